package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/realkafka"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/partition"
)

// Mirroring from a 3-broker Apache Kafka cluster into a 3-node kmirror
// cluster (issue 22): the fetchers run on the kmirror partitions'
// leaders, the followers replicate the mirrored batches, a kmirror node
// goes down and its partitions are mirrored on by their new leaders, and
// the failover runs with that node still down. realkafka_cluster_test.go
// holds the 3-broker source into one kmirror node.

// rkCluster is a kmirror cluster of three voters; a nil entry of nodes'
// broker (ctlNode.b) is a node that was closed.
type rkCluster struct {
	t     *testing.T
	nodes []*ctlNode
}

// startMirrorCluster starts three voters at once (each waits for a
// majority), with default.replication.factor 3: a mirror topic takes that
// many replicas. The nodes log at info level into a buffer the test
// prints when it fails.
func startMirrorCluster(t *testing.T, name string) *rkCluster {
	t.Helper()
	var logs testutil.SyncBuffer
	t.Cleanup(func() { // runs after the nodes' own cleanups: their shutdown is in it
		if t.Failed() {
			t.Logf("the kmirror nodes' logs:\n%s", logs.String())
		}
	})
	c := &rkCluster{t: t, nodes: make([]*ctlNode, 3)}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, cfg := range nodetest.ClusterConfigs(t, 3) {
		cfg.DefaultReplicationFactor = 3
		n := newCtlNode(t, fmt.Sprintf("%s-%d", name, i+1), cfg, control.Config{})
		n.cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil)).With("node", n.name)
		n.ccfg.Logger = n.cfg.Logger
		c.nodes[i] = n
		wg.Go(func() { errs[i] = n.start() })
	}
	wg.Wait()
	for _, n := range c.nodes {
		t.Cleanup(n.close)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("starting kmirror cluster %s: %v", name, err)
	}
	return c
}

// running returns the indexes of the nodes not closed.
func (c *rkCluster) running() []int {
	var out []int
	for i, n := range c.nodes {
		if n.b != nil {
			out = append(out, i)
		}
	}
	return out
}

// pinned sends a mirror RPC to node i itself: kgo would send an admin
// request to the controller its metadata names, which may be the node
// just closed, and the test means to go through a node that forwards it.
func (c *rkCluster) pinned(ctx context.Context, i int, req kmsg.Request) (kmsg.Response, error) {
	resp, err := c.nodes[i].cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s through node %s: %w", mirrorapi.NameForKey(req.Key()), c.nodes[i].name, err)
	}
	return resp, nil
}

// ok sends req through node i and fails the test on any error code.
func (c *rkCluster) ok(ctx context.Context, i int, req kmsg.Request) {
	c.t.Helper()
	resp, err := c.pinned(ctx, i, req)
	if err != nil {
		c.t.Fatal(err)
	}
	a := answerOf(resp)
	bad := a.code != 0
	for _, code := range a.topics {
		bad = bad || code != 0
	}
	if bad {
		c.t.Fatalf("%s through node %s: %v", mirrorapi.NameForKey(req.Key()), c.nodes[i].name, a)
	}
}

// describe is node i's DescribeClusterMirrors of mirror's topic.
func (c *rkCluster) describe(ctx context.Context, i int, mirror, topic string) ([]mirrorapi.DescribeClusterMirrorsResponsePartition, error) {
	req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
	req.MirrorNames = []string{mirror}
	r, err := c.pinned(ctx, i, req)
	if err != nil {
		return nil, err
	}
	resp := r.(*mirrorapi.DescribeClusterMirrorsResponse)
	if resp.ErrorCode != 0 || len(resp.Mirrors) != 1 || resp.Mirrors[0].ErrorCode != 0 {
		return nil, fmt.Errorf("DescribeClusterMirrors %s through node %s: %+v", mirror, c.nodes[i].name, resp)
	}
	for _, t := range resp.Mirrors[0].Topics {
		if t.TopicName == topic {
			return t.Partitions, nil
		}
	}
	return nil, fmt.Errorf("DescribeClusterMirrors %s through node %s: no topic %s", mirror, c.nodes[i].name, topic)
}

// waitStates waits until node i describes every one of parts partitions
// of topic in state, at the destination offsets ends if ends is not nil.
func (c *rkCluster) waitStates(ctx context.Context, d time.Duration, i int, mirror, topic string, parts int, state string, ends map[int32]int64) {
	c.t.Helper()
	testutil.CheckFor(c.t, d, testutil.Named(fmt.Sprintf("node %s describing %s all %s at %v", c.nodes[i].name, topic, state, ends), func() error {
		ps, err := c.describe(ctx, i, mirror, topic)
		if err != nil {
			return err
		}
		if len(ps) != parts {
			return fmt.Errorf("%d partitions described, want %d: %s", len(ps), parts, describePartitions(ps))
		}
		for _, p := range ps {
			if p.StateValue != state {
				return errors.New(describePartitions(ps))
			}
			if end, ok := ends[p.PartitionIndex]; ok && (p.DestinationOffset != end || state == "MIRRORING" && p.SourceOffset != end) {
				return errors.New(describePartitions(ps))
			}
		}
		return nil
	}))
}

// local is topic/p on node i, nil when the node does not host it.
func (c *rkCluster) local(i int, topic string, p int32) *partition.Partition {
	tp := c.nodes[i].b.Partitions().Topic(topic)
	if tp == nil {
		return nil
	}
	return tp.Partition(p)
}

// leaders returns, for each partition of topic, the running node (index)
// that leads it by its own assignment, or an error while one has none.
func (c *rkCluster) leaders(topic string, parts int32) (map[int32]int, error) {
	out := map[int32]int{}
	for p := range parts {
		for _, i := range c.running() {
			lp := c.local(i, topic, p)
			if lp == nil {
				continue
			}
			if a, ok := lp.Assignment(); ok && a.Leader == c.nodes[i].cfg.NodeID {
				out[p] = i
			}
		}
		if _, ok := out[p]; !ok {
			return nil, fmt.Errorf("%s-%d has no running leader", topic, p)
		}
	}
	return out, nil
}

// waitCopied waits until every partition of topic has a running leader
// whose log end and high watermark are the source's end offset in ends,
// and every running replica holds the leader's bytes at the same
// offsets; it returns the leaders (node indexes).
func (c *rkCluster) waitCopied(d time.Duration, topic string, ends map[int32]int64) map[int32]int {
	c.t.Helper()
	parts := int32(len(ends))
	var led map[int32]int
	testutil.CheckFor(c.t, d, testutil.Named(fmt.Sprintf("kmirror: the leaders and replicas of %s at the source's ends %v", topic, ends), func() error {
		var err error
		if led, err = c.leaders(topic, parts); err != nil {
			return err
		}
		for p, end := range ends {
			leader := c.local(led[p], topic, p)
			if got, hw := leader.LogEndOffset(), leader.HighWatermark(); got != end || hw != end {
				return fmt.Errorf("%s-%d on its leader, node %s: log end %d, high watermark %d; the source's end %d",
					topic, p, c.nodes[led[p]].name, got, hw, end)
			}
			want, _, err := leader.Read(leader.LogStartOffset(), 64<<20, end, nil)
			if err != nil {
				return fmt.Errorf("%s-%d: reading the leader: %w", topic, p, err)
			}
			a, _ := leader.Assignment()
			if len(a.Replicas) != 3 {
				return fmt.Errorf("%s-%d: replicas %v, want 3", topic, p, a.Replicas)
			}
			for _, i := range c.running() {
				if !slices.Contains(a.Replicas, c.nodes[i].cfg.NodeID) {
					continue
				}
				r := c.local(i, topic, p)
				if r == nil {
					return fmt.Errorf("%s-%d: replica node %s does not host it", topic, p, c.nodes[i].name)
				}
				if r.LogStartOffset() != leader.LogStartOffset() || r.LogEndOffset() != end {
					return fmt.Errorf("%s-%d on node %s: log [%d, %d), the leader's [%d, %d)", topic, p, c.nodes[i].name,
						r.LogStartOffset(), r.LogEndOffset(), leader.LogStartOffset(), end)
				}
				got, _, err := r.Read(leader.LogStartOffset(), 64<<20, end, nil)
				if err != nil {
					return fmt.Errorf("%s-%d: reading node %s: %w", topic, p, c.nodes[i].name, err)
				}
				if !bytes.Equal(got, want) {
					return fmt.Errorf("%s-%d on node %s: %d bytes differ from the leader's %d", topic, p, c.nodes[i].name, len(got), len(want))
				}
			}
		}
		return nil
	}))
	return led
}

// ids maps the leaders by partition from node indexes to node ids.
func (c *rkCluster) ids(led map[int32]int) map[int32]int32 {
	out := map[int32]int32{}
	for p, i := range led {
		out[p] = c.nodes[i].cfg.NodeID
	}
	return out
}

// consumeRange reads topic's partitions from starts up to ends with a
// kgo consumer (what an application sees: data records, no control
// batches), by partition.
func consumeRange(t *testing.T, ctx context.Context, seeds []string, topic string, starts, ends map[int32]int64) map[int32][]*kgo.Record {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for p, s := range starts {
		offs[p] = kgo.NewOffset().At(s)
	}
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	out := map[int32][]*kgo.Record{}
	done := func() bool {
		for p, end := range ends {
			rs := out[p]
			if end > starts[p] && (len(rs) == 0 || rs[len(rs)-1].Offset+1 < end) {
				return false
			}
		}
		return true
	}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for !done() {
		fs := cl.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatalf("consuming %s from %v: %v; got up to %v of %v", topic, seeds, pctx.Err(), lastOffsetsByPartition(out), ends)
		}
		fs.EachError(func(_ string, p int32, err error) {
			if !kerr.IsRetriable(err) {
				t.Fatalf("consuming %s-%d from %v: %v", topic, p, seeds, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				out[r.Partition] = append(out[r.Partition], r)
			}
		})
	}
	return out
}

func lastOffsetsByPartition(rs map[int32][]*kgo.Record) map[int32]int64 {
	out := map[int32]int64{}
	for p, l := range rs {
		if len(l) > 0 {
			out[p] = l[len(l)-1].Offset
		}
	}
	return out
}

// checkSameConsumed fails t unless want and got hold the same records at
// the same offsets: keys, values, headers and timestamps.
func checkSameConsumed(t *testing.T, topic string, want, got map[int32][]*kgo.Record) {
	t.Helper()
	for p, ws := range want {
		gs := got[p]
		if len(gs) != len(ws) {
			t.Fatalf("%s-%d: %d records in kmirror, %d at the source", topic, p, len(gs), len(ws))
		}
		for j, w := range ws {
			g := gs[j]
			if g.Offset != w.Offset || !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) ||
				!g.Timestamp.Equal(w.Timestamp) || !slices.EqualFunc(g.Headers, w.Headers, func(a, b kgo.RecordHeader) bool {
				return a.Key == b.Key && bytes.Equal(a.Value, b.Value)
			}) {
				t.Fatalf("%s-%d record %d: kmirror has offset %d key %q value %q headers %v at %v; the source offset %d key %q value %q headers %v at %v",
					topic, p, j, g.Offset, g.Key, g.Value, g.Headers, g.Timestamp, w.Offset, w.Key, w.Value, w.Headers, w.Timestamp)
			}
		}
	}
}

// produceMixed writes, besides produceRound's keyed idempotent batches,
// records without keys and with headers from a producer that is not
// idempotent (acks=all), to every partition; it returns the source's log
// ends.
func (s *realCluster) produceMixed(t *testing.T, ctx context.Context, idem, plain *kgo.Client, topic string, parts int32, tag string) map[int32]int64 {
	t.Helper()
	s.produceRound(t, ctx, idem, topic, parts, 2, tag)
	var rs []*kgo.Record
	for p := range parts {
		for j := range 10 {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%s-plain-%d-%d", tag, p, j)),
				Headers: []kgo.RecordHeader{{Key: "tag", Value: []byte(tag)}, {Key: "n", Value: fmt.Appendf(nil, "%d", j)}, {Key: "empty"}}})
		}
	}
	if err := plain.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("source: producing %s without keys to %s: %v", tag, topic, err)
	}
	return listOffsets(t, ctx, s.adm, topic, false)
}

// compareWithSource checks, for every partition of topic, that kmirror's
// leader holds the source leader's raw batches from the log start to ends
// and that a consumer of either side reads the same records.
func (c *rkCluster) compareWithSource(ctx context.Context, src *realCluster, srcLed map[int32]int32, led map[int32]int, topic string, ends map[int32]int64) {
	c.t.Helper()
	via := c.nodes[c.running()[0]]
	starts := listOffsets(c.t, ctx, src.adm, topic, true)
	if got := listOffsets(c.t, ctx, via.adm, topic, true); !maps.Equal(got, starts) {
		c.t.Fatalf("%s: kmirror log starts %v, the source's %v", topic, got, starts)
	}
	if got := listOffsets(c.t, ctx, via.adm, topic, false); !maps.Equal(got, ends) {
		c.t.Fatalf("%s: kmirror log ends %v (ListOffsets through node %s), the source's %v", topic, got, via.name, ends)
	}
	kmLed := c.ids(led)
	for p, end := range ends {
		want := readRaw(c.t, ctx, src.cl, srcLed[p], topic, p, starts[p], end)
		got := readRaw(c.t, ctx, via.cl, kmLed[p], topic, p, starts[p], end)
		if !bytes.Equal(want, got) {
			c.t.Fatalf("%s-%d on its kmirror leader %d: batches differ from the source's: %s", topic, p, kmLed[p], diffRaw(want, got))
		}
	}
	var seeds []string
	for _, i := range c.running() {
		seeds = append(seeds, c.nodes[i].addr())
	}
	checkSameConsumed(c.t, topic, consumeRange(c.t, ctx, src.c.Bootstrap(), topic, starts, ends), consumeRange(c.t, ctx, seeds, topic, starts, ends))
}

// TestRealKafkaClusterMirrorsIntoAKmirrorCluster: a 6-partition RF 3
// topic of a 3-broker Kafka 4.4 (keyed records from an idempotent
// producer, keyless ones with headers from a plain one, six groups'
// committed offsets) mirrored into a 3-node kmirror cluster through a node
// that is not the controller: every partition is MIRRORING, its kmirror
// leader holds the source's batches byte for byte and its three replicas
// are identical. The node leading the most partitions is closed; their
// new leaders mirror what the source writes next. The failover
// (StopMirrorTopics) runs with that node still down: every partition
// STOPPED, the topic writable through a surviving node, and the groups'
// offsets readable from those of their coordinators that run.
func TestRealKafkaClusterMirrorsIntoAKmirrorCluster(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	began := time.Now()
	ctx := testCtx(t, 3*time.Minute)
	src := startRealCluster(t, realkafka.Newest)
	const topic, parts, mirror = "into-cluster", 6, "rkc"
	srcLed := src.createTopic(t, ctx, topic, parts)
	idem := manualProducer(t, src.c.Bootstrap())
	plain := manualProducer(t, src.c.Bootstrap(), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()))
	ends := src.produceMixed(t, ctx, idem, plain, topic, parts, "a")
	// Groups hash to coordinators: of six, some are coordinated by the
	// nodes that stay up.
	groups := map[string]kadm.Offsets{}
	for g := range 6 {
		var offs kadm.Offsets
		for p := range int32(parts) {
			offs.Add(kadm.Offset{Topic: topic, Partition: p, At: ends[p] - int64(p) - int64(g) - 1, LeaderEpoch: -1})
		}
		name := fmt.Sprintf("rkc-group-%d", g)
		if resp, err := src.adm.CommitOffsets(ctx, name, offs); err != nil || resp.Error() != nil {
			t.Fatalf("source: committing %s: %v %v", name, err, resp.Error())
		}
		groups[name] = offs
	}

	c := startMirrorCluster(t, "rkc")
	ctlID := clusterController(t, ctx, c.nodes)
	via := int(ctlID) % 3 // index of the node after the controller
	t.Logf("Kafka and kmirror up after %v; controller %d, mirroring through node %s", time.Since(began).Round(time.Millisecond), ctlID, c.nodes[via].name)
	c.ok(ctx, via, createReq(mirror, src.bootstrap()))
	c.ok(ctx, via, startReq(mirror, topic))
	c.waitStates(ctx, 45*time.Second, via, mirror, topic, parts, "MIRRORING", ends)
	t.Logf("every partition MIRRORING at the source's ends after %v", time.Since(began).Round(time.Millisecond))
	led := c.waitCopied(45*time.Second, topic, ends)
	t.Logf("every leader and replica at the source's ends after %v", time.Since(began).Round(time.Millisecond))
	c.compareWithSource(ctx, src, srcLed, led, topic, ends)
	// Every fetcher runs on its partition's kmirror leader, and there only.
	for i, n := range c.nodes {
		for p := range int32(parts) {
			_, err := n.ctl.Fetchers().Status(mirror, topic, p)
			if leads := led[p] == i; leads != (err == nil) {
				t.Fatalf("node %s: leads %s-%d %v, runs its fetcher %v", n.name, topic, p, leads, err == nil)
			}
		}
	}
	t.Logf("mirrored and compared after %v; kmirror leaders %v", time.Since(began).Round(time.Millisecond), c.ids(led))

	perNode := map[int]int{}
	for _, i := range led {
		perNode[i]++
	}
	gone := 0
	for i := range c.nodes {
		if perNode[i] > perNode[gone] {
			gone = i
		}
	}
	goneID := c.nodes[gone].cfg.NodeID
	c.nodes[gone].close()
	closed := time.Now()
	alive := (gone + 1) % 3
	ends = src.produceMixed(t, ctx, idem, plain, topic, parts, "b")
	led = c.waitCopied(45*time.Second, topic, ends)
	c.waitStates(ctx, 20*time.Second, alive, mirror, topic, parts, "MIRRORING", ends)
	t.Logf("node %d (led %d partitions) closed; the new leaders %v mirrored the source's new ends after %v", goneID, perNode[gone],
		c.ids(led), time.Since(closed).Round(time.Millisecond))
	c.compareWithSource(ctx, src, srcLed, led, topic, ends)

	// Failover with the node still down, through a surviving node.
	c.ok(ctx, alive, stopReq(mirror, topic))
	c.waitStates(ctx, 30*time.Second, alive, mirror, topic, parts, "STOPPED", nil)
	for _, i := range c.running() {
		c.nodes[i].checkNoFetcher(mirror, topic, parts)
	}
	pr := newClient(t, c.nodes[alive].addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	var rs []*kgo.Record
	for p := range int32(parts) {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte("written after the failover")})
	}
	res := pr.ProduceSync(ctx, rs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("producing acks=all to the failed-over %s through node %s: %v", topic, c.nodes[alive].name, err)
	}
	for _, r := range res {
		if r.Record.Offset < ends[r.Record.Partition] {
			t.Fatalf("%s-%d: written at %d, below the mirrored end %d", topic, r.Record.Partition, r.Record.Offset, ends[r.Record.Partition])
		}
	}

	// The groups' offsets, synced by the failover's final sync into each
	// group's coordinator: readable unless the node that is down
	// coordinates the group (group state is each coordinator's own, issue
	// 23). At least one group must be checked.
	acl := c.nodes[alive].cl
	checked := 0
	testutil.CheckFor(t, 20*time.Second, testutil.Named("kmirror: the groups' committed offsets", func() error {
		checked = 0
		for _, group := range slices.Sorted(maps.Keys(groups)) {
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.Version, fc.CoordinatorKeys = 4, []string{group}
			r, err := acl.SeedBrokers()[0].Request(ctx, fc)
			if err != nil {
				return fmt.Errorf("FindCoordinator of %s through node %s: %w", group, c.nodes[alive].name, err)
			}
			co := r.(*kmsg.FindCoordinatorResponse).Coordinators[0]
			switch {
			case co.ErrorCode == kerr.CoordinatorNotAvailable.Code, co.ErrorCode == 0 && co.NodeID == goneID:
				continue // coordinated by the node that is down
			case co.ErrorCode != 0:
				return fmt.Errorf("FindCoordinator of %s: %v", group, kerr.ErrorForCode(co.ErrorCode))
			}
			fetched, err := kadm.NewClient(acl).FetchOffsets(ctx, group)
			if err != nil {
				return fmt.Errorf("OffsetFetch %s (coordinator %d): %w", group, co.NodeID, err)
			}
			for _, o := range groups[group].Sorted() {
				if got, ok := fetched.Lookup(topic, o.Partition); !ok || got.Err != nil || got.At != o.At {
					return fmt.Errorf("%s (coordinator %d), %s-%d: committed %+v, want %d as at the source", group, co.NodeID, topic, o.Partition, got, o.At)
				}
			}
			checked++
		}
		return nil
	}))
	if checked == 0 {
		t.Fatalf("every group is coordinated by node %d, which is down: no synced offset was checked", goneID)
	}
	t.Logf("%d of %d groups coordinated by running nodes hold the source's offsets", checked, len(groups))
	t.Logf("done after %v", time.Since(began).Round(time.Millisecond))
}
