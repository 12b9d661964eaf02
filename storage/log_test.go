package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/vfs"
)

// dataBatch builds an uncompressed v2 batch of n records (values of size
// bytes) at base with leader epoch ple and a correct CRC.
func dataBatch(base int64, n int, size int, ple int32, pid int64, seq int32, ts int64) []byte {
	var recs []byte
	for i := range n {
		var body []byte
		body = append(body, 0)
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, -1)
		body = binary.AppendVarint(body, int64(size))
		body = append(body, bytes.Repeat([]byte{byte('a' + i%26)}, size)...)
		body = binary.AppendVarint(body, 0)
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	b := make([]byte, batch.HeaderSize, batch.HeaderSize+len(recs))
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(batch.HeaderSize-batch.LogOverhead+len(recs)))
	binary.BigEndian.PutUint32(b[12:], uint32(ple))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))
	binary.BigEndian.PutUint64(b[27:], uint64(ts))
	binary.BigEndian.PutUint64(b[35:], uint64(ts+int64(n)-1))
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], 0)
	if pid < 0 {
		binary.BigEndian.PutUint16(b[51:], 0xFFFF)
	}
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[17:], batch.Checksum(b[21:]))
	return b
}

func openTestLog(t *testing.T, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func readAll(t *testing.T, l *Log, from int64) []batch.Batch {
	t.Helper()
	var out []batch.Batch
	for off := from; off < l.HighWatermark(); {
		buf, info, err := l.Read(off, 1<<20, l.HighWatermark(), nil)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if info.FirstOffset < 0 {
			break
		}
		it := batch.NewIterator(buf)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			out = append(out, b)
			off = b.NextOffset()
		}
		if it.Err() != nil || it.Incomplete() {
			t.Fatalf("read returned bad bytes: %v", it.Err())
		}
	}
	return out
}

func TestMirrorAppendKeepsOffsetsBytesAndGaps(t *testing.T) {
	t.Parallel()
	l := openTestLog(t, t.TempDir(), Config{SegmentBytes: 1024})
	defer l.Close()
	var want [][]byte
	var chunk []byte
	for i, base := range []int64{0, 5, 40, 43, 1000, 1003} {
		b := dataBatch(base, 3, 50+i, int32(i/2), 7, int32(base), 1000+base)
		want = append(want, b)
		chunk = append(chunk, b...)
	}
	res, err := l.AppendMirror(chunk)
	if err != nil {
		t.Fatal(err)
	}
	if res.FirstOffset != 0 || res.LastOffset != 1005 || res.NextOffset != 1006 || res.Batches != 6 || res.Records != 18 {
		t.Fatalf("result %+v", res)
	}
	if l.LogEndOffset() != 1006 || l.HighWatermark() != 1006 || l.NumSegments() < 2 {
		t.Fatalf("leo %d hw %d segments %d", l.LogEndOffset(), l.HighWatermark(), l.NumSegments())
	}
	got := readAll(t, l, 0)
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	// A read inside a gap starts at the next batch; inside a batch at it.
	for _, tc := range []struct{ at, first int64 }{{6, 5}, {9, 40}, {100, 1000}, {1004, 1003}} {
		_, info, err := l.Read(tc.at, 1, l.HighWatermark(), nil)
		if err != nil || info.FirstOffset != tc.first {
			t.Errorf("read at %d: first %d (%v), want %d", tc.at, info.FirstOffset, err, tc.first)
		}
	}
	// Epochs came from the batches: 0 at 0, 1 at 40, 2 at 1000.
	if e, off := l.EndOffsetForEpoch(0); e != 0 || off != 40 {
		t.Errorf("end offset for epoch 0: %d %d", e, off)
	}
	if e, off := l.EndOffsetForEpoch(2); e != 2 || off != 1006 {
		t.Errorf("end offset for epoch 2: %d %d", e, off)
	}
	// Offsets below the log end are refused, and nothing is written.
	if _, err := l.AppendMirror(dataBatch(1005, 1, 1, 2, -1, -1, 0)); !errors.Is(err, ErrOffsetOrder) {
		t.Fatalf("overlapping append: %v", err)
	}
	if _, err := l.AppendMirror(append(dataBatch(2000, 1, 1, 2, -1, -1, 0), 1, 2, 3)); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("partial chunk: %v", err)
	}
	if l.LogEndOffset() != 1006 {
		t.Fatalf("a refused append changed the log end to %d", l.LogEndOffset())
	}
	if _, _, err := l.Read(2000, 100, 3000, nil); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past the end: %v", err)
	}
}

func TestProduceAppendAssignsOffsetsAndDedups(t *testing.T) {
	t.Parallel()
	l := openTestLog(t, t.TempDir(), Config{})
	defer l.Close()
	for i := range 3 {
		raw := dataBatch(999, 4, 10, -1, 42, int32(4*i), 1)
		res, err := l.AppendProduce(raw, 5)
		if err != nil || res.FirstOffset != int64(4*i) || res.Duplicate {
			t.Fatalf("produce %d: %+v %v", i, res, err)
		}
	}
	// A retry of the second batch is answered with its original offsets.
	res, err := l.AppendProduce(dataBatch(0, 4, 10, -1, 42, 4, 1), 5)
	if err != nil || !res.Duplicate || res.FirstOffset != 4 || res.LastOffset != 7 {
		t.Fatalf("retry: %+v %v", res, err)
	}
	if _, err := l.AppendProduce(dataBatch(0, 4, 10, -1, 42, 40, 1), 5); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap in sequence: %v", err)
	}
	bad := dataBatch(0, 2, 10, -1, -1, -1, 1)
	bad[len(bad)-1] ^= 1
	if _, err := l.AppendProduce(bad, 5); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("corrupt produce: %v", err)
	}
	if _, err := l.AppendProduce(batch.AppendTxnMarker(nil, batch.TxnMarker{ProducerID: 1, Commit: true}), 5); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("client control batch: %v", err)
	}
	got := readAll(t, l, 0)
	if len(got) != 3 || got[2].BaseOffset() != 8 || got[2].PartitionLeaderEpoch() != 5 || got[2].Verify() != nil {
		t.Fatalf("stored batches wrong: %d", len(got))
	}
}

func TestTransactionsDriveLastStableOffset(t *testing.T) {
	t.Parallel()
	l := openTestLog(t, t.TempDir(), Config{})
	defer l.Close()
	txn := dataBatch(0, 2, 5, 0, 9, 0, 1)
	binary.BigEndian.PutUint16(txn[21:], 0x10)
	binary.BigEndian.PutUint32(txn[17:], batch.Checksum(txn[21:]))
	if _, err := l.AppendMirror(append(txn, dataBatch(2, 1, 5, 0, -1, -1, 1)...)); err != nil {
		t.Fatal(err)
	}
	if l.LastStableOffset() != 0 || l.HighWatermark() != 3 {
		t.Fatalf("lso %d hw %d", l.LastStableOffset(), l.HighWatermark())
	}
	// read_committed reads stop at the LSO.
	if _, info, err := l.Read(0, 1<<20, l.LastStableOffset(), nil); err != nil || info.FirstOffset != -1 {
		t.Fatalf("read below lso: %+v %v", info, err)
	}
	abort := batch.AppendTxnMarker(nil, batch.TxnMarker{BaseOffset: 3, ProducerID: 9, Commit: false})
	if _, err := l.AppendMirror(abort); err != nil {
		t.Fatal(err)
	}
	if l.LastStableOffset() != 4 {
		t.Fatalf("lso after abort %d", l.LastStableOffset())
	}
	if ab := l.Producers().AbortedTxns(0, 4); len(ab) != 1 || ab[0].FirstOffset != 0 || ab[0].ProducerID != 9 {
		t.Fatalf("aborted %+v", ab)
	}
}

func TestReopenCleanAndUnclean(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openTestLog(t, dir, Config{SegmentBytes: 2048, IndexIntervalBytes: 256})
	for i := range 40 {
		if _, err := l.AppendMirror(dataBatch(int64(i*10), 5, 20, int32(i/10), 3, int32(i*5), int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	want := readAll(t, l, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, Config{SegmentBytes: 2048, IndexIntervalBytes: 256})
	if got := readAll(t, l, 0); len(got) != len(want) || l.LogEndOffset() != 395 {
		t.Fatalf("clean reopen: %d batches, leo %d", len(got), l.LogEndOffset())
	}
	if e, ok := l.Producers().Entry(3); !ok || e.LastSequence != 199 {
		t.Fatalf("producer state after clean reopen: %+v %v", e, ok)
	}
	l.Close()

	// Unclean: no marker, a torn tail and garbage in the last segment, a
	// damaged index and a damaged epoch checkpoint.
	os.Remove(filepath.Join(dir, cleanMarker))
	segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	last := segs[len(segs)-1]
	f, _ := os.OpenFile(last, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(dataBatch(395, 5, 20, 3, 3, 200, 0)[:70])
	f.Close()
	os.WriteFile(segs[0][:len(segs[0])-4]+".index", []byte{1, 2, 3}, 0o644)
	os.WriteFile(filepath.Join(dir, "leader-epoch-checkpoint"), []byte("garbage"), 0o644)
	l = openTestLog(t, dir, Config{SegmentBytes: 2048, IndexIntervalBytes: 256})
	defer l.Close()
	got := readAll(t, l, 0)
	if len(got) != len(want) || l.LogEndOffset() != 395 {
		t.Fatalf("unclean reopen: %d batches, leo %d", len(got), l.LogEndOffset())
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d differs after recovery", i)
		}
	}
	if e, off := l.EndOffsetForEpoch(1); e != 1 || off != 200 {
		t.Fatalf("rebuilt epochs: %d %d", e, off)
	}
	// The log keeps working after recovery.
	if _, err := l.AppendMirror(dataBatch(395, 5, 20, 3, 3, 200, 0)); err != nil {
		t.Fatal(err)
	}
}

func TestTruncation(t *testing.T) {
	t.Parallel()
	l := openTestLog(t, t.TempDir(), Config{SegmentBytes: 1024})
	defer l.Close()
	for i := range 20 {
		if _, err := l.AppendMirror(dataBatch(int64(i*4), 4, 30, int32(i/5), 8, int32(i*4), int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.TruncateTo(42); err != nil { // inside the batch 40-43
		t.Fatal(err)
	}
	if l.LogEndOffset() != 40 || l.HighWatermark() != 40 {
		t.Fatalf("leo %d hw %d", l.LogEndOffset(), l.HighWatermark())
	}
	if got := readAll(t, l, 0); len(got) != 10 {
		t.Fatalf("%d batches after truncation", len(got))
	}
	if e, _ := l.Epochs().Latest(); e.Epoch != 1 {
		t.Fatalf("epoch cache not truncated: %+v", e)
	}
	if e, ok := l.Producers().Entry(8); !ok || e.LastSequence != 39 {
		t.Fatalf("producer state not rebuilt: %+v", e)
	}
	if _, err := l.AppendMirror(dataBatch(40, 4, 30, 7, -1, -1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateFullyAndStartAt(500); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 500 || l.LogEndOffset() != 500 || l.NumSegments() != 1 || l.Size() != 0 {
		t.Fatalf("after full truncation: start %d end %d", l.LogStartOffset(), l.LogEndOffset())
	}
	if _, err := l.AppendMirror(dataBatch(510, 1, 1, 9, -1, -1, 1)); err != nil {
		t.Fatal(err)
	}
}

func TestLogStartAndRetention(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_000_000)
	cfg := Config{SegmentBytes: 600, RetentionMs: 1000, Now: func() time.Time { return now }}
	l := openTestLog(t, t.TempDir(), cfg)
	defer l.Close()
	for i := range 12 {
		if _, err := l.AppendMirror(dataBatch(int64(i*2), 2, 100, 0, -1, -1, int64(990_000+i*1000))); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.NumSegments()
	if err := l.SetLogStartOffset(3); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Read(2, 100, 100, nil); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
	if err := l.SetLogStartOffset(1000); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("log start past hw: %v", err)
	}
	n, err := l.ApplyRetention()
	if err != nil || n == 0 || l.NumSegments() != segs-n || l.LogStartOffset() <= 3 {
		t.Fatalf("retention: deleted %d of %d (%v), start %d", n, segs, err, l.LogStartOffset())
	}
	if got := readAll(t, l, l.LogStartOffset()); len(got) == 0 || got[0].BaseOffset() != l.LogStartOffset() {
		t.Fatalf("reads after retention start at %d", got[0].BaseOffset())
	}
}

// Timestamp lookups answer per record (record i of a batch has timestamp
// base+i), as Kafka does.
func TestOffsetForTimestamp(t *testing.T) {
	t.Parallel()
	l := openTestLog(t, t.TempDir(), Config{SegmentBytes: 500, IndexIntervalBytes: 100})
	defer l.Close()
	for i := range 10 {
		if _, err := l.AppendMirror(dataBatch(int64(i*3), 3, 40, 0, -1, -1, int64(100*i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		ts, off int64
		found   bool
	}{{0, 0, true}, {101, 4, true}, {102, 5, true}, {103, 6, true}, {902, 29, true}, {903, 0, false}} {
		off, _, found, err := l.OffsetForTimestamp(tc.ts)
		if err != nil || found != tc.found || (found && off != tc.off) {
			t.Errorf("ts %d: %d %v %v, want %d %v", tc.ts, off, found, err, tc.off, tc.found)
		}
	}
	if off, ts, ok, _ := l.MaxTimestamp(); !ok || off != 29 || ts != 902 {
		t.Errorf("max timestamp: %d %d %v", off, ts, ok)
	}
}

// A full disk or an I/O error fails the append, takes the partition
// offline, and leaves nothing partial behind: a reopen sees exactly the
// batches appended before the failure.
// TestDiskFull: an append the disk has no room for is undone whole and
// answers ErrNoSpace (with the ENOSPC); the log stays readable and, once
// space is back, takes appends again by itself, no reopen. Other I/O
// errors (a failed fsync) still take the partition offline.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ffs := vfs.NewFaultFS(vfs.Default)
	l := openTestLog(t, dir, Config{FS: ffs})
	for i := range 5 {
		if _, err := l.AppendMirror(dataBatch(int64(i), 1, 100, 0, -1, -1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	want := readAll(t, l, 0)
	ffs.DiskFull(50)
	for i := range 2 {
		_, err := l.AppendMirror(dataBatch(5, 1, 100, 0, -1, -1, 1))
		if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrOffline) {
			t.Fatalf("append %d on a full disk: %v, want ErrNoSpace, not offline", i, err)
		}
		if _, err := l.AppendProduce(dataBatch(0, 1, 100, 0, -1, -1, 1), 0); !errors.Is(err, ErrNoSpace) {
			t.Fatalf("produce on a full disk: %v", err)
		}
	}
	if l.LogEndOffset() != 5 {
		t.Fatalf("log end %d after the refused appends, want 5", l.LogEndOffset())
	}
	if got := readAll(t, l, 0); len(got) != len(want) {
		t.Fatalf("reads on a full disk: %d batches, want %d", len(got), len(want))
	}
	ffs.DiskFull(-1)
	if _, err := l.AppendMirror(dataBatch(5, 1, 100, 0, -1, -1, 1)); err != nil {
		t.Fatalf("append once space is back: %v", err)
	}
	l.Close()
	l = openTestLog(t, dir, Config{})
	defer l.Close()
	if got := readAll(t, l, 0); len(got) != 6 || l.LogEndOffset() != 6 {
		t.Fatalf("after reopen: %d batches, leo %d", len(got), l.LogEndOffset())
	}

	ffs2 := vfs.NewFaultFS(vfs.Default)
	l2 := openTestLog(t, t.TempDir(), Config{FS: ffs2, FlushMessages: 1})
	defer l2.Close()
	ffs2.Fail(vfs.OpSync, syscall.EIO)
	if _, err := l2.AppendMirror(dataBatch(0, 1, 10, 0, -1, -1, 1)); !errors.Is(err, ErrOffline) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync failure: %v", err)
	}
	if _, _, err := l2.Read(0, 100, 10, nil); !errors.Is(err, ErrOffline) {
		t.Fatalf("read after an fsync failure: %v, want offline", err)
	}
}

func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{{SegmentBytes: 10}, {RetentionMs: -2}, {FlushMessages: -5}, {IndexIntervalBytes: -1}} {
		if _, err := Open(t.TempDir(), cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// An open error on a segment is returned, never a panic, and closes what
// was opened.
func TestOpenReportsSegmentErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openTestLog(t, dir, Config{})
	if _, err := l.AppendMirror(dataBatch(0, 1, 10, 0, -1, -1, 1)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	ffs := vfs.NewFaultFS(vfs.Default)
	ffs.Fail(vfs.OpRead, syscall.EIO)
	if _, err := Open(dir, Config{FS: ffs}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("open with failing reads: %v", err)
	}
}

// A crash after a batch reached the segment but before the epoch
// checkpoint learned its epoch: recovery assigns it from the log.
func TestUncleanOpenReassignsEpochs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openTestLog(t, dir, Config{})
	for i, ple := range []int32{1, 1, 4} {
		if _, err := l.AppendMirror(dataBatch(int64(i), 1, 10, ple, -1, -1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	os.Remove(filepath.Join(dir, cleanMarker))
	// The checkpoint as it was before the epoch-4 batch.
	os.WriteFile(filepath.Join(dir, "leader-epoch-checkpoint"), []byte("0\n1\n1 0\n"), 0o644)
	l = openTestLog(t, dir, Config{})
	defer l.Close()
	if e, ok := l.Epochs().Latest(); !ok || e.Epoch != 4 || e.StartOffset != 2 {
		t.Fatalf("latest epoch after recovery: %+v", e)
	}
}

// Recovery re-assigns epochs only after the recovery point, so a flush,
// which advances it, must first make the unsynced epoch checkpoint durable.
func TestFlushSyncsTheEpochCheckpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openTestLog(t, dir, Config{})
	defer l.Close()
	for i, ple := range []int32{1, 4} {
		if _, err := l.AppendMirror(dataBatch(int64(i), 1, 10, ple, -1, -1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if !l.epochs.unsynced {
		t.Fatal("the append's epoch assignment was fsynced: the hot path pays two fsyncs per new epoch")
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.epochs.unsynced {
		t.Fatal("Flush advanced the recovery point past epoch 4 without fsyncing its checkpoint entry")
	}
	got, err := os.ReadFile(filepath.Join(dir, "leader-epoch-checkpoint"))
	if err != nil || string(got) != "0\n2\n1 0\n4 1\n" {
		t.Fatalf("checkpoint after Flush = %q, %v", got, err)
	}
}

// One chunk into a new log fills one segment, not one segment per batch.
func TestFirstChunkDoesNotRollPerBatch(t *testing.T) {
	t.Parallel()
	l := openTestLog(t, t.TempDir(), Config{})
	defer l.Close()
	var chunk []byte
	for i := range 50 {
		chunk = append(chunk, dataBatch(int64(i), 1, 100, 0, -1, -1, 1)...)
	}
	if _, err := l.AppendMirror(chunk); err != nil {
		t.Fatal(err)
	}
	if n := l.NumSegments(); n != 1 {
		t.Fatalf("%d segments after one chunk", n)
	}
}

// TestMarkDeletedStopsEveryWrite: once a log is marked deleted (its owner
// renames the directory away), no operation writes under its path again,
// Close included, while reads of the open segments still work.
func TestMarkDeletedStopsEveryWrite(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "p-0")
	l := openTestLog(t, dir, Config{FlushMs: 1})
	if _, err := l.AppendProduce(dataBatch(0, 3, 10, -1, -1, -1, 1), 0); err != nil {
		t.Fatal(err)
	}
	l.MarkDeleted()
	// The owner's rename; a re-created partition takes the name.
	if err := os.Rename(dir, dir+".x-delete"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func() error{
		"produce":   func() error { _, err := l.AppendProduce(dataBatch(0, 1, 10, -1, -1, -1, 1), 0); return err },
		"mirror":    func() error { _, err := l.AppendMirror(dataBatch(3, 1, 10, 0, -1, -1, 1)); return err },
		"flush":     l.Flush,
		"flushDue":  l.FlushIfDue,
		"retention": func() error { _, err := l.ApplyRetention(); return err },
		"compact":   func() error { _, err := l.Compact(time.Now()); return err },
		"truncate":  func() error { return l.TruncateTo(0) },
	} {
		if err := op(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after MarkDeleted: %v, want ErrClosed", name, err)
		}
	}
	if got := readAll(t, l, 0); len(got) != 1 {
		t.Errorf("read after MarkDeleted: %d batches, want 1", len(got))
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close after MarkDeleted: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the deleted log wrote %d files under its old path", len(entries))
	}
}

// budgetGuard grants bytes from a budget the test sets.
type budgetGuard struct{ left atomic.Int64 }

var errBudget = errors.New("budget spent")

func (g *budgetGuard) Reserve(n int64) error {
	if g.left.Add(-n) < 0 {
		g.left.Add(n)
		return errBudget
	}
	return nil
}

// TestSpaceGuard: a log whose guard refuses a write answers ErrNoSpace
// wrapping the guard's reason, exactly as for ENOSPC (nothing written,
// readable, not offline), for appends and for compaction's cleaned copies;
// it writes again as soon as the guard grants.
func TestSpaceGuard(t *testing.T) {
	t.Parallel()
	l := openTestLog(t, t.TempDir(), Config{})
	defer l.Close()
	g := &budgetGuard{}
	g.left.Store(1 << 20)
	l.SetSpaceGuard(g)
	b := dataBatch(0, 1, 100, 0, -1, -1, 1)
	if _, err := l.AppendMirror(b); err != nil {
		t.Fatal(err)
	}
	if got := 1<<20 - g.left.Load(); got != int64(len(b)) {
		t.Fatalf("guard asked for %d bytes, the batch has %d", got, len(b))
	}
	g.left.Store(10)
	_, err := l.AppendMirror(dataBatch(1, 1, 100, 0, -1, -1, 1))
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, errBudget) || errors.Is(err, ErrOffline) {
		t.Fatalf("mirror append refused by the guard: %v", err)
	}
	if _, err := l.AppendProduce(dataBatch(0, 1, 100, 0, -1, -1, 1), 0); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("produce refused by the guard: %v", err)
	}
	if l.LogEndOffset() != 1 || len(readAll(t, l, 0)) != 1 {
		t.Fatalf("log end %d after refusals, want 1 and the batch readable", l.LogEndOffset())
	}
	g.left.Store(1 << 20)
	if _, err := l.AppendMirror(dataBatch(1, 1, 100, 0, -1, -1, 1)); err != nil {
		t.Fatalf("append once the guard grants: %v", err)
	}

	// Compaction writes a cleaned copy of a segment: refused, the log is
	// unchanged and stays writable.
	cl, _ := openCompactLog(t, t.TempDir(), Config{Compact: true}, [][]tbatch{
		{{base: 0, recs: []trec{kv("a", "1"), kv("b", "1")}}},
		{{base: 2, recs: []trec{kv("a", "2")}}},
	}, batch.CodecNone)
	defer cl.Close()
	cg := &budgetGuard{}
	cl.SetSpaceGuard(cg)
	before := readAll(t, cl, 0)
	if _, err := cl.Compact(time.UnixMilli(10_000_000)); !errors.Is(err, ErrNoSpace) || errors.Is(err, ErrOffline) {
		t.Fatalf("compaction refused by the guard: %v", err)
	}
	if got := readAll(t, cl, 0); len(got) != len(before) {
		t.Fatalf("a refused compaction changed the log: %d batches, had %d", len(got), len(before))
	}
	cg.left.Store(1 << 20)
	if st, err := cl.Compact(time.UnixMilli(10_000_000)); err != nil || st.SegmentsCleaned == 0 {
		t.Fatalf("compaction once the guard grants: %+v, %v", st, err)
	}
}
