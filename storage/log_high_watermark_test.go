package storage

import (
	"encoding/binary"
	"testing"

	"github.com/kmirror/kmirror/batch"
)

// openExternalHW opens a log whose owner moves the high watermark, holding
// batches of 2 records at 0, 2, ..., 2*(n-1) in segments of about 3
// batches.
func openExternalHW(t *testing.T, dir string, n int) *Log {
	t.Helper()
	l := openTestLog(t, dir, Config{SegmentBytes: 300, ExternalHighWatermark: true})
	for i := range n {
		if _, err := l.AppendMirror(dataBatch(int64(2*i), 2, 20, 0, -1, -1, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// With ExternalHighWatermark, appends leave the high watermark where it
// is; SetHighWatermark raises it, clamped into [log start, log end], and
// never lowers it.
func TestSetHighWatermark(t *testing.T) {
	t.Parallel()
	l := openExternalHW(t, t.TempDir(), 5) // log end 10
	defer l.Close()
	if l.HighWatermark() != 0 || l.LogEndOffset() != 10 {
		t.Fatalf("after appends: hw %d leo %d, want 0 and 10", l.HighWatermark(), l.LogEndOffset())
	}
	for _, step := range []struct {
		set   int64
		moved bool
		want  int64
	}{
		{4, true, 4},
		{3, false, 4}, // never back
		{4, false, 4},
		{-5, false, 4},
		{7, true, 7},   // inside a batch: Kafka's high watermark is any offset
		{99, true, 10}, // clamped to the log end
		{11, false, 10},
	} {
		if moved := l.SetHighWatermark(step.set); moved != step.moved || l.HighWatermark() != step.want {
			t.Fatalf("SetHighWatermark(%d): moved %v hw %d, want %v %d", step.set, moved, l.HighWatermark(), step.moved, step.want)
		}
	}
	// The log start bounds it from below: a log restarted at 20.
	if err := l.TruncateFullyAndStartAt(20); err != nil {
		t.Fatal(err)
	}
	if l.HighWatermark() != 20 || l.SetHighWatermark(5) || l.HighWatermark() != 20 {
		t.Fatalf("after restarting at 20: hw %d, want 20", l.HighWatermark())
	}
}

// Truncation below the high watermark brings it down to the new log end;
// a truncation above it leaves it; a log start moved up keeps it at or
// above the log start; DeleteRecords (SetLogStartOffset) never passes it
// and retention never deletes a segment that reaches past it.
func TestHighWatermarkTruncationAndLogStart(t *testing.T) {
	t.Parallel()
	t.Run("truncate below", func(t *testing.T) {
		t.Parallel()
		l := openExternalHW(t, t.TempDir(), 5)
		defer l.Close()
		l.SetHighWatermark(10)
		if err := l.TruncateTo(5); err != nil { // inside the batch at 4: it goes whole
			t.Fatal(err)
		}
		if l.LogEndOffset() != 4 || l.HighWatermark() != 4 {
			t.Fatalf("leo %d hw %d, want 4 and 4", l.LogEndOffset(), l.HighWatermark())
		}
	})
	t.Run("truncate above", func(t *testing.T) {
		t.Parallel()
		l := openExternalHW(t, t.TempDir(), 5)
		defer l.Close()
		l.SetHighWatermark(3)
		if err := l.TruncateTo(8); err != nil {
			t.Fatal(err)
		}
		if l.LogEndOffset() != 8 || l.HighWatermark() != 3 {
			t.Fatalf("leo %d hw %d, want 8 and 3", l.LogEndOffset(), l.HighWatermark())
		}
	})
	t.Run("delete records", func(t *testing.T) {
		t.Parallel()
		l := openExternalHW(t, t.TempDir(), 5)
		defer l.Close()
		l.SetHighWatermark(6)
		if err := l.SetLogStartOffset(7); err == nil {
			t.Fatalf("log start moved to 7 past the high watermark 6")
		}
		if err := l.SetLogStartOffset(6); err != nil || l.LogStartOffset() != 6 || l.HighWatermark() != 6 {
			t.Fatalf("log start 6: %v, start %d hw %d", err, l.LogStartOffset(), l.HighWatermark())
		}
	})
	t.Run("retention", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		l := openExternalHW(t, dir, 12)
		defer l.Close()
		if err := l.SetConfig(Config{SegmentBytes: 300, RetentionBytes: 1, ExternalHighWatermark: true}); err != nil {
			t.Fatal(err)
		}
		segs := l.segments()
		if len(segs) < 4 {
			t.Fatalf("want at least 4 segments, have %d", len(segs))
		}
		hw := segs[2].base + 1 // inside the third segment
		l.SetHighWatermark(hw)
		n, err := l.ApplyRetention()
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 || l.LogStartOffset() != segs[2].base {
			t.Fatalf("retention deleted %d segments, log start %d; want 2 (the ones below the high watermark %d), start %d",
				n, l.LogStartOffset(), hw, segs[2].base)
		}
		if l.HighWatermark() != hw {
			t.Fatalf("hw %d after retention, want %d", l.HighWatermark(), hw)
		}
	})
}

// With the high watermark below the log end, every read a consumer can
// make stops there: read_uncommitted reads, the last stable offset
// (read_committed reads), and the offsets a read reports.
func TestReadsStopAtHighWatermark(t *testing.T) {
	t.Parallel()
	l := openExternalHW(t, t.TempDir(), 5)
	defer l.Close()
	// An open transaction past the high watermark: it does not pull the
	// LSO above the high watermark.
	txn := dataBatch(10, 2, 5, 0, 9, 0, 1)
	binary.BigEndian.PutUint16(txn[21:], 0x10)
	binary.BigEndian.PutUint32(txn[17:], batch.Checksum(txn[21:]))
	if _, err := l.AppendMirror(txn); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(6)
	if l.LastStableOffset() != 6 {
		t.Fatalf("lso %d, want the high watermark 6", l.LastStableOffset())
	}
	for _, upTo := range []int64{l.HighWatermark(), l.LastStableOffset()} {
		var got []int64
		for off := int64(0); ; {
			buf, info, err := l.Read(off, 1<<20, upTo, nil)
			if err != nil {
				t.Fatal(err)
			}
			if info.HighWatermark != 6 || info.LastStableOffset != 6 || info.LogEndOffset != 12 {
				t.Fatalf("read info %+v, want hw 6 lso 6 leo 12", info)
			}
			if len(buf) == 0 {
				break
			}
			it := batch.NewIterator(buf)
			for b, ok := it.Next(); ok; b, ok = it.Next() {
				got = append(got, b.BaseOffset())
				off = b.NextOffset()
			}
		}
		if len(got) != 3 || got[2] != 4 {
			t.Fatalf("read up to %d: batches at %v, want 0 2 4", upTo, got)
		}
	}
	// Between the high watermark and the log end: in range, nothing.
	if _, info, err := l.Read(8, 1<<20, l.HighWatermark(), nil); err != nil || info.FirstOffset != -1 {
		t.Fatalf("read at 8 past the high watermark: %+v %v", info, err)
	}
}

// A reopened log whose owner sets the high watermark starts it at the log
// start (the owner then applies its checkpoint); the default starts at the
// log end, as before.
func TestHighWatermarkAtReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openExternalHW(t, dir, 5)
	l.SetHighWatermark(6)
	if err := l.SetLogStartOffset(2); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, Config{SegmentBytes: 300, ExternalHighWatermark: true})
	if l.HighWatermark() != 2 || l.LogEndOffset() != 10 {
		t.Fatalf("reopened: hw %d leo %d, want 2 (the log start) and 10", l.HighWatermark(), l.LogEndOffset())
	}
	if !l.SetHighWatermark(6) || l.HighWatermark() != 6 {
		t.Fatalf("hw %d after setting 6", l.HighWatermark())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, dir, Config{SegmentBytes: 300})
	defer l.Close()
	if l.HighWatermark() != 10 {
		t.Fatalf("reopened without ExternalHighWatermark: hw %d, want the log end 10", l.HighWatermark())
	}
}
