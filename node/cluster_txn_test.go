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

// A consume-transform-produce loop keeps exactly-once on a cluster: the
// transaction coordinator writes its markers at every partition's leader
// (WriteTxnMarkers to the other nodes), the group's coordinator, another
// node, holds the offsets committed in each transaction pending in
// __consumer_offsets until the marker there decides them, and the loop
// goes on after the group's coordinator stops: the partition's new leader
// replays the pending offsets and the next marker decides them. Every
// input record is in the output once, none twice, and the group's offsets
// end at the input's end.
func TestClusterExactlyOnceAcrossNodes(t *testing.T) {
	t.Parallel()
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
	var gco kadm.FindCoordinatorResponse
	deadline := time.Now().Add(20 * time.Second)
	for {
		gco = gadm.FindGroupCoordinators(ctx, "etl")["etl"]
		if gco.Err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if gco.Err != nil {
		t.Fatal(gco.Err)
	}
	txnID := ""
	for i := 0; txnID == "" && i < 100; i++ {
		id := fmt.Sprint("etl-", i)
		if co := gadm.FindTxnCoordinators(ctx, id)[id]; co.Err == nil && co.NodeID != gco.NodeID {
			txnID = id
		}
	}
	if txnID == "" {
		t.Fatal("no transactional id coordinated away from the group's coordinator")
	}

	run := func(seeds []string, until int, seen map[string]int, stopAfter func(rounds int) bool) {
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
		for rounds := 0; len(seen) < until; rounds++ {
			if stopAfter != nil && stopAfter(rounds) {
				return
			}
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
	seen := map[string]int{}
	run(addrs, n, seen, func(rounds int) bool { return rounds > 0 && len(seen) >= n/3 })
	if len(seen) >= n {
		t.Fatalf("the first session read everything (%d) before the stop", len(seen))
	}
	c.stop(int(gco.NodeID - 1))
	var live []string
	for _, nd := range c.nodes {
		if nd != nil {
			live = append(live, nd.Addr())
		}
	}
	run(live, n, seen, nil)

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
