package batch

import (
	"encoding/binary"
	"fmt"
)

// Control record types (the "type" field of a control record's key). These
// constants are part of the wire format.
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
	// ControlMirrorPIDReset tells every reader of the log that all producer
	// state before it is void (KIP-1279, appended at failover).
	ControlMirrorPIDReset int16 = 7
)

// A control batch holds exactly one uncompressed record whose key is
//
//	version int16 (0) | type int16
//
// and whose value depends on the type:
//
//	ABORT/COMMIT marker:  version int16 (0) | coordinator epoch int32
//	MIRROR_PID_RESET:     version int16 (0) | source cluster id: int16 length + bytes
//
// The record itself is a v2 record:
//
//	length varint | attributes int8 (0) | timestamp delta varint (0) |
//	offset delta varint (0) | key length varint | key | value length varint |
//	value | header count varint (0)
//
// Markers carry the transaction's producer id and epoch and set both the
// transactional and control bits, as Kafka writes them. MIRROR_PID_RESET
// belongs to no producer (id and epoch -1) and sets only the control bit:
// consumers skip it like any control batch, and read_committed consumers do
// not mistake it for the end of a transaction.
const controlKeyVersion = 0

// TxnMarker describes a transaction marker batch.
type TxnMarker struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Timestamp            int64 // milliseconds since the epoch
	ProducerID           int64
	ProducerEpoch        int16
	CoordinatorEpoch     int32
	Commit               bool // false: ABORT
}

// AppendTxnMarker appends a COMMIT or ABORT control batch to dst.
func AppendTxnMarker(dst []byte, m TxnMarker) []byte {
	typ := ControlAbort
	if m.Commit {
		typ = ControlCommit
	}
	var value [6]byte
	binary.BigEndian.PutUint16(value[0:], controlKeyVersion)
	binary.BigEndian.PutUint32(value[2:], uint32(m.CoordinatorEpoch))
	return appendControlBatch(dst, header{
		baseOffset: m.BaseOffset, leaderEpoch: m.PartitionLeaderEpoch,
		timestamp: m.Timestamp, producerID: m.ProducerID, producerEpoch: m.ProducerEpoch,
		attributes: attrControl | attrTransactional,
	}, typ, value[:])
}

// PIDReset describes a MIRROR_PID_RESET control batch.
type PIDReset struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Timestamp            int64
	SourceClusterID      string
}

// pidResetVersion is the version of the MIRROR_PID_RESET value.
const pidResetVersion = 0

// AppendMirrorPIDReset appends a MIRROR_PID_RESET control batch to dst.
func AppendMirrorPIDReset(dst []byte, r PIDReset) []byte {
	value := make([]byte, 0, 4+len(r.SourceClusterID))
	value = binary.BigEndian.AppendUint16(value, pidResetVersion)
	value = binary.BigEndian.AppendUint16(value, uint16(len(r.SourceClusterID)))
	value = append(value, r.SourceClusterID...)
	return appendControlBatch(dst, header{
		baseOffset: r.BaseOffset, leaderEpoch: r.PartitionLeaderEpoch,
		timestamp: r.Timestamp, producerID: noProducerID, producerEpoch: noProducerID,
		attributes: attrControl,
	}, ControlMirrorPIDReset, value)
}

// header is what a batch written here says of itself beyond its records.
type header struct {
	baseOffset    int64
	leaderEpoch   int32
	timestamp     int64
	producerID    int64
	producerEpoch int16
	attributes    int16
}

// Record is one record of a batch AppendRecords writes: a nil Key or
// Value is null (a nil Value is a tombstone).
type Record struct {
	Key, Value []byte
}

// AppendRecords appends an uncompressed data batch holding recs (at least
// one), with no producer, every record at timestamp, at base offset 0 and
// leader epoch 0: the leader's append stamps both. It is for what a node
// writes itself, the group coordinator's __consumer_offsets records.
func AppendRecords(dst []byte, timestamp int64, recs []Record) []byte {
	return appendBatch(dst, header{timestamp: timestamp, producerID: noProducerID, producerEpoch: noProducerID}, recs)
}

// AppendTxnRecords is AppendRecords for records written in the
// transaction of producer pid at epoch (a transactional batch, base
// sequence -1, as Kafka's group coordinator writes a TxnOffsetCommit):
// the transaction's marker decides them.
func AppendTxnRecords(dst []byte, timestamp, pid int64, epoch int16, recs []Record) []byte {
	return appendBatch(dst, header{timestamp: timestamp, producerID: pid, producerEpoch: epoch,
		attributes: attrTransactional}, recs)
}

func appendControlBatch(dst []byte, h header, typ int16, value []byte) []byte {
	var key [4]byte
	binary.BigEndian.PutUint16(key[0:], controlKeyVersion)
	binary.BigEndian.PutUint16(key[2:], uint16(typ))
	return appendBatch(dst, h, []Record{{Key: key[:], Value: value}})
}

// appendBatch appends a magic 2 batch of recs, uncompressed, every record
// at h's timestamp (deltas 0) and offset delta its index.
func appendBatch(dst []byte, h header, recs []Record) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.baseOffset))
	dst = binary.BigEndian.AppendUint32(dst, 0) // length, filled below
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.leaderEpoch))
	dst = append(dst, supportedMagic)
	dst = binary.BigEndian.AppendUint32(dst, 0) // crc, filled below
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.attributes))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(recs)-1)) // last offset delta
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.timestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.timestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.producerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.producerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF) // base sequence -1
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(recs)))

	for i, r := range recs {
		bodyLen := 1 + 1 + varintLen(i) + nullableLen(r.Key) + nullableLen(r.Value) + 1
		dst = binary.AppendVarint(dst, int64(bodyLen))
		dst = append(dst, 0) // record attributes
		dst = append(dst, 0) // timestamp delta
		dst = binary.AppendVarint(dst, int64(i))
		dst = appendNullable(dst, r.Key)
		dst = appendNullable(dst, r.Value)
		dst = append(dst, 0) // no headers
	}

	b := Batch(dst[start:])
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-LogOverhead))
	binary.BigEndian.PutUint32(b[offCRC:], Checksum(b[crcStart:]))
	return dst
}

// nullableLen is the encoded size of a record's key or value: its varint
// length (-1 for nil) and its bytes.
func nullableLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(len(b)) + len(b)
}

func appendNullable(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	return append(binary.AppendVarint(dst, int64(len(b))), b...)
}

func varintLen(n int) int {
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutVarint(tmp[:], int64(n))
}

// ControlType returns the type of a control batch's record (ControlAbort,
// ControlCommit, ControlMirrorPIDReset or another Kafka type). It reads only
// the first record's key; control batches are never compressed.
func (b Batch) ControlType() (int16, error) {
	if !b.IsControl() {
		return 0, &Error{Offset: b.BaseOffset(), Err: ErrCorrupt, Detail: "not a control batch"}
	}
	if b.Codec() != CodecNone || b.RecordCount() < 1 {
		return 0, &Error{Offset: b.BaseOffset(), Err: ErrCorrupt, Detail: "control batch without a plain record"}
	}
	rec := b.Records()
	pos := 0
	// length, attributes(int8), timestamp delta, offset delta, key length
	if bodyLen, n := binary.Varint(rec); n > 0 && bodyLen >= 0 && bodyLen <= int64(len(rec)-n) {
		pos += n
	} else {
		return 0, badControl(b)
	}
	pos++ // attributes
	for range 2 {
		if pos >= len(rec) {
			return 0, badControl(b)
		}
		_, n := binary.Varint(rec[pos:])
		if n <= 0 {
			return 0, badControl(b)
		}
		pos += n
	}
	if pos >= len(rec) {
		return 0, badControl(b)
	}
	keyLen, n := binary.Varint(rec[pos:])
	if n <= 0 || keyLen < 4 || int64(len(rec)-pos-n) < keyLen {
		return 0, badControl(b)
	}
	pos += n
	return int16(binary.BigEndian.Uint16(rec[pos+2:])), nil
}

func badControl(b Batch) error {
	return &Error{Offset: b.BaseOffset(), Err: ErrCorrupt, Detail: fmt.Sprintf("malformed control record in %d-byte batch", len(b))}
}
