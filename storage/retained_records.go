package storage

import (
	"bytes"

	"github.com/kmirror/kmirror/batch"
)

// RetainedRecords reports whether kept is orig after a compaction: every
// record of kept is one of orig's, at the same offset and timestamp with
// the same key, value and headers, from the same producer. Kafka's cleaner
// keeps the records it retains whole and at their offsets, but may
// re-encode their batch (another size, CRC, codec, base timestamp), so a
// source without topic ids that compacted a batch the copy holds whole is
// still the topic copied; a recreated topic holds other records at those
// offsets. An empty kept (everything cleaned away) shows nothing: false.
// Records that cannot be read are a corruption error (batch.IsCorruption).
func RetainedRecords(orig, kept batch.Batch) (bool, error) {
	if kept.RecordCount() == 0 || orig.ProducerID() != kept.ProducerID() || orig.ProducerEpoch() != kept.ProducerEpoch() ||
		orig.IsControl() != kept.IsControl() {
		return false, nil
	}
	var o, k RecordKeys
	if err := o.read(orig); err != nil {
		return false, err
	}
	if err := k.read(kept); err != nil {
		return false, err
	}
	byOffset := make(map[int64]*recordView, len(o.views))
	for i := range o.views {
		byOffset[orig.BaseOffset()+int64(o.views[i].offsetDelta)] = &o.views[i]
	}
	for _, kr := range k.views {
		or := byOffset[kept.BaseOffset()+int64(kr.offsetDelta)]
		switch {
		case or == nil,
			orig.BaseTimestamp()+or.timestampDelta != kept.BaseTimestamp()+kr.timestampDelta,
			(or.key == nil) != (kr.key == nil) || !bytes.Equal(or.key, kr.key),
			(or.value == nil) != (kr.value == nil) || !bytes.Equal(or.value, kr.value),
			!bytes.Equal(or.headers, kr.headers):
			return false, nil
		}
	}
	return true, nil
}
