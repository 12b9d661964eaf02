package state

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Fuzz targets, one per record decoder. Every record shares the invariants
// of checkRecord; the seeds are values the encoders write plus damaged
// variants of them.

// checkRecord holds the invariants of every record decoder on data:
//   - no panic, and a failure is a corruption error;
//   - the encoding is canonical: what decodes re-encodes to the very same
//     bytes, appended after any prefix, and decodes again to an equal value;
//   - the decoded value does not alias data (Badger's values die with their
//     transaction): scribbling over the input leaves it unchanged;
//   - the input split in two (STYLE.md item 23): every record is
//     self-delimiting and rejects trailing bytes, so the first half of a
//     valid value (a torn write) never decodes, and neither does a valid
//     value followed by its second half (a value glued to garbage).
func checkRecord[T any](t *testing.T, data []byte, decode func([]byte) (T, error),
	encode func([]byte, T) []byte, equal func(a, b T) bool) {
	t.Helper()
	buf := slices.Clone(data) // the fuzzer's input must not be modified
	v, err := decode(buf)
	half := len(data) / 2
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v is not ErrCorrupt", err)
		}
		for _, part := range [][]byte{data[:half], data[half:]} {
			if _, err := decode(slices.Clone(part)); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("half: error %v is not ErrCorrupt", err)
			}
		}
		return
	}
	for i := range buf {
		buf[i] ^= 0xa5
	}
	if re := encode(nil, v); !bytes.Equal(re, data) {
		t.Fatalf("re-encoded %x, input %x", re, data)
	}
	if re := encode([]byte("pre"), v); !bytes.Equal(re, append([]byte("pre"), data...)) {
		t.Fatalf("append after a prefix: %x", re)
	}
	v2, err := decode(encode(nil, v))
	if err != nil || !equal(v, v2) {
		t.Fatalf("round trip: %v, %v != %v", err, v2, v)
	}
	if _, err := decode(slices.Clone(data[:half])); err == nil {
		t.Fatalf("first half %x of a valid value decodes", data[:half])
	}
	if half < len(data) {
		glued := append(slices.Clone(data), data[half:]...)
		if _, err := decode(glued); err == nil {
			t.Fatalf("valid value with %d trailing bytes decodes", len(data)-half)
		}
	}
}

func eq[T comparable](a, b T) bool { return a == b }

func FuzzDecodeTopic(f *testing.F) {
	for _, tp := range []Topic{
		{Name: "t", ID: tid(1), Partitions: 1},
		{Name: "orders.v2_eu-1", ID: tid(0xde, 0xad, 0xbe, 0xef), Partitions: 1<<31 - 1, Mirror: "east",
			Configs: map[string]string{"cleanup.policy": "compact", "retention.ms": "-1", "x": ""}},
		{Name: strings.Repeat("z", maxTopicNameLen), ID: [16]byte{15: 0xff}, Partitions: 12,
			Configs: map[string]string{"min.insync.replicas": "2"}},
	} {
		f.Add(appendTopic(nil, tp))
	}
	good := appendTopic(nil, Topic{Name: "a", ID: tid(1), Partitions: 1, Configs: map[string]string{"b": "1", "c": "2"}})
	// Damaged variants: unknown version, a huge config count, zero
	// partitions, swapped config order, truncated, trailing byte.
	v2 := slices.Clone(good)
	v2[0] = 2
	f.Add(v2)
	huge := appendTopic(nil, Topic{Name: "a", ID: tid(1), Partitions: 1})
	copy(huge[len(huge)-4:], []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(huge)
	zeroParts := slices.Clone(good)
	copy(zeroParts[17:21], []byte{0, 0, 0, 0})
	f.Add(zeroParts)
	f.Add(bytes.Replace(bytes.Replace(good, []byte("b"), []byte("#"), 1), []byte("c"), []byte("b"), 1))
	f.Add(good[:len(good)-1])
	f.Add(append(slices.Clone(good), 0))
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeTopic, appendTopic, topicsEqual)
	})
}

func FuzzDecodeTopicIndex(f *testing.F) {
	f.Add(appendTopicIndex(nil, "orders"))
	f.Add(appendTopicIndex(nil, strings.Repeat("q", maxTopicNameLen)))
	f.Add(appendTopicIndex(nil, ""))
	f.Add(appendTopicIndex(nil, ".."))
	f.Add(appendTopicIndex(nil, "a/b"))
	f.Add([]byte{1, 0, 0, 1, 0, 'a'})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 'a'})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeTopicIndex, appendTopicIndex, eq[string])
	})
}

func FuzzDecodeBrokerConfig(f *testing.F) {
	f.Add(appendBrokerConfig(nil, "1048576"))
	f.Add(appendBrokerConfig(nil, ""))
	f.Add(appendBrokerConfig(nil, "PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9093"))
	f.Add([]byte{1, 0, 0, 0, 3, 'a', 'b'})
	f.Add([]byte{0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeBrokerConfig, appendBrokerConfig, eq[string])
	})
}

func FuzzDecodeClusterID(f *testing.F) {
	f.Add(appendClusterID(nil, tid(0x3f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)))
	f.Add(appendClusterID(nil, [16]byte{}))
	f.Add(appendClusterID(nil, tid(1))[:10])
	f.Add([]byte{2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeClusterID, appendClusterID, eq[[16]byte])
	})
}

func FuzzDecodeNextProducerID(f *testing.F) {
	for _, next := range []int64{0, 1, 1000, producerIDLimit - 1, producerIDLimit, producerIDLimit + 1, -1, -1 << 63} {
		f.Add(appendNextProducerID(nil, next))
	}
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeNextProducerID, appendNextProducerID, eq[int64])
	})
}

func FuzzDecodeGroupOffset(f *testing.F) {
	for _, o := range []GroupOffset{
		{Offset: 0, LeaderEpoch: -1},
		{Offset: -1, LeaderEpoch: 0, CommitTimestamp: 1700000000000},
		{Offset: 1<<63 - 1, LeaderEpoch: 1<<31 - 1, Metadata: "gen=3 \x00\xff", CommitTimestamp: 1<<63 - 1},
		{Offset: 42, LeaderEpoch: 7, Metadata: strings.Repeat("m", 300), CommitTimestamp: 1},
	} {
		f.Add(appendGroupOffset(nil, o))
	}
	good := appendGroupOffset(nil, GroupOffset{Offset: 5, LeaderEpoch: 1, Metadata: "md", CommitTimestamp: 9})
	// Damaged variants: unknown version, offset -2, epoch -2, negative
	// timestamp, a huge metadata length, truncated, trailing byte.
	v2 := slices.Clone(good)
	v2[0] = 2
	f.Add(v2)
	f.Add(appendGroupOffset(nil, GroupOffset{Offset: -2, LeaderEpoch: -1}))
	f.Add(appendGroupOffset(nil, GroupOffset{Offset: 1, LeaderEpoch: -2}))
	f.Add(appendGroupOffset(nil, GroupOffset{Offset: 1, LeaderEpoch: -1, CommitTimestamp: -1}))
	huge := slices.Clone(good)
	copy(huge[21:25], []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(huge)
	f.Add(good[:len(good)-1])
	f.Add(append(slices.Clone(good), 0))
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeGroupOffset, appendGroupOffset, eq[GroupOffset])
	})
}

func FuzzDecodeGroupMeta(f *testing.F) {
	for _, m := range []GroupMeta{
		{Group: "g"},
		{Group: "orders-consumers", ProtocolType: "consumer", Generation: 12},
		{Group: "a\x00b/\xff", ProtocolType: "connect", Generation: 1<<31 - 1},
		{Group: strings.Repeat("g", 300), ProtocolType: strings.Repeat("p", 130)},
	} {
		f.Add(appendGroupMeta(nil, m))
	}
	good := appendGroupMeta(nil, GroupMeta{Group: "g", ProtocolType: "consumer", Generation: 3})
	v2 := slices.Clone(good)
	v2[0] = 2
	f.Add(v2)
	f.Add(appendGroupMeta(nil, GroupMeta{Group: "", ProtocolType: "consumer"}))
	f.Add(appendGroupMeta(nil, GroupMeta{Group: "g", Generation: -1}))
	f.Add(good[:len(good)-1])
	f.Add(append(slices.Clone(good), 0))
	f.Add([]byte{1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeGroupMeta, appendGroupMeta, func(a, b GroupMeta) bool { return reflect.DeepEqual(a, b) })
	})
}

func FuzzDecodeGroupKey(f *testing.F) {
	for _, g := range []string{"g", "a\x00b", "/", "\x80", strings.Repeat("g", 128), strings.Repeat("\xff", 300)} {
		f.Add(appendGroupKey(nil, g))
	}
	f.Add(appendGroupKey(nil, ""))
	f.Add([]byte(keyGroupPrefix + "\x05ab"))
	f.Add([]byte(keyGroupPrefix + "\x81\x00"))                                     // non-minimal length
	f.Add([]byte(keyGroupPrefix + "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")) // overflow
	f.Add([]byte(keyGroupOffsetPrefix + "\x01g"))
	f.Add([]byte("v1/group"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeGroupKey, appendGroupKey, eq[string])
	})
}

func FuzzDecodeGroupOffsetKey(f *testing.F) {
	for _, k := range []groupOffsetKey{
		{"g", "t", 0},
		{"a\x00b", "orders.v2_eu-1", 1<<31 - 1},
		{strings.Repeat("\x80", 200), strings.Repeat("z", maxTopicNameLen), 256},
	} {
		f.Add(appendGroupOffsetKey(nil, k))
	}
	f.Add(appendGroupOffsetKey(nil, groupOffsetKey{"", "t", 0}))
	f.Add(appendGroupOffsetKey(nil, groupOffsetKey{"g", "a/b", 0}))
	f.Add(appendGroupOffsetKey(nil, groupOffsetKey{"g", "..", 0}))
	f.Add(appendGroupOffsetKey(nil, groupOffsetKey{"g", "t", -1}))
	f.Add([]byte(keyGroupOffsetPrefix + "\x01g\x01t\x00\x00\x00"))
	f.Add([]byte(keyGroupOffsetPrefix + "\x01g\x80\x00t\x00\x00\x00\x00"))
	f.Add([]byte(keyGroupPrefix + "\x01g"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeGroupOffsetKey, appendGroupOffsetKey, eq[groupOffsetKey])
	})
}
