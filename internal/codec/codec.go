// Package codec compresses and decompresses the records section of Kafka
// RecordBatches with the codecs of the attributes field (batch.Codec), in
// the framings Kafka clients read and write. It is for paths that must look
// inside batches (log compaction, tests, benchmarks); the mirror and fetch
// hot paths never decompress (DESIGN.md decision 2).
//
// Formats. These are part of the wire format:
//
//	gzip    RFC 1952. Concatenated members read as one stream, as Java's
//	        GZIPInputStream does. Written at level 6, the JDK Deflater
//	        default that compression.gzip.level -1 selects.
//	snappy  Read: a raw snappy block (kgo, librdkafka, sarama) or the
//	        xerial framing (the Java client). Written: xerial framing, as
//	        the Java producer's SnappyOutputStream writes it, because every
//	        client reads that framing and the Java consumer is the strictest
//	        reader:
//
//	            0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0x00     magic (8 bytes)
//	            version u32 (1) | compatible u32 (1)  big endian
//	            then per input block of at most 32 KiB:
//	            length u32 (big endian) | raw snappy block
//
//	lz4     The LZ4 frame format (never raw blocks). Written as Java's
//	        KafkaLZ4BlockOutputStream does: version 1, independent 64 KiB
//	        blocks, no block checksum, no content checksum, no content size.
//	zstd    zstd frames. Written at level 3 (compression.zstd.level default).
//
// Decompression is bounded: every call names maxOut, the most bytes it may
// produce, and fails with ErrTooLarge as soon as the output would exceed it,
// so a small hostile input (a decompression bomb) costs at most maxOut of
// memory, plus one codec block. zstd is the exception in degree, not in
// kind: its decoder limit also bounds the frame window, so it decodes up to
// max(maxOut, 8 MiB) before the final check (zstdMinLimit).
//
// Encoders and decoders are pooled (sync.Pool): callers on any goroutine
// may call Compress and Decompress concurrently.
package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/kmirror/kmirror/batch"
)

// Errors. Decompress wraps the codec library's error in ErrCorrupt.
var (
	ErrUnknownCodec = errors.New("codec: unknown compression codec")
	ErrCorrupt      = errors.New("codec: malformed compressed data")
	ErrTooLarge     = errors.New("codec: decompressed data above the size limit")
)

// DefaultMaxOut is a decompression limit suited to record batches: 64 times
// Kafka's default message.max.bytes (1 MiB), well beyond the compression
// ratio of real record data.
const DefaultMaxOut = 64 << 20

const (
	xerialHeaderLen = 16
	xerialBlockSize = 32 << 10 // snappy-java's default block size
	xerialVersion   = 1
	xerialCompat    = 1
	gzipLevel       = 6
	// lz4 frame descriptor bytes Java writes (and our writer must match):
	// FLG = version 01, block independence; BD = 64 KiB blocks.
	lz4FLG = 0x60
	lz4BD  = 0x40
	// readChunk is the first growth step when reading a stream.
	readChunk = 4 << 10
	// maxZeroReads stops a reader that returns no data and no error.
	maxZeroReads = 100
	// zstdMinLimit is the smallest decoder limit used for zstd. The
	// library applies its output limit to the frame window size too, and
	// streaming encoders (Java's zstd-jni at level 3: 2 MiB; klauspost's
	// default: 8 MiB) announce windows larger than small batches.
	zstdMinLimit = 8 << 20
)

var xerialMagic = [8]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// Decompress appends the decompression of src, compressed with c, to dst
// and returns the extended slice. It never appends more than maxOut bytes:
// larger output fails with ErrTooLarge. Malformed input fails with
// ErrCorrupt. On error the returned slice holds dst's original content
// (possibly in a new array). An empty src decompresses to nothing for every
// codec: a zero-length records section carries no records either way.
// CodecNone appends src itself, within the same limit.
func Decompress(c batch.Codec, src, dst []byte, maxOut int) ([]byte, error) {
	start := len(dst)
	maxOut = max(maxOut, 0)
	if len(src) == 0 && c >= batch.CodecNone && c <= batch.CodecZstd {
		return dst, nil
	}
	var err error
	switch c {
	case batch.CodecNone:
		if len(src) > maxOut {
			return dst, tooLarge(maxOut)
		}
		return append(dst, src...), nil
	case batch.CodecGzip:
		dst, err = gunzip(src, dst, maxOut)
	case batch.CodecSnappy:
		dst, err = unsnappy(src, dst, maxOut)
	case batch.CodecLz4:
		dst, err = unlz4(src, dst, maxOut)
	case batch.CodecZstd:
		dst, err = unzstd(src, dst, maxOut)
	default:
		return dst, fmt.Errorf("%w: %d", ErrUnknownCodec, int8(c))
	}
	if err == nil && len(dst)-start > maxOut {
		err = tooLarge(maxOut) // belt and braces: every path checks already
	}
	if err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// Compress appends src compressed with c to dst, in the framing described
// in the package doc, and returns the extended slice. CodecNone appends src.
func Compress(c batch.Codec, src, dst []byte) ([]byte, error) {
	switch c {
	case batch.CodecNone:
		return append(dst, src...), nil
	case batch.CodecGzip:
		w := gzipWriters.Get().(*gzipWriter)
		defer gzipWriters.Put(w)
		w.sink.b = dst
		w.zw.Reset(&w.sink)
		return w.sink.finish(w.zw, src)
	case batch.CodecSnappy:
		return appendXerial(dst, src), nil
	case batch.CodecLz4:
		w := lz4Writers.Get().(*lz4Writer)
		defer lz4Writers.Put(w)
		w.sink.b = dst
		w.zw.Reset(&w.sink)
		return w.sink.finish(w.zw, src)
	case batch.CodecZstd:
		enc, err := getZstdEncoder()
		if err != nil {
			return dst, err
		}
		defer zstdEncoders.Put(enc)
		return enc.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: %d", ErrUnknownCodec, int8(c))
}

func tooLarge(maxOut int) error {
	return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, maxOut)
}

func corrupt(codec string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrCorrupt, codec, err)
}

// readLimited reads r to its end, appending to dst, and fails as soon as
// more than maxOut bytes arrive. It reuses dst's capacity and never grows
// dst beyond maxOut+1 new bytes, so a bomb cannot make it allocate more.
func readLimited(dst []byte, r io.Reader, maxOut int, codec string) ([]byte, error) {
	start := len(dst)
	zero := 0
	for {
		got := len(dst) - start
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, min(max(got, readChunk), maxOut+1-got))
		}
		limit := min(cap(dst), start+maxOut+1)
		n, err := r.Read(dst[len(dst):limit])
		dst = dst[:len(dst)+n]
		if len(dst)-start > maxOut {
			return dst[:start], tooLarge(maxOut)
		}
		switch {
		case errors.Is(err, io.EOF):
			return dst, nil
		case err != nil:
			return dst[:start], corrupt(codec, err)
		case n == 0:
			if zero++; zero > maxZeroReads {
				return dst[:start], corrupt(codec, io.ErrNoProgress)
			}
		default:
			zero = 0
		}
	}
}

// appendWriter is an io.Writer appending to b; the streaming encoders
// write into it so that Compress appends to the caller's dst.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// finish writes src through the stream w (whose sink is a), closes the
// stream and hands the collected bytes to the caller.
func (a *appendWriter) finish(w io.WriteCloser, src []byte) ([]byte, error) {
	_, err := w.Write(src)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	out := a.b
	a.b = nil // the pooled writer must not keep the caller's buffer
	return out, err
}

// gzip

type gzipReader struct {
	zr  gzip.Reader
	src bytes.Reader
}

type gzipWriter struct {
	zw   *gzip.Writer
	sink appendWriter
}

var (
	gzipReaders = sync.Pool{New: func() any { return new(gzipReader) }}
	gzipWriters = sync.Pool{New: func() any {
		zw, err := gzip.NewWriterLevel(nil, gzipLevel)
		if err != nil {
			panic(fmt.Sprintf("BUG: gzip level %d refused: %v", gzipLevel, err))
		}
		return &gzipWriter{zw: zw}
	}}
)

func gunzip(src, dst []byte, maxOut int) ([]byte, error) {
	r := gzipReaders.Get().(*gzipReader)
	defer func() {
		r.src.Reset(nil) // do not pin the caller's bytes in the pool
		gzipReaders.Put(r)
	}()
	r.src.Reset(src)
	if err := r.zr.Reset(&r.src); err != nil {
		return dst, corrupt("gzip", err)
	}
	r.zr.Multistream(true)
	return readLimited(dst, &r.zr, maxOut, "gzip")
}

// snappy

func unsnappy(src, dst []byte, maxOut int) ([]byte, error) {
	if len(src) < len(xerialMagic) || [8]byte(src[:8]) != xerialMagic {
		return appendSnappyBlock(dst, src, maxOut)
	}
	if len(src) < xerialHeaderLen {
		return dst, corrupt("snappy", errors.New("truncated xerial header"))
	}
	// The version fields are not checked: every writer in use writes 1/1
	// and no later framing exists.
	start := len(dst)
	for rest := src[xerialHeaderLen:]; len(rest) > 0; {
		if len(rest) < 4 {
			return dst[:start], corrupt("snappy", errors.New("truncated xerial block length"))
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return dst[:start], corrupt("snappy", fmt.Errorf("xerial block of %d bytes with %d left", n, len(rest)))
		}
		var err error
		if dst, err = appendSnappyBlock(dst, rest[:n], maxOut-(len(dst)-start)); err != nil {
			if errors.Is(err, ErrTooLarge) {
				err = tooLarge(maxOut)
			}
			return dst[:start], err
		}
		rest = rest[n:]
	}
	return dst, nil
}

// appendSnappyBlock decodes one raw snappy block after dst, refusing a
// block that announces more than room bytes before decoding it.
func appendSnappyBlock(dst, block []byte, room int) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return dst, corrupt("snappy", err)
	}
	if n > room {
		return dst, tooLarge(room)
	}
	dst = slices.Grow(dst, n)
	out, err := s2.Decode(dst[len(dst):len(dst)+n], block)
	if err != nil {
		return dst, corrupt("snappy", err)
	}
	return dst[:len(dst)+len(out)], nil
}

// appendXerial appends src in xerial framing.
func appendXerial(dst, src []byte) []byte {
	dst = append(dst, xerialMagic[:]...)
	dst = binary.BigEndian.AppendUint32(dst, xerialVersion)
	dst = binary.BigEndian.AppendUint32(dst, xerialCompat)
	for len(src) > 0 {
		chunk := src[:min(len(src), xerialBlockSize)]
		src = src[len(chunk):]
		lenAt := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		n := s2.MaxEncodedLen(len(chunk)) // chunk <= 32 KiB: never -1
		dst = slices.Grow(dst, n)
		// EncodeSnappy writes into the spare capacity when it holds n
		// bytes; append then copies the block onto itself.
		dst = append(dst, s2.EncodeSnappy(dst[len(dst):len(dst)+n], chunk)...)
		binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	}
	return dst
}

// lz4

type lz4Reader struct {
	zr  *lz4.Reader
	src bytes.Reader
}

type lz4Writer struct {
	zw   *lz4.Writer
	sink appendWriter
}

var (
	lz4Readers = sync.Pool{New: func() any {
		zr := lz4.NewReader(nil)
		if err := zr.Apply(lz4.ConcurrencyOption(1)); err != nil {
			panic(fmt.Sprintf("BUG: lz4 reader options refused: %v", err))
		}
		return &lz4Reader{zr: zr}
	}}
	lz4Writers = sync.Pool{New: func() any {
		zw := lz4.NewWriter(nil)
		err := zw.Apply(lz4.ConcurrencyOption(1), lz4.BlockSizeOption(lz4.Block64Kb),
			lz4.ChecksumOption(false), lz4.BlockChecksumOption(false),
			lz4.CompressionLevelOption(lz4.Fast))
		if err != nil {
			panic(fmt.Sprintf("BUG: lz4 writer options refused: %v", err))
		}
		return &lz4Writer{zw: zw}
	}}
)

func unlz4(src, dst []byte, maxOut int) ([]byte, error) {
	r := lz4Readers.Get().(*lz4Reader)
	defer func() {
		r.src.Reset(nil)
		r.zr.Reset(nil)
		lz4Readers.Put(r)
	}()
	r.src.Reset(src)
	r.zr.Reset(&r.src)
	return readLimited(dst, r.zr, maxOut, "lz4")
}

// zstd

// zstdDecoder remembers the size limit its decoder was configured with, so
// that a pooled decoder is reconfigured only when a caller's limit differs.
type zstdDecoder struct {
	d      *zstd.Decoder
	maxOut int
}

var (
	zstdDecoders sync.Pool // *zstdDecoder
	zstdEncoders sync.Pool // *zstd.Encoder
)

// unzstd decodes with DecodeAll, which checks the decoder's maximum memory
// against each frame's window and announced content size before
// allocating, and against the output after every block; maxOut itself is
// checked at the end. Decoders run single-threaded and start no
// goroutines, so the pool may drop them without Close.
func unzstd(src, dst []byte, maxOut int) ([]byte, error) {
	limit := max(maxOut, zstdMinLimit)
	zd, _ := zstdDecoders.Get().(*zstdDecoder)
	if zd == nil {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(limit)))
		if err != nil {
			return dst, fmt.Errorf("creating zstd decoder: %w", err)
		}
		zd = &zstdDecoder{d: d, maxOut: limit}
	} else if zd.maxOut != limit {
		if err := zd.d.ResetWithOptions(nil, zstd.WithDecoderMaxMemory(uint64(limit))); err != nil {
			return dst, fmt.Errorf("configuring zstd decoder: %w", err)
		}
		zd.maxOut = limit
	}
	defer zstdDecoders.Put(zd)
	start := len(dst)
	out, err := zd.d.DecodeAll(src, dst)
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded):
		return dst[:start], tooLarge(maxOut)
	case err != nil:
		return dst[:start], corrupt("zstd", err)
	case len(out)-start > maxOut:
		return dst[:start], tooLarge(maxOut)
	}
	return out, nil
}

func getZstdEncoder() (*zstd.Encoder, error) {
	if enc, ok := zstdEncoders.Get().(*zstd.Encoder); ok {
		return enc, nil
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
	if err != nil {
		return nil, fmt.Errorf("creating zstd encoder: %w", err)
	}
	return enc, nil
}
