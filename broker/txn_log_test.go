package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/state"
	"github.com/kmirror/kmirror/txn"
)

// transactionalProducer commits one transaction of id on b and closes.
func commitOneTransaction(ctx context.Context, t *testing.T, b *Broker, id string) {
	t.Helper()
	p := newTestClient(t, b, kgo.TransactionalID(id), kgo.DefaultProduceTopic("data"))
	defer p.Close()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("r")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
}

// describeTxn returns id's state as DescribeTransactions reports it.
func describeTxn(ctx context.Context, t *testing.T, b *Broker, id string) kadm.DescribedTransaction {
	t.Helper()
	for {
		d, err := kadm.NewClient(newTestClient(t, b)).DescribeTransactions(ctx, id)
		if err == nil {
			if dt, ok := d[id]; ok && dt.Err == nil {
				return dt
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("describing %s: %v %+v", id, err, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A transactional id's record lives in its partition of
// __transaction_state, which the first FindCoordinator for a
// transactional id creates as Kafka does (50 partitions, compacted,
// internal), and a restarted node serves it from the log even when its
// Badger copy is gone: the next producer of the id gets the next epoch.
func TestTxnStateLivesInTransactionState(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	b := newTestBroker(t, groupLogConfig(dir))
	if _, err := kadm.NewClient(newTestClient(t, b)).CreateTopic(ctx, 1, 1, nil, "data"); err != nil {
		t.Fatal(err)
	}
	commitOneTransaction(ctx, t, b, "etl")
	before := describeTxn(ctx, t, b, "etl")

	checkInternalTopic(ctx, t, newTestClient(t, b), meta.TransactionTopic, DefaultTransactionTopicPartitions)
	// The record is Kafka's, in the id's partition.
	part := int32(meta.CoordinatorPartition("etl", DefaultTransactionTopicPartitions))
	rd := newTestClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		meta.TransactionTopic: {part: kgo.NewOffset().AtStart()}}))
	recs := txn.Records{}
	for recs["etl"].State != int8(txn.CompleteCommit) {
		fs := rd.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading __transaction_state: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if err := recs.Apply(r.Key, r.Value); err != nil {
				t.Errorf("record at %d: %v", r.Offset, err)
			}
		})
	}
	if got := recs["etl"]; got.ProducerID != before.ProducerID || got.Epoch != before.ProducerEpoch {
		t.Fatalf("the record says %+v, DescribeTransactions %+v", got, before)
	}

	b.Close()
	st := openGroupLogStore(t, dir)
	if err := st.DeleteTxn("etl"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	b = newTestBroker(t, groupLogConfig(dir))
	commitOneTransaction(ctx, t, b, "etl")
	if after := describeTxn(ctx, t, b, "etl"); after.ProducerID != before.ProducerID || after.ProducerEpoch != before.ProducerEpoch+1 {
		t.Fatalf("after a restart without the Badger copy: %+v, want producer %d epoch %d", after, before.ProducerID,
			before.ProducerEpoch+1)
	}
}

// A node upgraded in place: transactional ids its Badger store held before
// __transaction_state existed move into the topic at the first load, and
// a transaction decided but not completed there is finished.
func TestTxnStateMovesFromBadgerIntoTheLog(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	b := newTestBroker(t, groupLogConfig(dir))
	if _, err := kadm.NewClient(newTestClient(t, b)).CreateTopic(ctx, 1, 1, nil, "data"); err != nil {
		t.Fatal(err)
	}
	b.Close()
	st := openGroupLogStore(t, dir)
	now := time.Now().UnixMilli()
	for _, rec := range []state.Txn{
		{ID: "old", ProducerID: 900, Epoch: 4, LastProducerID: -1, LastEpoch: -1, TimeoutMs: 60_000,
			State: int8(txn.CompleteCommit), StartMs: now, UpdateMs: now},
		{ID: "decided", ProducerID: 901, Epoch: 2, LastProducerID: -1, LastEpoch: -1, TimeoutMs: 60_000,
			State: int8(txn.PrepareAbort), StartMs: now, UpdateMs: now,
			Partitions: []state.TxnPartition{{Topic: "data", Partition: 0}}},
	} {
		if err := st.PutTxn(rec); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	b = newTestBroker(t, groupLogConfig(dir))
	if d := describeTxn(ctx, t, b, "old"); d.ProducerID != 900 || d.ProducerEpoch != 4 || d.State != "CompleteCommit" {
		t.Fatalf("the moved id: %+v", d)
	}
	if d := describeTxn(ctx, t, b, "decided"); d.State != "CompleteAbort" {
		t.Fatalf("the decided transaction after the move: %+v, want CompleteAbort", d)
	}
	if b.partitions.Topic(meta.TransactionTopic) == nil {
		t.Fatal("no __transaction_state")
	}
	part := b.partitions.Topic(meta.TransactionTopic).Partition(int32(meta.CoordinatorPartition("old", DefaultTransactionTopicPartitions)))
	recs := txn.Records{}
	if _, err := replay(part, recs.ApplyBatch); err != nil {
		t.Fatal(err)
	}
	if recs["old"].ProducerID != 900 {
		t.Fatalf("the log of old's partition holds %+v", recs)
	}
}
