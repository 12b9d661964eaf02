package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/meta"
)

// groupCoordinator is the node id that node answers FindCoordinator of
// group with, or the answer's error: asked of that node itself (kgo would
// ask any node it knows, which may be one just stopped).
func groupCoordinator(ctx context.Context, node *kgo.Broker, group string) (int32, error) {
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{group}
	kr, err := node.Request(ctx, fc)
	if err != nil {
		return -1, err
	}
	r := kr.(*kmsg.FindCoordinatorResponse)
	if code := r.Coordinators[0].ErrorCode; code != 0 {
		return -1, fmt.Errorf("FindCoordinator of %s: %w", group, kerr.ErrorForCode(code))
	}
	return r.Coordinators[0].NodeID, nil
}

// A group's committed offsets survive the loss of its coordinator: they
// are replicated in __consumer_offsets, and the partition's new leader
// loads them and coordinates the group; a commit there is what the old
// coordinator serves once it leads again.
func TestClusterGroupOffsetsSurviveTheCoordinator(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, logsOnFailure(t))
	ctx := t.Context()
	adm := c.client(0)
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "data"); err != nil {
		t.Fatal(err)
	}
	commit := func(adm *kadm.Client, at int64) error {
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "data", Partition: 0, At: at, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, "g", offs)
		if err == nil {
			err = resp.Error()
		}
		return err
	}
	testutil.CheckFor(t, 20*time.Second, func() error { return commit(adm, 42) })
	// One client per node address: a new one per try would run the
	// nodes out of file descriptors.
	clients := map[string]*kgo.Client{}
	seed := func(i int) *kgo.Broker {
		addr := c.nodes[i].Addr()
		if clients[addr] == nil {
			clients[addr] = nodetest.Client(t, []string{addr})
		}
		return clients[addr].SeedBrokers()[0]
	}
	coordinator := func(i int) (int32, error) { return groupCoordinator(ctx, seed(i), "g") }
	first, err := coordinator(0)
	if err != nil {
		t.Fatal(err)
	}
	part := int32(meta.CoordinatorPartition("g", 50))
	if a, _ := c.partitionOn(0, meta.GroupTopic, part).Assignment(); len(a.Replicas) != 3 || a.Leader != first {
		t.Fatalf("the group's partition of __consumer_offsets: %+v, want 3 replicas led by %d", a, first)
	}
	gone := int(first - 1)
	c.stop(gone)
	alive := (gone + 1) % 3
	// After the stop, requests go straight to the coordinator node i
	// names: a client's own lookups may pick the stopped node.
	atCoordinator := func(i int, req kmsg.Request) (kmsg.Response, error) {
		id, err := coordinator(i)
		if err != nil {
			return nil, err
		}
		if id < 1 || int(id) > len(c.nodes) || c.nodes[id-1] == nil {
			return nil, fmt.Errorf("FindCoordinator at node %d names node %d, which is down", i+1, id)
		}
		return seed(int(id-1)).Request(ctx, req)
	}
	fetched := func(i int) (int64, error) {
		// kgo sends the highest version both sides serve: the
		// batched (v8+) shape.
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = "g"
		ft := kmsg.NewOffsetFetchRequestGroupTopic()
		ft.Topic, ft.Partitions = "data", []int32{0}
		rg.Topics = append(rg.Topics, ft)
		req.Groups = append(req.Groups, rg)
		r, err := atCoordinator(i, req)
		if err != nil {
			return -1, err
		}
		resp := r.(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) != 1 {
			return -1, fmt.Errorf("OffsetFetch answered %d groups", len(resp.Groups))
		}
		g := resp.Groups[0]
		if g.ErrorCode != 0 {
			return -1, kerr.ErrorForCode(g.ErrorCode)
		}
		if len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 1 {
			return -1, fmt.Errorf("OffsetFetch answered %+v", g.Topics)
		}
		rp := g.Topics[0].Partitions[0]
		return rp.Offset, kerr.ErrorForCode(rp.ErrorCode)
	}
	commitAt := func(i int, at int64) error {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, "g", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "data"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, at, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r, err := atCoordinator(i, req)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
	}
	testutil.CheckFor(t, 30*time.Second, func() error {
		now, err := coordinator(alive)
		if err != nil {
			return err
		}
		if now == first {
			return fmt.Errorf("FindCoordinator still names node %d, which is down", first)
		}
		at, err := fetched(alive)
		if err == nil && at != 42 {
			t.Fatalf("the new coordinator %d serves offset %d, want 42", now, at)
		}
		return err
	})
	testutil.CheckFor(t, 20*time.Second, func() error { return commitAt(alive, 43) })

	c.restart(gone)
	testutil.CheckFor(t, 30*time.Second, func() error {
		at, err := fetched(gone)
		if err == nil && at != 43 {
			return fmt.Errorf("offset %d after the old coordinator came back, want 43", at)
		}
		return err
	})
}

// A consumer group keeps consuming across the loss of its coordinator: the
// members find the partition's new leader, rejoin, and resume from the
// offsets they committed, so no record committed as consumed is read
// again and none is skipped.
func TestClusterConsumersResumeAfterTheCoordinatorDies(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, logsOnFailure(t), func(cfg *broker.Config) { cfg.GroupInitialRebalanceDelay = 0 })
	ctx := t.Context()
	if _, err := c.client(0).CreateTopic(ctx, 3, 3, nil, "events"); err != nil {
		t.Fatal(err)
	}
	addrs := c.addrs()
	prod := nodetest.Client(t, addrs, kgo.DefaultProduceTopic("events"), kgo.RequiredAcks(kgo.AllISRAcks()))
	const n = 600
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	consume := func(cl *kgo.Client, until int) {
		t.Helper()
		for len(seen) < until {
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			fs := cl.PollRecords(pctx, 50)
			cancel()
			if err := fs.Err0(); err != nil {
				t.Fatalf("poll after %d records: %v", len(seen), err)
			}
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Fatalf("commit: %v", err)
			}
		}
	}
	opts := []kgo.Opt{kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("events"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)}
	first := nodetest.Client(t, addrs, opts...)
	consume(first, n/2)
	first.Close() // everything it read is committed

	co := kadm.NewClient(nodetest.Client(t, addrs)).FindGroupCoordinators(ctx, "readers")["readers"]
	if co.Err != nil {
		t.Fatal(co.Err)
	}
	c.stop(int(co.NodeID - 1))
	second := nodetest.Client(t, c.addrs(), opts...)
	consume(second, n)
	for v, k := range seen {
		if k != 1 {
			t.Errorf("record %s consumed %d times: its commit was lost with the coordinator", v, k)
		}
	}
}

// A Stable group keeps its generation across the loss of its coordinator:
// the generation's members and assignments are in __consumer_offsets, so
// the partition's new leader serves them as they were and their
// heartbeats go on, with no rebalance (as in Kafka). The new coordinator
// used to load the group Empty, every member's heartbeat answered
// UNKNOWN_MEMBER_ID, and the group rebalanced from scratch.
func TestClusterGroupKeepsItsGenerationAcrossTheCoordinator(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		protocol []kgo.Opt
	}{
		{"classic", nil},
		// The consumer protocol (KIP-848): the member keeps its epoch
		// and assignment from the group's records.
		{"consumer", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer(), kgo.StickyBalancer()), kgo.ServerSideBalancer()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testGroupKeepsItsGenerationAcrossTheCoordinator(t, tc.protocol)
		})
	}
}

func testGroupKeepsItsGenerationAcrossTheCoordinator(t *testing.T, protocol []kgo.Opt) {
	logs := testutil.LogOnFailure(t, slog.LevelInfo)
	c := startCluster(t, 3, func(cfg *broker.Config) {
		cfg.Logger = logs.With("node", cfg.NodeID)
		cfg.GroupInitialRebalanceDelay = 0
		cfg.GroupConsumerHeartbeatInterval = 100 * time.Millisecond
	})
	ctx := t.Context()
	if _, err := c.client(0).CreateTopic(ctx, 3, 3, nil, "steady"); err != nil {
		t.Fatal(err)
	}
	addrs := c.addrs()
	var assigned, lost atomic.Int32
	member := nodetest.Client(t, addrs, append(slices.Clone(protocol), kgo.ConsumerGroup("steady-group"), kgo.ConsumeTopics("steady"),
		kgo.HeartbeatInterval(100*time.Millisecond), kgo.SessionTimeout(6*time.Second), nodetest.ClientLogs(logs),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { assigned.Add(1) }),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) { lost.Add(1) }))...)
	go func() { // polls until the client closes, so that it heartbeats and stays in the group
		for ctx.Err() == nil {
			if member.PollFetches(ctx).IsClientClosed() {
				return
			}
		}
	}()
	stable := func(adm *kadm.Client) (kadm.DescribedGroup, error) {
		described, err := adm.DescribeGroups(ctx, "steady-group")
		if err != nil {
			return kadm.DescribedGroup{}, err
		}
		g := described["steady-group"]
		switch {
		case g.Err != nil:
			return g, g.Err
		case g.State != "Stable" || len(g.Members) != 1:
			return g, fmt.Errorf("group %s with %d members", g.State, len(g.Members))
		}
		return g, nil
	}
	var before kadm.DescribedGroup
	// Stable at the coordinator comes before the client's OnPartitionsAssigned:
	// wait for both, so that a late callback is not taken for a rebalance.
	testutil.CheckFor(t, 20*time.Second, func() (err error) {
		if before, err = stable(c.client(0)); err == nil && assigned.Load() == 0 {
			err = errors.New("the member has not been assigned its partitions yet")
		}
		return err
	})
	id, rounds := before.Members[0].MemberID, assigned.Load()
	coordinator, err := groupCoordinator(ctx, nodetest.Client(t, []string{c.nodes[0].Addr()}).SeedBrokers()[0], "steady-group")
	if err != nil {
		t.Fatal(err)
	}
	c.stop(int(coordinator - 1))
	alive := int(coordinator) % 3 // the node after the stopped one
	testutil.CheckFor(t, 30*time.Second, func() error {
		g, err := stable(c.client(alive))
		if err != nil {
			return err
		}
		if g.Coordinator.NodeID == coordinator {
			return fmt.Errorf("described by node %d, which is stopped", coordinator)
		}
		if g.Members[0].MemberID != id {
			t.Fatalf("after node %d (the coordinator) stopped: member %s, before: %s (it rejoined)",
				coordinator, g.Members[0].MemberID, id)
		}
		return nil
	})
	// The member's heartbeats reach the new coordinator, which keeps it:
	// no partition was lost or assigned again.
	time.Sleep(time.Second)
	g, err := stable(c.client(alive))
	switch {
	case err != nil:
		t.Fatalf("a second after the move: %v", err)
	case g.Members[0].MemberID != id || assigned.Load() != rounds || lost.Load() != 0:
		t.Fatalf("a second after the move: member %s (was %s), %d assignments (was %d), %d losses: the group rebalanced",
			g.Members[0].MemberID, id, assigned.Load(), rounds, lost.Load())
	}
}
