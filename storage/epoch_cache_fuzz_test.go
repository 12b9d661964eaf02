package storage

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// FuzzEpochCheckpoint feeds arbitrary bytes as a leader-epoch checkpoint.
// Invariants: parsing never panics and fails only with
// ErrEpochCheckpointCorrupt naming a line; a file that parses is canonical
// (writing its entries back gives the same bytes, which parse to the same
// entries); the entries satisfy the format's ordering rules and load into a
// cache whose queries do not panic. Split in two halves: the halves joined
// parse like the whole, and when the whole parses its first half alone does
// not (a torn write is always detected).
func FuzzEpochCheckpoint(f *testing.F) {
	for _, seed := range []string{
		"0\n0\n",
		"0\n1\n0 0\n",
		"0\n3\n1 0\n3 7\n6 9\n",
		"0\n3\n1 0\n2 5\n3 5\n",
		"0\n2\n0 0\n2147483647 9223372036854775807\n",
		"0\n2\n5 10\n4 11\n",
		"0\n2\n4 11\n5 10\n",
		"0\n1\n5 10",
		"0\n2\n5 10\n",
		"0\n1\n5 10\n6 11\n",
		"0\n1\n-1 10\n",
		"0\n1\n01 10\n",
		"0\n2147483647\n",
		"0\r\n0\r\n",
		"1\n0\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := parseEpochCheckpoint(data)
		epochFuzzCheck(t, data, es, err)

		cut := len(data) / 2
		joined := append(slices.Clip(data[:cut]), data[cut:]...)
		es2, err2 := parseEpochCheckpoint(joined)
		if (err == nil) != (err2 == nil) || !slices.Equal(es, es2) {
			t.Fatalf("halves joined parse to %v, %v; whole to %v, %v", es2, err2, es, err)
		}
		if err == nil && cut < len(data) {
			if _, err := parseEpochCheckpoint(data[:cut]); err == nil {
				t.Fatalf("torn file %q (first %d of %d bytes) parses", data[:cut], cut, len(data))
			}
		}
	})
}

func epochFuzzCheck(t *testing.T, data []byte, es []EpochEntry, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrEpochCheckpointCorrupt) || !bytes.Contains([]byte(err.Error()), []byte("line ")) {
			t.Fatalf("error %v does not wrap ErrEpochCheckpointCorrupt with a line", err)
		}
		return
	}
	for i, e := range es {
		if e.Epoch < 0 || e.StartOffset < 0 ||
			i > 0 && (e.Epoch <= es[i-1].Epoch || e.StartOffset < es[i-1].StartOffset) {
			t.Fatalf("parsed entries break the format rules at %d: %v", i, es)
		}
	}
	out := appendEpochCheckpoint(nil, es)
	if !bytes.Equal(out, data) {
		t.Fatalf("re-encoded %q, read %q", out, data)
	}
	again, err := parseEpochCheckpoint(out)
	if err != nil || !slices.Equal(again, es) {
		t.Fatalf("re-encoded file parses to %v, %v; want %v", again, err, es)
	}

	// Load as OpenEpochCache does and query: strictly ascending, no panic.
	c := &EpochCache{entries: epochRebuildList(es)}
	loaded := c.Entries()
	for i := 1; i < len(loaded); i++ {
		if loaded[i].Epoch <= loaded[i-1].Epoch || loaded[i].StartOffset <= loaded[i-1].StartOffset {
			t.Fatalf("loaded entries not strictly ascending: %v", loaded)
		}
	}
	for _, e := range es {
		c.EndOffsetFor(e.Epoch, e.StartOffset+1)
		c.EndOffsetFor(e.Epoch+1, e.StartOffset+1)
		if epoch, ok := c.EpochForOffset(e.StartOffset); !ok || epoch < e.Epoch {
			t.Fatalf("EpochForOffset(%d) = %d, %v after loading %v", e.StartOffset, epoch, ok, es)
		}
	}
}
