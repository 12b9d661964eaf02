package state

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// ACL keys. The key holds the whole binding, so a binding is stored once
// however often it is put, and a delete needs no lookup by content:
//
//	v1/acl/<resource type i8><resource name n><pattern type i8>
//	       <principal n><host n><operation i8><permission i8>
//
// The name fields are "x n" like the group keys' (a minimal uvarint length,
// then the bytes), so every field is self-delimiting and two bindings never
// share a key. The resource comes first, so the bindings of one resource
// pattern are adjacent in key order. The value is the format version byte
// alone: the key already says everything. These layouts are part of the
// on-disk format.
const keyACLPrefix = "v1/acl/"

// maxACLKeyLen is Badger's key size limit. An ACL whose key would pass it
// (its three strings together near 65000 bytes) cannot be stored.
const maxACLKeyLen = 65000

// ResourceClusterMirror is the CLUSTER_MIRROR resource type (KIP-1279),
// which kmsg does not know yet. The other enum values are kmsg's.
const ResourceClusterMirror int8 = 8

// ACL is one ACL binding as Kafka defines it. The enum fields hold Kafka's
// wire values (kmsg.ACLResourceType etc. are int8 with these values).
// ACL is comparable, so it can key a map.
type ACL struct {
	ResourceType int8   // TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5, DELEGATION_TOKEN 6, USER 7, CLUSTER_MIRROR 8
	ResourceName string // never empty
	PatternType  int8   // LITERAL 3, PREFIXED 4
	Principal    string // "User:alice"
	Host         string // "*" or an address
	Operation    int8   // kmsg.ACLOperation values, ALL 2 to DESCRIBE_TOKENS 14
	Permission   int8   // DENY 2, ALLOW 3
}

// Names of the enum values, indexed by value, for String and errors.
var (
	aclResourceTypeNames = [...]string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER",
		"TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER", "CLUSTER_MIRROR"}
	aclPatternTypeNames = [...]string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}
	aclOperationNames   = [...]string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE",
		"DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
		"IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"}
	aclPermissionNames = [...]string{"UNKNOWN", "ANY", "DENY", "ALLOW"}
)

// enumName names v from names, or prints the number if names has no entry.
func enumName(names []string, v int8) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%d", v)
}

// String prints a in one line with its strings quoted, since they may hold
// any bytes: TOPIC LITERAL "orders" "User:alice"@"*" READ ALLOW.
func (a ACL) String() string {
	return fmt.Sprintf("%s %s %q %q@%q %s %s",
		enumName(aclResourceTypeNames[:], a.ResourceType), enumName(aclPatternTypeNames[:], a.PatternType),
		a.ResourceName, a.Principal, a.Host,
		enumName(aclOperationNames[:], a.Operation), enumName(aclPermissionNames[:], a.Permission))
}

// CompareACLs orders ACLs by resource type, resource name, pattern type,
// principal, host, operation and permission: the order in which Kafka's
// tools list them, and one that groups the bindings of a resource pattern.
func CompareACLs(a, b ACL) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		strings.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType),
		strings.Compare(a.Principal, b.Principal),
		strings.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// CheckACL reports whether a can be stored: every enum a concrete value
// (never UNKNOWN or a filter's ANY or MATCH), a non-empty resource name
// and a key within Badger's limit. These are the store's rules only;
// Kafka's rules for a new ACL (a principal "Type:Name", the CLUSTER
// resource's name) belong to the broker, which checks them first. The
// store keeps no stricter rule than Kafka's own, so a binding copied from
// a Kafka cluster always fits.
func CheckACL(a ACL) error {
	switch {
	case a.ResourceType < 2 || a.ResourceType > ResourceClusterMirror:
		return fmt.Errorf("acl %v: resource type %d is not a concrete resource type", a, a.ResourceType)
	case a.PatternType != 3 && a.PatternType != 4:
		return fmt.Errorf("acl %v: pattern type %d is neither LITERAL nor PREFIXED", a, a.PatternType)
	case a.Operation < 2 || a.Operation > 14:
		return fmt.Errorf("acl %v: operation %d is not a concrete operation", a, a.Operation)
	case a.Permission != 2 && a.Permission != 3:
		return fmt.Errorf("acl %v: permission %d is neither DENY nor ALLOW", a, a.Permission)
	case a.ResourceName == "":
		return fmt.Errorf("acl %v: empty resource name", a)
	}
	if n := aclKeyLen(a); n > maxACLKeyLen {
		return fmt.Errorf("acl %v: key of %d bytes, limit %d", a, n, maxACLKeyLen)
	}
	return nil
}

// aclKeyLen is the length of a's key, computed without building it so a
// huge ACL is refused before it is copied.
func aclKeyLen(a ACL) int {
	n := len(keyACLPrefix) + 4 // the four enum bytes
	for _, s := range []string{a.ResourceName, a.Principal, a.Host} {
		var scratch [binary.MaxVarintLen64]byte
		n += len(binary.AppendUvarint(scratch[:0], uint64(len(s)))) + len(s)
	}
	return n
}

// appendACLKey appends the key of a. REQUIRES: CheckACL(a) == nil.
func appendACLKey(dst []byte, a ACL) []byte {
	dst = append(dst, keyACLPrefix...)
	dst = append(dst, byte(a.ResourceType))
	dst = appendGroupName(dst, a.ResourceName)
	dst = append(dst, byte(a.PatternType))
	dst = appendGroupName(dst, a.Principal)
	dst = appendGroupName(dst, a.Host)
	return append(dst, byte(a.Operation), byte(a.Permission))
}

// decodeACLKey decodes an ACL key (prefix included) into its binding.
// Errors wrap ErrCorrupt.
func decodeACLKey(key []byte) (ACL, error) {
	r := reader{b: key, what: "acl key"}
	r.prefix(keyACLPrefix)
	var a ACL
	a.ResourceType = r.i8()
	a.ResourceName = r.name()
	a.PatternType = r.i8()
	a.Principal = r.name()
	a.Host = r.name()
	a.Operation = r.i8()
	a.Permission = r.i8()
	if err := r.complete(); err != nil {
		return ACL{}, err
	}
	if err := CheckACL(a); err != nil {
		return ACL{}, fmt.Errorf("%w: acl key: %v", ErrCorrupt, err)
	}
	return a, nil
}

// aclValue is the value of every ACL key: the format version alone.
var aclValue = []byte{formatV1}

// decodeACLValue checks an ACL value. Errors wrap ErrCorrupt.
func decodeACLValue(b []byte) error {
	r := reader{b: b, what: "acl"}
	r.version()
	return r.complete()
}

// ACLs returns every stored ACL in key order: by resource type, then
// resource name length and bytes, then the remaining fields (see the key
// layout). Callers that present ACLs sort them with CompareACLs. A record
// that does not decode fails the call with an error wrapping ErrCorrupt
// that names its key.
func (s *Store) ACLs() ([]ACL, error) {
	var acls []ACL
	err := s.view(func(txn tx) error {
		acls = acls[:0]
		return scanPrefix(txn, keyACLPrefix, func(suffix string, v []byte) error {
			a, err := decodeACLKey([]byte(keyACLPrefix + suffix))
			if err != nil {
				return err
			}
			if err := decodeACLValue(v); err != nil {
				return err
			}
			acls = append(acls, a)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return acls, nil
}

// PutACLs stores acls in one transaction, fsynced. Storing an ACL that is
// already stored changes nothing, so PutACLs is idempotent. It refuses the
// whole call, writing nothing, if any ACL fails CheckACL, and fails with
// ErrTooLarge for more ACLs than one transaction holds (several
// thousand).
func (s *Store) PutACLs(acls []ACL) error {
	keys := make([][]byte, 0, len(acls))
	for _, a := range acls {
		if err := CheckACL(a); err != nil {
			return fmt.Errorf("state: put acls: %v", err)
		}
		keys = append(keys, appendACLKey(nil, a))
	}
	if len(keys) == 0 {
		return nil // no fsync for nothing
	}
	return s.update(func(txn tx) error {
		for _, k := range keys {
			if err := txn.Set(k, aclValue); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteACLs deletes acls in one transaction, fsynced. ACLs that are not
// stored are ignored, which includes any ACL that fails CheckACL (none
// such can be stored). Values are not read, so a corrupt value is deleted
// too. It fails with ErrTooLarge for more ACLs than one transaction holds.
func (s *Store) DeleteACLs(acls []ACL) error {
	keys := make([][]byte, 0, len(acls))
	for _, a := range acls {
		if CheckACL(a) == nil {
			keys = append(keys, appendACLKey(nil, a))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return s.update(func(txn tx) error {
		for _, k := range keys {
			// A delete of an absent key would still write a tombstone
			// (and count against the transaction), so look first.
			_, err := txn.Get(k)
			switch {
			case errors.Is(err, badger.ErrKeyNotFound):
				continue
			case err != nil:
				return fmt.Errorf("state: reading key %q: %w", k, err)
			}
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}
