package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// transactionalBatch builds a one-record transactional RecordBatch of
// producer pid at epoch (sequence 0), as a client without a coordinator
// behind it could send.
func transactionalBatch(pid int64, epoch int16) []byte {
	rec := kmsg.NewRecord()
	rec.Value = []byte("orphan")
	// kmsg writes Length as given: set it to the body's size (the body
	// follows the one-byte varint of a zero Length).
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	recs := rec.AppendTo(nil)
	b := kmsg.NewRecordBatch()
	b.Magic, b.Attributes = 2, 0x10 // transactional
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = pid, epoch, 0
	b.NumRecords, b.LastOffsetDelta = 1, 0
	now := time.Now().UnixMilli()
	b.FirstTimestamp, b.MaxTimestamp = now, now
	b.Records = recs
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:12], uint32(len(raw)-12)) // batch length after the length field
	// CRC-32C over everything after the CRC field (offset 21).
	crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))
	raw[17], raw[18], raw[19], raw[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	return raw
}

// produceTransactional produces transactionalBatch(pid, epoch) to
// partition 0 of topic, as a producer whose coordinator is elsewhere (or
// nowhere) would, and leaves its transaction open.
func produceTransactional(ctx context.Context, t *testing.T, b *Broker, cl *kgo.Client, topic string, pid int64, epoch int16) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	id := "no-coordinator"
	req.TransactionID = &id
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, b.partitions.Topic(topic).ID()
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = transactionalBatch(pid, epoch)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("producing a transactional batch of producer %d: %v %+v", pid, err, resp)
	}
}

// A transaction no transactional id owns (written without a coordinator,
// or whose id expired) holds read_committed consumers back only until it
// has been open longer than transaction.max.timeout.ms: then maintenance
// aborts it and the last stable offset reaches the log end.
func TestOrphanedTransactionAborted(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, func(c *Config) { c.Transactions.MaxTimeout = 200 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newTestClient(t, b, kgo.DefaultProduceTopic("orphan"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, kgo.StringRecord("before")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produceTransactional(ctx, t, b, cl, "orphan", 987654, 0)
	p := b.partitions.Topic("orphan").Partitions()[0]
	if p.Log().LastStableOffset() != 1 {
		t.Fatalf("last stable offset %d with the orphan open, want 1", p.Log().LastStableOffset())
	}
	now := time.Now()
	b.repairTxns(now) // first sighting
	if p.Log().LastStableOffset() != 1 {
		t.Fatal("the orphan was aborted at its first sighting")
	}
	b.repairTxns(now.Add(300 * time.Millisecond))
	if lso, hw := p.Log().LastStableOffset(), p.Log().HighWatermark(); lso != hw || hw != 3 {
		t.Fatalf("after transaction.max.timeout.ms: last stable offset %d, high watermark %d; want both 3 (marker written)", lso, hw)
	}
}

// A transaction the coordinator runs is left alone by maintenance.
func TestRunningTransactionKept(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, func(c *Config) { c.Transactions.MaxTimeout = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := newTestClient(t, b, kgo.TransactionalID("kept"), kgo.DefaultProduceTopic("kept"), kgo.AllowAutoTopicCreation())
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("open")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	part := b.partitions.Topic("kept").Partitions()[0]
	b.repairTxns(time.Now())
	b.repairTxns(time.Now().Add(2 * time.Minute))
	if part.Log().LastStableOffset() != 0 {
		t.Fatalf("maintenance ended a running transaction: last stable offset %d", part.Log().LastStableOffset())
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("committing after maintenance: %v", err)
	}
}

// A marker for a partition whose topic was deleted between the
// coordinator's lookup and the append answers errNoPartition, which
// the coordinator skips, as Kafka drops markers for deleted partitions.
// It used to answer the log's ErrClosed, which the coordinator retries:
// the transaction never completed. A closed log of a topic that still
// exists (a shutdown) stays an error to retry.
func TestTxnMarkerOnADeletedTopic(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "doomed", 1)
	if err := b.deleteTopic(tp); err != nil {
		t.Fatal(err)
	}
	err := txnNode{b}.writeMarkerOn(tp, state.TxnPartition{Topic: "doomed", Partition: 0}, 7, 0, 0, true)
	if !errors.Is(err, errNoPartition) {
		t.Fatalf("marker on a deleted topic: %v, want errNoPartition", err)
	}

	kept := mustTopic(t, b, "kept", 1)
	kept.Partitions()[0].Log().MarkDeleted() // closed under the marker, the topic still here
	err = txnNode{b}.writeMarkerOn(kept, state.TxnPartition{Topic: "kept", Partition: 0}, 7, 0, 0, true)
	if err == nil || errors.Is(err, errNoPartition) {
		t.Fatalf("marker on a closed log of a live topic: %v, want an error to retry", err)
	}
}
