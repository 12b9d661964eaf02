package control

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The periodic checkpoint persists what the fetchers read: the source high
// watermark and its read time, on the partition's state, then each newer
// reading. This is what a node that crashes (no final checkpoint at Close)
// shows after its restart until the source answers.
func TestCheckpointPersistsSourceOffsets(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	pr, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	produce := func(n int) {
		for range n {
			if err := pr.ProduceSync(ctx, kgo.StringRecord("r")).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(3)
	n := openTestNode(t, testConfig(t), nil)
	defer n.close()
	n.createMirror(t, ctx, src.ListenAddrs()[0])
	n.startTopics(t, ctx, "t")

	last := map[partitionKey]checkpointed{}
	// checkpointAt waits for the fetcher to have read want, checkpoints,
	// and checks the store holds that reading.
	checkpointAt := func(want int64) {
		t.Helper()
		waitFor(t, func() bool {
			st, err := n.ctl.fm.Status("m", "t", 0)
			return err == nil && st.SourceHighWatermark == want
		})
		// The fetcher may read again while this runs: the stored time
		// lies between the readings before and after the checkpoint.
		before, _ := n.ctl.fm.Status("m", "t", 0)
		n.ctl.checkpointOffsets(last, false)
		after, _ := n.ctl.fm.Status("m", "t", 0)
		ps, err := n.ctl.store.MirrorPartitionState("m", "t", 0)
		if err != nil {
			t.Fatal(err)
		}
		ms := ps.SourceOffsetTime.UnixMilli()
		if ps.SourceOffset != want || ms < before.SourceUpdated.UnixMilli() || ms > after.SourceUpdated.UnixMilli() {
			t.Fatalf("stored source offset %d read at %v; want %d read between %v and %v", ps.SourceOffset,
				ps.SourceOffsetTime, want, before.SourceUpdated, after.SourceUpdated)
		}
	}
	checkpointAt(3)
	produce(2)
	checkpointAt(5)
}
