package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// The Jepsen-style kill -9 test of mirroring into a cluster (issue 22:
// "kill -9 of the node leading the most mirrored partitions while the
// source produces, then restart it: the copy is byte-identical once the
// source stops"). kfake, in the test process, is the source; three
// `kmirror serve` children mirror its topic with three replicas. While a
// producer writes to every source partition, the node leading the most
// mirrored partitions gets SIGKILL; the new leaders must mirror on, and
// the killed node, restarted on its data, catch up. Once the source
// stops, every partition's leader ends where the source ends, the copy
// reads back as the source (the same values at the same offsets, none
// lost, none twice), and the three copies of each partition, read from
// disk once the nodes stopped, are the same batches byte for byte.

const (
	mkTopic  = "orders"
	mkParts  = 6
	mkMirror = "dr"
)

func TestServeClusterMirrorKill9LeaderWhileSourceProduces(t *testing.T) {
	t.Parallel()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Second)
	defer cancel()

	src := kfaketest.Source(t, kfake.SeedTopics(mkParts, mkTopic))
	c := startServeClusterWith(t, "--override", "default.replication.factor=3",
		"--override", "replica.lag.time.max.ms="+strconv.Itoa(rkLagMs), "--log-level", "info")
	c.pinClientPorts()
	t.Cleanup(func() {
		if t.Failed() {
			for i, p := range c.procs {
				t.Logf("node %d's stderr:\n%s", i+1, rkTail(p.stderr.String(), 60))
			}
		}
	})
	c.waitBrokers(ctx, 1, 2, 3)
	ctl := c.controller(ctx)
	via := ctl%3 + 1 // not the controller: the mirror RPCs are forwarded

	sp := startMKProducer(t, ctx, src.ListenAddrs())
	sp.waitAcked("before the mirror", 100)

	create := mirrorapi.NewPtrCreateClusterMirrorRequest()
	create.MirrorName = mkMirror
	create.Configs = []mirrorapi.CreateClusterMirrorRequestConfig{
		{Name: "bootstrap.servers", Value: kmsg.StringPtr(src.ListenAddrs()[0])},
		{Name: "mirror.fetch.wait.max.ms", Value: kmsg.StringPtr("100")}}
	resp, err := c.mirrorRPC(ctx, via, create)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*mirrorapi.CreateClusterMirrorResponse); r.ErrorCode != 0 {
		t.Fatalf("CreateClusterMirror through node %d: %d %s", via, r.ErrorCode, deref(r.ErrorMessage))
	}
	start := mirrorapi.NewPtrStartMirrorTopicsRequest()
	start.MirrorName = mkMirror
	start.Topics = []mirrorapi.StartMirrorTopicsRequestTopic{{TopicName: mkTopic}}
	if resp, err = c.mirrorRPC(ctx, via, start); err != nil {
		t.Fatal(err)
	}
	if r := resp.(*mirrorapi.StartMirrorTopicsResponse); r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("StartMirrorTopics through node %d: %+v", via, r)
	}
	c.waitMirrorStates(ctx, via, "MIRRORING")
	c.waitFullISROf(ctx, mkTopic, mkParts, clusterBound)
	t.Logf("mirroring %s with full ISRs through node %d (controller %d): %v", mkTopic, via, ctl, time.Since(began).Round(time.Millisecond))

	// The node leading the most partitions of the copy.
	leaders, err := c.leaders(ctx, via, mkTopic)
	if err != nil {
		t.Fatal(err)
	}
	led := map[int32]int{}
	for _, l := range leaders {
		led[l]++
	}
	var victim int32
	for _, id := range []int32{1, 2, 3} {
		if victim == 0 || led[id] > led[victim] {
			victim = id
		}
	}
	// Some of the copy committed first (every replica has it), so that
	// the kill lands mid-copy with something to lose.
	n, _ := sp.counts()
	sp.waitAcked("before the kill", n+300)
	c.waitCopied(ctx, "before the kill", mkSourceEnds(t, ctx, src.ListenAddrs()))
	if err := c.signal(victim, syscall.SIGKILL, 10*time.Second); err == nil {
		t.Fatalf("node %d exited 0 after kill -9", victim)
	}
	killedAt := time.Now()
	n, _ = sp.counts()
	t.Logf("killed node %d, leader of %d of %v (leaders %v), %d records acknowledged by the source", victim, led[victim], mkTopic, leaders, n)

	// The new leaders mirror on: every partition of the copy reaches
	// where the source was after the kill, with the killed node down.
	sp.waitAcked("after the kill", n+300)
	mid := mkSourceEnds(t, ctx, src.ListenAddrs())
	c.waitCopied(ctx, fmt.Sprintf("with node %d down", victim), mid)
	t.Logf("with node %d down the copy reached the source's ends %v after %v", victim, mid, time.Since(killedAt).Round(time.Millisecond))

	c.start(victim)
	t.Logf("node %d serving again after %v", victim, time.Since(killedAt).Round(time.Millisecond))
	n, _ = sp.counts()
	sp.waitAcked("after the restart", n+300)
	sp.stop()
	acked, failed := sp.counts()
	ends := mkSourceEnds(t, ctx, src.ListenAddrs())
	t.Logf("source stopped: %d acknowledged, %d failed; its ends %v", acked, failed, ends)

	// Every partition's leader ends where the source ends, ISR full.
	c.waitFullISROf(ctx, mkTopic, mkParts, clusterBound)
	testutil.CheckFor(t, clusterBound, func() error {
		got, err := mkEnds(ctx, c.addrs, mkTopic)
		if err != nil {
			return err
		}
		if !maps.Equal(got, ends) {
			return fmt.Errorf("the copy's ends %v, the source's %v", got, ends)
		}
		return nil
	})
	c.waitFullISROf(ctx, mkTopic, mkParts, clusterBound)
	c.waitMirrorStates(ctx, via, "MIRRORING")
	t.Logf("copy caught up with full ISRs %v after the kill", time.Since(killedAt).Round(time.Millisecond))

	// The copy reads back as the source.
	want := mkReadAll(t, ctx, "the source", src.ListenAddrs(), ends)
	got := mkReadAll(t, ctx, "the copy", c.addrs, ends)
	for p := range int32(mkParts) {
		if d := mkDiff(want[p], got[p]); d != "" {
			t.Errorf("%s-%d: the copy differs from the source: %s", mkTopic, p, d)
		}
	}
	seen := map[string]bool{}
	for _, recs := range want {
		for _, r := range recs {
			seen[r.value] = true
		}
	}
	var missing []string
	sp.mu.Lock()
	for _, v := range sp.acked {
		if !seen[v] {
			missing = append(missing, v)
		}
	}
	sp.mu.Unlock()
	if len(missing) > 0 {
		t.Errorf("%d records the source acknowledged are not in it, e.g. %v", len(missing), missing[:min(len(missing), 10)])
	}
	t.Logf("read %d records from each side", len(seen))

	// Stop every node cleanly and compare the copies on disk. The last
	// one stops with no quorum left, its shutdown bounded all the same.
	for _, id := range []int32{1, 2, 3} {
		stopAt := time.Now()
		if err := c.signal(id, syscall.SIGTERM, 20*time.Second); err != nil {
			t.Fatalf("node %d after SIGTERM: %v\n%s", id, err, c.procs[id-1].stderr.String())
		}
		t.Logf("node %d exited %v after SIGTERM", id, time.Since(stopAt).Round(time.Millisecond))
	}
	checkReplicasOf(t, c, mkTopic, ends)
	t.Logf("done in %v", time.Since(began).Round(time.Millisecond))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// mirrorRPC sends a mirror RPC to node id itself (forwarded to the
// controller when node id is not it).
func (c *serveCluster) mirrorRPC(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	resp, err := c.ask(ctx, id, req, kgo.MaxVersions(mirrorapi.WithMirrorKeys(nil)))
	if err != nil {
		return nil, fmt.Errorf("%s through node %d: %w", mirrorapi.NameForKey(req.Key()), id, err)
	}
	return resp, nil
}

// waitMirrorStates waits until node id describes each of mkParts
// partitions of mkMirror in state.
func (c *serveCluster) waitMirrorStates(ctx context.Context, id int32, state string) {
	c.t.Helper()
	testutil.CheckFor(c.t, clusterBound, func() error {
		req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
		req.MirrorNames = []string{mkMirror}
		resp, err := c.mirrorRPC(ctx, id, req)
		if err != nil {
			return err
		}
		r := resp.(*mirrorapi.DescribeClusterMirrorsResponse)
		if r.ErrorCode != 0 || len(r.Mirrors) != 1 || r.Mirrors[0].ErrorCode != 0 {
			return fmt.Errorf("DescribeClusterMirrors through node %d: %+v", id, r)
		}
		states := map[string]string{}
		for _, rt := range r.Mirrors[0].Topics {
			for _, p := range rt.Partitions {
				states[fmt.Sprintf("%s-%d", rt.TopicName, p.PartitionIndex)] = p.StateValue
			}
		}
		if len(states) != mkParts {
			return fmt.Errorf("node %d describes %d partitions, want %d: %v", id, len(states), mkParts, states)
		}
		for p, s := range states {
			if s != state {
				return fmt.Errorf("node %d describes %s %s, want %s (all: %v)", id, p, s, state, states)
			}
		}
		return nil
	})
}

// waitCopied waits until the copy's end offsets (its high watermarks)
// reach ends, the source's at some point.
func (c *serveCluster) waitCopied(ctx context.Context, what string, ends map[int32]int64) {
	c.t.Helper()
	testutil.CheckFor(c.t, clusterBound, func() error {
		got, err := mkEnds(ctx, c.addrs, mkTopic)
		if err != nil {
			return err
		}
		for p, want := range ends {
			if got[p] < want {
				return fmt.Errorf("%s: %s-%d copied up to %d, the source's end %d (copy's ends %v)", what, mkTopic, p, got[p], want, got)
			}
		}
		return nil
	})
}

// mkEnds is topic's end offsets (ListOffsets latest) on the cluster at
// addrs ("" entries: nodes down).
func mkEnds(ctx context.Context, addrs []string, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == "" })...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
	defer lcancel()
	lo, err := kadm.NewClient(cl).ListEndOffsets(lctx, topic)
	if err != nil {
		return nil, err
	}
	if err := lo.Error(); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	if len(out) != mkParts {
		return nil, fmt.Errorf("%s: %d partitions' end offsets, want %d", topic, len(out), mkParts)
	}
	return out, nil
}

// mkSourceEnds is mkEnds of the source, which does not fail.
func mkSourceEnds(t *testing.T, ctx context.Context, addrs []string) map[int32]int64 {
	t.Helper()
	ends, err := mkEnds(ctx, addrs, mkTopic)
	if err != nil {
		t.Fatalf("the source's end offsets: %v", err)
	}
	return ends
}

// mkRec is a record as read: its offset and value.
type mkRec struct {
	offset int64
	value  string
}

// mkReadAll reads every partition of mkTopic at addrs from its start up
// to ends.
func mkReadAll(t *testing.T, ctx context.Context, what string, addrs []string, ends map[int32]int64) map[int32][]mkRec {
	t.Helper()
	starts := map[int32]kgo.Offset{}
	for p := range int32(mkParts) {
		starts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{mkTopic: starts}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[int32][]mkRec{}
	next := map[int32]int64{}
	testutil.CheckFor(t, clusterBound, func() error {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		fs := cl.PollFetches(pctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil && pctx.Err() == nil {
				t.Logf("%s: fetching %s-%d: %v", what, topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], mkRec{r.Offset, string(r.Value)})
			next[r.Partition] = r.Offset + 1
		})
		for p, end := range ends {
			if next[p] < end {
				return fmt.Errorf("%s: %s-%d read up to %d of %d", what, mkTopic, p, next[p], end)
			}
		}
		return nil
	})
	return out
}

// mkDiff describes how got differs from want ("" when it does not):
// records lost, records twice, records at other offsets.
func mkDiff(want, got []mkRec) string {
	at := map[string]int64{}
	var twice []string
	for _, r := range got {
		if prev, ok := at[r.value]; ok {
			twice = append(twice, fmt.Sprintf("%s at %d and %d", r.value, prev, r.offset))
		}
		at[r.value] = r.offset
	}
	var lost, moved []string
	for _, r := range want {
		switch off, ok := at[r.value]; {
		case !ok:
			lost = append(lost, fmt.Sprintf("%s (at %d)", r.value, r.offset))
		case off != r.offset:
			moved = append(moved, fmt.Sprintf("%s at %d, the source's %d", r.value, off, r.offset))
		}
	}
	if len(lost) == 0 && len(twice) == 0 && len(moved) == 0 && len(got) == len(want) {
		return ""
	}
	return fmt.Sprintf("%d records against the source's %d; %d lost %v; %d twice %v; %d moved %v",
		len(got), len(want), len(lost), lost[:min(len(lost), 5)], len(twice), twice[:min(len(twice), 5)],
		len(moved), moved[:min(len(moved), 5)])
}

// mkProducer writes "m-<n>" to source partition n%mkParts, in batches of
// one record per partition, until stopped; what the source acknowledged
// is in acked.
type mkProducer struct {
	t       *testing.T
	cl      *kgo.Client
	stopped atomic.Bool
	done    chan struct{}
	mu      sync.Mutex
	acked   []string
	failed  int
}

// startMKProducer starts the producer on the source at addrs; it stops
// when the test ends if not before.
func startMKProducer(t *testing.T, ctx context.Context, addrs []string) *mkProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(mkTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	sp := &mkProducer{t: t, cl: cl, done: make(chan struct{})}
	t.Cleanup(sp.stop)
	go func() {
		defer close(sp.done)
		for n := 0; !sp.stopped.Load() && ctx.Err() == nil; {
			recs := make([]*kgo.Record, mkParts)
			for i := range recs {
				recs[i] = &kgo.Record{Partition: int32(n % mkParts), Value: fmt.Appendf(nil, "m-%d", n)}
				n++
			}
			res := cl.ProduceSync(ctx, recs...)
			sp.mu.Lock()
			for _, r := range res {
				if r.Err != nil {
					sp.failed++
					continue
				}
				sp.acked = append(sp.acked, string(r.Record.Value))
			}
			sp.mu.Unlock()
			// About a thousand records a second: the kill lands while
			// the fetchers copy, and two cores keep up.
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return sp
}

// stop stops the producer and waits until its last batch is answered.
func (sp *mkProducer) stop() {
	if sp.stopped.Swap(true) {
		return
	}
	select {
	case <-sp.done:
	case <-time.After(clusterBound):
		sp.t.Errorf("the source's producer still running %v after it was told to stop", clusterBound)
	}
	sp.cl.Close()
}

func (sp *mkProducer) counts() (acked, failed int) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.acked), sp.failed
}

// waitAcked waits until the source acknowledged more than n records.
func (sp *mkProducer) waitAcked(what string, n int) {
	sp.t.Helper()
	testutil.CheckFor(sp.t, clusterBound, func() error {
		if got, _ := sp.counts(); got <= n {
			return fmt.Errorf("%s: the source acknowledged %d records, want more than %d", what, got, n)
		}
		return nil
	})
}
