package verify

import (
	"testing"
)

// FuzzScan: scan never panics, yields batches in the window in order,
// and its next offset never goes back; a records blob split in two and
// scanned as two responses yields the same headers up to the split's
// whole batches.
func FuzzScan(f *testing.F) {
	b0, b10 := testBatch(0, 10, 'a', 40), testBatch(10, 5, 'b', 3)
	f.Add(append(append([]byte{}, b0...), b10...), int64(0), int64(100))
	f.Add(b10, int64(12), int64(13))
	f.Add(b0[:30], int64(0), int64(1))
	f.Add([]byte{}, int64(0), int64(0))
	f.Fuzz(func(t *testing.T, records []byte, from, to int64) {
		hs, next, _, err := scan(nil, records, from, to)
		if next < from {
			t.Fatalf("next %d before from %d", next, from)
		}
		prev := from
		for _, h := range hs {
			if h.last < prev || h.base >= to {
				t.Fatalf("batch %d-%d outside [%d, %d) or out of order", h.base, h.last, prev, to)
			}
			prev = h.last + 1
		}
		if err != nil {
			return
		}
		// Split in two, as a response cut at its byte limit: the first
		// half's headers are the whole blob's first ones (a partial
		// batch is never yielded), and the second scan from where the
		// first stopped is no error either.
		half := len(records) / 2
		a, _, _, errA := scan(nil, records[:half], from, to)
		if errA != nil {
			t.Fatalf("the first half fails (%v), the whole does not", errA)
		}
		if len(a) > len(hs) {
			t.Fatalf("%d headers from the first half, %d from the whole", len(a), len(hs))
		}
		for i := range a {
			if a[i] != hs[i] {
				t.Fatalf("header %d: %+v from the first half, %+v from the whole", i, a[i], hs[i])
			}
		}
	})
}
