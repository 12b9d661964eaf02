package storage

import (
	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/codec"
)

// RecordKeys reads the records of a client's batch for the checks that
// need them: Kafka refuses a record without a key on a compacted topic
// (LogValidator.validateKey). Only Produce to a compacted topic uses it;
// every other path keeps batches opaque. The zero value is ready; its
// buffers are reused across calls, so a RecordKeys is owned by one
// goroutine at a time.
type RecordKeys struct {
	plain []byte // decompressed records section
	views []recordView
}

// Keyless appends to dst the batch indexes (0 for the first record) of
// b's records whose key is null, and returns it. A compressed batch is
// decompressed (at most codec.DefaultMaxOut bytes). Records that cannot be
// read are a corruption error (batch.IsCorruption).
// REQUIRES: b's CRC checked (b.Verify), so unreadable records are the
// producer's, not a damaged copy.
func (k *RecordKeys) Keyless(b batch.Batch, dst []int32) ([]int32, error) {
	data := b.Records()
	if b.Codec() != batch.CodecNone {
		out, err := codec.Decompress(b.Codec(), data, k.plain[:0], codec.DefaultMaxOut)
		k.plain = out
		if err != nil {
			return dst, &batch.Error{Offset: -1, Err: batch.ErrCorrupt, Detail: err.Error()}
		}
		data = out
	}
	var err error
	if k.views, err = decodeRecords(k.views, data, b.RecordCount()); err != nil {
		return dst, err
	}
	for i := range k.views {
		if k.views[i].key == nil {
			dst = append(dst, int32(i))
		}
	}
	return dst, nil
}
