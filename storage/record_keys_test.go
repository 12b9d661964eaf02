package storage

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/codec"
)

// keysBatch is a batch of one record per key, compressed with c; a nil
// key is a null key (length -1), an empty one a present key of 0 bytes.
func keysBatch(t *testing.T, c batch.Codec, keys [][]byte) batch.Batch {
	t.Helper()
	var recs []byte
	for i, k := range keys {
		body := []byte{0}
		body = binary.AppendVarint(body, 0)
		body = binary.AppendVarint(body, int64(i))
		if k == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(k)))
			body = append(body, k...)
		}
		body = binary.AppendVarint(body, 1)
		body = append(body, 'v')
		body = binary.AppendVarint(body, 0)
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	raw := dataBatch(0, len(keys), 1, 0, -1, -1, 1)[:batch.HeaderSize]
	var err error
	if raw, err = codec.Compress(c, recs, raw); err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(raw[hdrLength:], uint32(len(raw)-batch.LogOverhead))
	binary.BigEndian.PutUint16(raw[hdrAttributes:], uint16(c))
	binary.BigEndian.PutUint32(raw[hdrCRC:], batch.Checksum(raw[hdrCRCStart:]))
	b, err := batch.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRecordKeysKeyless(t *testing.T) {
	t.Parallel()
	keys := [][]byte{[]byte("a"), nil, {}, nil, []byte("bb")}
	var rk RecordKeys // reused across codecs, as a caller would
	for _, c := range []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLz4, batch.CodecZstd} {
		t.Run(c.String(), func(t *testing.T) {
			got, err := rk.Keyless(keysBatch(t, c, keys), nil)
			// An empty key is a key (Kafka's Record.hasKey: not null).
			if err != nil || !slices.Equal(got, []int32{1, 3}) {
				t.Fatalf("Keyless = %v, %v; want [1 3]", got, err)
			}
		})
	}
	t.Run("corrupt", func(t *testing.T) {
		b := keysBatch(t, batch.CodecNone, keys)
		binary.BigEndian.PutUint32(b[hdrRecordCount:], 6) // one record more than held
		if _, err := rk.Keyless(b, nil); !batch.IsCorruption(err) {
			t.Fatalf("a count the records do not hold: %v, want a corruption error", err)
		}
		z := keysBatch(t, batch.CodecZstd, keys)
		z[len(z)-1] ^= 0xff
		if _, err := rk.Keyless(z, nil); !batch.IsCorruption(err) {
			t.Fatalf("a damaged zstd frame: %v, want a corruption error", err)
		}
	})
}
