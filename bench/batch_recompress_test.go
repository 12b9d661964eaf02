package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/kmirror/kmirror/batch"
)

// TestRecompressRoundTrip checks that the baseline does the whole job: its
// output is a valid batch holding the same records under the new producer
// id. Because Codecs compresses deterministically, the output must also be
// byte for byte the input patched in place by SetProducerID, which
// cross-checks the baseline and the CRC patch against each other.
func TestRecompressRoundTrip(t *testing.T) {
	t.Parallel()
	pid := batch.MirrorProducerID(GenProducerID)
	for _, codec := range benchCodecs {
		for _, size := range benchSizes {
			t.Run(fmt.Sprintf("codec=%v/size=%s", codec, size.name), func(t *testing.T) {
				t.Parallel()
				src := testBatch(t, codec, size.n)
				r, err := NewRecompressor()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()

				out, err := r.Recompress(nil, batch.Batch(src), pid)
				if err != nil {
					t.Fatalf("Recompress: %v", err)
				}
				b, err := batch.Parse(out)
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if err := b.Verify(); err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if b.ProducerID() != pid {
					t.Fatalf("producer id %d, want %d", b.ProducerID(), pid)
				}
				want := headerOf(batch.Batch(src))
				want.producerID = pid
				if got := headerOf(b); got != want {
					t.Fatalf("header\n got %+v\nwant %+v", got, want)
				}
				recs, err := decodeStd(decompressForTest(t, b))
				if err != nil {
					t.Fatal(err)
				}
				checkRecords(t, recs, GenRecords(int(b.RecordCount())))

				patched := bytes.Clone(src)
				batch.Batch(patched).SetProducerID(pid)
				if !bytes.Equal(out, patched) {
					t.Errorf("recompressed batch (%d bytes) differs from the patched input (%d bytes)",
						len(out), len(patched))
				}

				// Reuse: a second call, appending after a prefix, and the
				// way back to the original producer id.
				prefix := []byte("prefix")
				again, err := r.Recompress(bytes.Clone(prefix), batch.Batch(src), pid)
				if err != nil || !bytes.Equal(again[:len(prefix)], prefix) || !bytes.Equal(again[len(prefix):], out) {
					t.Errorf("second Recompress differs (err %v)", err)
				}
				back, err := r.Recompress(nil, b, GenProducerID)
				if err != nil || !bytes.Equal(back, src) {
					t.Errorf("recompressing back to pid %d does not give the input (err %v)", GenProducerID, err)
				}
			})
		}
	}
}

func TestRecompressCorrupt(t *testing.T) {
	t.Parallel()
	src := testBatch(t, batch.CodecNone, 16<<10)
	count := batch.Batch(src).RecordCount()
	tests := []struct {
		name   string
		modify func(b []byte)
	}{
		{"count=+1", func(b []byte) { binary.BigEndian.PutUint32(b[hdrRecordCount:], uint32(count+1)) }},
		{"count=-1", func(b []byte) { binary.BigEndian.PutUint32(b[hdrRecordCount:], uint32(count-1)) }},
		{"count=huge", func(b []byte) { binary.BigEndian.PutUint32(b[hdrRecordCount:], 1<<30) }},
		{"count=negative", func(b []byte) { binary.BigEndian.PutUint32(b[hdrRecordCount:], 1<<31) }},
		{"first-length=huge", func(b []byte) { copy(b[batch.HeaderSize:], []byte{0xfe, 0xff, 0x7f}) }},
		{"first-length=negative", func(b []byte) { b[batch.HeaderSize] = 0x01 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := bytes.Clone(src)
			tt.modify(b)
			// Keep the CRC right: the Recompressor must catch the damage
			// by decoding, not rely on Verify.
			binary.BigEndian.PutUint32(b[hdrCRC:], batch.Checksum(b[hdrCRCStart:]))
			r, err := NewRecompressor()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := r.Recompress(nil, batch.Batch(b), 1); !errors.Is(err, batch.ErrCorrupt) {
				t.Fatalf("got %v, want batch.ErrCorrupt", err)
			}
		})
	}
}
