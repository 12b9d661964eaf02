package batch

import "encoding/binary"

// SetBaseOffset restamps the base offset. It lies before the CRC range, so
// the checksum stays valid.
func (b Batch) SetBaseOffset(offset int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(offset))
}

// SetPartitionLeaderEpoch restamps the partition leader epoch. It lies before
// the CRC range, so the checksum stays valid.
func (b Batch) SetPartitionLeaderEpoch(epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}

// SetProducerID replaces the producer id and updates the CRC32C in place
// from the old checksum, in time independent of the batch size. The records
// are not touched (their compression is irrelevant: the producer id is only
// in the header).
//
// REQUIRES: the stored CRC is correct (Verify passed). A wrong checksum stays
// exactly as wrong after the patch, so corruption is never laundered.
func (b Batch) SetProducerID(pid int64) {
	field := b[offProducerID : offProducerID+8]
	old := binary.BigEndian.Uint64(field)
	var delta [8]byte
	binary.BigEndian.PutUint64(delta[:], old^uint64(pid))
	binary.BigEndian.PutUint64(field, uint64(pid))
	crc := patchedCRC(b.CRC(), delta[:], len(b)-(offProducerID+8))
	binary.BigEndian.PutUint32(b[offCRC:], crc)
}

// MirrorPIDOffset is added to source producer ids by producer.id.rewrite
// (DESIGN.md decision 2). The local producer-id allocator never issues ids at
// or above it, so rewritten ids cannot collide with local ones.
const MirrorPIDOffset int64 = 1 << 62

// MirrorProducerID maps a source producer id into the reserved range:
// pid + 2^62 for 0 <= pid < 2^62; any other value (-1 "no producer", or an id
// already in the reserved range, e.g. from a chained mirror) is unchanged,
// so the mapping is idempotent along a chain of mirrors.
func MirrorProducerID(pid int64) int64 {
	if pid >= 0 && pid < MirrorPIDOffset {
		return pid + MirrorPIDOffset
	}
	return pid
}

// RewriteProducerID applies MirrorProducerID to the batch in place and
// reports whether it changed anything. Batches without a producer id are
// left alone.
//
// REQUIRES: the stored CRC is correct (Verify passed).
func (b Batch) RewriteProducerID() bool {
	pid := b.ProducerID()
	mapped := MirrorProducerID(pid)
	if mapped == pid {
		return false
	}
	b.SetProducerID(mapped)
	return true
}

// SetLogAppendTime marks the batch's timestamps as broker-assigned
// (message.timestamp.type=LogAppendTime): the timestamp-type attribute is
// set and MaxTimestamp becomes ts, which consumers then report for every
// record. The CRC32C is patched in place from the old checksum, as
// SetProducerID does; the records are untouched.
//
// REQUIRES: the stored CRC is correct (Verify passed).
func (b Batch) SetLogAppendTime(ts int64) {
	// Attributes (offset 21) and MaxTimestamp (offset 35) are both in the
	// CRC range; patch each as an XOR delta.
	attrs := b[offAttributes : offAttributes+2]
	oldAttrs := binary.BigEndian.Uint16(attrs)
	newAttrs := oldAttrs | attrTimestampType
	var d2 [2]byte
	binary.BigEndian.PutUint16(d2[:], oldAttrs^newAttrs)
	binary.BigEndian.PutUint16(attrs, newAttrs)
	crc := patchedCRC(b.CRC(), d2[:], len(b)-(offAttributes+2))

	field := b[offMaxTimestamp : offMaxTimestamp+8]
	var d8 [8]byte
	binary.BigEndian.PutUint64(d8[:], binary.BigEndian.Uint64(field)^uint64(ts))
	binary.BigEndian.PutUint64(field, uint64(ts))
	crc = patchedCRC(crc, d8[:], len(b)-(offMaxTimestamp+8))
	binary.BigEndian.PutUint32(b[offCRC:], crc)
}
