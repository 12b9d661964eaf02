package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// A consume-transform-produce loop keeps exactly-once on a cluster, with
// its transactional id coordinated by one node and its group by another:
// the transaction coordinator writes its markers at every partition's
// leader (WriteTxnMarkers to the other nodes), and the group's
// coordinator holds the offsets committed in each transaction pending in
// __consumer_offsets until the marker there decides them.
//   - The group's coordinator stops while a transaction is open: the
//     partition's new leader replays the group's offsets and goes on.
//   - The transaction coordinator stops in the middle of a transaction:
//     the id's partition of __transaction_state has a new leader, which
//     loads the open transaction; the next producer of the id aborts it
//     there and goes on.
//
// Every input record is in the read_committed output once, none twice,
// and the group's offsets end at the input's end.
func TestClusterExactlyOnceAcrossNodes(t *testing.T) {
	t.Parallel()
	for _, stop := range []string{"group coordinator", "transaction coordinator"} {
		t.Run(stop, func(t *testing.T) {
			t.Parallel()
			exactlyOnceAcrossAStop(t, stop == "transaction coordinator")
		})
	}
}

func exactlyOnceAcrossAStop(t *testing.T, stopTxnCoordinator bool) {
	c := startCluster(t, 3, logsOnFailure(t), func(cfg *broker.Config) { cfg.GroupInitialRebalanceDelay = 0 })
	ctx := t.Context()
	adm := c.client(0)
	for _, topic := range []string{"in", "out"} {
		if _, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.Addr())
	}
	prod := nodetest.Client(t, addrs, kgo.DefaultProduceTopic("in"), kgo.RequiredAcks(kgo.AllISRAcks()))
	const n = 300
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// The group's coordinator, and a transactional id another node
	// coordinates.
	gadm := kadm.NewClient(nodetest.Client(t, addrs))
	find := func(lookup func() kadm.FindCoordinatorResponse) kadm.FindCoordinatorResponse {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			co := lookup()
			if co.Err == nil || time.Now().After(deadline) {
				if co.Err != nil {
					t.Fatal(co.Err)
				}
				return co
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	gco := find(func() kadm.FindCoordinatorResponse { return gadm.FindGroupCoordinators(ctx, "etl")["etl"] })
	txnID, tco := "", kadm.FindCoordinatorResponse{}
	for i := 0; txnID == "" && i < 100; i++ {
		id := fmt.Sprint("etl-", i)
		if co := find(func() kadm.FindCoordinatorResponse { return gadm.FindTxnCoordinators(ctx, id)[id] }); co.NodeID != gco.NodeID {
			txnID, tco = id, co
		}
	}
	if txnID == "" {
		t.Fatal("no transactional id coordinated away from the group's coordinator")
	}

	seen := map[string]int{}
	// run consumes, transforms and produces until until records were
	// committed, or (stopAt) until a third of them were, and then stops
	// node stopAt in the middle of the next transaction.
	run := func(seeds []string, until int, stopAt int) {
		t.Helper()
		sess, err := kgo.NewGroupTransactSession(append([]kgo.Opt{kgo.SeedBrokers(seeds...)},
			kgo.TransactionalID(txnID), kgo.ConsumerGroup("etl"), kgo.ConsumeTopics("in"),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.RequireStableFetchOffsets(), kgo.DefaultProduceTopic("out"), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.TransactionTimeout(20*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		for len(seen) < until {
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			fs := sess.PollRecords(pctx, 40)
			cancel()
			if err := fs.Err0(); err != nil {
				t.Fatalf("poll after %d records: %v", len(seen), err)
			}
			if err := sess.Begin(); err != nil {
				t.Fatal(err)
			}
			var batch []string
			fs.EachRecord(func(r *kgo.Record) {
				batch = append(batch, string(r.Value))
				sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, nil)
			})
			if stopAt >= 0 && len(seen) >= n/3 {
				if err := sess.Client().Flush(ctx); err != nil {
					t.Fatal(err)
				}
				c.stop(stopAt) // the transaction is open, its records written
				return
			}
			committed, err := sess.End(ctx, kgo.TryCommit)
			if err != nil {
				t.Fatalf("ending a transaction after %d records: %v", len(seen), err)
			}
			if committed {
				for _, v := range batch {
					seen[v]++
				}
			}
		}
	}
	stopAt := int(gco.NodeID - 1)
	if stopTxnCoordinator {
		stopAt = int(tco.NodeID - 1)
	}
	run(addrs, n, stopAt)
	if len(seen) >= n {
		t.Fatalf("the first session read everything (%d) before the stop", len(seen))
	}
	var live []string
	for _, nd := range c.nodes {
		if nd != nil {
			live = append(live, nd.Addr())
		}
	}
	run(live, n, -1)

	// The output, read committed, holds each input record once.
	out := nodetest.Client(t, live, kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	got := map[string]int{}
	total := 0
	for total < n {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		fs := out.PollFetches(pctx)
		cancel()
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading the output after %d records: %v", total, err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)]++; total++ })
	}
	for i := range n {
		if k := got[fmt.Sprint(i)]; k != 1 {
			t.Errorf("record %d is in the output %d times", i, k)
		}
	}
	lag, err := kadm.NewClient(nodetest.Client(t, live)).Lag(ctx, "etl")
	if err != nil {
		t.Fatal(err)
	}
	if l := lag["etl"]; l.FetchErr != nil || l.DescribeErr != nil || l.Lag.Total() != 0 {
		t.Fatalf("the group's offsets after the loop: %+v", l)
	}
}
