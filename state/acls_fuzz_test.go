package state

import (
	"strings"
	"testing"
)

// FuzzDecodeACLKey feeds arbitrary bytes to the ACL key decoder, with the
// invariants of checkRecord (state_fuzz_test.go): no panic, corruption
// errors only, a canonical encoding, no aliasing, and no half or glued
// key decoding. The value of an ACL record is one version byte, which
// TestACLsCorrupt covers.
func FuzzDecodeACLKey(f *testing.F) {
	for _, a := range []ACL{
		readACL("orders", "User:alice"),
		{ResourceType: tGroup, ResourceName: "*", PatternType: pPrefixed, Principal: "User:*", Host: "10.0.0.1",
			Operation: opAll, Permission: permDeny},
		{ResourceType: ResourceClusterMirror, ResourceName: "m", PatternType: pLiteral, Principal: "",
			Host: "", Operation: 14, Permission: permAllow},
		{ResourceType: tCluster, ResourceName: strings.Repeat("n", 200), PatternType: pLiteral,
			Principal: "User:" + strings.Repeat("p", 300), Host: "*", Operation: 9, Permission: permAllow},
		{ResourceType: 5, ResourceName: "a\x00/\xff", PatternType: pLiteral, Principal: "x:y", Host: "::1",
			Operation: 12, Permission: permAllow},
	} {
		f.Add(appendACLKey(nil, a))
	}
	// Damaged variants: each enum outside its range, an empty name, a
	// non-minimal length, a length past the end, the wrong prefix,
	// truncated, trailing byte.
	good := appendACLKey(nil, readACL("t", "User:a"))
	p := len(keyACLPrefix)
	for _, mut := range []func(b []byte){
		func(b []byte) { b[p] = 1 },
		func(b []byte) { b[p] = 9 },
		func(b []byte) { b[p+3] = 2 },
		func(b []byte) { b[len(b)-2] = 1 },
		func(b []byte) { b[len(b)-1] = 4 },
		func(b []byte) { b[p+1] = 0xff },
		func(b []byte) { b[0] = 'w' },
	} {
		b := append([]byte(nil), good...)
		mut(b)
		f.Add(b)
	}
	f.Add([]byte(keyACLPrefix + "\x02\x00\x03\x00\x00\x03\x03"))
	f.Add([]byte(keyACLPrefix + "\x02\x81\x00t\x03\x00\x00\x03\x03"))
	f.Add(good[:len(good)-1])
	f.Add(append(append([]byte(nil), good...), 0))
	f.Add([]byte(keyACLPrefix))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeACLKey, appendACLKey, eq[ACL])
	})
}
