package bench

import (
	"fmt"
	"hash/crc32"
	"testing"

	kcrc32 "github.com/klauspost/crc32"

	"github.com/kmirror/kmirror/batch"
)

// validatePatch is kmirror's per-batch work on the mirror path: frame the
// batch, check its CRC32C, and rewrite the producer id in place.
//
// RewriteProducerID is idempotent (a rewritten id stays as it is), so a
// loop over the same bytes would patch only once. When the id is already
// rewritten, this maps it back with SetProducerID instead: either way every
// call patches the same 8 bytes and recomputes the CRC once, which is what
// the benchmark must measure.
//
// REQUIRES: buf holds a batch whose producer id is below
// batch.MirrorPIDOffset or was rewritten from one.
func validatePatch(buf []byte) error {
	b, err := batch.Parse(buf)
	if err != nil {
		return err
	}
	if err := b.Verify(); err != nil {
		return err
	}
	if !b.RewriteProducerID() {
		b.SetProducerID(b.ProducerID() - batch.MirrorPIDOffset)
	}
	return nil
}

// validatePatchCodec is the codec of the batches BenchmarkValidatePatch and
// BenchmarkCRC32C run on. Neither looks inside the records, so the codec
// changes nothing but the exact batch size.
const validatePatchCodec = batch.CodecNone

// BenchmarkValidatePatch measures validatePatch on one batch per size. The
// patch alternates between the same two ids, an easy case for the branch
// predictor; BenchmarkSetProducerID shows what the patch costs when its
// inputs vary.
func BenchmarkValidatePatch(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("size="+size.name, func(b *testing.B) {
			buf := testBatch(b, validatePatchCodec, size.n)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if err := validatePatch(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSetProducerID isolates the patch: the CRC32C update from the old
// checksum, without Parse and Verify. Its cost does not grow with the bytes
// (so there is no SetBytes: MB/s would mean nothing) but it does depend on
// the data: the update
// multiplies polynomials bit by bit with data-dependent branches, so how
// well the branch predictor learns the inputs matters. Three patterns:
//
//	toggle   one batch, the id flipped between two values, as
//	         BenchmarkValidatePatch does: the same two computations over and
//	         over, which the predictor learns. A lower bound.
//	lengths  64 batch lengths in turn (views of one buffer cut short; the
//	         patch reads only len(b)), the id rewritten and restored as
//	         RewriteProducerID does. Its delta is always 1<<62, so what
//	         varies is the length, as in real traffic.
//	random   one batch, a fresh pseudo-random id each time: every input
//	         new. An upper bound (SetProducerID with arbitrary ids).
func BenchmarkSetProducerID(b *testing.B) {
	patterns := []struct {
		name string
		run  func(b *testing.B, buf []byte)
	}{
		{"toggle", func(b *testing.B, buf []byte) {
			bb := batch.Batch(buf)
			pids := [2]int64{batch.MirrorProducerID(GenProducerID), GenProducerID}
			i := 0
			for b.Loop() {
				bb.SetProducerID(pids[i&1])
				i++
			}
		}},
		{"lengths", func(b *testing.B, buf []byte) {
			var views [64]batch.Batch
			for j := range views {
				views[j] = batch.Batch(buf[:len(buf)-5*j])
			}
			i := 0
			for b.Loop() {
				v := views[i%len(views)]
				if !v.RewriteProducerID() {
					v.SetProducerID(v.ProducerID() - batch.MirrorPIDOffset)
				}
				i++
			}
		}},
		{"random", func(b *testing.B, buf []byte) {
			bb := batch.Batch(buf)
			x := uint64(GenProducerID)
			for b.Loop() {
				x = x*6364136223846793005 + 1442695040888963407 // LCG step
				bb.SetProducerID(int64(x >> 2))
			}
		}},
	}
	for _, p := range patterns {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("pattern=%s/size=%s", p.name, size.name), func(b *testing.B) {
				buf := testBatch(b, validatePatchCodec, size.n)
				b.ReportAllocs()
				p.run(b, buf)
			})
		}
	}
}

// TestValidatePatchZeroAllocs enforces the hot-path rule (STYLE.md 17):
// framing, verifying and patching a batch allocate nothing. It cannot be
// parallel: testing.AllocsPerRun panics while parallel tests run.
func TestValidatePatchZeroAllocs(t *testing.T) {
	for _, codec := range benchCodecs {
		for _, size := range benchSizes {
			buf := testBatch(t, codec, size.n)
			var err error
			allocs := testing.AllocsPerRun(100, func() {
				if e := validatePatch(buf); e != nil {
					err = e
				}
			})
			if err != nil {
				t.Fatalf("codec=%v/size=%s: %v", codec, size.name, err)
			}
			if allocs != 0 {
				t.Errorf("codec=%v/size=%s: Parse+Verify+patch made %v allocations, want 0",
					codec, size.name, allocs)
			}
		}
	}
}

// BenchmarkCRC32C is the floor under Verify: a bare CRC32C over the bytes
// Verify covers (from the attributes to the end), on the same batches as
// BenchmarkValidatePatch and with the same SetBytes, so the two ns/op
// compare directly. batch/crc.go uses the klauspost implementation.
func BenchmarkCRC32C(b *testing.B) {
	impls := []struct {
		name     string
		checksum func([]byte) uint32
	}{
		{"klauspost", func(p []byte) uint32 { return kcrc32.Checksum(p, klauspostTable) }},
		{"stdlib", func(p []byte) uint32 { return crc32.Checksum(p, stdlibTable) }},
	}
	for _, impl := range impls {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("impl=%s/size=%s", impl.name, size.name), func(b *testing.B) {
				buf := testBatch(b, validatePatchCodec, size.n)
				want := batch.Batch(buf).CRC()
				p := buf[hdrCRCStart:]
				b.SetBytes(int64(len(buf)))
				b.ReportAllocs()
				for b.Loop() {
					if impl.checksum(p) != want {
						b.Fatal("checksum mismatch")
					}
				}
			})
		}
	}
}

var (
	klauspostTable = kcrc32.MakeTable(kcrc32.Castagnoli)
	stdlibTable    = crc32.MakeTable(crc32.Castagnoli)
)

// BenchmarkRecompress is the baseline: the same entry checks as
// BenchmarkValidatePatch (Parse, Verify; a consumer checks CRCs too), then
// decompress, decode every record, re-encode, recompress with the batch's
// own codec, and write a new header and CRC with the producer id rewritten.
// One Recompressor and one output buffer serve all iterations.
func BenchmarkRecompress(b *testing.B) {
	pid := batch.MirrorProducerID(GenProducerID)
	for _, codec := range benchCodecs {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("codec=%v/size=%s", codec, size.name), func(b *testing.B) {
				src := testBatch(b, codec, size.n)
				r, err := NewRecompressor()
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				// Warm up so buffers, record slots and codec state are sized.
				out, err := r.Recompress(nil, batch.Batch(src), pid)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				for b.Loop() {
					bb, err := batch.Parse(src)
					if err != nil {
						b.Fatal(err)
					}
					if err := bb.Verify(); err != nil {
						b.Fatal(err)
					}
					if out, err = r.Recompress(out[:0], bb, pid); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
