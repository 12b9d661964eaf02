package control

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// The dry run's other rules, from a source that never mirrored from us
// (kfake): a topic that does not exist here yet is created and copied
// from the source's log start; a stopped one with local writes is cut
// whole (no last mirror epoch: from scratch), as the real start then
// does. The failback by divergence is cmd/kmirror's TestMirrorsStartDryRun.
func TestStartDryRunFromScratch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	sp := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic("t"))
	if err := sp.ProduceSync(ctx, kgo.StringRecord("1"), kgo.StringRecord("2"), kgo.StringRecord("3")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	n := openTestNode(t, nodetest.Config(t), nil)
	defer n.close()
	n.createMirror(t, ctx, src.ListenAddrs()[0])
	startReq := func(dry bool) *mirrorapi.StartMirrorTopicsResponse {
		t.Helper()
		req := mirrorapi.NewPtrStartMirrorTopicsRequest()
		req.MirrorName, req.ValidateOnly = "m", dry
		req.Topics = []mirrorapi.StartMirrorTopicsRequestTopic{{TopicName: "t"}}
		resp, err := req.RequestWith(ctx, n.cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || resp.DryRun != dry {
			t.Fatalf("start (dry run %v): %+v %s", dry, resp, *resp.Topics[0].ErrorMessage)
		}
		return resp
	}
	preview := func() mirrorapi.StartPreviewPartition {
		t.Helper()
		resp := startReq(true)
		if len(resp.Topics[0].Preview) != 1 {
			t.Fatalf("dry run: %+v", resp.Topics[0])
		}
		return resp.Topics[0].Preview[0]
	}

	want := mirrorapi.StartPreviewPartition{LocalEnd: -1, TruncateFrom: -1, Cause: mirrorapi.AlignNone, CopyFrom: 0, SourceEnd: 3}
	if got := preview(); got != want {
		t.Fatalf("dry run of a new topic: %+v, want %+v", got, want)
	}
	if _, ok := n.b.Partitions().Info("t"); ok {
		t.Fatal("the dry run created the topic")
	}

	startReq(false)
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 mirrored to log end 3", func() bool {
		st, err := n.ctl.fm.Status("m", "t", 0)
		return err == nil && st.LogEndOffset == 3
	}))
	stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName = "m"
	stop.Topics = []mirrorapi.MirrorTopicsRequestTopic{{TopicName: "t"}}
	if _, err := n.cl.Request(ctx, stop); err != nil {
		t.Fatal(err)
	}
	wp, err := kgo.NewClient(kgo.SeedBrokers(n.b.Addr()), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer wp.Close()
	if err := wp.ProduceSync(ctx, kgo.StringRecord("written here")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	l, err := n.b.Partitions().View("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	size := l.Size()
	// 3 mirrored records, MIRROR_PID_RESET and the local write: all go.
	want = mirrorapi.StartPreviewPartition{LocalEnd: 5, TruncateFrom: 0, TruncateRecords: 5, TruncateBytes: size,
		Cause: mirrorapi.AlignFromScratch, CopyFrom: 0, SourceEnd: 3}
	if got := preview(); got != want {
		t.Fatalf("dry run of the restart: %+v, want %+v", got, want)
	}
	if l.LogEndOffset() != 5 || l.Size() != size || n.partitionStateName(t, "t") != "STOPPED" {
		t.Fatalf("the dry run changed the topic: end %d size %d->%d", l.LogEndOffset(), size, l.Size())
	}
	startReq(false)
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 mirrored to log end 3, source at 3", func() bool {
		st, err := n.ctl.fm.Status("m", "t", 0)
		return err == nil && st.LogEndOffset == 3 && st.SourceHighWatermark == 3
	}))
}

// partitionStateName is partition 0's stored state.
func (n *testNode) partitionStateName(t *testing.T, topic string) string {
	t.Helper()
	ps, err := n.ctl.store.MirrorPartitionState("m", topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ps.State.String()
}
