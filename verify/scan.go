package verify

import (
	"github.com/kmirror/kmirror/batch"
)

// scan appends to dst the headers of the whole batches of records (a Fetch
// response's RecordBatches) that end at or after from and start before to,
// recomputing each one's CRC32C. next is the offset after the last batch
// appended (from when none was), done reports that a batch at or past to
// was seen, so the side has nothing more in the window. A partial trailing
// batch (a response cut at its byte limit) is left for the next fetch. err
// is set when the bytes are not a sequence of batches (bad length, bad
// magic): what precedes it is returned, and the caller reports the side as
// damaged at next.
func scan(dst []header, records []byte, from, to int64) (out []header, next int64, done bool, err error) {
	next = from
	it := batch.NewIterator(records)
	it.SkipCRC() // checked here, so that a damaged batch is reported and passed
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		if b.LastOffset() < next {
			continue // before the window, or a batch already read
		}
		if b.BaseOffset() >= to {
			return dst, next, true, nil
		}
		dst = append(dst, header{base: b.BaseOffset(), last: b.LastOffset(), length: b.Length(), crc: b.CRC(),
			damaged: b.Verify() != nil})
		next = b.NextOffset()
	}
	return dst, next, next >= to, it.Err()
}
