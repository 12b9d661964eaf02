package storage

import (
	"testing"
)

// PreviewTruncateTo says exactly what TruncateTo then does: the log end it
// leaves and the records and bytes it removes, for a cut inside a batch,
// on a batch boundary, in a compaction gap, across segments, below the log
// start (a full truncation) and at the end (nothing), and it changes
// nothing itself.
func TestPreviewTruncateTo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		offset  int64
		end     int64 // the log end TruncateTo leaves
		records int64
		ok      bool
	}{
		{"inside a batch", 42, 40, 40 + 4, true}, // 40-43 goes whole, then 48.. (44-47 is a gap)
		{"on a boundary", 40, 40, 44, true},
		{"in a gap", 45, 45, 40, true},
		{"first segment", 4, 4, 80, true},
		{"below the log start", 0, 0, 80, true},
		{"at the end", 88, 0, 0, false},
		{"past the end", 100, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := openTestLog(t, t.TempDir(), Config{SegmentBytes: 1024})
			defer l.Close()
			// Batches of 4 records at 4, 8, ..., 84, but none at 44 (a
			// compaction gap): log start 4, end 88, several segments.
			for i := 1; i < 22; i++ {
				if i == 11 {
					continue
				}
				if _, err := l.AppendMirror(dataBatch(int64(i*4), 4, 30, int32(i/5), -1, -1, int64(i))); err != nil {
					t.Fatal(err)
				}
			}
			if l.NumSegments() < 3 {
				t.Fatalf("want several segments, have %d", l.NumSegments())
			}
			if tc.name == "below the log start" {
				if err := l.SetLogStartOffset(4); err != nil {
					t.Fatal(err)
				}
			}
			size, leo, segs := l.Size(), l.LogEndOffset(), l.NumSegments()
			got, ok, err := l.PreviewTruncateTo(tc.offset)
			if err != nil {
				t.Fatal(err)
			}
			if l.Size() != size || l.LogEndOffset() != leo || l.NumSegments() != segs {
				t.Fatalf("the preview changed the log: size %d->%d, end %d->%d", size, l.Size(), leo, l.LogEndOffset())
			}
			if ok != tc.ok || ok && (got.End != tc.end || got.Records != tc.records) {
				t.Fatalf("preview of %d: %+v ok %v, want end %d records %d ok %v", tc.offset, got, ok, tc.end, tc.records, tc.ok)
			}
			if err := l.TruncateTo(tc.offset); err != nil {
				t.Fatal(err)
			}
			wantEnd, wantSize := leo, size
			if ok {
				wantEnd, wantSize = got.End, size-got.Bytes
			}
			if l.LogEndOffset() != wantEnd || l.Size() != wantSize {
				t.Fatalf("TruncateTo(%d) left end %d size %d; the preview said end %d size %d (%+v)",
					tc.offset, l.LogEndOffset(), l.Size(), wantEnd, wantSize, got)
			}
		})
	}
}
