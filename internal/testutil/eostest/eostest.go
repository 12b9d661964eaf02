// Package eostest runs an exactly-once consume-transform-produce loop
// (kgo's GroupTransactSession) against a cluster, and checks what it
// left: the tests of coordinator failover in one process (node/) and of
// kill -9 of child processes (cmd/kmirror) share it.
package eostest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Loop is one loop: it reads In as group Group and writes each record to
// Out inside transactions of TxnID, committing the group's offsets in
// each transaction.
type Loop struct {
	TxnID, Group, In, Out string
	// Seen counts the input values of committed transactions.
	Seen map[string]int
}

// New returns a loop on the topics "in" and "out".
func New(txnID, group string) *Loop {
	return &Loop{TxnID: txnID, Group: group, In: "in", Out: "out", Seen: map[string]int{}}
}

// Produce writes n records with values "0" to "n-1" to the loop's input,
// acks=all.
func (l *Loop) Produce(ctx context.Context, t testing.TB, seeds []string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(l.In), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// Run runs one session on seeds until until input records are committed.
// With interrupt set, once at least interruptAfter are committed, it
// starts one more transaction, writes its records and calls interrupt
// with the transaction open (a coordinator killed mid-transaction), then
// returns.
func (l *Loop) Run(ctx context.Context, t testing.TB, seeds []string, until, interruptAfter int, interrupt func()) {
	t.Helper()
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...),
		kgo.TransactionalID(l.TxnID), kgo.ConsumerGroup(l.Group), kgo.ConsumeTopics(l.In),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RequireStableFetchOffsets(), kgo.DefaultProduceTopic(l.Out), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.TransactionTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for len(l.Seen) < until {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		fs := sess.PollRecords(pctx, 40)
		cancel()
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll after %d records: %v", len(l.Seen), err)
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		var batch []string
		fs.EachRecord(func(r *kgo.Record) {
			batch = append(batch, string(r.Value))
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, nil)
		})
		if interrupt != nil && len(l.Seen) >= interruptAfter {
			if err := sess.Client().Flush(ctx); err != nil {
				t.Fatal(err)
			}
			interrupt() // the transaction is open, its records written
			return
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("ending a transaction after %d records: %v", len(l.Seen), err)
		}
		if committed {
			for _, v := range batch {
				l.Seen[v]++
			}
		}
	}
}

// Check reads the output read_committed from seeds and fails the test
// unless it holds each of the n input values once, and the group's
// offsets are at the input's end.
func (l *Loop) Check(ctx context.Context, t testing.TB, seeds []string, n int) {
	t.Helper()
	out, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(l.Out), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	got := map[string]int{}
	total := 0
	for total < n {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
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
	// Lag asks every broker the client knows of: one just stopped may
	// be among them until the metadata moves on.
	deadline := time.Now().Add(30 * time.Second)
	for {
		lag, err := kadm.NewClient(out).Lag(ctx, l.Group)
		gl := lag[l.Group]
		if err == nil && gl.FetchErr == nil && gl.DescribeErr == nil {
			if gl.Lag.Total() != 0 {
				t.Fatalf("the group's offsets after the loop: lag %d, %+v", gl.Lag.Total(), gl)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group's lag: %v %+v", err, gl)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Coordinators waits for the group's coordinator and returns it with a
// transactional id that another node coordinates ("<prefix>-N").
func Coordinators(ctx context.Context, t testing.TB, seeds []string, group, prefix string) (groupNode int32, txnID string, txnNode int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	find := func(lookup func() kadm.FindCoordinatorResponse) int32 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			co := lookup()
			if co.Err == nil {
				return co.NodeID
			}
			if time.Now().After(deadline) {
				t.Fatal(co.Err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	groupNode = find(func() kadm.FindCoordinatorResponse { return adm.FindGroupCoordinators(ctx, group)[group] })
	for i := range 100 {
		id := fmt.Sprint(prefix, "-", i)
		if n := find(func() kadm.FindCoordinatorResponse { return adm.FindTxnCoordinators(ctx, id)[id] }); n != groupNode {
			return groupNode, id, n
		}
	}
	t.Fatal("no transactional id coordinated away from the group's coordinator")
	return
}
