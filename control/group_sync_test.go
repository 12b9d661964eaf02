package control

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// A group's offsets committed at the source appear here after a sync
// cycle, clamped to what the mirror holds, so its consumers fail over
// without translating offsets.
func TestSyncCopiesGroupOffsets(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	sc := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic("t"))
	for range 5 {
		if err := sc.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sadm := kadm.NewClient(sc)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: 3, LeaderEpoch: 0, Metadata: "app"})
	if _, err := sadm.CommitOffsets(ctx, "orders-app", offs); err != nil {
		t.Fatal(err)
	}

	cfg := nodetest.Config(t)
	n := openTestNode(t, cfg, nil)
	defer n.close()
	boot := src.ListenAddrs()[0]
	n.createMirror(t, ctx, boot)
	n.startTopics(t, ctx, "t")
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 mirrored to log end 5", func() bool {
		st, err := n.ctl.fm.Status("m", "t", 0)
		return err == nil && st.LogEndOffset == 5
	}))
	n.ctl.SyncOnce()
	got, err := kadm.NewClient(n.cl).FetchOffsets(ctx, "orders-app")
	if err != nil {
		t.Fatal(err)
	}
	o, ok := got.Lookup("t", 0)
	if !ok || o.At != 3 || o.Metadata != "app" {
		t.Fatalf("synced offset %+v (found %v), want 3 with its metadata", o, ok)
	}
}

// A source whose cluster id changed (the bootstrap servers now reach
// another cluster) stops the mirror: every partition FAILED, not retried.
func TestClusterIDGuard(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := kfaketest.Source(t, kfake.SeedTopics(1, "t"), kfake.ClusterID("first"))
	second := kfaketest.Source(t, kfake.SeedTopics(1, "t"), kfake.ClusterID("second"))
	cfg := nodetest.Config(t)
	n := openTestNode(t, cfg, nil)
	defer n.close()
	boot := first.ListenAddrs()[0]
	n.createMirror(t, ctx, boot)
	n.startTopics(t, ctx, "t")
	n.ctl.SyncOnce()
	// MIRRORING once the source accepted the fetch (alignment.go).
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 MIRRORING", func() bool {
		ps, _ := n.b.Store().MirrorPartitionState("m", "t", 0)
		return ps.State.String() == "MIRRORING"
	}))
	if err := n.ctl.SetMirrorConfigs("m", map[string]string{"bootstrap.servers": second.ListenAddrs()[0]}); err != nil {
		t.Fatal(err)
	}
	n.ctl.SyncOnce()
	ps, err := n.b.Store().MirrorPartitionState("m", "t", 0)
	if err != nil || ps.State.String() != "FAILED" || ps.RetryAttempt != -1 {
		t.Fatalf("after the cluster id changed: %+v %v", ps, err)
	}
	if _, err := n.ctl.fm.Status("m", "t", 0); err == nil {
		t.Fatal("the partition is still fetching")
	}
}

// A share group's start offsets at the source (KIP-932) appear here after a
// sync cycle, clamped to what the mirror holds (KIP-1279); the group need
// not exist here first. A share group whose name is a classic group here
// is not synced and is counted as a failed share group sync; the others
// are synced still.
func TestSyncCopiesShareGroupStartOffsets(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	sc := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic("t"))
	for range 5 {
		if err := sc.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sadm := kadm.NewClient(sc)
	for group, at := range map[string]int64{"queue": 3, "far": 50, "clash": 1} {
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "t", Partition: 0, At: at})
		if resp, err := sadm.AlterShareGroupOffsets(ctx, group, offs); err != nil || resp.Error() != nil {
			t.Fatalf("setting %s at the source: %v %v", group, err, resp.Error())
		}
	}

	cfg := nodetest.Config(t)
	cfg.GroupRebalanceProtocols = []string{"classic", "consumer", "share"}
	n := openTestNode(t, cfg, nil)
	defer n.close()
	n.createMirror(t, ctx, src.ListenAddrs()[0])
	n.startTopics(t, ctx, "t")
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 mirrored to log end 5", func() bool {
		st, err := n.ctl.fm.Status("m", "t", 0)
		return err == nil && st.LogEndOffset == 5
	}))
	adm := kadm.NewClient(n.cl)
	classic := kadm.Offsets{}
	classic.Add(kadm.Offset{Topic: "t", Partition: 0, At: 2})
	if _, err := adm.CommitOffsets(ctx, "clash", classic); err != nil {
		t.Fatal(err)
	}
	n.ctl.SyncOnce()
	got, err := adm.DescribeShareGroupOffsets(ctx, "queue", "far", "clash")
	if err != nil {
		t.Fatal(err)
	}
	for group, want := range map[string]int64{"queue": 3, "far": 5} {
		if o := got[group].Offsets["t"][0]; got[group].Err != nil || o.StartOffset != want {
			t.Fatalf("%s here: %+v (%v), want start offset %d", group, o, got[group].Err, want)
		}
	}
	if got["clash"].Err == nil {
		t.Fatalf("the classic group clash was described as a share group: %+v", got["clash"])
	}
	stats := n.ctl.SyncStats()
	if len(stats) != 1 || stats[0].Errors[SyncShareGroupOffsets] != 1 || stats[0].Errors[SyncGroupOffsets] != 0 {
		t.Fatalf("sync stats %+v: want one failed share group sync, the group sync fine", stats)
	}
}
