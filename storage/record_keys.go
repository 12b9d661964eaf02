package storage

import (
	"fmt"
	"sync"

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
	if err := k.read(b); err != nil {
		return dst, err
	}
	for i := range k.views {
		if k.views[i].key == nil {
			dst = append(dst, int32(i))
		}
	}
	return dst, nil
}

// read decompresses (at most codec.DefaultMaxOut bytes) and decodes b's
// records into k.views. Records that cannot be read are a corruption
// error (batch.IsCorruption).
func (k *RecordKeys) read(b batch.Batch) error {
	data := b.Records()
	if b.Codec() != batch.CodecNone {
		out, err := codec.Decompress(b.Codec(), data, k.plain[:0], codec.DefaultMaxOut)
		k.plain = out
		if err != nil {
			return &batch.Error{Offset: -1, Err: batch.ErrCorrupt, Detail: fmt.Sprintf("records (codec %v): %v", b.Codec(), err)}
		}
		data = out
	}
	var err error
	k.views, err = decodeRecords(k.views, data, b.RecordCount())
	return err
}

// recordCheckers pool the buffers of validateRecords across produces (one
// per partition append in flight); maxPooledPlain drops the oversized.
var recordCheckers = sync.Pool{New: func() any { return new(RecordKeys) }}

const maxPooledPlain = 4 << 20

// validateRecords checks a client's batch as Kafka's LogValidator does
// before it appends one: the codec is one Kafka knows and the records
// decompress; each record's framing holds (lengths, varints, headers);
// the header's count is the records'; and their offset deltas run 0, 1,
// ... A batch that fails would be stored and then stop every consumer at
// its offset ("unable to decompress batch"), so it is refused: a
// corruption error (CORRUPT_MESSAGE) for unreadable records, and
// ErrInvalidRecord for offsets out of order. Mirror appends never come
// here: the source validated them, and the CRC is their check.
// REQUIRES: b's CRC checked.
func validateRecords(b batch.Batch) error {
	k := recordCheckers.Get().(*RecordKeys)
	defer func() {
		if cap(k.plain) > maxPooledPlain {
			k.plain = nil
		}
		k.views = k.views[:0]
		recordCheckers.Put(k)
	}()
	if err := k.read(b); err != nil {
		return err
	}
	for i := range k.views {
		if d := k.views[i].offsetDelta; d != int32(i) {
			return fmt.Errorf("%w: record %d of the batch has offset delta %d, want %d", ErrInvalidRecord, i, d, i)
		}
	}
	return nil
}
