package state

import (
	"encoding/binary"
	"fmt"
)

// Transactions (the transaction coordinator, txn/). One record per
// transactional id holds everything a restart needs to finish or go on
// with its transaction: the producer id and epoch (and the previous pair,
// for KIP-360 retries), the state, the partitions and groups added, and
// the offsets committed inside the transaction, which reach the group
// only when it commits. Every write is fsynced: a transaction's state is
// persisted before its markers are written, so a crash between the two
// ends with the markers written at the restart, never a hanging
// transaction.
//
//	v1/txn/<transactional id n>  ->  Txn
const keyTxnPrefix = "v1/txn/"

// TxnPartition is a partition added to a transaction.
type TxnPartition struct {
	Topic     string
	Partition int32
}

// TxnOffset is an offset committed inside a transaction (TxnOffsetCommit).
type TxnOffset struct {
	Group       string
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// Txn is one transactional id's coordinator record.
type Txn struct {
	ID             string
	ProducerID     int64
	Epoch          int16
	LastProducerID int64 // -1 if none
	LastEpoch      int16 // -1 if none
	TimeoutMs      int32
	State          int8 // txn.State values
	StartMs        int64
	UpdateMs       int64
	Partitions     []TxnPartition
	Groups         []string
	Offsets        []TxnOffset
}

func txnKey(id string) []byte { return appendGroupName([]byte(keyTxnPrefix), id) }

// PutTxn stores a transaction record, fsynced.
func (s *Store) PutTxn(t Txn) error {
	if t.ID == "" {
		return fmt.Errorf("state: put txn: empty transactional id")
	}
	key, val := txnKey(t.ID), appendTxn(nil, t)
	return s.update(func(txn tx) error { return txn.Set(key, val) })
}

// PutTxnLazy stores a transaction record without an fsync of its own: it
// reaches the disk with the next fsynced write (every later PutTxn flushes
// the log up to itself) or at Close. The coordinator uses it only for
// writes whose loss a restart repairs (see txn/coordinator.go).
func (s *Store) PutTxnLazy(t Txn) error {
	if t.ID == "" {
		return fmt.Errorf("state: put txn: empty transactional id")
	}
	key, val := txnKey(t.ID), appendTxn(nil, t)
	return s.updateNoSync(func(txn tx) error { return txn.Set(key, val) })
}

// DeleteTxn removes a transactional id's record (expiration).
func (s *Store) DeleteTxn(id string) error {
	key := txnKey(id)
	return s.update(func(txn tx) error { return txn.Delete(key) })
}

// Txns returns every transaction record, by transactional id.
func (s *Store) Txns() ([]Txn, error) {
	var out []Txn
	err := s.view(func(txn tx) error {
		out = out[:0]
		return scanPrefix(txn, keyTxnPrefix, func(suffix string, v []byte) error {
			t, err := decodeTxn(suffix, v)
			if err != nil {
				return err
			}
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

func appendTxn(dst []byte, t Txn) []byte {
	dst = append(dst, formatV1)
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.ProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(t.Epoch))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.LastProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(t.LastEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(t.TimeoutMs))
	dst = append(dst, byte(t.State))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.StartMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.UpdateMs))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(t.Partitions)))
	for _, p := range t.Partitions {
		dst = appendString(dst, p.Topic)
		dst = binary.BigEndian.AppendUint32(dst, uint32(p.Partition))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(t.Groups)))
	for _, g := range t.Groups {
		dst = appendString(dst, g)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(t.Offsets)))
	for _, o := range t.Offsets {
		dst = appendString(dst, o.Group)
		dst = appendString(dst, o.Topic)
		dst = binary.BigEndian.AppendUint32(dst, uint32(o.Partition))
		dst = binary.BigEndian.AppendUint64(dst, uint64(o.Offset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(o.LeaderEpoch))
		dst = appendString(dst, o.Metadata)
	}
	return dst
}

// decodeTxn decodes a record from its key suffix (the id) and value.
func decodeTxn(suffix string, v []byte) (Txn, error) {
	k := reader{b: []byte(suffix), what: "txn key"}
	id := k.name()
	if err := k.complete(); err != nil {
		return Txn{}, err
	}
	r := reader{b: v, what: fmt.Sprintf("txn %q", id)}
	r.version()
	t := Txn{ID: id}
	t.ProducerID = int64(r.u64())
	t.Epoch = int16(r.u16())
	t.LastProducerID = int64(r.u64())
	t.LastEpoch = int16(r.u16())
	t.TimeoutMs = int32(r.u32())
	t.State = r.i8()
	t.StartMs = int64(r.u64())
	t.UpdateMs = int64(r.u64())
	for n := r.count(8); n > 0 && r.err == nil; n-- {
		t.Partitions = append(t.Partitions, TxnPartition{Topic: r.str(), Partition: int32(r.u32())})
	}
	for n := r.count(4); n > 0 && r.err == nil; n-- {
		t.Groups = append(t.Groups, r.str())
	}
	for n := r.count(28); n > 0 && r.err == nil; n-- {
		t.Offsets = append(t.Offsets, TxnOffset{Group: r.str(), Topic: r.str(), Partition: int32(r.u32()),
			Offset: int64(r.u64()), LeaderEpoch: int32(r.u32()), Metadata: r.str()})
	}
	if err := r.complete(); err != nil {
		return Txn{}, err
	}
	if id == "" {
		return Txn{}, fmt.Errorf("%w: txn with an empty id", ErrCorrupt)
	}
	return t, nil
}

func (r *reader) u16() uint16 {
	if v := r.bytes(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}
