package tests

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil"
)

// The transaction coordinator (txn/) end to end, driven by kgo as
// applications drive it: exactly-once consume-transform-produce across
// group rebalances (franz-go's ETL tests), a transaction aborted by
// transaction.timeout.ms, a zombie producer fenced, and new transactions
// on a node that failed over from a source with an open transaction.

// txnFenced reports whether err is one of the answers that fence a
// producer: PRODUCER_FENCED from the coordinator, INVALID_PRODUCER_EPOCH
// from a partition that saw the fencing epoch's marker.
func txnFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// txnLastStableOffset is ListOffsets latest under read_committed: the first
// offset of the oldest open transaction, else the high watermark.
func txnLastStableOffset(t testing.TB, ctx context.Context, cl *kgo.Client, topic string, p int32) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ListOffsets read_committed %s-%d: %v", topic, p, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("ListOffsets read_committed %s-%d: %+v", topic, p, resp)
	}
	sp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
		t.Fatalf("ListOffsets read_committed %s-%d: %v", topic, p, err)
	}
	return sp.Offset
}

// txnReadCommittedUntil reads topic from the start under read_committed
// until it has seen a record with value end on each of parts partitions,
// and returns the records read before them. The end records are written
// last, by a plain producer, so everything committed before them is
// returned and nothing can come after.
func txnReadCommittedUntil(t testing.TB, ctx context.Context, addr, topic string, parts int, end string) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	var out []*kgo.Record
	ended := map[int32]bool{}
	for len(ended) < parts {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v after %d records, end seen on %v", topic, ctx.Err(), len(out), ended)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetching %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case string(r.Value) == end:
				ended[r.Partition] = true
			case ended[r.Partition]:
				t.Fatalf("%s-%d: record %q at %d after the end record", topic, r.Partition, r.Value, r.Offset)
			default:
				out = append(out, r)
			}
		})
	}
	return out
}

// txnWriteEnd writes the end record to each of parts partitions of topic.
func txnWriteEnd(t testing.TB, ctx context.Context, addr, topic string, parts int32, end string) {
	t.Helper()
	pr := manualProducer(t, []string{addr})
	var rs []*kgo.Record
	for p := range parts {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(end)})
	}
	if err := pr.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("writing the end records to %s: %v", topic, err)
	}
	pr.Close()
}

// txnValues is the values of rs, in order.
func txnValues(rs []*kgo.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value)
	}
	return out
}

const (
	etlIn    = "etl-in"
	etlOut   = "etl-out"
	etlGroup = "etl"
)

// etlWorker is one consume-transform-produce instance: a kgo
// GroupTransactSession that reads etlIn in group etlGroup and writes each
// record, transformed, to etlOut in a transaction that also commits the
// input offsets.
type etlWorker struct {
	id   string
	sess *kgo.GroupTransactSession
	stop chan struct{}
	done chan struct{}
	// assigned is set once the group gave the worker input partitions.
	assigned atomic.Bool
	// committed counts input records of committed transactions, aborted
	// the transactions a rebalance aborted.
	committed, aborted atomic.Int64
}

func startETLWorker(t *testing.T, ctx context.Context, addr, id string, total *atomic.Int64) *etlWorker {
	t.Helper()
	w := &etlWorker{id: id, stop: make(chan struct{}), done: make(chan struct{})}
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(addr),
		kgo.ClientID(id),
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup(etlGroup),
		kgo.ConsumeTopics(etlIn),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic(etlOut),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			if len(m[etlIn]) > 0 {
				w.assigned.Store(true)
			}
		}),
	)
	if err != nil {
		t.Fatalf("worker %s: %v", id, err)
	}
	w.sess = sess
	go w.run(t, ctx, total)
	t.Cleanup(w.halt)
	return w
}

// halt stops the worker after its current transaction and waits until it
// left the group.
func (w *etlWorker) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *etlWorker) run(t *testing.T, ctx context.Context, total *atomic.Int64) {
	defer close(w.done)
	defer w.sess.Close() // leaves the group: a rebalance for the others
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := w.sess.PollRecords(pctx, 50)
		cancel()
		if ctx.Err() != nil {
			return
		}
		failed := false
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				t.Errorf("worker %s: fetching %s-%d: %v", w.id, topic, p, err)
				failed = true
			}
		})
		recs := fs.Records()
		if failed {
			return
		}
		if len(recs) == 0 {
			continue
		}
		if err := w.sess.Begin(); err != nil {
			t.Errorf("worker %s: Begin: %v", w.id, err)
			return
		}
		for _, r := range recs {
			out := &kgo.Record{Key: slices.Clone(r.Key), Value: append([]byte("etl:"), r.Value...)}
			w.sess.Produce(ctx, out, func(r *kgo.Record, err error) {
				if err != nil && !errors.Is(err, kgo.ErrAborting) {
					t.Errorf("worker %s: producing %s: %v", w.id, r.Key, err)
				}
			})
		}
		committed, err := w.sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Errorf("worker %s: End: %v", w.id, err)
			return
		}
		if committed {
			w.committed.Add(int64(len(recs)))
			total.Add(int64(len(recs)))
		} else {
			w.aborted.Add(1)
		}
	}
}

// TestTxnExactlyOnceETL runs consume-transform-produce with kgo's
// GroupTransactSession (franz-go's ETL tests): 3000 input records over 3
// partitions, two workers in one group, a third joining midway and the
// first leaving later, both rebalances while records are in flight (the
// feeder keeps up to 400 records unconsumed). At the end the output
// holds, under read_committed, every input record transformed exactly
// once, and the group's committed offsets are the input's end.
func TestTxnExactlyOnceETL(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 90*time.Second)
	n := startNode(t, noRebalanceDelay)
	addr := n.addr()
	adm := newAdmin(t, addr)
	createTopic(t, ctx, adm, etlIn, 3, nil)
	createTopic(t, ctx, adm, etlOut, 3, nil)

	const (
		records = 3000
		batch   = 100
		backlog = 300 // records produced ahead of the committed ones
	)
	var total atomic.Int64
	feed := newClient(t, addr, kgo.DefaultProduceTopic(etlIn))
	w1 := startETLWorker(t, ctx, addr, "etl-1", &total)
	w2 := startETLWorker(t, ctx, addr, "etl-2", &total)
	var w3 *etlWorker
	for next := 0; next < records; next += batch {
		testutil.CheckFor(t, 30*time.Second, testutil.Named(fmt.Sprintf("ETL within %d records of the %d produced", backlog, next), func() error {
			if c := total.Load(); c < int64(next-backlog) {
				return fmt.Errorf("%d committed", c)
			}
			return nil
		}))
		rs := make([]*kgo.Record, batch)
		for i := range rs {
			k := fmt.Sprintf("%04d", next+i)
			rs[i] = &kgo.Record{Key: []byte(k), Value: []byte("v" + k)}
		}
		if err := feed.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("producing input: %v", err)
		}
		switch next + batch {
		case records / 2:
			// A third worker joins while the others have records to
			// transform: a rebalance mid-transaction.
			w3 = startETLWorker(t, ctx, addr, "etl-3", &total)
			testutil.CheckFor(t, 30*time.Second, testutil.Named("etl-3 assigned input partitions", func() error {
				if !w3.assigned.Load() {
					return fmt.Errorf("%d of %d committed", total.Load(), next+batch)
				}
				return nil
			}))
		case records * 4 / 5:
			w1.halt() // and leaves: another rebalance
		}
	}
	testutil.CheckFor(t, 45*time.Second, testutil.Named("every input record transformed", func() error {
		if c := total.Load(); c < records {
			return fmt.Errorf("%d of %d committed", c, records)
		}
		return nil
	}))
	for _, w := range []*etlWorker{w1, w2, w3} {
		w.halt()
	}
	if c := total.Load(); c != records {
		t.Fatalf("the workers committed %d input records, want %d (a record committed twice)", c, records)
	}
	for _, w := range []*etlWorker{w1, w3} {
		if w.committed.Load() == 0 {
			t.Fatalf("worker %s committed nothing: the rebalances were not mid-stream", w.id)
		}
	}
	t.Logf("committed input records by worker: etl-1 %d, etl-2 %d, etl-3 %d; transactions aborted by rebalances: %d",
		w1.committed.Load(), w2.committed.Load(), w3.committed.Load(), w1.aborted.Load()+w2.aborted.Load()+w3.aborted.Load())

	const end = "end-of-output"
	txnWriteEnd(t, ctx, addr, etlOut, 3, end)
	out := txnReadCommittedUntil(t, ctx, addr, etlOut, 3, end)
	seen := map[string]int{}
	for _, r := range out {
		seen[string(r.Key)]++
		if want := "etl:v" + string(r.Key); string(r.Value) != want {
			t.Fatalf("output record %q: value %q, want %q", r.Key, r.Value, want)
		}
	}
	for i := range records {
		k := fmt.Sprintf("%04d", i)
		if seen[k] != 1 {
			t.Fatalf("input %s is in the committed output %d times, want once (%d output records)", k, seen[k], len(out))
		}
	}
	if len(out) != records {
		t.Fatalf("%d committed output records, want %d", len(out), records)
	}

	offs, err := adm.FetchOffsets(ctx, etlGroup)
	if err != nil {
		t.Fatal(err)
	}
	for p, end := range listOffsets(t, ctx, adm, etlIn, false) {
		if o, ok := offs.Lookup(etlIn, p); !ok || o.Err != nil || o.At != end {
			t.Fatalf("group %s committed %s-%d at %+v, want the end %d", etlGroup, etlIn, p, o, end)
		}
	}
}

// TestTxnTimeoutAbort: a producer begins a transaction with a 2 s
// transaction.timeout.ms and stalls. Until the coordinator aborts it, the
// last stable offset stays at its first record; once the checker (every
// 10 s) aborted it, read_committed consumers read the records written
// after it, never its own, and the stalled producer's commit is fenced.
func TestTxnTimeoutAbort(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 40*time.Second)
	n := startNode(t)
	addr := n.addr()
	adm := newAdmin(t, addr)
	const topic = "txn-timeout"
	createTopic(t, ctx, adm, topic, 1, nil)

	stalled := newClient(t, addr, kgo.TransactionalID("stalled"), kgo.TransactionTimeout(2*time.Second),
		kgo.DefaultProduceTopic(topic))
	if err := stalled.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := range 3 {
		rs = append(rs, kgo.StringRecord(fmt.Sprint("stalled-", i)))
	}
	if err := stalled.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing in the transaction: %v", err)
	}
	first := rs[0].Offset
	plain := newClient(t, addr, kgo.DefaultProduceTopic(topic))
	var after []*kgo.Record
	for i := range 3 {
		after = append(after, kgo.StringRecord(fmt.Sprint("after-", i)))
	}
	if err := plain.ProduceSync(ctx, after...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Well inside the 2 s: the transaction is open and holds the LSO.
	if lso := txnLastStableOffset(t, ctx, plain, topic, 0); lso != first {
		t.Fatalf("last stable offset %d with the transaction open, want its first offset %d", lso, first)
	}
	if d, err := adm.DescribeTransactions(ctx, "stalled"); err != nil || d["stalled"].State != "Ongoing" {
		t.Fatalf("DescribeTransactions while stalled: %+v %v", d, err)
	}

	rc := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	pctx, cancel := context.WithTimeout(ctx, 25*time.Second) // timeout 2 s + a checker interval of 10 s, with slack
	defer cancel()
	got := txnValues(pollN(t, pctx, rc, len(after)))
	if !slices.Equal(got, txnValues(after)) {
		t.Fatalf("read_committed past the timed-out transaction read %v, want %v", got, txnValues(after))
	}
	hwm := listOffsets(t, ctx, adm, topic, false)[0]
	if lso := txnLastStableOffset(t, ctx, plain, topic, 0); lso != hwm {
		t.Fatalf("last stable offset %d after the abort, want the high watermark %d", lso, hwm)
	}
	d, err := adm.DescribeTransactions(ctx, "stalled")
	if err != nil || d["stalled"].State != "CompleteAbort" || d["stalled"].ProducerEpoch != 1 {
		t.Fatalf("DescribeTransactions after the timeout: %+v %v, want CompleteAbort at epoch 1", d, err)
	}
	if err := stalled.EndTransaction(ctx, kgo.TryCommit); err == nil || !txnFenced(err) {
		t.Fatalf("the stalled producer's commit after the timeout: %v, want a fencing error", err)
	}
}

// TestTxnZombieFenced: producer A (transactional id X) has a transaction
// open when producer B initializes X. B's InitProducerId aborts A's
// transaction under a bumped epoch; A's next produce and its commit fail
// with fencing errors; B's transactions go on, and read_committed
// consumers see from X only what B committed.
func TestTxnZombieFenced(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	n := startNode(t)
	addr := n.addr()
	adm := newAdmin(t, addr)
	const topic = "zombie"
	createTopic(t, ctx, adm, topic, 2, nil)
	opts := []kgo.Opt{kgo.TransactionalID("X"), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	rec := func(p int32, v string) *kgo.Record { return &kgo.Record{Partition: p, Value: []byte(v)} }

	a := newClient(t, addr, opts...)
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := a.ProduceSync(ctx, rec(0, "a-1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pidA, epochA, err := a.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := newClient(t, addr, opts...)
	pidB, epochB, err := b.ProducerID(ctx) // InitProducerId: fences A
	if err != nil {
		t.Fatalf("B's InitProducerId: %v", err)
	}
	if pidB != pidA || epochB <= epochA {
		t.Fatalf("B got (%d, %d), A has (%d, %d): want A's producer id at a higher epoch", pidB, epochB, pidA, epochA)
	}
	if err := a.ProduceSync(ctx, rec(0, "a-2")).FirstErr(); !txnFenced(err) {
		t.Fatalf("zombie A producing to a partition of its aborted transaction: %v, want a fencing error", err)
	}
	if err := a.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("zombie A committed")
	}
	a.Close()
	// A new zombie instance at the fenced epoch, raw: every coordinator
	// call is PRODUCER_FENCED.
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "X", pidA, epochA
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{1}}}
	addResp, err := add.RequestWith(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if code := addResp.Topics[0].Partitions[0].ErrorCode; code != kerr.ProducerFenced.Code {
		t.Fatalf("AddPartitionsToTxn at A's epoch: %v, want PRODUCER_FENCED", kerr.ErrorForCode(code))
	}

	for _, txn := range []struct {
		commit bool
		rs     []*kgo.Record
	}{
		{true, []*kgo.Record{rec(0, "b-1"), rec(1, "b-2")}},
		{false, []*kgo.Record{rec(0, "b-aborted"), rec(1, "b-aborted")}},
		{true, []*kgo.Record{rec(0, "b-3"), rec(1, "b-4")}},
	} {
		if err := b.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := b.ProduceSync(ctx, txn.rs...).FirstErr(); err != nil {
			t.Fatalf("B producing: %v", err)
		}
		if err := b.EndTransaction(ctx, kgo.TransactionEndTry(txn.commit)); err != nil {
			t.Fatalf("B ending a transaction (commit %v): %v", txn.commit, err)
		}
	}
	const end = "end"
	txnWriteEnd(t, ctx, addr, topic, 2, end)
	got := txnValues(txnReadCommittedUntil(t, ctx, addr, topic, 2, end))
	slices.Sort(got)
	if want := []string{"b-1", "b-2", "b-3", "b-4"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed sees %v from X, want %v", got, want)
	}
	d, err := adm.DescribeTransactions(ctx, "X")
	if err != nil || d["X"].State != "CompleteCommit" || d["X"].ProducerID != pidB || d["X"].ProducerEpoch != epochB {
		t.Fatalf("DescribeTransactions X: %+v %v", d, err)
	}
}

// TestTxnRequireStableOffsetFetch: while a transaction holds offsets of a
// group (TxnOffsetCommit, not yet ended), an OffsetFetch with
// RequireStable (KIP-447) must answer UNSTABLE_OFFSET_COMMIT for those
// partitions, so that a member that takes over the partition in a
// rebalance does not start from the offsets before the transaction and
// process its records a second time. kgo's group consumers always ask
// for stable offsets and retry on UNSTABLE_OFFSET_COMMIT; they rely on
// it for exactly-once (GroupTransactSession sleeps only against pre-2.5
// brokers). Once the transaction commits, the offset is there, stable.
func TestTxnRequireStableOffsetFetch(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	n := startNode(t)
	addr := n.addr()
	const topic, group, id = "stable-in", "stable-group", "stable-txn"
	createTopic(t, ctx, newAdmin(t, addr), topic, 1, nil)

	init := kmsg.NewPtrInitProducerIDRequest()
	init.SetVersion(4)
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr(id), 60_000
	init.ProducerID, init.ProducerEpoch = -1, -1
	ir := rawRequest(t, ctx, addr, init).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(ir.ErrorCode))
	}
	addOffs := kmsg.NewPtrAddOffsetsToTxnRequest()
	addOffs.SetVersion(3)
	addOffs.TransactionalID, addOffs.ProducerID, addOffs.ProducerEpoch, addOffs.Group = id, ir.ProducerID, ir.ProducerEpoch, group
	if r := rawRequest(t, ctx, addr, addOffs).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.SetVersion(3)
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = id, group, ir.ProducerID, ir.ProducerEpoch
	commit.Generation = -1
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = topic
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = 0, 5, -1
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if r := rawRequest(t, ctx, addr, commit).(*kmsg.TxnOffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}

	// fetchStable returns the group-level and partition-level answers of
	// an OffsetFetch v8 with RequireStable.
	fetchStable := func() (groupErr, partErr error, offset int64) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(8)
		req.RequireStable = true
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp := rawRequest(t, ctx, addr, req).(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 || len(resp.Groups[0].Topics[0].Partitions) != 1 {
			t.Fatalf("OffsetFetch: %+v", resp)
		}
		g := resp.Groups[0]
		p := g.Topics[0].Partitions[0]
		return kerr.ErrorForCode(g.ErrorCode), kerr.ErrorForCode(p.ErrorCode), p.Offset
	}
	if gerr, perr, off := fetchStable(); gerr != kerr.UnstableOffsetCommit && perr != kerr.UnstableOffsetCommit {
		t.Fatalf("OffsetFetch RequireStable with the transaction's offset pending: group %v, partition %v, offset %d; "+
			"want UNSTABLE_OFFSET_COMMIT", gerr, perr, off)
	}

	end := kmsg.NewPtrEndTxnRequest()
	end.SetVersion(3)
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, ir.ProducerID, ir.ProducerEpoch, true
	if r := rawRequest(t, ctx, addr, end).(*kmsg.EndTxnResponse); r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if gerr, perr, off := fetchStable(); gerr != nil || perr != nil || off != 5 {
		t.Fatalf("OffsetFetch RequireStable after the commit: group %v, partition %v, offset %d; want offset 5", gerr, perr, off)
	}
}

// TestTxnAfterFailover: a kfake source holds committed and aborted
// transactions and one left open; kmirror mirrors it and fails over
// (StopMirrorTopics aborts the open one). Then kgo transactional
// producers commit and abort transactions on the node: read_committed
// consumers see the source's committed records plus the node's committed
// ones, never the open or aborted ones; DescribeProducers shows no open
// transaction; ListTransactions and DescribeTransactions show the new ids
// in CompleteCommit and CompleteAbort; the new producer ids are not
// mirrored ones.
func TestTxnAfterFailover(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	src, srcCl := startSource(t)
	seeds := src.ListenAddrs()
	const topic = "txn-failover"
	createTopic(t, ctx, kadm.NewClient(srcCl), topic, 3, nil)
	mix := produceTxnMix(t, ctx, seeds, topic, kgo.SnappyCompression(), 3, false)
	_, openPID := openSourceTxn(t, ctx, seeds, topic, "src-open", 1)
	ends := listOffsets(t, ctx, kadm.NewClient(srcCl), topic, false)

	n := startCtlNode(t, "txn-fo", control.Config{})
	n.ok(ctx, createReq("fo", seeds[0]))
	n.ok(ctx, startReq("fo", topic))
	n.waitMirrored(ctx, "fo", topic, ends)
	mirrored := checkSameLog(t, ctx, srcCl, n.cl, topic)
	mirroredPIDs := map[int64]bool{}
	for _, raw := range mirrored {
		for _, b := range splitBatches(t, raw) {
			if b.HasProducerID() {
				mirroredPIDs[b.ProducerID()] = true
			}
		}
	}
	if !mirroredPIDs[openPID] {
		t.Fatalf("the open transaction's producer %d is in no mirrored batch", openPID)
	}
	src.Close()
	n.ok(ctx, stopReq("fo", topic))
	n.checkStates(ctx, "fo", topic, 3, "STOPPED")

	// New transactions on the node: "app" commits, aborts, commits;
	// "app-aborts" commits, then aborts last.
	var committed []*kgo.Record
	pids := map[string]int64{}
	for _, c := range []struct {
		id    string
		plan  []bool
		state string
	}{
		{"app", []bool{true, false, true}, "CompleteCommit"},
		{"app-aborts", []bool{true, false}, "CompleteAbort"},
	} {
		pr := newClient(t, n.addr(), kgo.TransactionalID(c.id), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for i, commit := range c.plan {
			if err := pr.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			var rs []*kgo.Record
			for p := range int32(3) {
				rs = append(rs, &kgo.Record{Partition: p, Key: fmt.Appendf(nil, "%s-t%d-p%d", c.id, i, p), Value: []byte("new")})
			}
			if err := pr.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatalf("%s: producing after the failover: %v", c.id, err)
			}
			if err := pr.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatalf("%s: ending transaction %d (commit %v): %v", c.id, i, commit, err)
			}
			if commit {
				committed = append(committed, rs...)
			}
		}
		pid, _, err := pr.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if mirroredPIDs[pid] {
			t.Fatalf("%s: new producer id %d is a mirrored one", c.id, pid)
		}
		pids[c.id] = pid
		pr.Close()
	}
	// Plain records last on every partition: an aborted record, if
	// visible, would take the place of one of them in the count below.
	tail := produceTo(t, ctx, manualProducer(t, []string{n.addr()}), topic, 3, 2, "tail")
	want := sortedUnion(mix.committed, asMirrorRecords(committed), tail)
	got := consumeAll(t, ctx, []string{n.addr()}, topic, true, len(want))
	checkSameRecords(t, "read_committed after the failover and the new transactions", got, want)
	for _, r := range got {
		if strings.Contains(r, ":open-p") {
			t.Fatalf("read_committed shows the source's open transaction: %s", r)
		}
	}

	dp, err := n.adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dp[topic].Partitions.Sorted() {
		if p.Err != nil {
			t.Fatalf("DescribeProducers %s-%d: %v", topic, p.Partition, p.Err)
		}
		for _, ap := range p.ActiveProducers.Sorted() {
			if ap.CurrentTxnStartOffset != -1 {
				t.Fatalf("DescribeProducers %s-%d: producer %d has a transaction open at %d (source open producer %d)",
					topic, p.Partition, ap.ProducerID, ap.CurrentTxnStartOffset, openPID)
			}
		}
	}
	listed, err := n.adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	described, err := n.adm.DescribeTransactions(ctx, "app", "app-aborts")
	if err != nil {
		t.Fatal(err)
	}
	for id, state := range map[string]string{"app": "CompleteCommit", "app-aborts": "CompleteAbort"} {
		l, d := listed[id], described[id]
		if l.State != state || l.ProducerID != pids[id] {
			t.Fatalf("ListTransactions %s: %+v, want %s with producer id %d", id, l, state, pids[id])
		}
		if d.Err != nil || d.State != state || d.ProducerID != pids[id] || d.StartTimestamp != -1 || len(d.Topics) != 0 {
			t.Fatalf("DescribeTransactions %s: %+v, want %s with producer id %d and no partitions", id, d, state, pids[id])
		}
	}
	if len(listed) != 2 {
		t.Fatalf("ListTransactions lists %v; the source's transactional ids were never this coordinator's", listed.TransactionalIDs())
	}
}
