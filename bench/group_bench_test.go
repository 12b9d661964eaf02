package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// The group benchmarks measure the consumer group coordinator through kgo,
// over loopback, against an in-process node:
//
//	go test -run '^$' -bench BenchmarkGroupRebalance -benchtime 5x ./bench/
//	go test -run '^$' -bench BenchmarkOffsetCommit -benchtime 2s ./bench/
//
// A rebalance is mostly client time: members learn of a rebalance from
// their next heartbeat, and kgo's cooperative-sticky balancer moves
// partitions in two rounds. The members heartbeat every
// groupBenchHeartbeat (kgo's default is 3 s), which bounds each round.

const (
	// groupBenchTopic is the topic the members subscribe to.
	groupBenchTopic = "group-bench"
	// groupBenchMembers and groupBenchPartitions: one partition each.
	groupBenchMembers    = 10
	groupBenchPartitions = 10
	// groupBenchHeartbeat is the members' heartbeat interval.
	groupBenchHeartbeat = 100 * time.Millisecond
	// groupBenchCommitClients is the parallel OffsetCommit client count.
	groupBenchCommitClients = 8
)

// startGroupBroker starts a node with the given initial rebalance delay
// and a groupBenchPartitions-partition topic, and returns its address.
func startGroupBroker(b *testing.B, delay time.Duration) string {
	b.Helper()
	cfg := nodetest.Config(b)
	cfg.GroupInitialRebalanceDelay = delay
	br := nodetest.Start(b, cfg)
	cl := newGroupBenchClient(b, br.Addr())
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, groupBenchPartitions, 1, nil, groupBenchTopic); err != nil {
		b.Fatalf("creating %s: %v (%s)", groupBenchTopic, err, resp.ErrMessage)
	}
	return br.Addr()
}

func newGroupBenchClient(b *testing.B, addr string, opts ...kgo.Opt) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		b.Fatalf("creating a kgo client: %v", err)
	}
	return cl
}

// rebalanceWatch follows the members of one group through kgo's
// callbacks: what each owns, and the generation of its last SyncGroup
// (kgo calls OnPartitionsAssigned after every sync, even when nothing
// new was assigned).
type rebalanceWatch struct {
	mu      sync.Mutex
	owned   []map[int32]bool
	synced  []int32 // generation of each member's last sync; -1 none
	want    func(w *rebalanceWatch) bool
	done    chan struct{}
	closed  bool
	members []*kgo.Client
}

func newRebalanceWatch() *rebalanceWatch {
	return &rebalanceWatch{done: make(chan struct{})}
}

// await arms the watch with a condition, checked at every callback.
func (w *rebalanceWatch) await(want func(w *rebalanceWatch) bool) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.want, w.done, w.closed = want, make(chan struct{}), false
	w.checkLocked()
	return w.done
}

func (w *rebalanceWatch) checkLocked() {
	if !w.closed && w.want != nil && w.want(w) {
		w.closed = true
		close(w.done)
	}
}

// stableGeneration reports the generation every member last synced in,
// or -1 if they differ.
func (w *rebalanceWatch) stableGeneration() int32 {
	gen := int32(-1)
	for i, g := range w.synced {
		if g < 0 || i > 0 && g != gen {
			return -1
		}
		gen = g
	}
	return gen
}

// addMember starts a group member reporting to w.
func (w *rebalanceWatch) addMember(b *testing.B, addr, group string) {
	b.Helper()
	w.mu.Lock()
	i := len(w.owned)
	w.owned = append(w.owned, map[int32]bool{})
	w.synced = append(w.synced, -1)
	w.mu.Unlock()
	update := func(cl *kgo.Client, ps []int32, add, assigned bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, p := range ps {
			if add {
				w.owned[i][p] = true
			} else {
				delete(w.owned[i], p)
			}
		}
		if assigned {
			_, w.synced[i] = cl.GroupMetadata()
		}
		w.checkLocked()
	}
	cl := newGroupBenchClient(b, addr,
		kgo.ClientID(fmt.Sprintf("member-%d", i)),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(groupBenchTopic),
		kgo.HeartbeatInterval(groupBenchHeartbeat),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			update(cl, m[groupBenchTopic], true, true)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			update(cl, m[groupBenchTopic], false, false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			update(cl, m[groupBenchTopic], false, false)
		}),
	)
	w.mu.Lock()
	w.members = append(w.members, cl)
	w.mu.Unlock()
}

// everyMemberOwns holds in a generation every member synced in, each
// owning a partition.
func everyMemberOwns(w *rebalanceWatch) bool {
	if w.stableGeneration() < 0 {
		return false
	}
	for _, o := range w.owned {
		if len(o) == 0 {
			return false
		}
	}
	return true
}

// closeAll closes every member at once (each leaves the group).
func (w *rebalanceWatch) closeAll() {
	var wg sync.WaitGroup
	for _, cl := range w.members {
		wg.Go(cl.Close)
	}
	wg.Wait()
}

// waitWatch waits for ch, failing b after benchTimeout.
func waitWatch(b *testing.B, ch <-chan struct{}, w *rebalanceWatch, what string) {
	b.Helper()
	select {
	case <-ch:
	case <-time.After(benchTimeout):
		w.mu.Lock()
		defer w.mu.Unlock()
		b.Fatalf("%s: no stable generation after %v: synced %v, owned %v", what, benchTimeout, w.synced, w.owned)
	}
}

// BenchmarkGroupRebalance times rebalances of kgo members (cooperative-
// sticky, groupBenchHeartbeat heartbeats) of a fresh group per op:
//
//   - start=10: from starting 10 members until a generation in which all
//     10 synced and each owns one of the 10 partitions, with
//     group.initial.rebalance.delay.ms 0 and 100 ms;
//   - join=11th: from starting an 11th member next to a stable group of
//     10 until all 11 synced in one generation (the 11th owns nothing:
//     there are 10 partitions).
func BenchmarkGroupRebalance(b *testing.B) {
	for _, delay := range []time.Duration{0, 100 * time.Millisecond} {
		b.Run(fmt.Sprintf("start=%d/delay=%v", groupBenchMembers, delay), func(b *testing.B) {
			addr := startGroupBroker(b, delay)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				w := newRebalanceWatch()
				done := w.await(everyMemberOwns)
				start := time.Now()
				for range groupBenchMembers {
					w.addMember(b, addr, fmt.Sprintf("start-%d", i))
				}
				waitWatch(b, done, w, "starting members")
				b.StopTimer()
				if i == 0 {
					w.mu.Lock()
					b.Logf("first op: %v, generation %d", time.Since(start), w.stableGeneration())
					w.mu.Unlock()
				}
				w.closeAll()
				b.StartTimer()
			}
		})
	}
	b.Run(fmt.Sprintf("join=%dth", groupBenchMembers+1), func(b *testing.B) {
		addr := startGroupBroker(b, 0)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			group := fmt.Sprintf("join-%d", i)
			w := newRebalanceWatch()
			done := w.await(everyMemberOwns)
			for range groupBenchMembers {
				w.addMember(b, addr, group)
			}
			waitWatch(b, done, w, "starting members")
			w.mu.Lock()
			before := w.stableGeneration()
			w.mu.Unlock()
			done = w.await(func(w *rebalanceWatch) bool {
				return len(w.synced) == groupBenchMembers+1 && w.stableGeneration() > before
			})
			b.StartTimer()
			w.addMember(b, addr, group)
			waitWatch(b, done, w, "the 11th member joining")
			b.StopTimer()
			w.closeAll()
			b.StartTimer()
		}
	})
}

// newSimpleCommit is an OffsetCommit of one partition outside group
// membership (generation -1, no member id), as an admin tool or a
// consumer assigning partitions itself sends it.
func newSimpleCommit(group string) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = groupBenchTopic
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.LeaderEpoch = 0, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// commitOnce sends req with offset off and checks the answer.
func commitOnce(ctx context.Context, cl *kgo.Client, req *kmsg.OffsetCommitRequest, off int64) error {
	req.Topics[0].Partitions[0].Offset = off
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("commit answered %d topics", len(resp.Topics))
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// BenchmarkOffsetCommit measures OffsetCommit round trips of one
// partition into empty groups (generation -1): one client committing in
// sequence, and groupBenchCommitClients clients at once, each on its own
// connection and group. commits/s is the rate over the whole run.
func BenchmarkOffsetCommit(b *testing.B) {
	addr := startGroupBroker(b, 0)
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()

	b.Run("clients=1", func(b *testing.B) {
		cl := newGroupBenchClient(b, addr)
		defer cl.Close()
		req := newSimpleCommit("commit-seq")
		if err := commitOnce(ctx, cl, req, 0); err != nil { // connect outside the timer
			b.Fatalf("commit: %v", err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := commitOnce(ctx, cl, req, int64(i)); err != nil {
				b.Fatalf("commit %d: %v", i, err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	})

	b.Run(fmt.Sprintf("clients=%d", groupBenchCommitClients), func(b *testing.B) {
		procs := runtime.GOMAXPROCS(0)
		par := (groupBenchCommitClients + procs - 1) / procs
		clients := make([]*kgo.Client, par*procs) // RunParallel starts par*GOMAXPROCS goroutines
		reqs := make([]*kmsg.OffsetCommitRequest, len(clients))
		for i := range clients {
			clients[i] = newGroupBenchClient(b, addr)
			defer clients[i].Close()
			reqs[i] = newSimpleCommit(fmt.Sprintf("commit-par-%d", i))
			if err := commitOnce(ctx, clients[i], reqs[i], 0); err != nil {
				b.Fatalf("commit: %v", err)
			}
		}
		var next atomic.Int32
		b.SetParallelism(par)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := next.Add(1) - 1
			cl, req := clients[i], reqs[i]
			for off := int64(1); pb.Next(); off++ {
				if err := commitOnce(ctx, cl, req, off); err != nil {
					b.Errorf("commit: %v", err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	})
}
