package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/eostest"
)

// Kill -9 of the coordinators (issue 23), each node a `kmirror serve`
// child process: the coordinators' state is in __consumer_offsets and
// __transaction_state, replicated, so the partitions' new leaders carry
// on from it.

// live is the addresses of the running nodes.
func (c *serveCluster) live() []string {
	var out []string
	for _, id := range c.up() {
		out = append(out, c.addrs[id-1])
	}
	return out
}

// The transaction coordinator of an exactly-once loop is killed with a
// transaction open: the new leader of the id's __transaction_state
// partition loads it, the next producer of the id aborts it, the loop
// goes on, and the killed node comes back. Every input record is in the
// output once, the group's offsets at the input's end.
func TestServeClusterKill9TransactionCoordinator(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startServeCluster(t)
	for _, topic := range []string{"in", "out"} {
		c.createWith(ctx, 1, topic, 3, 3, nil)
	}
	const n = 300
	loop := eostest.New("", "etl")
	loop.Produce(ctx, t, c.live(), n)
	_, txnID, txnNode := eostest.Coordinators(ctx, t, c.live(), "etl", "etl")
	loop.TxnID = txnID
	loop.Run(ctx, t, c.live(), n, n/3, func() {
		if err := c.signal(txnNode, syscall.SIGKILL, 10*time.Second); err == nil {
			t.Fatal("the node exited cleanly after SIGKILL")
		}
	})
	t.Logf("killed node %d, the coordinator of %s, after %d records", txnNode, txnID, len(loop.Seen))
	loop.Run(ctx, t, c.live(), n, 0, nil)
	c.start(txnNode)
	loop.Check(ctx, t, c.live(), n)
}

// The group coordinator is killed while its group rebalances (a second
// member joining): the members find the partition's new leader, finish
// the rebalance there and resume from their committed offsets, so no
// record whose offset was committed before the kill is read again, and
// every record is read.
func TestServeClusterKill9GroupCoordinatorDuringARebalance(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startServeCluster(t)
	c.createWith(ctx, 1, "events", 3, 3, nil)
	const n = 600
	loop := eostest.New("", "readers")
	loop.In = "events"
	loop.Produce(ctx, t, c.live(), n)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.live()...))
	if err != nil {
		t.Fatal(err)
	}
	// The first lookup has __consumer_offsets created (by the controller,
	// asked by whichever node answered): COORDINATOR_NOT_AVAILABLE until
	// it exists, as Kafka answers.
	var co kadm.FindCoordinatorResponse
	testutil.CheckFor(t, 20*time.Second, func() error {
		co = kadm.NewClient(cl).FindGroupCoordinators(ctx, "readers")["readers"]
		return co.Err
	})
	cl.Close()

	var mu sync.Mutex
	seen := map[string]int{}
	committed := map[int32]int64{} // the next offset committed, by partition
	var reread []string
	var atKill map[int32]int64
	consume := func(seeds []string, done func() bool) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("events"),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(200*time.Millisecond), kgo.SessionTimeout(6*time.Second),
			kgo.RebalanceTimeout(20*time.Second))
		if err != nil {
			t.Error(err)
			return
		}
		defer cl.Close()
		for !done() && ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			fs := cl.PollRecords(pctx, 20)
			pcancel()
			time.Sleep(50 * time.Millisecond) // processing: the kill comes mid-way
			next := map[int32]int64{}
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				seen[string(r.Value)]++
				if atKill != nil && r.Offset < atKill[r.Partition] {
					reread = append(reread, fmt.Sprintf("%d@%d", r.Partition, r.Offset))
				}
				next[r.Partition] = max(next[r.Partition], r.Offset+1)
			})
			mu.Unlock()
			if len(next) == 0 {
				continue
			}
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				continue // a commit lost with the coordinator: its records may come again
			}
			mu.Lock()
			for p, o := range next {
				committed[p] = max(committed[p], o)
			}
			mu.Unlock()
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	var wg sync.WaitGroup
	wg.Go(func() { consume(c.live(), func() bool { return count() >= n }) })
	for count() < n/3 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	seeds := c.live()
	wg.Go(func() { consume(seeds, func() bool { return count() >= n }) }) // the rebalance
	time.Sleep(100 * time.Millisecond)                                    // its JoinGroup is in, the first member's rejoin due
	mu.Lock()
	atKill = map[int32]int64{}
	for p, o := range committed {
		atKill[p] = o
	}
	mu.Unlock()
	if got := count(); got >= n {
		t.Fatalf("all %d records were read before the kill", got)
	}
	if err := c.signal(co.NodeID, syscall.SIGKILL, 10*time.Second); err == nil {
		t.Fatal("the node exited cleanly after SIGKILL")
	}
	t.Logf("killed node %d, the group's coordinator, after %d records, committed %v", co.NodeID, count(), atKill)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < n {
		t.Fatalf("%d of %d records read", len(seen), n)
	}
	if len(reread) > 0 {
		t.Fatalf("records committed before the kill read again: %v", reread)
	}
}
