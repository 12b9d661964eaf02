package storage

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/testutil"
)

// TestDamagedClosedSegment damages the length of a closed segment's first
// batch (0x7fffffff) behind a clean shutdown. Opening says so at ERROR,
// naming the file; reads there answer a corruption error naming the file
// and position instead of a 2 GiB region no reader could finish (a
// consumer hung at that offset); the other segments still read; and the
// error is logged once, not per read.
func TestDamagedClosedSegment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 256}
	l := openTestLog(t, dir, cfg)
	for i := range 40 {
		if _, err := l.AppendMirror(dataBatch(int64(i*10), 5, 20, 0, -1, -1, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	want := readAll(t, l, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(segs) < 3 {
		t.Fatalf("%d segments, want >= 3", len(segs))
	}
	damaged := segs[1]
	f, err := os.OpenFile(damaged, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var first [batch.HeaderSize]byte
	if _, err := f.ReadAt(first[:], 0); err != nil {
		t.Fatal(err)
	}
	base := int64(binary.BigEndian.Uint64(first[:8]))
	if _, err := f.WriteAt([]byte{0x7f, 0xff, 0xff, 0xff}, 8); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var logs testutil.SyncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	l = openTestLog(t, dir, cfg)
	defer l.Close()
	name := strings.TrimSuffix(filepath.Base(damaged), ".log")
	if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, name) {
		t.Fatalf("opening a log with a damaged segment logged:\n%s", out)
	}
	opened := strings.Count(logs.String(), "level=ERROR")
	for range 3 {
		_, _, err := l.Read(base, 1<<20, l.HighWatermark(), nil)
		if !batch.IsCorruption(err) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "position 0") {
			t.Fatalf("read in the damaged segment at %d: %v, want a corruption naming %s and position 0", base, err, name)
		}
		if r, _, err := l.ReadRegion(base, 1<<20, l.HighWatermark()); !batch.IsCorruption(err) || r.Length != 0 {
			t.Fatalf("ReadRegion in the damaged segment: %+v %v", r, err)
		}
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != opened+1 {
		t.Fatalf("%d ERROR lines after the reads, want one more than the %d of the open:\n%s", n, opened, logs.String())
	}
	// Before and after the damaged segment, reads work.
	if buf, info, err := l.Read(0, 1<<20, base, nil); err != nil || info.FirstOffset != 0 || !bytes.HasPrefix(buf, want[0]) {
		t.Fatalf("reading the first segment, up to the damaged one: first offset %d, %v", info.FirstOffset, err)
	}
	nextBase, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(segs[2]), ".log"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	tail := readAll(t, l, nextBase)
	if len(tail) == 0 || !bytes.Equal(tail[len(tail)-1], want[len(want)-1]) {
		t.Fatalf("reading past the damaged segment from %d: %d batches", nextBase, len(tail))
	}
}
