package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// What a mirror's metadata sync keeps (control's sync loop, sync/acls):
// the ACL bindings it created here, so that it only ever deletes its own,
// never one created on this node by hand; and when the mirror's group
// offsets were last synced, which describe shows across restarts.
//
//	v1/mirror-acl/<mirror name>/<type i8><name n><pattern i8><principal n><host n><op i8><perm i8>
//	    one binding the sync of the mirror created; the value is the
//	    format version byte alone, as for v1/acl/ (the key says it all).
//	    The fields after the '/' are those of the binding's v1/acl/ key.
//
//	v1/mirror-sync/<mirror name>
//	+------+---------------------+
//	| 0x01 | last group sync i64 |
//	+------+---------------------+
//	    last group sync: Unix milliseconds, >= 1 (0 would be "never",
//	    which is no record at all).
//
// The mirror name ends at the '/' (mirror names hold none), so one
// mirror's scan never sees another's bindings. Writes require the mirror
// to exist, in the same transaction: a sync cycle that races a delete of
// its mirror cannot leave records behind for a later mirror of that name
// to inherit. These layouts are part of the on-disk format.
const (
	keyMirrorACLPrefix  = "v1/mirror-acl/"
	keyMirrorSyncPrefix = "v1/mirror-sync/"
)

// mirrorACL is the key of one synced binding.
type mirrorACL struct {
	Mirror string
	ACL    ACL
}

func mirrorACLPrefix(mirror string) []byte { return []byte(keyMirrorACLPrefix + mirror + "/") }

// appendMirrorACLKey appends k's key. REQUIRES: checkMirrorName(k.Mirror)
// and CheckACL(k.ACL) are nil.
func appendMirrorACLKey(dst []byte, k mirrorACL) []byte {
	dst = append(dst, mirrorACLPrefix(k.Mirror)...)
	return append(dst, appendACLKey(nil, k.ACL)[len(keyACLPrefix):]...)
}

// decodeMirrorACLKey decodes a synced binding's key. Errors wrap
// ErrCorrupt.
func decodeMirrorACLKey(key []byte) (mirrorACL, error) {
	r := reader{b: key, what: "mirror acl key"}
	r.prefix(keyMirrorACLPrefix)
	if r.err != nil {
		return mirrorACL{}, r.err
	}
	i := bytes.IndexByte(r.b, '/')
	if i < 0 {
		r.fail("no '/' after the mirror name")
		return mirrorACL{}, r.err
	}
	mirror := string(r.b[:i])
	if err := checkMirrorName(mirror); err != nil {
		return mirrorACL{}, fmt.Errorf("%w: mirror acl key: %v", ErrCorrupt, err)
	}
	a, err := decodeACLKey(append([]byte(keyACLPrefix), r.b[i+1:]...))
	if err != nil {
		return mirrorACL{}, fmt.Errorf("mirror acl key of mirror %q: %w", mirror, err)
	}
	return mirrorACL{Mirror: mirror, ACL: a}, nil
}

// SyncedACLs returns the bindings mirror's ACL sync created here and has
// not deleted since, sorted with CompareACLs. None is an empty result.
func (s *Store) SyncedACLs(mirror string) ([]ACL, error) {
	if err := checkMirrorName(mirror); err != nil {
		return nil, fmt.Errorf("state: synced acls: %v", err)
	}
	prefix := string(mirrorACLPrefix(mirror))
	var out []ACL
	err := s.view(func(txn tx) error {
		out = out[:0]
		return scanPrefix(txn, prefix, func(suffix string, v []byte) error {
			k, err := decodeMirrorACLKey([]byte(prefix + suffix))
			if err != nil {
				return err
			}
			if err := decodeACLValue(v); err != nil {
				return err
			}
			out = append(out, k.ACL)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, CompareACLs)
	return out, nil
}

// PutSyncedACLs records acls as created by mirror's ACL sync, in one
// transaction, fsynced; recording one twice changes nothing. It refuses
// the whole call if any ACL fails CheckACL, and fails with an error
// wrapping ErrNotFound if the mirror does not exist.
func (s *Store) PutSyncedACLs(mirror string, acls []ACL) error {
	keys, err := mirrorACLKeys(mirror, acls, true)
	if err != nil || len(keys) == 0 {
		return err
	}
	return s.update(func(txn tx) error {
		if err := mirrorExists(txn, mirror); err != nil {
			return err
		}
		for _, k := range keys {
			if err := txn.Set(k, aclValue); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteSyncedACLs forgets acls from mirror's record, in one transaction,
// fsynced. Bindings not recorded (and invalid ones, which cannot be) are
// ignored. The bindings themselves are not touched.
func (s *Store) DeleteSyncedACLs(mirror string, acls []ACL) error {
	keys, err := mirrorACLKeys(mirror, acls, false)
	if err != nil || len(keys) == 0 {
		return err
	}
	return s.update(func(txn tx) error {
		for _, k := range keys {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// mirrorACLKeys builds the keys of acls in mirror's record; strict refuses
// an invalid ACL, else it is skipped.
func mirrorACLKeys(mirror string, acls []ACL, strict bool) ([][]byte, error) {
	if err := checkMirrorName(mirror); err != nil {
		return nil, fmt.Errorf("state: synced acls: %v", err)
	}
	keys := make([][]byte, 0, len(acls))
	for _, a := range acls {
		if err := CheckACL(a); err != nil {
			if strict {
				return nil, fmt.Errorf("state: synced acls of mirror %q: %v", mirror, err)
			}
			continue
		}
		keys = append(keys, appendMirrorACLKey(nil, mirrorACL{mirror, a}))
	}
	return keys, nil
}

func mirrorSyncKey(mirror string) []byte { return []byte(keyMirrorSyncPrefix + mirror) }

// appendLastGroupSync appends the v1/mirror-sync/ value. REQUIRES: ms >= 1.
func appendLastGroupSync(dst []byte, ms int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, formatV1), uint64(ms))
}

// decodeLastGroupSync decodes the v1/mirror-sync/ value. Errors wrap
// ErrCorrupt.
func decodeLastGroupSync(b []byte) (int64, error) {
	r := reader{b: b, what: "mirror sync"}
	r.version()
	ms := int64(r.u64())
	if err := r.complete(); err != nil {
		return 0, err
	}
	if ms < 1 {
		return 0, fmt.Errorf("%w: mirror sync: last group sync %d ms", ErrCorrupt, ms)
	}
	return ms, nil
}

// PutLastGroupSync records when mirror's group offsets were last synced
// (millisecond precision), fsynced. It fails with an error wrapping
// ErrNotFound if the mirror does not exist.
func (s *Store) PutLastGroupSync(mirror string, at time.Time) error {
	if err := checkMirrorName(mirror); err != nil {
		return fmt.Errorf("state: last group sync: %v", err)
	}
	ms := at.UnixMilli()
	if ms < 1 {
		return fmt.Errorf("state: last group sync of mirror %q: time %v before 1970", mirror, at)
	}
	return s.update(func(txn tx) error {
		if err := mirrorExists(txn, mirror); err != nil {
			return err
		}
		return txn.Set(mirrorSyncKey(mirror), appendLastGroupSync(nil, ms))
	})
}

// LastGroupSync returns when mirror's group offsets were last synced; the
// zero time if never (or no such mirror).
func (s *Store) LastGroupSync(mirror string) (time.Time, error) {
	if err := checkMirrorName(mirror); err != nil {
		return time.Time{}, fmt.Errorf("state: last group sync: %v", err)
	}
	var ms int64
	err := s.view(func(txn tx) error {
		_, err := getRecord(txn, mirrorSyncKey(mirror), func(v []byte) (err error) {
			ms, err = decodeLastGroupSync(v)
			return err
		})
		return err
	})
	if err != nil || ms == 0 {
		return time.Time{}, err
	}
	return time.UnixMilli(ms), nil
}

// DeleteMirrorSync deletes everything the sync of mirror recorded (its
// synced bindings, its last group sync), fsynced; the bindings themselves
// stay, as bindings of this node. For a mirror being deleted: call it
// before DeleteMirror, so a crash in between leaves a mirror without a
// record (its bindings then count as local and are never deleted by a
// sync), never a record without its mirror. Values are not read, so
// corrupt records are deleted too. Keys go in transactions of a few
// thousand each; calling it again after a failure finishes the work.
func (s *Store) DeleteMirrorSync(mirror string) error {
	if err := checkMirrorName(mirror); err != nil {
		return fmt.Errorf("state: delete mirror sync: %v", err)
	}
	// The quota record first: a failure part way leaves the sync key,
	// and calling again finishes both.
	if err := s.deletePrefixThen(mirrorQuotaPrefix(mirror), mirrorSyncKey(mirror)); err != nil {
		return err
	}
	return s.deletePrefixThen(mirrorACLPrefix(mirror), mirrorSyncKey(mirror))
}

// deletePrefixThen deletes every key under prefix, in transactions of one
// keyBatch each, fsynced, and then key, in the transaction of the last
// keys: a failure part way leaves key, so the work can be finished by
// calling it again. (DeleteGroup, DeleteMirror and
// DeleteMirrorPartitionStates run the same loop inline.)
func (s *Store) deletePrefixThen(prefix, key []byte) error {
	for {
		var more bool
		err := s.update(func(txn tx) error {
			kb := s.newKeyBatch(1) // room for key
			var err error
			if more, err = collectKeys(txn, prefix, &kb); err != nil {
				return err
			}
			if err := kb.deleteAll(txn); err != nil || more {
				return err
			}
			return txn.Delete(key)
		})
		if err != nil || !more {
			return err
		}
	}
}
