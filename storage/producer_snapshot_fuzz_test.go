package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/vfs"
)

// Snapshot tests: FuzzProducerSnapshot for the decoder, then the file
// handling (round trip, damaged files, maxOffset, fault injection,
// retention and truncation of snapshot files).

// psSnapshotBody encodes s as a snapshot body at offset.
func psSnapshotBody(s *ProducerState, offset int64) []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.appendSnapshotBodyLocked(nil, offset)
}

// FuzzProducerSnapshot feeds arbitrary bytes to the snapshot decoder, as a
// body and as a whole file. Invariants: no panic; errors are corruption
// errors; what decodes re-encodes to the very same bytes (the format is
// canonical) and to an equal state; the decoded state is internally
// consistent and usable.
func FuzzProducerSnapshot(f *testing.F) {
	f.Add(psSnapshotBody(NewProducerState(), 0))
	f.Add(psSnapshotBody(psAbortedLog(f).s, 41))
	rich := psRichState(f).s
	f.Add(psSnapshotBody(rich, 1<<40))
	f.Add(rich.appendSnapshotLocked(nil, 7))
	// Hostile counts: negative, huge, and a producer with six batches.
	f.Add(binary.BigEndian.AppendUint32(make([]byte, 8), 0x80000000))
	f.Add(binary.BigEndian.AppendUint32(make([]byte, 8), 0x7fffffff))
	six := psSnapshotBody(rich, 0)
	six[12+30] = 6
	f.Add(six)
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		// Any prefix (a torn file) and the input as a whole file must be
		// handled without a panic, like the input itself.
		psDecodeChecked(t, data[:len(data)/2])
		if _, _, err := decodeProducerSnapshot(data); err != nil && !errors.Is(err, ErrCorruptProducerSnapshot) {
			t.Fatalf("file decode error %v is not a corruption", err)
		}

		s, off, ok := psDecodeChecked(t, data)
		if !ok {
			return
		}
		re := psSnapshotBody(s, off)
		if !bytes.Equal(re, data) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", data, re)
		}
		s.mu.RLock()
		file := s.appendSnapshotLocked(nil, off)
		s.mu.RUnlock()
		s2, off2, err := decodeProducerSnapshot(file)
		if err != nil || off2 != off {
			t.Fatalf("framed round trip: offset %d, %v", off2, err)
		}
		psSameState(t, s2, s)
	})
}

// psDecodeChecked decodes a body and checks the decoded state's invariants.
func psDecodeChecked(t *testing.T, data []byte) (*ProducerState, int64, bool) {
	t.Helper()
	s, off, err := decodeProducerSnapshotBody(data)
	if err != nil {
		if !errors.Is(err, ErrCorruptProducerSnapshot) {
			t.Fatalf("error %v is not a corruption", err)
		}
		if s != nil {
			t.Fatal("state returned with an error")
		}
		return nil, 0, false
	}
	if off < 0 {
		t.Fatalf("negative offset %d accepted", off)
	}
	// The ongoing list matches the entries and is sorted.
	if !slices.IsSortedFunc(s.ongoing, compareOngoing) {
		t.Fatalf("ongoing list not sorted: %v", s.ongoing)
	}
	open := 0
	for pid, e := range s.producers {
		if e.pid != pid || pid < 0 || e.n > producerBatchesRetained {
			t.Fatalf("bad entry %d: %+v", pid, e)
		}
		if e.txnFirstOffset >= 0 {
			open++
		}
	}
	if open != len(s.ongoing) {
		t.Fatalf("%d open transactions, %d in the ongoing list", open, len(s.ongoing))
	}
	for i, a := range s.aborted {
		if a.LastOffset-a.FirstOffset > s.abortedMaxSpan || (i > 0 && a.LastOffset <= s.aborted[i-1].LastOffset) {
			t.Fatalf("aborted index broken at %d: %+v (span %d)", i, a, s.abortedMaxSpan)
		}
	}
	// Usable: the read paths agree with a brute-force filter.
	all := s.AbortedTxns(0, math.MaxInt64)
	if len(all) != len(s.aborted) {
		t.Fatalf("AbortedTxns returned %d of %d", len(all), len(s.aborted))
	}
	if len(s.aborted) > 0 {
		mid := s.aborted[len(s.aborted)/2]
		lo, hi := mid.FirstOffset, mid.LastOffset
		want := 0
		for _, a := range s.aborted {
			if a.LastOffset >= lo && a.FirstOffset < hi {
				want++
			}
		}
		if got := len(s.AbortedTxns(lo, hi)); got != want {
			t.Fatalf("AbortedTxns(%d, %d) returned %d, brute force %d", lo, hi, got, want)
		}
	}
	if fuo, ok := s.FirstUnstableOffset(); ok != (len(s.ongoing) > 0) || (ok && fuo != s.OngoingTxns()[0].FirstOffset) {
		t.Fatalf("first unstable offset %d %v", fuo, ok)
	}
	return s, off, true
}

func TestProducerSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		build  func(t testing.TB) *ProducerState
		offset int64
	}{
		{name: "empty", build: func(testing.TB) *ProducerState { return NewProducerState() }, offset: 0},
		{name: "aborted index only", build: func(t testing.TB) *ProducerState {
			l := psAbortedLog(t)
			l.mirror(psPIDReset(), 41)
			return l.s
		}, offset: 42},
		{name: "rich", build: func(t testing.TB) *ProducerState { return psRichState(t).s }, offset: 1 << 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := tt.build(t)
			if err := s.WriteSnapshot(vfs.Default, dir, tt.offset); err != nil {
				t.Fatal(err)
			}
			got, off, err := LoadSnapshot(vfs.Default, dir, math.MaxInt64)
			if err != nil || off != tt.offset {
				t.Fatalf("LoadSnapshot: offset %d, %v", off, err)
			}
			psSameState(t, got, s)
		})
	}

	// The loaded state behaves: cached batches are still duplicates and
	// the sequence goes on across the wrap.
	s := psRichState(t).s
	dir := t.TempDir()
	if err := s.WriteSnapshot(vfs.Default, dir, 100); err != nil {
		t.Fatal(err)
	}
	got, _, err := LoadSnapshot(vfs.Default, dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []psBatch{
		{pid: 10, epoch: 3, seq: psWrapSeq(2), count: 2},
		{pid: 10, epoch: 3, seq: psWrapSeq(6), count: 2},
	} {
		if dup, err := got.CheckProduce(p.bytes(t, 0)); dup == nil || err != nil {
			t.Fatalf("%+v after load: dup %v, err %v", p, dup, err)
		}
	}
	if _, err := got.CheckProduce(psBatch{pid: 10, epoch: 3, seq: psWrapSeq(1), count: 2}.bytes(t, 0)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("evicted batch after load: %v", err)
	}
	if dup, err := got.CheckProduce(psBatch{pid: 10, epoch: 3, seq: 8, count: 1}.bytes(t, 0)); dup != nil || err != nil {
		t.Fatalf("next sequence after load: dup %v, err %v", dup, err)
	}
	fuo, _ := s.FirstUnstableOffset()
	psWantFUO(t, got, fuo)
}

// psWriteAt writes a distinct state (one producer at sequence off) as the
// snapshot at off.
func psWriteAt(t testing.TB, fsys vfs.FS, dir string, off int64) *ProducerState {
	t.Helper()
	l := newPSLog(t)
	l.mustProduce(psBatch{pid: off, count: 1, ts: off})
	if err := l.s.WriteSnapshot(fsys, dir, off); err != nil {
		t.Fatal(err)
	}
	return l.s
}

func TestProducerSnapshotDamaged(t *testing.T) {
	t.Parallel()
	name20 := producerSnapshotName(20)
	rewrite := func(f func(b []byte) []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			p := filepath.Join(dir, name20)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{name: "flipped bit", damage: rewrite(func(b []byte) []byte { b[len(b)-3] ^= 0x10; return b })},
		{name: "torn", damage: rewrite(func(b []byte) []byte { return b[:len(b)-5] })},
		{name: "header only", damage: rewrite(func(b []byte) []byte { return b[:producerSnapshotHeaderSize] })},
		{name: "empty", damage: rewrite(func([]byte) []byte { return nil })},
		{name: "bad magic", damage: rewrite(func(b []byte) []byte { b[0] = 'X'; return b })},
		{name: "bad crc", damage: rewrite(func(b []byte) []byte { b[5] ^= 1; return b })},
		{name: "unknown version", damage: rewrite(func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[8:], 2)
			binary.BigEndian.PutUint32(b[4:], batch.Checksum(b[8:]))
			return b
		})},
		{name: "offset differs from the name", damage: func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, producerSnapshotName(25)), filepath.Join(dir, name20)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			want := psWriteAt(t, vfs.Default, dir, 10)
			psWriteAt(t, vfs.Default, dir, 20)
			psWriteAt(t, vfs.Default, dir, 25)
			tt.damage(t, dir)
			got, off, err := LoadSnapshot(vfs.Default, dir, 24)
			if err != nil || off != 10 {
				t.Fatalf("LoadSnapshot: offset %d, %v; want the fallback at 10", off, err)
			}
			psSameState(t, got, want)
			offs, err := ListSnapshots(vfs.Default, dir)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(offs, 10) || slices.Contains(offs, 20) {
				t.Fatalf("snapshots %v: the damaged one should be gone, the older kept", offs)
			}
		})
	}

	t.Run("all damaged", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		psWriteAt(t, vfs.Default, dir, 20)
		rewrite(func(b []byte) []byte { return b[:len(b)/2] })(t, dir)
		got, off, err := LoadSnapshot(vfs.Default, dir, 100)
		if err != nil || off != 0 || got.Len() != 0 {
			t.Fatalf("LoadSnapshot: offset %d, %d producers, %v; want an empty state at 0", off, got.Len(), err)
		}
	})
}

func TestProducerSnapshotMaxOffset(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, off := range []int64{10, 20, 30} {
		psWriteAt(t, vfs.Default, dir, off)
	}
	tests := []struct {
		max, want int64
	}{{max: 5, want: 0}, {max: 10, want: 10}, {max: 29, want: 20}, {max: math.MaxInt64, want: 30}}
	for _, tt := range tests {
		s, off, err := LoadSnapshot(vfs.Default, dir, tt.max)
		if err != nil || off != tt.want {
			t.Fatalf("LoadSnapshot(max %d): offset %d, %v; want %d", tt.max, off, err, tt.want)
		}
		if _, ok := s.Entry(tt.want); ok != (tt.want != 0) {
			t.Fatalf("LoadSnapshot(max %d): wrong state", tt.max)
		}
	}
	if offs, _ := ListSnapshots(vfs.Default, dir); !slices.Equal(offs, []int64{10, 20, 30}) {
		t.Fatalf("loading deleted snapshots: %v", offs)
	}
}

func TestProducerSnapshotFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		arm  func(f *vfs.FaultFS)
	}{
		{name: "disk full", arm: func(f *vfs.FaultFS) { f.DiskFull(0) }},
		{name: "disk full midway", arm: func(f *vfs.FaultFS) { f.DiskFull(20) }},
		{name: "write error", arm: func(f *vfs.FaultFS) { f.Fail(vfs.OpWrite, vfs.ErrInjected) }},
		{name: "sync error", arm: func(f *vfs.FaultFS) { f.Fail(vfs.OpSync, vfs.ErrInjected) }},
		{name: "rename error", arm: func(f *vfs.FaultFS) { f.Fail(vfs.OpRename, vfs.ErrInjected) }},
		{name: "open error", arm: func(f *vfs.FaultFS) { f.Fail(vfs.OpOpen, vfs.ErrInjected) }},
		{name: "disk full and no cleanup", arm: func(f *vfs.FaultFS) {
			f.DiskFull(20)
			f.Fail(vfs.OpRemove, vfs.ErrInjected)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ffs := vfs.NewFaultFS(vfs.Default)
			want := psWriteAt(t, ffs, dir, 10)
			tt.arm(ffs)
			if err := psRichState(t).s.WriteSnapshot(ffs, dir, 20); err == nil {
				t.Fatal("WriteSnapshot succeeded under a fault")
			}
			// Whatever the write left behind is never taken for a snapshot.
			offs, err := ListSnapshots(vfs.Default, dir)
			if err != nil || !slices.Equal(offs, []int64{10}) {
				t.Fatalf("snapshots %v, %v; want only 10", offs, err)
			}
			got, off, err := LoadSnapshot(vfs.Default, dir, 100)
			if err != nil || off != 10 {
				t.Fatalf("LoadSnapshot: offset %d, %v", off, err)
			}
			psSameState(t, got, want)
			// LoadSnapshot removed any leftover temporary file.
			ents, err := os.ReadDir(dir)
			if err != nil || len(ents) != 1 {
				t.Fatalf("directory holds %d entries (%v), want the one snapshot", len(ents), err)
			}
			// With the fault gone, writing works again.
			ffs.DiskFull(-1)
			for op := range vfs.OpRead + 1 {
				ffs.Fail(op, nil)
			}
			if err := want.WriteSnapshot(ffs, dir, 20); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestProducerSnapshotDelete(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		op   func(dir string) error
		want []int64
	}{
		{name: "above", op: func(dir string) error { return DeleteSnapshotsAbove(vfs.Default, dir, 10) }, want: []int64{5, 10}},
		{name: "above everything", op: func(dir string) error { return DeleteSnapshotsAbove(vfs.Default, dir, 30) }, want: []int64{5, 10, 20, 30}},
		{name: "below", op: func(dir string) error { return DeleteSnapshotsBelow(vfs.Default, dir, 15, 0) }, want: []int64{20, 30}},
		{name: "below keeps one", op: func(dir string) error { return DeleteSnapshotsBelow(vfs.Default, dir, 100, 1) }, want: []int64{30}},
		{name: "below keeps two", op: func(dir string) error { return DeleteSnapshotsBelow(vfs.Default, dir, 25, 2) }, want: []int64{20, 30}},
		{name: "below keeps more than exist", op: func(dir string) error { return DeleteSnapshotsBelow(vfs.Default, dir, 100, 9) }, want: []int64{5, 10, 20, 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for _, off := range []int64{30, 5, 20, 10} {
				psWriteAt(t, vfs.Default, dir, off)
			}
			// Other files of the partition directory are not snapshots.
			for _, name := range []string{"00000000000000000000.log", "leader-epoch-checkpoint", "1.snapshot", "0000000000000000000x.snapshot"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := tt.op(dir); err != nil {
				t.Fatal(err)
			}
			got, err := ListSnapshots(vfs.Default, dir)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("snapshots %v (%v), want %v", got, err, tt.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != len(tt.want)+4 {
				t.Fatalf("%d directory entries, want %d", len(ents), len(tt.want)+4)
			}
		})
	}
}
