package state

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Client quotas (AlterClientQuotas): one record per quota entity, holding
// every quota key set on it, as Kafka's quota records do.
//
//	v1/quota/<user part><client-id part><ip part>
//	    ->  version, count u32, then count x (key s, value f64 bits u64)
//	        in strictly ascending key order
//
// Each part is one tag byte: 0 the entity has no such type, 1 the default
// entity (Kafka's null name), 2 a name, followed by the name (uvarint
// length and bytes, minimal). Fixed order and tags make one key per
// entity. These bytes are part of the on-disk format.
const keyQuotaPrefix = "v1/quota/"

// Entity part tags (part of the on-disk format).
const (
	quotaPartAbsent  byte = 0
	quotaPartDefault byte = 1
	quotaPartNamed   byte = 2
)

// QuotaName is one entity type of a quota entity.
type QuotaName struct {
	// Set is true when the entity has this type.
	Set bool
	// Default is the default entity of the type (Kafka's null name).
	Default bool
	// Name is the entity name when Set and not Default; never empty then.
	Name string
}

// QuotaEntity names what a quota applies to: a user, a client id, both,
// or an IP, each named or the default.
type QuotaEntity struct {
	User, ClientID, IP QuotaName
}

// ClientQuota is one entity's quotas, by Kafka quota key
// (producer_byte_rate, consumer_byte_rate, request_percentage, ...).
type ClientQuota struct {
	Entity QuotaEntity
	Values map[string]float64
}

func appendQuotaPart(dst []byte, n QuotaName) []byte {
	switch {
	case !n.Set:
		return append(dst, quotaPartAbsent)
	case n.Default:
		return append(dst, quotaPartDefault)
	}
	dst = append(dst, quotaPartNamed)
	dst = binary.AppendUvarint(dst, uint64(len(n.Name)))
	return append(dst, n.Name...)
}

func quotaKey(e QuotaEntity) []byte {
	k := []byte(keyQuotaPrefix)
	k = appendQuotaPart(k, e.User)
	k = appendQuotaPart(k, e.ClientID)
	return appendQuotaPart(k, e.IP)
}

// checkQuotaEntity holds the rules of an entity Kafka accepts: at least one
// type, ip alone, names never empty (a default has none).
func checkQuotaEntity(e QuotaEntity) error {
	for _, n := range []QuotaName{e.User, e.ClientID, e.IP} {
		switch {
		case !n.Set && (n.Default || n.Name != ""):
			return fmt.Errorf("an absent entity type with a name")
		case n.Set && n.Default && n.Name != "":
			return fmt.Errorf("a default entity with a name")
		case n.Set && !n.Default && n.Name == "":
			return fmt.Errorf("an empty entity name")
		}
	}
	switch {
	case !e.User.Set && !e.ClientID.Set && !e.IP.Set:
		return fmt.Errorf("an empty entity")
	case e.IP.Set && (e.User.Set || e.ClientID.Set):
		return fmt.Errorf("ip combined with user or client-id")
	}
	return nil
}

func checkClientQuota(q ClientQuota) error {
	if err := checkQuotaEntity(q.Entity); err != nil {
		return err
	}
	for k, v := range q.Values {
		if k == "" {
			return fmt.Errorf("an empty quota key")
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("quota %s = %v", k, v)
		}
	}
	return nil
}

// appendClientQuotaValue appends q's value. REQUIRES: checkClientQuota(q) == nil.
func appendClientQuotaValue(dst []byte, q ClientQuota) []byte {
	keys := make([]string, 0, len(q.Values))
	for k := range q.Values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, formatV1)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(keys)))
	for _, k := range keys {
		dst = appendString(dst, k)
		dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(q.Values[k]))
	}
	return dst
}

// PutClientQuotas replaces the quotas of each entity in put, in one synced
// transaction; an entity with no values is deleted.
func (s *Store) PutClientQuotas(put []ClientQuota) error {
	for _, q := range put {
		if err := checkClientQuota(q); err != nil {
			return fmt.Errorf("state: client quota: %v", err)
		}
	}
	return s.update(func(txn tx) error { return putQuotas(txn, put, quotaKey) })
}

// putQuotas writes each quota of put at key(entity), deleting those with
// no values.
func putQuotas(txn tx, put []ClientQuota, key func(QuotaEntity) []byte) error {
	for _, q := range put {
		k := key(q.Entity)
		if len(q.Values) == 0 {
			if err := txn.Delete(k); err != nil {
				return err
			}
			continue
		}
		if err := txn.Set(k, appendClientQuotaValue(nil, q)); err != nil {
			return err
		}
	}
	return nil
}

// ClientQuotas returns every stored entity's quotas, in key order.
func (s *Store) ClientQuotas() ([]ClientQuota, error) { return s.scanQuotas(keyQuotaPrefix) }

// scanQuotas reads the quota records under prefix, whose key suffixes are
// entity parts, in key order.
func (s *Store) scanQuotas(prefix string) ([]ClientQuota, error) {
	var out []ClientQuota
	err := s.view(func(txn tx) error {
		out = out[:0]
		return scanPrefix(txn, prefix, func(suffix string, v []byte) error {
			q, err := decodeClientQuota(suffix, v)
			if err != nil {
				return err
			}
			out = append(out, q)
			return nil
		})
	})
	return out, err
}

func (r *reader) quotaPart() QuotaName {
	b := r.bytes(1)
	if b == nil {
		return QuotaName{}
	}
	switch b[0] {
	case quotaPartAbsent:
		return QuotaName{}
	case quotaPartDefault:
		return QuotaName{Set: true, Default: true}
	case quotaPartNamed:
		return QuotaName{Set: true, Name: r.name()}
	}
	r.fail("entity part tag %d", b[0])
	return QuotaName{}
}

// decodeClientQuota decodes a quota record from its key suffix and value.
// Errors wrap ErrCorrupt; what decodes passes checkClientQuota and has at
// least one value.
func decodeClientQuota(suffix string, v []byte) (ClientQuota, error) {
	k := reader{b: []byte(suffix), what: "client quota key"}
	var q ClientQuota
	q.Entity.User, q.Entity.ClientID, q.Entity.IP = k.quotaPart(), k.quotaPart(), k.quotaPart()
	if err := k.complete(); err != nil {
		return ClientQuota{}, err
	}
	r := reader{b: v, what: "client quota"}
	r.version()
	n := r.count(12) // a key takes at least 4 bytes, a value 8
	q.Values = make(map[string]float64, min(n, 8))
	prev := ""
	for i := uint32(0); i < n && r.err == nil; i++ {
		key := r.str()
		val := math.Float64frombits(r.u64())
		if r.err != nil {
			break
		}
		if i > 0 && key <= prev {
			r.fail("quota %q after %q: keys not strictly ascending", key, prev)
			break
		}
		q.Values[key] = val
		prev = key
	}
	if err := r.complete(); err != nil {
		return ClientQuota{}, err
	}
	if len(q.Values) == 0 {
		return ClientQuota{}, fmt.Errorf("%w: client quota without values", ErrCorrupt)
	}
	if err := checkClientQuota(q); err != nil {
		return ClientQuota{}, fmt.Errorf("%w: client quota: %v", ErrCorrupt, err)
	}
	return q, nil
}
