package state

import "testing"

// TestSkipProducerIDsThrough: later blocks start above the given id, the
// allocator never moves back, and ids past the limit are refused.
func TestSkipProducerIDsThrough(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	if err := s.SkipProducerIDsThrough(41); err != nil {
		t.Fatal(err)
	}
	if first, err := s.AllocateProducerIDs(10); err != nil || first != 42 {
		t.Fatalf("first block at %d, %v; want 42", first, err)
	}
	if err := s.SkipProducerIDsThrough(7); err != nil {
		t.Fatal(err)
	}
	if first, err := s.AllocateProducerIDs(1); err != nil || first != 52 {
		t.Fatalf("after a lower skip the block is at %d, %v; want 52", first, err)
	}
	for _, max := range []int64{-1, producerIDLimit - 1, producerIDLimit} {
		if err := s.SkipProducerIDsThrough(max); err == nil {
			t.Fatalf("skip through %d accepted", max)
		}
	}
}
