package control

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// refuseFetches makes the source answer every Fetch and
// OffsetForLeaderEpoch with NOT_LEADER_OR_FOLLOWER while blocked is set: a
// source that never accepts the fetch position.
func refuseFetches(src *kfake.Cluster, blocked *atomic.Bool) {
	notLeader := kerr.NotLeaderForPartition.Code
	src.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		if !blocked.Load() {
			return nil, nil, false
		}
		src.KeepControl()
		req := r.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.HighWatermark, sp.LastStableOffset = rp.Partition, notLeader, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	src.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		if !blocked.Load() {
			return nil, nil, false
		}
		src.KeepControl()
		req := r.(*kmsg.OffsetForLeaderEpochRequest)
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.LeaderEpoch, sp.EndOffset = rp.Partition, notLeader, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}

// A failback interrupted before the source accepted the fetch position
// (the alignment not done) aligns when it goes on: LOG_ALIGNMENT stays
// persisted until then. Before, MIRRORING was persisted at the start, and
// a node restarted (or a topic paused and resumed) in between resumed
// unaligned: the partition FAILED on the divergent tail instead of
// finishing the failback.
func TestInterruptedAlignmentAlignsAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		interrupt func(t *testing.T, ctx context.Context, n *testNode) *testNode
	}{{
		name: "node restart",
		interrupt: func(t *testing.T, ctx context.Context, n *testNode) *testNode {
			n.close()
			n = openTestNode(t, n.cfg, nil)
			if ps, _ := n.b.Store().MirrorPartitionState("m", "t", 0); ps.State != state.StateLogAlignment {
				t.Fatalf("restarted before the alignment: state %v, want LOG_ALIGNMENT", ps.State)
			}
			return n
		},
	}, {
		name: "pause and resume",
		interrupt: func(t *testing.T, ctx context.Context, n *testNode) *testNode {
			pause := mirrorapi.NewPtrPauseMirrorTopicsRequest()
			pause.MirrorName, pause.Topics = "m", []mirrorapi.MirrorTopicsRequestTopic{{TopicName: "t"}}
			if resp, err := n.cl.Request(ctx, pause); err != nil || resp.(*mirrorapi.PauseMirrorTopicsResponse).ErrorCode != 0 {
				t.Fatalf("pause: %v %+v", err, resp)
			}
			// Paused through a restart: still aligning, no fetcher.
			n.close()
			n = openTestNode(t, n.cfg, nil)
			if _, err := n.ctl.fm.Status("m", "t", 0); err == nil {
				t.Fatal("a paused partition has a fetcher after a restart")
			}
			if ps, _ := n.b.Store().MirrorPartitionState("m", "t", 0); ps.State != state.StateLogAlignment {
				t.Fatalf("paused before the alignment: %v, want LOG_ALIGNMENT (PAUSING is entered from MIRRORING only)", ps.State)
			}
			resume := mirrorapi.NewPtrResumeMirrorTopicsRequest()
			resume.MirrorName, resume.Topics = "m", []mirrorapi.MirrorTopicsRequestTopic{{TopicName: "t"}}
			if _, err := n.cl.Request(ctx, resume); err != nil {
				t.Fatal(err)
			}
			return n
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			interruptedAlignment(t, tc.interrupt)
		})
	}
}

func interruptedAlignment(t *testing.T, interrupt func(t *testing.T, ctx context.Context, n *testNode) *testNode) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	var blocked atomic.Bool
	refuseFetches(src, &blocked)
	srcCl := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic("t"))
	if err := srcCl.ProduceSync(ctx, kgo.StringRecord("a"), kgo.StringRecord("b")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	cfg := nodetest.Config(t)
	n := openTestNode(t, cfg, nil)
	n.createMirror(t, ctx, src.ListenAddrs()[0])
	n.startTopics(t, ctx, "t")
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 caught up with the source at 2", func() bool {
		st, err := n.ctl.fm.Status("m", "t", 0)
		return err == nil && st.SourceHighWatermark == 2 && st.Lag == 0
	}))
	// Failover, then writes on both sides: the copy's tail diverges.
	stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName = "m"
	stop.Topics = []mirrorapi.MirrorTopicsRequestTopic{{TopicName: "t"}}
	if _, err := n.cl.Request(ctx, stop); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 STOPPED", func() bool {
		ps, err := n.b.Store().MirrorPartitionState("m", "t", 0)
		return err == nil && ps.State == state.StateStopped
	}))
	local, err := kgo.NewClient(kgo.SeedBrokers(n.b.Addr()), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := local.ProduceSync(ctx, kgo.StringRecord("local-1"), kgo.StringRecord("local-2")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	local.Close()
	if err := srcCl.ProduceSync(ctx, kgo.StringRecord("c")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// The failback starts while the source refuses fetches, and is
	// interrupted before any fetch was accepted.
	blocked.Store(true)
	n.startTopics(t, ctx, "t")
	if ps, _ := n.b.Store().MirrorPartitionState("m", "t", 0); ps.State != state.StateLogAlignment {
		t.Fatalf("started, not aligned yet: state %v, want LOG_ALIGNMENT", ps.State)
	}
	n = interrupt(t, ctx, n)
	defer n.close()

	blocked.Store(false)
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 MIRRORING again, caught up with the source at 3", func() bool {
		ps, _ := n.b.Store().MirrorPartitionState("m", "t", 0)
		if ps.State == state.StateFailed {
			t.Fatalf("the restarted failback failed: %s", ps.ErrorMessage)
		}
		st, err := n.ctl.fm.Status("m", "t", 0)
		return ps.State == state.StateMirroring && err == nil && st.Lag == 0 && st.SourceHighWatermark == 3
	}))
	cons, err := kgo.NewClient(kgo.SeedBrokers(n.b.Addr()), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for len(got) < 3 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming the aligned copy: %v (got %q)", err, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("the copy after the failback holds %q, want the source's a b c", got)
	}
}
