package state

import (
	"errors"
	"testing"
)

func TestLeaderEpochsNeverGoBack(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	id := [16]byte{1}
	for _, step := range []struct{ partition, put, want int32 }{
		{0, 10, 10}, {0, 5, 10}, {0, 20, 20}, {3, 7, 7}, {1, 0, 0},
	} {
		got, err := s.PutLeaderEpoch(id, step.partition, step.put)
		if err != nil || got != step.want {
			t.Fatalf("put %d on %d: %d, %v; want %d", step.put, step.partition, got, err, step.want)
		}
	}
	epochs, err := s.LeaderEpochs(id)
	if err != nil || len(epochs) != 3 || epochs[0] != 20 || epochs[3] != 7 || epochs[1] != 0 {
		t.Fatalf("epochs %v, %v", epochs, err)
	}
	if other, err := s.LeaderEpochs([16]byte{2}); err != nil || len(other) != 0 {
		t.Fatalf("another topic: %v %v", other, err)
	}
	if _, err := s.PutLeaderEpoch(id, -1, 1); err == nil {
		t.Fatal("negative partition accepted")
	}
	if err := s.DeleteLeaderEpochs(id); err != nil {
		t.Fatal(err)
	}
	if epochs, _ := s.LeaderEpochs(id); len(epochs) != 0 {
		t.Fatalf("after delete: %v", epochs)
	}
}

func FuzzDecodeLeaderEpochs(f *testing.F) {
	f.Add(appendLeaderEpochs(nil, map[int32]int32{0: 1, 5: 9}))
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		epochs, err := decodeLeaderEpochs(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if again := appendLeaderEpochs(nil, epochs); string(again) != string(b) {
			t.Fatalf("not canonical: % x -> % x", b, again)
		}
	})
}
