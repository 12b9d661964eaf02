package storage

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kmirror/kmirror/batch"
)

// Benchmarks of the append and read paths against plain file I/O of the
// same bytes on the same file system, the recovery benchmark, and the
// zero-allocation proofs of STYLE rule 17.
//
// Every batch is exactly benchBatchSize bytes (uncompressed, idempotent
// producer), so that each chunk size holds whole batches and a Read of
// maxBytes=chunk returns exactly chunk bytes: the log and the plain file
// move the same number of bytes per op.

const (
	benchBatchSize = 4 << 10  // one batch; Kafka's default batch.size is 16 KiB
	benchRingBytes = 8 << 20  // pre-built chunks per restamp round (append)
	benchReadLog   = 64 << 20 // size of the log the read benchmarks read from
	benchPID       = 4242
	benchTsBase    = 1_700_000_000_000
)

var benchChunkSizes = []struct {
	name  string
	bytes int
}{
	{"16KiB", 16 << 10},
	{"256KiB", 256 << 10},
	{"1MiB", 1 << 20},
}

// exactBatch returns a batch of exactly size bytes with as many records of
// a few hundred bytes as fit, and its record count.
func exactBatch(size int) ([]byte, int) {
	for n := max(1, size/512); n >= 1; n-- {
		for v := (size - batch.HeaderSize) / n; v >= 0; v-- {
			b := dataBatch(0, n, v, 0, benchPID, 0, benchTsBase)
			if len(b) == size {
				return b, n
			}
			if len(b) < size {
				break
			}
		}
	}
	panic(fmt.Sprintf("BUG: no batch of exactly %d bytes", size))
}

var benchBatch = sync.OnceValues(func() ([]byte, int) { return exactBatch(benchBatchSize) })

// benchChunk returns chunkBytes of benchBatch copies starting at offset
// base, timestamps starting at ts.
func benchChunk(chunkBytes int, base, ts int64) []byte {
	proto, _ := benchBatch()
	chunk := make([]byte, 0, chunkBytes)
	for len(chunk) < chunkBytes {
		chunk = append(chunk, proto...)
	}
	benchRestamp(chunk, base, ts)
	return chunk
}

// benchRestamp gives the batches of chunk consecutive offsets from base
// and timestamps from ts (one per batch, so the time index grows as it does
// with live traffic), and fixes the CRCs. It returns the next offset and
// timestamp.
func benchRestamp(chunk []byte, base, ts int64) (int64, int64) {
	it := batch.NewIterator(chunk)
	it.SkipCRC()
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		b.SetBaseOffset(base)
		binary.BigEndian.PutUint64(b[27:], uint64(ts))
		binary.BigEndian.PutUint64(b[35:], uint64(ts))
		binary.BigEndian.PutUint32(b[17:], batch.Checksum(b[21:]))
		base, ts = b.NextOffset(), ts+1
	}
	return base, ts
}

// benchRing is a set of pre-built chunks whose offsets and timestamps are
// advanced together, outside the timer, once all of them were appended.
type benchRing struct {
	chunks   [][]byte
	next, ts int64
}

// newBenchRing builds the chunks, numbered to follow the log's end.
func newBenchRing(chunkBytes int, next, ts int64) *benchRing {
	r := &benchRing{next: next, ts: ts}
	for range max(1, benchRingBytes/chunkBytes) {
		r.chunks = append(r.chunks, benchChunk(chunkBytes, 0, 0))
	}
	r.restamp()
	return r
}

func (r *benchRing) restamp() {
	for _, c := range r.chunks {
		r.next, r.ts = benchRestamp(c, r.next, r.ts)
	}
}

// benchOpen opens an empty log in dir and appends one batch of proto at
// offset 0, returning the next offset and timestamp.
//
// The single batch is a workaround: while the active segment is empty,
// AppendMirror rolls after every batch of a multi-batch chunk (the
// segment.ms check in appendBatches reads the unset creation time 0 as
// 1970), so a first 1 MiB chunk would leave 255 one-batch segments.
// One single-batch append sets the creation time first.
func benchOpen(tb testing.TB, dir string, proto []byte) (l *Log, next, ts int64) {
	tb.Helper()
	l, err := Open(dir, Config{})
	if err != nil {
		tb.Fatal(err)
	}
	first := append([]byte(nil), proto...)
	next, ts = benchRestamp(first, 0, benchTsBase)
	if _, err := l.AppendMirror(first); err != nil {
		tb.Fatal(err)
	}
	return l, next, ts
}

// benchFill appends totalBytes of copies of proto in chunks of up to 1 MiB.
func benchFill(tb testing.TB, l *Log, proto []byte, next, ts int64, totalBytes int) (int64, int64) {
	tb.Helper()
	chunk := make([]byte, 0, 1<<20)
	for len(chunk)+len(proto) <= cap(chunk) {
		chunk = append(chunk, proto...)
	}
	for totalBytes > 0 {
		c := chunk[:min(len(chunk), totalBytes)]
		next, ts = benchRestamp(c, next, ts)
		if _, err := l.AppendMirror(c); err != nil {
			tb.Fatal(err)
		}
		totalBytes -= len(c)
	}
	return next, ts
}

// BenchmarkMirrorAppend appends pre-built chunks of valid batches with
// AppendMirror, as the mirror fetcher does, into a log with the default
// 1 GiB segments. "rolls" counts segment rolls in the run (0 unless the
// run wrote more than 1 GiB).
//
// Each time the ring of chunks is used up (every 8 MiB), the timer stops,
// the log is flushed and the chunks get new offsets. The flush keeps the
// dirty page cache small: without it, kernel writeback throttling made the
// spread between runs larger than the difference being measured.
// BenchmarkFileWrite does the same with File.Sync.
func BenchmarkMirrorAppend(b *testing.B) {
	for _, c := range benchChunkSizes {
		b.Run("chunk="+c.name, func(b *testing.B) {
			proto, _ := benchBatch()
			l, next, ts := benchOpen(b, b.TempDir(), proto)
			b.Cleanup(func() { l.Close() })
			r := newBenchRing(c.bytes, next, ts)
			b.SetBytes(int64(c.bytes))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i == len(r.chunks) {
					b.StopTimer()
					if err := l.Flush(); err != nil {
						b.Fatal(err)
					}
					r.restamp()
					i = 0
					b.StartTimer()
				}
				if _, err := l.AppendMirror(r.chunks[i]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(l.NumSegments()-1), "rolls")
		})
	}
}

// BenchmarkFileWrite is the baseline of BenchmarkMirrorAppend: os.File.Write
// of the same chunks to a file in the same kind of temporary directory, with
// the same ring and timer stops. The file starts with the same first batch
// as the log, so that every write lands at the same file offset: on this
// kernel (ext4 with large folios) a 16 KiB write at a 4 KiB offset costs
// about 1.3x one at a 16 KiB-aligned offset.
func BenchmarkFileWrite(b *testing.B) {
	for _, c := range benchChunkSizes {
		b.Run("chunk="+c.name, func(b *testing.B) {
			f, err := os.OpenFile(filepath.Join(b.TempDir(), "plain.log"), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { f.Close() })
			proto, _ := benchBatch()
			first := append([]byte(nil), proto...)
			next, ts := benchRestamp(first, 0, benchTsBase)
			if _, err := f.Write(first); err != nil {
				b.Fatal(err)
			}
			r := newBenchRing(c.bytes, next, ts)
			b.SetBytes(int64(c.bytes))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i == len(r.chunks) {
					b.StopTimer()
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
					r.restamp()
					i = 0
					b.StartTimer()
				}
				if _, err := f.Write(r.chunks[i]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// benchReadFixture is a log of benchReadLog bytes of benchBatch batches in
// one segment, offsets dense from 0.
type benchReadFixture struct {
	l        *Log
	segPath  string
	batches  int
	perBatch int // records (offsets) per batch
}

func newBenchReadFixture(b *testing.B) *benchReadFixture {
	b.Helper()
	dir := b.TempDir()
	proto, n := benchBatch()
	l, next, ts := benchOpen(b, dir, proto)
	b.Cleanup(func() { l.Close() })
	benchFill(b, l, proto, next, ts, benchReadLog-len(proto))
	if l.NumSegments() != 1 || l.Size() != benchReadLog {
		b.Fatalf("%d segments, %d bytes; want 1 segment of %d bytes", l.NumSegments(), l.Size(), benchReadLog)
	}
	return &benchReadFixture{l: l, segPath: segmentPath(dir, 0) + ".log",
		batches: benchReadLog / benchBatchSize, perBatch: n}
}

// starts returns random batch indexes from which chunkBytes of whole
// batches lie inside the log.
func (f *benchReadFixture) starts(chunkBytes int) []int {
	rng := rand.New(rand.NewPCG(1, uint64(chunkBytes)))
	idx := make([]int, 4096)
	for i := range idx {
		idx[i] = rng.IntN(f.batches - chunkBytes/benchBatchSize + 1)
	}
	return idx
}

// BenchmarkRead copies chunk bytes of whole batches from a random batch of
// a 64 MiB log into a reused buffer (Log.Read, the copying fetch path).
func BenchmarkRead(b *testing.B) {
	f := newBenchReadFixture(b)
	for _, c := range benchChunkSizes {
		b.Run("chunk="+c.name, func(b *testing.B) {
			idx := f.starts(c.bytes)
			hw := f.l.HighWatermark()
			dst := make([]byte, 0, c.bytes)
			// Outside the timer: every read returns exactly c.bytes.
			for _, i := range idx[:64] {
				got, _, err := f.l.Read(int64(i*f.perBatch), c.bytes, hw, dst)
				if err != nil || len(got) != c.bytes {
					b.Fatalf("read at batch %d: %d bytes, %v", i, len(got), err)
				}
			}
			b.SetBytes(int64(c.bytes))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				var err error
				if dst, _, err = f.l.Read(int64(idx[i%len(idx)]*f.perBatch), c.bytes, hw, dst); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkReadAt is the baseline of BenchmarkRead: os.File.ReadAt of the
// same byte ranges of the same kind of segment file.
func BenchmarkReadAt(b *testing.B) {
	f := newBenchReadFixture(b)
	file, err := os.Open(f.segPath)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { file.Close() })
	for _, c := range benchChunkSizes {
		b.Run("chunk="+c.name, func(b *testing.B) {
			idx := f.starts(c.bytes)
			dst := make([]byte, c.bytes)
			b.SetBytes(int64(c.bytes))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := file.ReadAt(dst, int64(idx[i%len(idx)]*benchBatchSize)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkReadRegion locates the same ranges as BenchmarkRead without
// copying them (the sendfile/writev fetch path). Its MB/s is the rate at
// which regions are found, not bytes moved.
func BenchmarkReadRegion(b *testing.B) {
	f := newBenchReadFixture(b)
	for _, c := range benchChunkSizes {
		b.Run("chunk="+c.name, func(b *testing.B) {
			idx := f.starts(c.bytes)
			hw := f.l.HighWatermark()
			b.SetBytes(int64(c.bytes))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r, _, err := f.l.ReadRegion(int64(idx[i%len(idx)]*f.perBatch), c.bytes, hw)
				if err != nil || r.Length != int64(c.bytes) {
					b.Fatalf("region %+v, %v", r, err)
				}
				i++
			}
		})
	}
}

// BenchmarkRecoveryAfterCrash times Open of a log that was not closed
// cleanly and has no recovery point: every batch is re-read and its CRC32C
// verified, and the indexes are rebuilt. The log (16 KiB batches) is built
// once outside the timer; each op deletes the clean marker and
// partition.meta first. The segment is in the page cache, as after a
// process crash (not a power loss). Slow to build: run with -benchtime=1x.
func BenchmarkRecoveryAfterCrash(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"1GiB", 1 << 30}} {
		b.Run("size="+size.name, func(b *testing.B) {
			dir := b.TempDir()
			proto, _ := exactBatch(16 << 10)
			l, next, ts := benchOpen(b, dir, proto)
			next, _ = benchFill(b, l, proto, next, ts, size.bytes-len(proto))
			if l.NumSegments() != 1 || l.Size() != int64(size.bytes) {
				b.Fatalf("%d segments, %d bytes; want 1 segment of %d bytes", l.NumSegments(), l.Size(), size.bytes)
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size.bytes))
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for _, name := range []string{cleanMarker, metaFile} {
					if err := os.Remove(filepath.Join(dir, name)); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				l, err := Open(dir, Config{})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if leo := l.LogEndOffset(); leo != next {
					b.Fatalf("recovered log end %d, want %d", leo, next)
				}
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// TestAppendReadZeroAllocs proves STYLE rule 17 for the log's hot paths: a
// steady-state AppendMirror (no roll, no new epoch) and a Read into a large
// enough buffer do not allocate. Not parallel: AllocsPerRun counts the
// allocations of every goroutine.
func TestAppendReadZeroAllocs(t *testing.T) {
	proto, _ := benchBatch()
	l, next, ts := benchOpen(t, t.TempDir(), proto)
	defer l.Close()
	chunk := benchChunk(64<<10, 0, 0)
	appendOne := func() {
		next, ts = benchRestamp(chunk, next, ts)
		if _, err := l.AppendMirror(chunk); err != nil {
			panic(err)
		}
	}
	for range 16 { // warm up: index slices, producer entry, epoch 0
		appendOne()
	}
	plain := dataBatch(0, 10, 100, 0, -1, -1, benchTsBase)
	appendPlain := func() {
		next, ts = benchRestamp(plain, next, ts)
		if _, err := l.AppendMirror(plain); err != nil {
			panic(err)
		}
	}
	appendPlain()
	var c batch.Chunk
	appendChunk := func() {
		next, ts = benchRestamp(chunk, next, ts)
		it := batch.NewIterator(chunk)
		it.Collect(&c)
		for _, ok := it.Next(); ok; _, ok = it.Next() {
		}
		if _, err := l.AppendChunk(&c); err != nil {
			panic(err)
		}
	}
	appendChunk()
	hw := l.HighWatermark()
	dst := make([]byte, 0, 1<<20)
	for _, tc := range []struct {
		name string
		fn   func()
	}{
		{"AppendMirror/producer=idempotent", appendOne},
		{"AppendMirror/producer=none", appendPlain},
		{"AppendChunk", appendChunk},
		{"Read", func() {
			if got, _, err := l.Read(hw/3, 64<<10, hw, dst); err != nil || len(got) == 0 {
				panic(fmt.Sprint(len(got), err))
			}
		}},
		{"ReadRegion", func() {
			if r, _, err := l.ReadRegion(hw/3, 64<<10, hw); err != nil || r.Length == 0 {
				panic(fmt.Sprint(r, err))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(200, tc.fn); n != 0 {
				t.Errorf("%v allocs per run, want 0", n)
			}
		})
	}
}
