package control

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// testNode is a broker with its control plane, reopenable on the same dirs.
type testNode struct {
	cfg broker.Config
	b   *broker.Broker
	ctl *Plane
	cl  *kgo.Client
}

func openTestNode(t testing.TB, cfg broker.Config, before func(*broker.Broker)) *testNode {
	t.Helper()
	return openTestNodeWith(t, cfg, before, Config{})
}

// openTestNodeWith is openTestNode with a control plane config.
func openTestNodeWith(t testing.TB, cfg broker.Config, before func(*broker.Broker), ctlCfg Config) *testNode {
	t.Helper()
	b, err := broker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(b)
	}
	ctl, err := New(b, ctlCfg)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	b.SetMirrorAdmin(ctl)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.MaxVersions(mirrorapi.WithMirrorKeys(nil)))
	if err != nil {
		t.Fatal(err)
	}
	return &testNode{cfg: cfg, b: b, ctl: ctl, cl: cl}
}

// createMirror creates mirror "m" from the source at boot; the request
// must succeed.
func (n *testNode) createMirror(t testing.TB, ctx context.Context, boot string) {
	t.Helper()
	req := mirrorapi.NewPtrCreateClusterMirrorRequest()
	req.MirrorName = "m"
	req.Configs = []mirrorapi.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: &boot}}
	resp, err := n.cl.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.(*mirrorapi.CreateClusterMirrorResponse); c.ErrorCode != 0 {
		t.Fatalf("create: %d %v", c.ErrorCode, c.ErrorMessage)
	}
}

// startTopics starts mirroring topics in mirror "m".
func (n *testNode) startTopics(t testing.TB, ctx context.Context, topics ...string) {
	t.Helper()
	req := mirrorapi.NewPtrStartMirrorTopicsRequest()
	req.MirrorName = "m"
	for _, topic := range topics {
		req.Topics = append(req.Topics, mirrorapi.StartMirrorTopicsRequestTopic{TopicName: topic})
	}
	if _, err := n.cl.Request(ctx, req); err != nil {
		t.Fatal(err)
	}
}

func (n *testNode) close() {
	n.cl.Close()
	n.ctl.Close()
	n.b.Close()
}

// A node that stopped between persisting STOPPING and finishing the stop
// (a crash mid-failover) finishes it at the next start: the open source
// transaction is aborted, producer state is reset, the topic becomes
// writable, and read_committed consumers reach the end.
func TestRestartFinishesAStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	plain := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic("t"))
	if err := plain.ProduceSync(ctx, kgo.StringRecord("a"), kgo.StringRecord("b")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txn := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic("t"), kgo.TransactionalID("open"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, kgo.StringRecord("never committed")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	cfg := nodetest.Config(t)
	n := openTestNode(t, cfg, nil)
	boot := src.ListenAddrs()[0]
	n.createMirror(t, ctx, boot)
	n.startTopics(t, ctx, "t")
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 caught up with the source", func() bool {
		st, err := n.ctl.fm.Status("m", "t", 0)
		return err == nil && st.SourceHighWatermark > 0 && st.Lag == 0
	}))
	n.close()

	// The crash: STOPPING persisted, nothing of the stop done.
	n = openTestNode(t, cfg, func(b *broker.Broker) {
		ps, err := b.Store().MirrorPartitionState("m", "t", 0)
		if err != nil {
			t.Fatal(err)
		}
		ps.State, ps.LastMirrorEpoch, ps.LastMirrorOffset = state.StateStopping, 0, 3
		if err := b.Store().PutMirrorPartitionState(ps); err != nil {
			t.Fatal(err)
		}
	})
	defer n.close()
	if ps, err := n.b.Store().MirrorPartitionState("m", "t", 0); err != nil || ps.State != state.StateStopped {
		t.Fatalf("after restart: %+v %v", ps, err)
	}
	if info, _ := n.b.Partitions().Info("t"); info.Mirror != "" {
		t.Fatalf("topic still owned by mirror %q", info.Mirror)
	}
	local, err := n.b.Partitions().MirrorPartition("t", 0)
	if err == nil {
		t.Fatalf("a released topic still hands out a mirror partition: %v", local)
	}
	// The last stable offset is the log end: the open transaction was
	// aborted, so read_committed consumers do not hang on it.
	latest := func(isolation int8) int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.IsolationLevel = isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = 0, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, n.cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].Offset
	}
	if lso, hw := latest(1), latest(0); lso != hw || hw < 5 {
		t.Fatalf("last stable offset %d, high watermark %d: the open transaction still holds consumers", lso, hw)
	}
	// read_committed sees the committed records only.
	rc, err := kgo.NewClient(kgo.SeedBrokers(n.b.Addr()), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got []string
	for len(got) < 2 {
		fs := rc.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("read_committed after the stop: %v (got %q)", err, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("read_committed got %q", got)
	}
	// And the topic is writable.
	p, err := kgo.NewClient(kgo.SeedBrokers(n.b.Addr()), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.ProduceSync(ctx, kgo.StringRecord("after failover")).FirstErr(); err != nil {
		t.Fatalf("produce after the stop: %v", err)
	}
}
