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
