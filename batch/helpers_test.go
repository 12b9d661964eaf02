package batch

import (
	"encoding/binary"
	"math/rand/v2"
)

// testBatch builds an uncompressed v2 batch with n records of the given value
// size, a producer id and a correct CRC: small and deterministic, for unit tests.
func testBatch(base int64, n int, valueSize int, pid int64) []byte {
	rng := rand.New(rand.NewPCG(uint64(base), uint64(n)))
	var recs []byte
	for i := range n {
		var body []byte
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, int64(i)) // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = binary.AppendVarint(body, -1)       // null key
		body = binary.AppendVarint(body, int64(valueSize))
		for range valueSize {
			body = append(body, byte('a'+rng.IntN(26)))
		}
		body = binary.AppendVarint(body, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	b := make([]byte, HeaderSize, HeaderSize+len(recs))
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(base))
	binary.BigEndian.PutUint32(b[offLength:], uint32(HeaderSize-LogOverhead+len(recs)))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 3)
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], 0)
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(n-1))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], 1_700_000_000_000)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(1_700_000_000_000+n-1))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], 2)
	binary.BigEndian.PutUint32(b[offBaseSequence:], 10)
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(n))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[offCRC:], Checksum(b[crcStart:]))
	return b
}

// concat joins batches into one records blob.
func concat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// legacyMessage builds a magic 0/1 message set entry at offset off.
func legacyMessage(off int64, magic byte) []byte {
	msg := []byte{0, 0, 0, 0, magic, 0}
	if magic == 1 {
		msg = binary.BigEndian.AppendUint64(msg, 0) // timestamp
	}
	msg = binary.BigEndian.AppendUint32(msg, 0xFFFFFFFF) // null key
	msg = binary.BigEndian.AppendUint32(msg, 1)
	msg = append(msg, 'v')
	out := binary.BigEndian.AppendUint64(nil, uint64(off))
	out = binary.BigEndian.AppendUint32(out, uint32(len(msg)))
	return append(out, msg...)
}
