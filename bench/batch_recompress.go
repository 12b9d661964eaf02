package bench

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
)

// Recompressor is the baseline kmirror's in-place patch is measured
// against: what a consume-then-produce mirror (MirrorMaker 2, or any mirror
// built on a Kafka client) does to each batch. Its consumer decompresses
// the records and decodes every one of them (kgo and the Java consumer both
// do); its producer encodes them again, compresses the new records section
// and writes a new header and CRC32C.
//
// It is deliberately generous to the baseline: records are decoded with
// kmsg's generated decoder without copying keys, values or headers,
// re-encoded straight from those views, and every encoder, decoder, record
// slice and buffer is reused across calls, so that after the first batch
// the cost left is the work itself. A real mirror also pays for record
// objects, batching, and the producer's own sequence bookkeeping; none of
// that is counted here.
//
// A Recompressor is not safe for concurrent use.
type Recompressor struct {
	codecs *Codecs
	raw    []byte        // decompressed records section
	recs   []kmsg.Record // decoded records, aliasing raw
	plain  []byte        // re-encoded records section
}

// NewRecompressor returns a Recompressor. Call Close when done.
func NewRecompressor() (*Recompressor, error) {
	c, err := NewCodecs()
	if err != nil {
		return nil, err
	}
	return &Recompressor{codecs: c}, nil
}

// Close releases the codecs.
func (r *Recompressor) Close() { r.codecs.Close() }

// Records decompresses b and decodes every record. The returned slice and
// the records' keys, values and headers belong to r and stay valid until
// the next call on r.
//
// REQUIRES: b passed Verify (a consumer checks the CRC before decoding).
func (r *Recompressor) Records(b batch.Batch) ([]kmsg.Record, error) {
	raw, err := r.codecs.Decompress(r.raw[:0], b.Records(), b.Codec())
	r.raw = raw
	if err != nil {
		return nil, fmt.Errorf("decompressing batch at offset %d: %w", b.BaseOffset(), err)
	}
	// Every record takes at least 7 bytes (one per varint and the
	// attributes), so a larger count is corrupt; checking first keeps a bad
	// count from sizing an allocation.
	n := int(b.RecordCount())
	if n < 0 || n > len(raw)/7 {
		return nil, fmt.Errorf("%w: %d records in %d decompressed bytes at offset %d",
			batch.ErrCorrupt, n, len(raw), b.BaseOffset())
	}
	// The slice only grows, so each slot keeps its Headers capacity and
	// decoding a record with headers does not allocate once warm.
	if n > cap(r.recs) {
		r.recs = append(r.recs[:cap(r.recs)], make([]kmsg.Record, n-cap(r.recs))...)
	}
	recs := r.recs[:n]
	pos := 0
	for i := range recs {
		// kmsg decodes one record from a slice holding exactly that record,
		// so find its end from the leading length varint first.
		l, m := binary.Varint(raw[pos:])
		if m <= 0 || l < 0 || l > int64(len(raw)-pos-m) {
			return nil, fmt.Errorf("%w: bad length of record %d at offset %d",
				batch.ErrCorrupt, i, b.BaseOffset())
		}
		end := pos + m + int(l)
		if err := recs[i].UnsafeReadFrom(raw[pos:end]); err != nil {
			return nil, fmt.Errorf("%w: record %d at offset %d: %v",
				batch.ErrCorrupt, i, b.BaseOffset(), err)
		}
		pos = end
	}
	if pos != len(raw) {
		return nil, fmt.Errorf("%w: %d bytes after the last record at offset %d",
			batch.ErrCorrupt, len(raw)-pos, b.BaseOffset())
	}
	return recs, nil
}

// Recompress appends to dst a copy of b whose producer id is pid, built the
// slow way: all records decompressed, decoded, encoded again, compressed
// again with b's codec, and a new header and CRC32C written. Offsets,
// timestamps, epoch, sequence and attributes are kept, so the new batch
// holds the same records as b.
//
// REQUIRES: b passed Verify.
func (r *Recompressor) Recompress(dst []byte, b batch.Batch, pid int64) ([]byte, error) {
	recs, err := r.Records(b)
	if err != nil {
		return dst, err
	}
	r.plain = r.plain[:0]
	for i := range recs {
		r.plain = appendRecord(r.plain, &recs[i])
	}
	start := len(dst)
	dst = appendHeaderSpace(dst)
	dst, err = r.codecs.Compress(dst, r.plain, b.Codec())
	if err != nil {
		return dst[:start], fmt.Errorf("compressing batch at offset %d: %w", b.BaseOffset(), err)
	}
	h := headerOf(b)
	h.producerID = pid
	putHeader(dst[start:], h)
	return dst, nil
}
