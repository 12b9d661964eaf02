package state

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Enum values used by the tests (Kafka's wire values).
const (
	tUnknown, tAny, tTopic, tGroup, tCluster int8 = 0, 1, 2, 3, 4
	pAny, pMatch, pLiteral, pPrefixed        int8 = 1, 2, 3, 4
	opUnknown, opAny, opAll, opRead, opWrite int8 = 0, 1, 2, 3, 4
	permAny, permDeny, permAllow             int8 = 1, 2, 3
)

func readACL(topic, principal string) ACL {
	return ACL{ResourceType: tTopic, ResourceName: topic, PatternType: pLiteral,
		Principal: principal, Host: "*", Operation: opRead, Permission: permAllow}
}

// mustACLs checks that ACLs() returns want, in any order (key order is
// not name order).
func mustACLs(t *testing.T, s *Store, want ...ACL) {
	t.Helper()
	got, err := s.ACLs()
	if err != nil {
		t.Fatalf("ACLs(): %v", err)
	}
	slices.SortFunc(got, CompareACLs)
	want = slices.Clone(want)
	slices.SortFunc(want, CompareACLs)
	if !slices.Equal(got, want) {
		t.Fatalf("ACLs() = %v\nwant %v", got, want)
	}
}

func TestACLsRoundTrip(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	mustACLs(t, s) // none yet
	acls := []ACL{
		readACL("orders", "User:alice"),
		readACL("orders", "User:bob"),
		{ResourceType: tTopic, ResourceName: "orders", PatternType: pPrefixed, Principal: "User:alice",
			Host: "10.0.0.1", Operation: opWrite, Permission: permDeny},
		{ResourceType: tGroup, ResourceName: "*", PatternType: pLiteral, Principal: "User:*",
			Host: "*", Operation: opAll, Permission: permAllow},
		{ResourceType: tCluster, ResourceName: "kafka-cluster", PatternType: pLiteral, Principal: "User:admin",
			Host: "*", Operation: 9, Permission: permAllow},
		{ResourceType: ResourceClusterMirror, ResourceName: "east", PatternType: pLiteral, Principal: "User:ops",
			Host: "*", Operation: 7, Permission: permAllow},
		// Any bytes in the strings: the key fields are length-prefixed.
		{ResourceType: 5, ResourceName: "tx\x00/\xff", PatternType: pLiteral, Principal: "",
			Host: "", Operation: 14, Permission: permAllow},
	}
	if err := s.PutACLs(acls); err != nil {
		t.Fatal(err)
	}
	mustACLs(t, s, acls...)

	// Key order groups one resource pattern's bindings together.
	got, _ := s.ACLs()
	type resource struct {
		typ, pattern int8
		name         string
	}
	seen := map[resource]bool{}
	var last resource
	for _, a := range got {
		res := resource{a.ResourceType, a.PatternType, a.ResourceName}
		if res != last && seen[res] {
			t.Fatalf("resource %+v is not contiguous in %v", res, got)
		}
		seen[res], last = true, res
	}
}

func TestPutACLsIdempotent(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	a, b := readACL("t", "User:a"), readACL("t", "User:b")
	for range 3 {
		if err := s.PutACLs([]ACL{a, a, b}); err != nil {
			t.Fatal(err)
		}
	}
	mustACLs(t, s, a, b)
	if err := s.PutACLs(nil); err != nil {
		t.Fatal(err)
	}
	mustACLs(t, s, a, b)
}

func TestDeleteACLs(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	a, b, c := readACL("t", "User:a"), readACL("t", "User:b"), readACL("u", "User:a")
	if err := s.PutACLs([]ACL{a, b, c}); err != nil {
		t.Fatal(err)
	}
	// Absent and impossible ACLs are ignored, a duplicate is deleted once.
	absent := readACL("t", "User:z")
	invalid := ACL{ResourceType: tAny, ResourceName: "t"}
	if err := s.DeleteACLs([]ACL{b, absent, invalid, b}); err != nil {
		t.Fatal(err)
	}
	mustACLs(t, s, a, c)
	if err := s.DeleteACLs([]ACL{a, c}); err != nil {
		t.Fatal(err)
	}
	mustACLs(t, s)
	if err := s.DeleteACLs(nil); err != nil {
		t.Fatal(err)
	}
}

func TestPutACLsRefusesInvalid(t *testing.T) {
	t.Parallel()
	good := readACL("t", "User:a")
	with := func(f func(*ACL)) ACL { a := good; f(&a); return a }
	for _, tc := range []struct {
		name string
		acl  ACL
	}{
		{"unknown resource type", with(func(a *ACL) { a.ResourceType = tUnknown })},
		{"any resource type", with(func(a *ACL) { a.ResourceType = tAny })},
		{"resource type past CLUSTER_MIRROR", with(func(a *ACL) { a.ResourceType = 9 })},
		{"negative resource type", with(func(a *ACL) { a.ResourceType = -1 })},
		{"any pattern", with(func(a *ACL) { a.PatternType = pAny })},
		{"match pattern", with(func(a *ACL) { a.PatternType = pMatch })},
		{"pattern 5", with(func(a *ACL) { a.PatternType = 5 })},
		{"unknown operation", with(func(a *ACL) { a.Operation = opUnknown })},
		{"any operation", with(func(a *ACL) { a.Operation = opAny })},
		{"operation 15", with(func(a *ACL) { a.Operation = 15 })},
		{"any permission", with(func(a *ACL) { a.Permission = permAny })},
		{"permission 4", with(func(a *ACL) { a.Permission = 4 })},
		{"empty name", with(func(a *ACL) { a.ResourceName = "" })},
		{"key too long", with(func(a *ACL) {
			a.ResourceName, a.Principal = strings.Repeat("n", 40000), strings.Repeat("p", 30000)
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			if err := CheckACL(tc.acl); err == nil {
				t.Fatalf("CheckACL(%v) accepted", tc.acl)
			}
			// One bad ACL refuses the whole call.
			if err := s.PutACLs([]ACL{good, tc.acl}); err == nil {
				t.Fatalf("PutACLs accepted %v", tc.acl)
			}
			mustACLs(t, s)
		})
	}
	// The longest key that fits is accepted.
	big := good
	// The name's length uvarint grows from 1 byte to 3.
	big.ResourceName = strings.Repeat("n", maxACLKeyLen-aclKeyLen(good)+len(good.ResourceName)-2)
	if n := aclKeyLen(big); n != maxACLKeyLen {
		t.Fatalf("test setup: key of %d bytes", n)
	}
	s := openMem(t)
	if err := s.PutACLs([]ACL{big}); err != nil {
		t.Fatal(err)
	}
	mustACLs(t, s, big)
}

// TestACLsPersistence: ACLs survive Close and Open on a real directory.
func TestACLsPersistence(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	s := openDir(t, dir)
	a, b := readACL("t", "User:a"), readACL("t", "User:b")
	if err := s.PutACLs([]ACL{a, b}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteACLs([]ACL{b}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ACLs(); !errors.Is(err, ErrClosed) {
		t.Fatalf("ACLs() after Close: %v", err)
	}
	s = openDir(t, dir)
	defer s.Close()
	mustACLs(t, s, a)
}

// TestACLsCorrupt: keys and values written directly with Badger that fail
// to decode are reported as ErrCorrupt naming the key, and DeleteACLs
// still removes a binding whose value is corrupt.
func TestACLsCorrupt(t *testing.T) {
	t.Parallel()
	good := readACL("t", "User:a")
	goodKey := string(appendACLKey(nil, good))
	for _, tc := range []struct {
		name, key string
		val       []byte
	}{
		{"empty value", goodKey, nil},
		{"unknown version", goodKey, []byte{2}},
		{"trailing value byte", goodKey, []byte{1, 0}},
		{"truncated key", goodKey[:len(goodKey)-1], []byte{1}},
		{"trailing key byte", goodKey + "x", []byte{1}},
		{"no fields", keyACLPrefix, []byte{1}},
		{"any resource type", keyACLPrefix + "\x01" + goodKey[len(keyACLPrefix)+1:], []byte{1}},
		{"empty name", keyACLPrefix + "\x02\x00\x03\x00\x00\x03\x03", []byte{1}},
		{"long name length", keyACLPrefix + "\x02\x81\x00", []byte{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			putRaw(t, s, tc.key, tc.val)
			_, err := s.ACLs()
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ACLs() = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), "v1/acl/") {
				t.Fatalf("error %q does not name the key", err)
			}
		})
	}

	s := openMem(t)
	putRaw(t, s, goodKey, []byte{9})
	if err := s.DeleteACLs([]ACL{good}); err != nil {
		t.Fatal(err)
	}
	mustACLs(t, s)
}

func TestACLString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		acl  ACL
		want string
	}{
		{readACL("orders", "User:alice"), `TOPIC LITERAL "orders" "User:alice"@"*" READ ALLOW`},
		{ACL{ResourceType: ResourceClusterMirror, ResourceName: "m", PatternType: pPrefixed, Principal: "User:x",
			Host: "h", Operation: 14, Permission: permDeny}, `CLUSTER_MIRROR PREFIXED "m" "User:x"@"h" DESCRIBE_TOKENS DENY`},
		{ACL{ResourceType: 9, PatternType: -1, Operation: 15, Permission: 4}, `9 -1 "" ""@"" 15 4`},
	} {
		if got := tc.acl.String(); got != tc.want {
			t.Errorf("String() = %s, want %s", got, tc.want)
		}
	}
}
