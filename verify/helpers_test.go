package verify

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
)

// testBatch is a valid v2 batch of n records at base whose payload is
// fill repeated size times.
func testBatch(base int64, n int32, fill byte, size int) []byte {
	rb := kmsg.RecordBatch{FirstOffset: base, Magic: 2, LastOffsetDelta: n - 1, NumRecords: n,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, Records: make([]byte, size)}
	for i := range rb.Records {
		rb.Records[i] = fill
	}
	rb.Length = int32(batch.MinLength + size)
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], batch.Checksum(b[21:]))
	return b
}

// sliceCursor yields hs, then err.
type sliceCursor struct {
	hs  []header
	err error
}

func (c *sliceCursor) next() (header, bool, error) {
	if len(c.hs) == 0 {
		return header{}, false, c.err
	}
	h := c.hs[0]
	c.hs = c.hs[1:]
	return h, true, nil
}

// h is a header of the batch [base, last] with length and crc.
func h(base, last int64, length int32, crc uint32) header {
	return header{base: base, last: last, length: length, crc: crc}
}
