package state

import (
	"fmt"
)

// The client quotas a mirror's metadata sync set here (control's quota
// sync, sync/quotas): per entity, the keys and values it last wrote, so
// that it changes and removes only those, never a quota set on this node
// by hand.
//
//	v1/mirror-quota/<mirror name>/<entity parts as in v1/quota/>
//	    -> the v1/quota/ value: the keys the sync set and their values
//
// The mirror name ends at the '/' (mirror names hold none). Writes require
// the mirror to exist, in the same transaction, as for v1/mirror-acl/.
// This layout is part of the on-disk format.
const keyMirrorQuotaPrefix = "v1/mirror-quota/"

func mirrorQuotaPrefix(mirror string) []byte { return []byte(keyMirrorQuotaPrefix + mirror + "/") }

func mirrorQuotaKey(mirror string, e QuotaEntity) []byte {
	return append(mirrorQuotaPrefix(mirror), quotaKey(e)[len(keyQuotaPrefix):]...)
}

// SyncedQuotas returns the quotas mirror's sync recorded as set, in key
// order.
func (s *Store) SyncedQuotas(mirror string) ([]ClientQuota, error) {
	if err := checkMirrorName(mirror); err != nil {
		return nil, fmt.Errorf("state: synced quotas: %v", err)
	}
	return s.scanQuotas(string(mirrorQuotaPrefix(mirror)))
}

// PutSyncedQuotas replaces mirror's record of each entity in put (one with
// no values is forgotten), in one transaction, fsynced. The mirror must
// exist.
func (s *Store) PutSyncedQuotas(mirror string, put []ClientQuota) error {
	if err := checkMirrorName(mirror); err != nil {
		return fmt.Errorf("state: put synced quotas: %v", err)
	}
	for _, q := range put {
		if err := checkClientQuota(q); err != nil {
			return fmt.Errorf("state: put synced quotas: %v", err)
		}
	}
	return s.update(func(txn tx) error {
		if err := mirrorExists(txn, mirror); err != nil {
			return err
		}
		return putQuotas(txn, put, func(e QuotaEntity) []byte { return mirrorQuotaKey(mirror, e) })
	})
}
