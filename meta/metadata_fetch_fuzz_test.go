package meta

import (
	"testing"

	"github.com/kmirror/kmirror/state"
)

// FuzzReadEntryBatches: what an observer reads from the wire decodes to
// increasing indexes from the fetch offset on, and encodes back to
// batches that decode the same.
func FuzzReadEntryBatches(f *testing.F) {
	f.Add(appendEntryBatch(appendEntryBatch(nil, 1, 1, []byte("a")), 4, 2, nil), uint64(1))
	f.Add(appendEntryBatch(nil, 9, 3, EncodeEntry([]state.Op{{Key: []byte("k"), Value: []byte("v")}})), uint64(5))
	f.Add([]byte{0, 0, 0}, uint64(0))
	f.Fuzz(func(t *testing.T, records []byte, from uint64) {
		got, err := readEntryBatches(records, from)
		if err != nil {
			return
		}
		var again []byte
		for i, e := range got {
			if e.index < from || i > 0 && e.index <= got[i-1].index {
				t.Fatalf("entry %d at index %d after %+v (from %d)", i, e.index, got[:i], from)
			}
			again = appendEntryBatch(again, e.index, e.term, e.data)
		}
		back, err := readEntryBatches(again, from)
		if err != nil || len(back) != len(got) {
			t.Fatalf("re-encoded entries: %d, %v; want %d", len(back), err, len(got))
		}
	})
}
