package codec

import (
	"bytes"
	"errors"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/kmirror/kmirror/batch"
)

// FuzzDecompress: any input, for any codec number and limit, never panics,
// never appends more than maxOut bytes, keeps the caller's prefix, and fails
// only with the package's errors. Output that decompresses round-trips
// through Compress. Each half of the input is fed too (a torn section).
func FuzzDecompress(f *testing.F) {
	text := []byte("the quick brown fox jumps over the lazy dog; ")
	text = bytes.Repeat(text, 50)
	for _, c := range allCodecs {
		comp, err := Compress(c, text, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(c), comp, uint32(len(text)))
		f.Add(uint8(c), comp, uint32(len(text)/2))
	}
	f.Add(uint8(batch.CodecSnappy), s2.EncodeSnappy(nil, text), uint32(1<<16))
	f.Add(uint8(batch.CodecSnappy), []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9}, uint32(100))
	f.Add(uint8(batch.CodecGzip), []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, uint32(100))
	f.Add(uint8(7), []byte{1, 2, 3}, uint32(10))
	f.Fuzz(func(t *testing.T, codec uint8, in []byte, limit uint32) {
		c := batch.Codec(codec % 8)
		maxOut := int(limit % (4 << 20)) // keep the fuzzer's memory bounded
		for _, src := range [][]byte{in, in[:len(in)/2], in[len(in)/2:]} {
			out, err := Decompress(c, src, []byte("prefix"), maxOut)
			if !bytes.HasPrefix(out, []byte("prefix")) {
				t.Fatalf("prefix lost: %q", out[:min(len(out), 6)])
			}
			if err != nil {
				if len(out) != len("prefix") {
					t.Fatalf("error %v with %d bytes appended", err, len(out)-6)
				}
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnknownCodec) {
					t.Fatalf("unexpected error class: %v", err)
				}
				continue
			}
			plain := out[len("prefix"):]
			if len(plain) > maxOut {
				t.Fatalf("%d bytes out, limit %d", len(plain), maxOut)
			}
			comp, err := Compress(c, plain, nil)
			if err != nil {
				t.Fatalf("compress after a successful decompress: %v", err)
			}
			back, err := Decompress(c, comp, nil, len(plain))
			if err != nil || !bytes.Equal(back, plain) {
				t.Fatalf("round trip of %d bytes: %v", len(plain), err)
			}
		}
	})
}
