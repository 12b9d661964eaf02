package storage

import (
	"reflect"
	"testing"
)

// FuzzOffsetCheckpoint: any replication-offset-checkpoint body parses or
// is refused, never panics; what parses writes back and parses again to
// the same offsets, and a file cut in two (a torn write) is refused or
// names the same offsets, never others.
func FuzzOffsetCheckpoint(f *testing.F) {
	// Kafka's layout (OffsetCheckpointFile), then variants around it.
	f.Add([]byte("0\n2\norders 0 1234\norders 1 987\n"))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n1\n__consumer_offsets 49 0\n"))
	f.Add([]byte("0\n1\norders 0 1234"))
	f.Add([]byte("1\n1\norders 0 1234\n"))
	f.Add([]byte("0\n2\norders 0 1\norders 0 2\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := ParseOffsetCheckpoint(body)
		if err != nil {
			if m != nil {
				t.Fatalf("%q: refused (%v) with offsets %v", body, err, m)
			}
			return
		}
		for tp, off := range m {
			if tp.Topic == "" || tp.Partition < 0 || off < 0 {
				t.Fatalf("%q: accepted %+v at %d", body, tp, off)
			}
		}
		again, err := ParseOffsetCheckpoint(AppendOffsetCheckpoint(nil, m))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("%q: %v does not write back: %v %v", body, m, again, err)
		}
		half := body[:len(body)/2]
		if hm, err := ParseOffsetCheckpoint(half); err == nil && len(half) > 0 && !reflect.DeepEqual(hm, m) {
			t.Fatalf("%q parses as %v, its half %q as %v", body, m, half, hm)
		}
	})
}
