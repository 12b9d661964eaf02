package fetch

import (
	"testing"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/storage"
)

// logView is a bare log as the partition.View a partition gives.
type logView struct{ *storage.Log }

func (v logView) LatestEpoch() (int32, bool) {
	e, ok := v.Epochs().Latest()
	return e.Epoch, ok
}

func (v logView) EpochForOffset(offset int64) (int32, bool) { return v.Epochs().EpochForOffset(offset) }

// divergence on a log, whole and seen as if cut at an epoch start first
// (the dry run's view): the view answers as the cut log would.
func TestDivergence(t *testing.T) {
	t.Parallel()
	l, err := storage.Open(t.TempDir(), storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Epoch 1 holds offsets 0-9, epoch 3 10-19, epoch 6 20-29.
	for off := range int64(30) {
		epoch := int32(1)
		switch {
		case off >= 20:
			epoch = 6
		case off >= 10:
			epoch = 3
		}
		if _, err := l.AppendMirror(batch.AppendMirrorPIDReset(nil, batch.PIDReset{BaseOffset: off, PartitionLeaderEpoch: epoch})); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name       string
		end        int64 // the view's end
		wantLatest int32
		epoch      int32 // the source's answer
		sourceEnd  int64
		wantCut    bool
		wantCutAt  int64
	}{
		{"whole, same history", 30, 6, 6, 30, false, 0},
		{"whole, source ends epoch 6 early", 30, 6, 6, 25, true, 25},
		{"whole, source has epoch 3 longer", 30, 6, 3, 24, true, 20},
		{"whole, source knows only epoch 1", 30, 6, 1, 10, true, 10},
		{"cut at 20, same history", 20, 3, 3, 20, false, 0},
		{"cut at 20, source has epoch 3 longer", 20, 3, 3, 24, false, 0},
		{"cut at 20, source ends epoch 3 at 15", 20, 3, 3, 15, true, 15},
		{"cut at 10, source ends epoch 1 at 4", 10, 1, 1, 4, true, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := alignView{l: logView{l}, end: tc.end}
			if got, ok := v.latest(); !ok || got != tc.wantLatest {
				t.Fatalf("latest %d %v, want %d", got, ok, tc.wantLatest)
			}
			to, cut := divergence(v, tc.epoch, tc.sourceEnd)
			if cut != tc.wantCut || cut && to != tc.wantCutAt {
				t.Fatalf("divergence(%d, %d) = %d %v, want %d %v", tc.epoch, tc.sourceEnd, to, cut, tc.wantCutAt, tc.wantCut)
			}
		})
	}
	if _, ok := (alignView{l: logView{l}, end: 0}).latest(); ok {
		t.Fatal("an empty view has a latest epoch")
	}
}
