package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Header layout constants. They are part of the wire format.
const (
	// HeaderSize is the size of the fixed RecordBatch v2 header.
	HeaderSize = 61
	// LogOverhead is the size of the base offset and length fields that
	// precede the length-counted part of every batch.
	LogOverhead = 12
	// MinLength is the smallest legal value of the length field: a header
	// with no records.
	MinLength = HeaderSize - LogOverhead

	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// crcStart is where the CRC32C range begins.
	crcStart = offAttributes
)

// Attribute bits.
const (
	attrCodecMask      = 0x07
	attrTimestampType  = 0x08
	attrTransactional  = 0x10
	attrControl        = 0x20
	attrDeleteHorizon  = 0x40
	supportedMagic     = 2
	noProducerID       = -1
	defaultMaxBatchLen = 1<<31 - 1
)

// Codec is the compression codec of a batch (attributes bits 0-2).
type Codec int8

// The codecs Kafka defines.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLz4    Codec = 3
	CodecZstd   Codec = 4
)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLz4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// Sentinel errors. Errors returned by this package wrap one of them in an
// *Error that names the batch's base offset; check with errors.Is.
var (
	// ErrCorrupt means the batch bytes are inconsistent: CRC32C mismatch,
	// a length field below the minimum, or a header that contradicts itself.
	ErrCorrupt = errors.New("batch: corrupt record batch")
	// ErrLegacyMagic means a magic 0 or 1 message set, which kmirror does
	// not mirror.
	ErrLegacyMagic = errors.New("batch: legacy message set (magic 0/1) not supported")
	// ErrUnknownMagic means a magic byte above 2.
	ErrUnknownMagic = errors.New("batch: unknown magic")
	// ErrTooLarge means a length field above the configured maximum.
	ErrTooLarge = errors.New("batch: record batch larger than the allowed maximum")
	// ErrShort means a slice too short to hold the batch its header announces.
	ErrShort = errors.New("batch: record batch truncated")
)

// Error names the batch a failure belongs to.
type Error struct {
	// Offset is the base offset field of the failing batch as read from
	// its bytes (for a legacy message set, the message's offset).
	Offset int64
	// Err is one of the package sentinels.
	Err error
	// Detail says more, e.g. the two CRC values. May be empty.
	Detail string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%v at offset %d", e.Err, e.Offset)
	}
	return fmt.Sprintf("%v at offset %d: %s", e.Err, e.Offset, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// IsCorruption reports whether err marks damaged bytes (as opposed to a
// legal but unsupported format), so callers can truncate or repair.
func IsCorruption(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrShort)
}

// Batch is a view over the bytes of exactly one RecordBatch v2. It never owns
// or copies the bytes: a Batch obtained from a buffer dies with that buffer.
// Accessors assume the view came from Parse or an Iterator, which guarantee
// len(b) >= HeaderSize and len(b) == LogOverhead + Length().
type Batch []byte

// Parse checks that b holds exactly one structurally sound v2 batch header
// (size, length field, magic) and returns the view. It does not check the
// CRC: call Verify for that. Trailing bytes beyond the batch are an error;
// use an Iterator for a sequence of batches.
func Parse(b []byte) (Batch, error) {
	n, err := frame(b, defaultMaxBatchLen)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, &Error{Offset: offsetOf(b), Err: ErrShort,
			Detail: fmt.Sprintf("%d bytes", len(b))}
	}
	if n != len(b) {
		return nil, &Error{Offset: offsetOf(b), Err: ErrCorrupt,
			Detail: fmt.Sprintf("%d bytes follow the batch", len(b)-n)}
	}
	return Batch(b), nil
}

// frame returns the total size of the batch at the front of b, or 0 if b
// holds only part of it (not an error: the caller decides). Structural
// errors (bad length, bad magic) are returned as *Error.
func frame(b []byte, maxLen int32) (int, error) {
	if len(b) < LogOverhead {
		return 0, nil
	}
	length := int32(binary.BigEndian.Uint32(b[offLength:]))
	// The length is checked before anything is sliced: a negative or huge
	// length must never turn into a slice bound (kgo's negative-length guard).
	if length < 0 {
		return 0, &Error{Offset: offsetOf(b), Err: ErrCorrupt,
			Detail: fmt.Sprintf("negative batch length %d", length)}
	}
	if len(b) <= offMagic {
		// The magic byte has not arrived: nothing more can be judged.
		if length > maxLen {
			return 0, &Error{Offset: offsetOf(b), Err: ErrTooLarge,
				Detail: fmt.Sprintf("batch length %d above %d", length, maxLen)}
		}
		return 0, nil
	}
	{
		switch magic := int8(b[offMagic]); {
		case magic == 0 || magic == 1:
			return 0, &Error{Offset: offsetOf(b), Err: ErrLegacyMagic,
				Detail: fmt.Sprintf("magic %d", magic)}
		case magic != supportedMagic:
			return 0, &Error{Offset: offsetOf(b), Err: ErrUnknownMagic,
				Detail: fmt.Sprintf("magic %d", magic)}
		}
	}
	if length < MinLength {
		return 0, &Error{Offset: offsetOf(b), Err: ErrCorrupt,
			Detail: fmt.Sprintf("batch length %d below the %d-byte header", length, MinLength)}
	}
	if length > maxLen {
		return 0, &Error{Offset: offsetOf(b), Err: ErrTooLarge,
			Detail: fmt.Sprintf("batch length %d above %d", length, maxLen)}
	}
	total := LogOverhead + int(length)
	if len(b) < total {
		return 0, nil
	}
	return total, nil
}

func offsetOf(b []byte) int64 {
	if len(b) < 8 {
		return -1
	}
	return int64(binary.BigEndian.Uint64(b))
}

// Verify checks the CRC32C of the batch. It is the only pass over the
// records that the hot path makes.
func (b Batch) Verify() error {
	if got, want := Checksum(b[crcStart:]), b.CRC(); got != want {
		return &Error{Offset: b.BaseOffset(), Err: ErrCorrupt,
			Detail: fmt.Sprintf("crc32c %08x, header says %08x", got, want)}
	}
	return nil
}

// BaseOffset is the offset of the first record.
func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }

// Length is the length field: the batch size minus LogOverhead.
func (b Batch) Length() int32 { return int32(binary.BigEndian.Uint32(b[offLength:])) }

// Size is the whole batch's size in bytes.
func (b Batch) Size() int { return len(b) }

// PartitionLeaderEpoch is the leader epoch stamped by the broker that appended it.
func (b Batch) PartitionLeaderEpoch() int32 {
	return int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
}

// Magic is the format version; 2 for any Batch.
func (b Batch) Magic() int8 { return int8(b[offMagic]) }

// CRC is the checksum stored in the header.
func (b Batch) CRC() uint32 { return binary.BigEndian.Uint32(b[offCRC:]) }

// Attributes is the raw attributes field.
func (b Batch) Attributes() int16 { return int16(binary.BigEndian.Uint16(b[offAttributes:])) }

// Codec is the compression codec.
func (b Batch) Codec() Codec { return Codec(b.Attributes() & attrCodecMask) }

// LogAppendTime reports whether timestamps are the broker's (timestamp type 1).
func (b Batch) LogAppendTime() bool { return b.Attributes()&attrTimestampType != 0 }

// IsTransactional reports the transactional bit.
func (b Batch) IsTransactional() bool { return b.Attributes()&attrTransactional != 0 }

// IsControl reports the control bit (transaction markers, MIRROR_PID_RESET).
func (b Batch) IsControl() bool { return b.Attributes()&attrControl != 0 }

// HasDeleteHorizon reports whether compaction set the delete horizon bit;
// the base timestamp then holds the horizon.
func (b Batch) HasDeleteHorizon() bool { return b.Attributes()&attrDeleteHorizon != 0 }

// LastOffsetDelta is the last record's offset minus the base offset. After
// compaction it may exceed RecordCount-1.
func (b Batch) LastOffsetDelta() int32 { return int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])) }

// BaseTimestamp is the first timestamp (or the delete horizon).
func (b Batch) BaseTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])) }

// MaxTimestamp is the largest record timestamp.
func (b Batch) MaxTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])) }

// ProducerID is the producer id, -1 when the batch has none.
func (b Batch) ProducerID() int64 { return int64(binary.BigEndian.Uint64(b[offProducerID:])) }

// ProducerEpoch is the producer epoch, -1 when the batch has none.
func (b Batch) ProducerEpoch() int16 { return int16(binary.BigEndian.Uint16(b[offProducerEpoch:])) }

// BaseSequence is the idempotent sequence of the first record, -1 when none.
func (b Batch) BaseSequence() int32 { return int32(binary.BigEndian.Uint32(b[offBaseSequence:])) }

// RecordCount is the number of records the header announces.
func (b Batch) RecordCount() int32 { return int32(binary.BigEndian.Uint32(b[offRecordCount:])) }

// HasProducerID reports whether the batch belongs to an idempotent or
// transactional producer.
func (b Batch) HasProducerID() bool { return b.ProducerID() > noProducerID }

// LastOffset is the offset of the last record (or of the last compacted-away
// record slot).
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset is the offset right after the batch.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// Records is the (possibly compressed) records section, aliasing b.
func (b Batch) Records() []byte { return b[HeaderSize:] }
