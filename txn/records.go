package txn

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
)

// A transactional id's record travels in __transaction_state as Kafka
// writes it, so that a partition's log is the state of its ids and
// Kafka's tools read it: the key is TransactionLogKey (version 0: the
// transactional id), the value TransactionLogValue (version 0: producer
// id and epoch, timeout, state, the partitions by topic, the last update
// and start times). A null value is a tombstone (an expired id). The
// topic is compacted on the key, so the latest record is the state.
//
// Kafka's value has no place for the previous producer pair a KIP-360
// retry is recognized by (LastProducerID, LastEpoch): a record read back
// has none, as a Kafka coordinator that loads a partition has none.

const (
	txnKeyVersion   = 0
	txnValueVersion = 0
)

// Record is the record of t.
func Record(t state.Txn) batch.Record {
	v := kmsg.NewTxnMetadataValue()
	v.Version, v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = txnValueVersion, t.ProducerID, t.Epoch, t.TimeoutMs
	v.State, v.LastUpdateTimestamp, v.StartTimestamp = kmsg.TransactionState(t.State), t.UpdateMs, t.StartMs
	for _, p := range t.Partitions {
		i := slices.IndexFunc(v.Topics, func(vt kmsg.TxnMetadataValueTopic) bool { return vt.Topic == p.Topic })
		if i < 0 {
			vt := kmsg.NewTxnMetadataValueTopic()
			vt.Topic = p.Topic
			v.Topics = append(v.Topics, vt)
			i = len(v.Topics) - 1
		}
		v.Topics[i].Partitions = append(v.Topics[i].Partitions, p.Partition)
	}
	return batch.Record{Key: key(t.ID), Value: v.AppendTo(nil)}
}

// Tombstone is the record that deletes id.
func Tombstone(id string) batch.Record { return batch.Record{Key: key(id)} }

func key(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version, k.TransactionalID = txnKeyVersion, id
	return k.AppendTo(nil)
}

// ErrTxnRecord marks a record of __transaction_state that does not decode.
var ErrTxnRecord = errors.New("txn: malformed __transaction_state record")

// Records is the state a partition's records leave: the latest record of
// each transactional id.
type Records map[string]state.Txn

// Apply applies one record.
func (rs Records) Apply(k, value []byte) error {
	var mk kmsg.TxnMetadataKey
	if err := mk.ReadFrom(k); err != nil {
		return fmt.Errorf("%w: key: %v", ErrTxnRecord, err)
	}
	if value == nil {
		delete(rs, mk.TransactionalID)
		return nil
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return fmt.Errorf("%w: value of %q: %v", ErrTxnRecord, mk.TransactionalID, err)
	}
	if v.State < kmsg.TransactionState(Empty) || v.State > kmsg.TransactionState(PrepareEpochFence) {
		return fmt.Errorf("%w: %q in state %d", ErrTxnRecord, mk.TransactionalID, v.State)
	}
	t := state.Txn{ID: mk.TransactionalID, ProducerID: v.ProducerID, Epoch: v.ProducerEpoch, LastProducerID: -1,
		LastEpoch: -1, TimeoutMs: v.TimeoutMillis, State: int8(v.State), StartMs: v.StartTimestamp,
		UpdateMs: v.LastUpdateTimestamp}
	for _, vt := range v.Topics {
		for _, p := range vt.Partitions {
			t.Partitions = append(t.Partitions, state.TxnPartition{Topic: vt.Topic, Partition: p})
		}
	}
	rs[t.ID] = t
	return nil
}

// ApplyBatch applies every record of b, an uncompressed data batch
// (control batches hold no record). A batch whose records do not decode
// is an error: the caller does not serve a partition it cannot read whole.
func (rs Records) ApplyBatch(b batch.Batch) error {
	if b.IsControl() {
		return nil
	}
	err := batch.EachRecord(b, rs.Apply)
	if errors.Is(err, batch.ErrRecord) {
		return fmt.Errorf("%w: %w", ErrTxnRecord, err)
	}
	return err
}
