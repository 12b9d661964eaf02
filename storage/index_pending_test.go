package storage

import "testing"

// The index entries an append holds back reach the files at Flush, and a
// rolled segment's at the roll: a clean open finds them all.
func TestIndexFilesWrittenAtFlushAndRoll(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openTestLog(t, dir, Config{SegmentBytes: 4000, IndexIntervalBytes: 1})
	var want int
	for i := range 20 {
		if _, err := l.AppendMirror(dataBatch(int64(i), 1, 300, 0, -1, -1, int64(i))); err != nil {
			t.Fatal(err)
		}
		want++
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	var got int64
	segs := l.segments()
	for _, s := range segs {
		fi, err := l.fs.Stat(s.path + ".index")
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != int64(len(s.ix.offsets))*offsetEntrySize {
			t.Fatalf("segment %d: %d index bytes on disk for %d entries", s.base, fi.Size(), len(s.ix.offsets))
		}
		got += fi.Size() / offsetEntrySize
	}
	if len(segs) < 2 || got != int64(want) {
		t.Fatalf("%d segments, %d index entries on disk, want %d", len(segs), got, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
