package state

import (
	"slices"
	"strings"
	"testing"
)

// FuzzDecodeMirrorACLKey feeds arbitrary bytes to the synced-binding key
// decoder, with the invariants of checkRecord. The value is one version
// byte, as for an ACL.
func FuzzDecodeMirrorACLKey(f *testing.F) {
	for _, k := range []mirrorACL{
		{"m", readACL("orders", "User:alice")},
		{strings.Repeat("x", maxMirrorNameLen), ACL{ResourceType: tGroup, ResourceName: "a/b\x00", PatternType: pPrefixed,
			Principal: "User:*", Host: "10.0.0.1", Operation: opAll, Permission: permDeny}},
		{"east.dr-1_a", ACL{ResourceType: tCluster, ResourceName: "kafka-cluster", PatternType: pLiteral,
			Principal: "", Host: "", Operation: 14, Permission: permAllow}},
	} {
		f.Add(appendMirrorACLKey(nil, k))
	}
	good := appendMirrorACLKey(nil, mirrorACL{"m", readACL("t", "User:a")})
	p := len(keyMirrorACLPrefix)
	for _, mut := range []func(b []byte){
		func(b []byte) { b[p] = '/' },      // empty mirror name
		func(b []byte) { b[p+1] = 'x' },    // no '/' after the name
		func(b []byte) { b[p+2] = 1 },      // resource type ANY
		func(b []byte) { b[p] = '*' },      // illegal mirror name character
		func(b []byte) { b[len(b)-1] = 4 }, // permission out of range
		func(b []byte) { b[0] = 'w' },      // prefix
	} {
		b := slices.Clone(good)
		mut(b)
		f.Add(b)
	}
	f.Add(good[:len(good)-1])
	f.Add(append(slices.Clone(good), 0))
	f.Add([]byte(keyMirrorACLPrefix))
	f.Add([]byte(keyMirrorACLPrefix + "m/"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeMirrorACLKey, appendMirrorACLKey, eq[mirrorACL])
	})
}

// FuzzDecodeLastGroupSync feeds arbitrary bytes to the v1/mirror-sync/
// value decoder.
func FuzzDecodeLastGroupSync(f *testing.F) {
	f.Add(appendLastGroupSync(nil, 1))
	f.Add(appendLastGroupSync(nil, 1_780_000_000_000))
	f.Add(appendLastGroupSync(nil, 1<<63-1))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0})                         // 0: never, not a record
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // negative
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1})                         // unknown version
	f.Add([]byte{1, 0, 0, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeLastGroupSync, appendLastGroupSync, eq[int64])
	})
}
