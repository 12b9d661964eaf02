package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/kmirror/kmirror/batch"
)

// ErrUnknownCodec is returned for a codec number Kafka does not define.
var ErrUnknownCodec = errors.New("bench: unknown compression codec")

// Codecs compresses and decompresses the records section of a batch with
// the settings franz-go's kgo uses by default (some differences from the
// Java producer are noted):
//
//	gzip    deflate level 6 (gzip.DefaultCompression), one gzip member.
//	        kgo uses compress/gzip; klauspost's gzip is a drop-in that is
//	        generally faster, which can only favour the recompress baseline.
//	snappy  one raw snappy block (s2.EncodeSnappy), as kgo writes. The Java
//	        producer writes xerial framing instead: the same block format,
//	        cut into 32 KiB blocks behind a small header.
//	lz4     LZ4 frame (pierrec/lz4/v4), Fast level, library defaults (4 MiB
//	        blocks, content checksum). Java uses 64 KiB blocks.
//	zstd    level 3 (zstd.SpeedDefault), 64 KiB window, single-threaded,
//	        DecodeAll with a single-threaded low-memory decoder.
//
// Encoders, decoders and scratch buffers live as long as the Codecs, so a
// benchmark measures compression work rather than setup. The zero value is
// not usable: call NewCodecs. A Codecs is not safe for concurrent use.
type Codecs struct {
	gzw *gzip.Writer
	gzr gzip.Reader
	lzw *lz4.Writer
	lzr *lz4.Reader
	zw  *zstd.Encoder
	zr  *zstd.Decoder

	// sink and src are the io.Writer and io.Reader the streaming codecs
	// are Reset onto; keeping them here avoids an allocation per call.
	sink appendWriter
	src  bytes.Reader
}

// NewCodecs returns ready-to-use codecs. Call Close when done to stop the
// zstd goroutines.
func NewCodecs() (*Codecs, error) {
	c := new(Codecs)
	var err error
	if c.gzw, err = gzip.NewWriterLevel(nil, gzip.DefaultCompression); err != nil {
		return nil, fmt.Errorf("creating gzip writer: %w", err)
	}
	c.lzw = lz4.NewWriter(nil)
	if err := c.lzw.Apply(lz4.ConcurrencyOption(1), lz4.CompressionLevelOption(lz4.Fast)); err != nil {
		return nil, fmt.Errorf("configuring lz4 writer: %w", err)
	}
	c.lzr = lz4.NewReader(nil)
	if err := c.lzr.Apply(lz4.ConcurrencyOption(1)); err != nil {
		return nil, fmt.Errorf("configuring lz4 reader: %w", err)
	}
	c.zw, err = zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithWindowSize(64<<10),
		zstd.WithEncoderConcurrency(1),
		zstd.WithZeroFrames(true))
	if err != nil {
		return nil, fmt.Errorf("creating zstd encoder: %w", err)
	}
	c.zr, err = zstd.NewReader(nil,
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderConcurrency(1))
	if err != nil {
		c.zw.Close()
		return nil, fmt.Errorf("creating zstd decoder: %w", err)
	}
	return c, nil
}

// Close releases the zstd encoder and decoder.
func (c *Codecs) Close() {
	c.zw.Close()
	c.zr.Close()
}

// Compress appends src compressed with codec to dst. CodecNone appends src
// as is.
func (c *Codecs) Compress(dst, src []byte, codec batch.Codec) ([]byte, error) {
	switch codec {
	case batch.CodecNone:
		return append(dst, src...), nil
	case batch.CodecGzip:
		c.sink.b = dst
		c.gzw.Reset(&c.sink)
		return c.finishStream(c.gzw, src)
	case batch.CodecSnappy:
		// EncodeSnappy writes at the start of the slice it is given and
		// allocates unless that slice can hold the worst case, so hand it
		// the free tail of dst, grown to MaxEncodedLen.
		n := s2.MaxEncodedLen(len(src))
		if n < 0 {
			return dst, fmt.Errorf("snappy: %d bytes: %w", len(src), s2.ErrTooLarge)
		}
		dst = slices.Grow(dst, n)
		out := s2.EncodeSnappy(dst[len(dst):len(dst)+n], src)
		return dst[:len(dst)+len(out)], nil
	case batch.CodecLz4:
		c.sink.b = dst
		c.lzw.Reset(&c.sink)
		return c.finishStream(c.lzw, src)
	case batch.CodecZstd:
		return c.zw.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: %d", ErrUnknownCodec, codec)
}

// finishStream writes src through w, whose sink is c.sink, closes the
// stream and returns what the sink collected.
func (c *Codecs) finishStream(w io.WriteCloser, src []byte) ([]byte, error) {
	_, err := w.Write(src)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	out := c.sink.b
	c.sink.b = nil // the caller owns the bytes now
	return out, err
}

// Decompress appends the decompression of src to dst. CodecNone appends src
// as is.
func (c *Codecs) Decompress(dst, src []byte, codec batch.Codec) ([]byte, error) {
	switch codec {
	case batch.CodecNone:
		return append(dst, src...), nil
	case batch.CodecGzip:
		c.src.Reset(src)
		if err := c.gzr.Reset(&c.src); err != nil {
			return dst, fmt.Errorf("gzip: %w", err)
		}
		return readAppend(dst, &c.gzr)
	case batch.CodecSnappy:
		n, err := s2.DecodedLen(src)
		if err != nil {
			return dst, fmt.Errorf("snappy: %w", err)
		}
		dst = slices.Grow(dst, n)
		out, err := s2.Decode(dst[len(dst):len(dst)+n], src)
		if err != nil {
			return dst, fmt.Errorf("snappy: %w", err)
		}
		return dst[:len(dst)+len(out)], nil
	case batch.CodecLz4:
		c.src.Reset(src)
		c.lzr.Reset(&c.src)
		return readAppend(dst, c.lzr)
	case batch.CodecZstd:
		out, err := c.zr.DecodeAll(src, dst)
		if err != nil {
			return dst, fmt.Errorf("zstd: %w", err)
		}
		return out, nil
	}
	return dst, fmt.Errorf("%w: %d", ErrUnknownCodec, codec)
}

// readAppend reads r to its end, appending to dst. Unlike io.ReadAll it
// reuses dst's capacity, so a scratch buffer kept across calls stops
// growing after the first large batch.
func readAppend(dst []byte, r io.Reader) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, max(cap(dst), 4<<10))
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// appendWriter is an io.Writer that appends to a byte slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
