package state

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

// Fuzz targets of the mirror records, with the invariants of checkRecord
// (state_fuzz_test.go).

func FuzzDecodeMirror(f *testing.F) {
	for _, m := range []Mirror{
		{Name: "m"},
		fullMirror("east"),
		{Name: strings.Repeat("m", maxMirrorNameLen), SourceClusterID: "\x00\xff",
			Configs: map[string]string{"x": ""}, Exclude: []string{".*"},
			Topics: map[string]PartitionState{strings.Repeat("t", maxTopicNameLen): StateStopped}},
	} {
		f.Add(appendMirror(nil, m))
	}
	good := appendMirror(nil, Mirror{Name: "m", Configs: map[string]string{"b": "1", "c": "2"},
		Include: []string{"i"}, Topics: map[string]PartitionState{"a": StateMirroring, "b": StatePaused}})
	// Damaged variants: unknown version, unsorted configs, unsorted
	// topics, an empty pattern, a desired state that is not one, huge
	// counts, truncated, trailing byte.
	v2 := slices.Clone(good)
	v2[0] = 2
	f.Add(v2)
	f.Add(bytes.Replace(bytes.Replace(good, []byte("\x01b"), []byte("\x01#"), 1), []byte("\x01c"), []byte("\x01b"), 1))
	f.Add(swapTopics(good))
	f.Add(appendMirror(nil, Mirror{Name: "m", Include: []string{""}}))
	f.Add(appendMirror(nil, Mirror{Name: "m", Topics: map[string]PartitionState{"t": StateFailed}}))
	f.Add(appendMirror(nil, Mirror{Name: "m/n"}))
	huge := appendMirror(nil, Mirror{Name: "m"})
	copy(huge[len(huge)-4:], []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(huge)
	hugePatterns := appendMirror(nil, Mirror{Name: "m"})
	copy(hugePatterns[len(hugePatterns)-12:], []byte{0x7f, 0xff, 0xff, 0xff})
	f.Add(hugePatterns)
	f.Add(good[:len(good)-1])
	f.Add(append(slices.Clone(good), 0))
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeMirror, appendMirror, mirrorsEqual)
	})
}

func FuzzDecodeMirrorPartitionState(f *testing.F) {
	for _, p := range []MirrorPartitionState{
		{State: StateLogAlignment, Previous: StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1},
		{State: StateStopped, Previous: StateUnknown, LastMirrorEpoch: 1<<31 - 1, LastMirrorOffset: 1<<63 - 1},
		{State: StateFailed, Previous: StateEpochFencing, RetryAttempt: 17, ErrorMessage: "boom \x00\xff",
			LastMirrorEpoch: 3, LastMirrorOffset: 0},
		{State: StateFailed, Previous: StateUnknown, RetryAttempt: -1, ErrorMessage: strings.Repeat("e", 300),
			LastMirrorEpoch: -1, LastMirrorOffset: -1},
		// v2: with the last known source offset.
		{State: StateMirroring, Previous: StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1,
			SourceOffset: 0, SourceOffsetTime: time.UnixMilli(1)},
		{State: StateStopped, Previous: StateUnknown, LastMirrorEpoch: 9, LastMirrorOffset: 1000, ErrorMessage: "x",
			SourceOffset: 1<<63 - 1, SourceOffsetTime: time.UnixMilli(1<<63 - 1)},
		{State: StateFailed, Previous: StateMirroring, RetryAttempt: 2, ErrorMessage: "y",
			LastMirrorEpoch: -1, LastMirrorOffset: -1, SourceOffset: 77, SourceOffsetTime: time.UnixMilli(1_700_000_000_000)},
	} {
		f.Add(appendMirrorPartitionState(nil, p))
	}
	// Damaged v2 values: no time (ms 0), a time before 1970, a negative
	// source offset, v2 cut inside its new fields, and a v1 value
	// relabelled v2 (too short).
	v2good := appendMirrorPartitionState(nil, MirrorPartitionState{State: StatePaused, Previous: StateUnknown,
		LastMirrorEpoch: -1, LastMirrorOffset: -1, SourceOffset: 5, SourceOffsetTime: time.UnixMilli(99)})
	for _, tail := range []string{"\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00",
		"\x00\x00\x00\x00\x00\x00\x00\x05\xff\xff\xff\xff\xff\xff\xff\xff",
		"\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x63"} {
		f.Add(append(slices.Clone(v2good[:len(v2good)-16]), tail...))
	}
	f.Add(v2good[:len(v2good)-3])
	v1as2 := appendMirrorPartitionState(nil, MirrorPartitionState{State: StatePaused, Previous: StateUnknown,
		LastMirrorEpoch: -1, LastMirrorOffset: -1})
	v1as2[0] = 2
	f.Add(v1as2)
	good := appendMirrorPartitionState(nil, MirrorPartitionState{State: StateMirroring, Previous: StateUnknown,
		ErrorMessage: "m", LastMirrorEpoch: 4, LastMirrorOffset: 5})
	// Damaged variants: unknown version, each field's rule broken, a huge
	// message length, truncated, trailing byte.
	unknown := slices.Clone(good)
	unknown[0] = 3
	f.Add(unknown)
	for _, p := range []MirrorPartitionState{
		{State: StateUnknown, Previous: StateUnknown},
		{State: 9, Previous: StateUnknown},
		{State: StateMirroring, Previous: StateLogAlignment},
		{State: StateMirroring, Previous: StateUnknown, RetryAttempt: 1},
		{State: StateFailed, Previous: StateFailed, RetryAttempt: 1},
		{State: StateFailed, Previous: StateMirroring, RetryAttempt: 0},
		{State: StateFailed, Previous: StateMirroring, RetryAttempt: -2},
		{State: StateStopping, Previous: StateUnknown, LastMirrorEpoch: -2, LastMirrorOffset: -1},
		{State: StateStopping, Previous: StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -2},
	} {
		f.Add(appendMirrorPartitionState(nil, p))
	}
	huge := slices.Clone(good)
	copy(huge[19:23], []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(huge)
	f.Add(good[:len(good)-1])
	f.Add(append(slices.Clone(good), 0))
	f.Add([]byte{})
	f.Add([]byte{1, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeMirrorPartitionState, appendMirrorPartitionState, eq[MirrorPartitionState])
	})
}

func FuzzDecodeMirrorPartitionKey(f *testing.F) {
	for _, k := range []mirrorPartitionKey{
		{"m", "t", 0},
		{"east.1_a-B", "orders.v2_eu-1", 1<<31 - 1},
		{strings.Repeat("m", maxMirrorNameLen), strings.Repeat("z", maxTopicNameLen), 256},
		{"m", strings.Repeat("t", 128), 0x2f2f2f2f}, // a two-byte uvarint; '/' in the partition
	} {
		f.Add(appendMirrorPartitionKey(nil, k))
	}
	f.Add(appendMirrorPartitionKey(nil, mirrorPartitionKey{"", "t", 0}))
	f.Add(appendMirrorPartitionKey(nil, mirrorPartitionKey{"..", "t", 0}))
	f.Add(appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "a/b", 0}))
	f.Add(appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "", 0}))
	f.Add(appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "t", -1}))
	f.Add([]byte(keyMirrorPartitionPrefix + "m/\x01t\x00\x00\x00"))
	f.Add([]byte(keyMirrorPartitionPrefix + "m/\x80\x00t\x00\x00\x00\x00"))
	f.Add([]byte(keyMirrorPartitionPrefix + "m\x01t\x00\x00\x00\x00"))
	f.Add([]byte(keyMirrorPrefix + "m/\x01t\x00\x00\x00\x00"))
	f.Add([]byte("v1/mirror-partition"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeMirrorPartitionKey, appendMirrorPartitionKey, eq[mirrorPartitionKey])
	})
}
