package control

import (
	"testing"

	"github.com/kmirror/kmirror/internal/testutil"
)

// The periodic checkpoint persists what the fetchers read: the source high
// watermark and its read time, on the partition's state, then each newer
// reading. This is what a node that crashes (no final checkpoint at Close)
// shows after its restart until the source answers.
func TestCheckpointPersistsSourceOffsets(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t, "t")
	f.produce(t, "t", 0, 3)
	f.n.startTopics(t, f.ctx, "t")

	last := map[partitionKey]checkpointed{}
	// checkpointAt waits for the fetcher to have read want, checkpoints,
	// and checks the store holds that reading.
	checkpointAt := func(want int64) {
		t.Helper()
		testutil.CheckFor(t, testutil.Timeout, testutil.True("the fetcher saw the source high watermark", func() bool {
			st, err := f.n.ctl.fm.Status("m", "t", 0)
			return err == nil && st.SourceHighWatermark == want
		}))
		// The fetcher may read again while this runs: the stored time
		// lies between the readings before and after the checkpoint.
		before, _ := f.n.ctl.fm.Status("m", "t", 0)
		f.n.ctl.checkpointOffsets(last, false)
		after, _ := f.n.ctl.fm.Status("m", "t", 0)
		ps := f.state(t, "t", 0)
		ms := ps.SourceOffsetTime.UnixMilli()
		if ps.SourceOffset != want || ms < before.SourceUpdated.UnixMilli() || ms > after.SourceUpdated.UnixMilli() {
			t.Fatalf("stored source offset %d read at %v; want %d read between %v and %v", ps.SourceOffset,
				ps.SourceOffsetTime, want, before.SourceUpdated, after.SourceUpdated)
		}
	}
	checkpointAt(3)
	f.produce(t, "t", 0, 2)
	checkpointAt(5)
}
