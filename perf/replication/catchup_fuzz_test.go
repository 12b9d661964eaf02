package main

import "testing"

func FuzzBatchesEnd(f *testing.F) {
	f.Add(append(batch(0, 9, 100), batch(10, 4, 50)...))
	f.Add(batch(3, 0, 0)[:30])
	f.Fuzz(func(t *testing.T, b []byte) {
		_, n, ok := batchesEnd(b)
		if n < 0 || n > len(b) || ok != (n > 0) {
			t.Fatalf("batchesEnd of %d bytes: %d bytes, ok %v", len(b), n, ok)
		}
	})
}
