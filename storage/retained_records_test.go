package storage

import (
	"testing"

	"github.com/kmirror/kmirror/batch"
)

// A batch the cleaner re-encoded with some of its records (same offsets,
// timestamps, keys, values and headers; another codec and base timestamp)
// is the original's; other records, another offset or another producer
// are not, and an empty one shows nothing.
func TestRetainedRecords(t *testing.T) {
	t.Parallel()
	orig := tbatch{base: 100, recs: []trec{kv("a", "1"), kv("b", "2"), kv("a", "3"), kv("c", "4")}, pid: 7, seq: 0}
	for _, tt := range []struct {
		name string
		kept tbatch
		want bool
	}{
		{"the same batch", orig, true},
		{"compacted, re-encoded", tbatch{base: 100, recs: []trec{kv("b", "2"), kv("a", "3")}, pid: 7, deltas: []int64{1, 2}, tsShift: 1}, true},
		{"another value", tbatch{base: 100, recs: []trec{kv("b", "2"), kv("a", "X")}, pid: 7, deltas: []int64{1, 2}}, false},
		{"another offset", tbatch{base: 101, recs: []trec{kv("b", "2")}, pid: 7, deltas: []int64{1}}, false},
		{"another producer", tbatch{base: 100, recs: []trec{kv("b", "2")}, pid: 8, deltas: []int64{1}}, false},
		{"a tombstone for a value", tbatch{base: 100, recs: []trec{tomb("b")}, pid: 7, deltas: []int64{1}}, false},
		{"another timestamp", tbatch{base: 100, recs: []trec{kv("b", "2")}, pid: 7, deltas: []int64{1}, ts: 5000}, false},
		{"everything cleaned away", tbatch{base: 100, pid: 7}, false},
	} {
		for _, c := range []batch.Codec{batch.CodecNone, batch.CodecLz4} {
			o, err := batch.Parse(orig.encode(t, batch.CodecNone))
			if err != nil {
				t.Fatal(err)
			}
			k, err := batch.Parse(tt.kept.encode(t, c))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := RetainedRecords(o, k); err != nil || got != tt.want {
				t.Errorf("%s (codec %v): %v, %v; want %v", tt.name, c, got, err, tt.want)
			}
		}
	}
}
