package storage

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/codec"
)

// Records inside a (decompressed) RecordBatch v2 records section, as the
// cleaner reads them. Only compaction decodes records; every other path
// keeps batches opaque. A record is (varint = zig-zag, as
// encoding/binary.AppendVarint):
//
//	length varint            bytes after this field
//	attributes int8          unused, 0
//	timestamp delta varlong  relative to the batch base timestamp
//	offset delta varint      relative to the batch base offset
//	key length varint        -1: null key
//	key bytes
//	value length varint      -1: null value (a tombstone)
//	value bytes
//	header count varint
//	headers                  key length varint (>= 0), key, value length varint (-1 null), value
//
// Because both deltas are relative to the batch header, a record copied
// byte for byte into a batch with the same base offset and base timestamp
// keeps its offset and timestamp: the cleaner re-encodes a batch by copying
// the raw bytes of the records it keeps. These constants are part of the
// wire format.
const (
	// minRecordSize: length, attributes, timestamp delta, offset delta,
	// key length, value length and header count take a byte each at least.
	minRecordSize = 7

	// Header field positions (see the diagram in the batch package doc).
	hdrLength          = 8
	hdrCRC             = 17
	hdrAttributes      = 21
	hdrBaseTimestamp   = 27
	hdrMaxTimestamp    = 35
	hdrRecordCount     = 57
	hdrCRCStart        = hdrAttributes
	attrCodecMask      = 0x07
	attrDeleteHorizon  = 0x40
	emptyBatchLenField = batch.HeaderSize - batch.LogOverhead
)

// recordView is one decoded record. Its slices alias the records section
// it was decoded from.
type recordView struct {
	offsetDelta    int32
	timestampDelta int64
	key            []byte // nil: null key
	value          []byte // nil: null value (tombstone)
	headers        []byte // the encoded header count and headers
	raw            []byte // the whole encoded record, length prefix included
}

// recordReader is a sticky-error reader over a records section: after the
// first bad read every read returns zero values, and bad stays set.
type recordReader struct {
	b   []byte
	pos int
	bad bool
}

func (r *recordReader) varint() int64 {
	if r.bad {
		return 0
	}
	v, n := binary.Varint(r.b[r.pos:])
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.pos += n
	return v
}

// varint32 reads a varint that must fit an int32 (Kafka's varint, as
// opposed to varlong).
func (r *recordReader) varint32() int32 {
	v := r.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.bad = true
		return 0
	}
	return int32(v)
}

// bytes returns the next n bytes; n must lie within what is left.
func (r *recordReader) bytes(n int64) []byte {
	if r.bad || n < 0 || n > int64(len(r.b)-r.pos) {
		r.bad = true
		return nil
	}
	out := r.b[r.pos : r.pos+int(n) : r.pos+int(n)]
	r.pos += int(n)
	return out
}

// nullable reads a length-prefixed byte field where -1 is null. A present
// field, even empty, is a non-nil slice.
func (r *recordReader) nullable() []byte {
	n := r.varint32()
	if n == -1 && !r.bad {
		return nil
	}
	return r.bytes(int64(n))
}

func (r *recordReader) byte() {
	if r.bad || r.pos >= len(r.b) {
		r.bad = true
		return
	}
	r.pos++
}

// decodeRecords decodes exactly count records filling the whole of recs
// into dst (reused: its capacity is kept across calls). It checks every
// length against what is left before slicing and never panics; any
// inconsistency, including a count that the bytes cannot hold or bytes
// left over, is a corruption error (batch.IsCorruption).
func decodeRecords(dst []recordView, recs []byte, count int32) ([]recordView, error) {
	dst = dst[:0]
	if count < 0 || int64(count) > int64(len(recs)/minRecordSize) {
		return dst, badRecords("%d records cannot fit in %d bytes", count, len(recs))
	}
	// Grow by appending rather than by count: a view is ten times the size
	// of the smallest record, and a lying count must not size an allocation.
	dst = slices.Grow(dst, min(int(count), 1024))
	r := recordReader{b: recs}
	for i := range int(count) {
		start := r.pos
		length := r.varint32()
		body := recordReader{b: r.bytes(int64(length))}
		if r.bad {
			return dst, badRecords("record %d: length %d with %d bytes left", i, length, len(recs)-start)
		}
		var v recordView
		body.byte() // attributes
		v.timestampDelta = body.varint()
		v.offsetDelta = body.varint32()
		v.key = body.nullable()
		v.value = body.nullable()
		hstart := body.pos
		headers := body.varint32()
		if headers < 0 || int64(headers) > int64(len(body.b)-body.pos)/2 {
			body.bad = true
		}
		for j := int32(0); j < headers && !body.bad; j++ {
			if k := body.varint32(); k >= 0 {
				body.bytes(int64(k))
			} else {
				body.bad = true
			}
			body.nullable()
		}
		if body.bad || body.pos != len(body.b) {
			return dst, badRecords("record %d: malformed body of %d bytes", i, length)
		}
		v.headers = body.b[hstart:body.pos:body.pos]
		v.raw = recs[start:r.pos:r.pos]
		dst = append(dst, v)
	}
	if r.pos != len(recs) {
		return dst, badRecords("%d bytes after record %d", len(recs)-r.pos, count)
	}
	return dst, nil
}

func badRecords(format string, args ...any) error {
	return &batch.Error{Offset: -1, Err: batch.ErrCorrupt, Detail: fmt.Sprintf(format, args...)}
}

// appendRecords appends the raw bytes of recs: a records section holding
// exactly those records, with their original offset and timestamp deltas.
func appendRecords(dst []byte, recs []recordView) []byte {
	for i := range recs {
		dst = append(dst, recs[i].raw...)
	}
	return dst
}

// appendPartialBatch appends a copy of b that holds only kept (records of
// b, in order), and returns the extended slice and the scratch buffer
// plain, grown if needed. The header is b's with three fields recomputed:
// the length, the record count and, for create-time batches, the max
// timestamp (the largest kept record timestamp). Everything else stays:
// base offset and last offset delta (so the batch keeps its offset range
// and the producer's last sequence), base timestamp (record timestamps are
// deltas from it, and with the delete-horizon bit it holds the horizon),
// producer id, epoch and base sequence, leader epoch and attributes. The
// records are compressed again with b's codec; the CRC is computed last.
//
// REQUIRES: len(kept) > 0.
func appendPartialBatch(dst, plain []byte, b batch.Batch, kept []recordView) ([]byte, []byte, error) {
	start := len(dst)
	dst = append(dst, b[:batch.HeaderSize]...)
	plain = appendRecords(plain[:0], kept)
	var err error
	if dst, err = codec.Compress(b.Codec(), plain, dst); err != nil {
		return dst[:start], plain, fmt.Errorf("compressing compacted batch at %d: %w", b.BaseOffset(), err)
	}
	out := dst[start:]
	binary.BigEndian.PutUint32(out[hdrLength:], uint32(len(out)-batch.LogOverhead))
	binary.BigEndian.PutUint32(out[hdrRecordCount:], uint32(len(kept)))
	if !b.LogAppendTime() {
		maxDelta := kept[0].timestampDelta
		for _, r := range kept[1:] {
			maxDelta = max(maxDelta, r.timestampDelta)
		}
		binary.BigEndian.PutUint64(out[hdrMaxTimestamp:], uint64(b.BaseTimestamp()+maxDelta))
	}
	binary.BigEndian.PutUint32(out[hdrCRC:], batch.Checksum(out[hdrCRCStart:]))
	return dst, plain, nil
}

// appendEmptyBatch appends the header of b alone, as Kafka writes a batch
// it retains only for its producer metadata: no records, same base offset,
// last offset delta, leader epoch, producer id, epoch and base sequence;
// both timestamps set to b's max timestamp; attributes without a codec
// (there is nothing to compress) and without the delete-horizon bit (no
// tombstones are left), transactional and control bits kept.
func appendEmptyBatch(dst []byte, b batch.Batch) []byte {
	start := len(dst)
	dst = append(dst, b[:batch.HeaderSize]...)
	out := dst[start:]
	binary.BigEndian.PutUint32(out[hdrLength:], emptyBatchLenField)
	attrs := binary.BigEndian.Uint16(out[hdrAttributes:]) &^ (attrCodecMask | attrDeleteHorizon)
	binary.BigEndian.PutUint16(out[hdrAttributes:], attrs)
	binary.BigEndian.PutUint64(out[hdrBaseTimestamp:], uint64(b.MaxTimestamp()))
	binary.BigEndian.PutUint32(out[hdrRecordCount:], 0)
	binary.BigEndian.PutUint32(out[hdrCRC:], batch.Checksum(out[hdrCRCStart:]))
	return dst
}
