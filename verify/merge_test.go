package verify

import (
	"errors"
	"fmt"
	"testing"
)

func TestMerge(t *testing.T) {
	t.Parallel()
	damaged := h(10, 19, 100, 2)
	damaged.damaged = true
	tests := []struct {
		name           string
		src, cp        []header
		compared, diff int64
		first          int64
		missing, only  string
	}{
		{name: "identical", src: []header{h(0, 9, 100, 1), h(10, 19, 100, 2)}, cp: []header{h(0, 9, 100, 1), h(10, 19, 100, 2)},
			compared: 2, first: -1, missing: "[]", only: "[]"},
		{name: "empty", first: -1, missing: "[]", only: "[]"},
		{name: "crc differs", src: []header{h(0, 9, 100, 1), h(10, 19, 100, 2)}, cp: []header{h(0, 9, 100, 1), h(10, 19, 100, 3)},
			compared: 1, diff: 1, first: 10, missing: "[]", only: "[]"},
		{name: "length differs", src: []header{h(0, 9, 100, 1)}, cp: []header{h(0, 9, 101, 1)},
			diff: 1, first: 0, missing: "[]", only: "[]"},
		{name: "damaged copy", src: []header{h(0, 9, 100, 1), h(10, 19, 100, 2)}, cp: []header{h(0, 9, 100, 1), damaged},
			compared: 1, diff: 1, first: 10, missing: "[]", only: "[]"},
		{name: "copy lacks a run", src: []header{h(0, 9, 1, 1), h(10, 19, 1, 2), h(20, 29, 1, 3), h(30, 39, 1, 4)},
			cp: []header{h(0, 9, 1, 1), h(30, 39, 1, 4)}, compared: 2, diff: 2, first: 10,
			missing: "[10..29(copy-lacks-batch)]", only: "[]"},
		{name: "source lacks one (compacted away)", src: []header{h(0, 9, 1, 1), h(20, 29, 1, 3)},
			cp: []header{h(0, 9, 1, 1), h(10, 19, 1, 2), h(20, 29, 1, 3)}, compared: 2, diff: 1, first: 10,
			missing: "[]", only: "[10..19(source-lacks-batch)]"},
		{name: "boundaries differ", src: []header{h(0, 9, 1, 1)}, cp: []header{h(0, 4, 1, 5), h(5, 9, 1, 6)},
			diff: 2, first: 0, missing: "[]", only: "[]"},
		{name: "copy ends early", src: []header{h(0, 9, 1, 1), h(10, 19, 1, 2)}, cp: []header{h(0, 9, 1, 1)},
			compared: 1, diff: 1, first: 10, missing: "[10..19(copy-lacks-batch)]", only: "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := Result{FirstDiff: -1}
			m := merger{res: &r}
			if err := m.run(&sliceCursor{hs: tt.src}, &sliceCursor{hs: tt.cp}); err != nil {
				t.Fatal(err)
			}
			if r.ComparedBatches != tt.compared || r.DifferingBatches != tt.diff || r.FirstDiff != tt.first {
				t.Errorf("compared %d differing %d first %d, want %d %d %d", r.ComparedBatches, r.DifferingBatches, r.FirstDiff,
					tt.compared, tt.diff, tt.first)
			}
			if got := fmt.Sprint(r.MissingInCopy.List); got != tt.missing {
				t.Errorf("missing in copy %s, want %s", got, tt.missing)
			}
			if got := fmt.Sprint(r.OnlyInCopy.List); got != tt.only {
				t.Errorf("only in copy %s, want %s", got, tt.only)
			}
			if tt.compared > 0 && r.ComparedBytes != tt.compared*(12+int64(tt.src[0].length)) {
				t.Errorf("compared bytes %d", r.ComparedBytes)
			}
		})
	}
}

// A cursor error ends the merge with that error, after what came before
// it was compared.
func TestMergeCursorError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := Result{FirstDiff: -1}
	m := merger{res: &r}
	err := m.run(&sliceCursor{hs: []header{h(0, 9, 1, 1), h(10, 19, 1, 2)}}, &sliceCursor{hs: []header{h(0, 9, 1, 1)}, err: boom})
	if !errors.Is(err, boom) || r.ComparedBatches != 1 {
		t.Fatalf("err %v, compared %d; want boom after 1", err, r.ComparedBatches)
	}
}

// Ranges keep maxRanges and count the others.
func TestRangesBounded(t *testing.T) {
	t.Parallel()
	var rs Ranges
	for i := range int64(20) {
		rs.add(Range{First: i * 10, Last: i*10 + 1, Reason: ReasonCopyLacks}, false)
	}
	if len(rs.List) != maxRanges || rs.More != 20-maxRanges {
		t.Fatalf("%d kept, %d more", len(rs.List), rs.More)
	}
}

func TestWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		s0, sh, c0, ch, stop int64
		from, to             int64
		only, notCopied      string
	}{
		{name: "caught up", s0: 0, sh: 100, c0: 0, ch: 100, stop: -1, from: 0, to: 100, only: "[]", notCopied: "[]"},
		{name: "lagging", s0: 0, sh: 150, c0: 0, ch: 100, stop: -1, from: 0, to: 100, only: "[]",
			notCopied: "[100..149(after-copy-end)]"},
		{name: "source retention", s0: 40, sh: 100, c0: 0, ch: 100, stop: -1, from: 40, to: 100,
			only: "[0..39(source-log-start)]", notCopied: "[]"},
		{name: "mirror started late", s0: 0, sh: 100, c0: 60, ch: 100, stop: -1, from: 60, to: 100, only: "[]",
			notCopied: "[0..59(before-copy-start)]"},
		{name: "stopped, written after", s0: 0, sh: 100, c0: 0, ch: 130, stop: 100, from: 0, to: 100,
			only: "[100..129(written-after-stop)]", notCopied: "[]"},
		{name: "stopped, source went on", s0: 0, sh: 120, c0: 0, ch: 101, stop: 100, from: 0, to: 100,
			only: "[100..100(written-after-stop)]", notCopied: "[100..119(source-after-stop)]"},
		{name: "source lost its tail", s0: 0, sh: 80, c0: 0, ch: 100, stop: -1, from: 0, to: 80,
			only: "[80..99(after-source-end)]", notCopied: "[]"},
		{name: "nothing in common", s0: 200, sh: 300, c0: 0, ch: 100, stop: -1, from: 200, to: 100,
			only: "[0..99(source-log-start)]", notCopied: "[200..299(after-copy-end)]"},
		{name: "both empty", s0: 5, sh: 5, c0: 5, ch: 5, stop: -1, from: 5, to: 5, only: "[]", notCopied: "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := Result{SourceLogStart: tt.s0, SourceHighWatermark: tt.sh, CopyLogStart: tt.c0, CopyHighWatermark: tt.ch, StoppedAt: tt.stop}
			window(&r)
			if r.From != tt.from || r.To != tt.to {
				t.Errorf("window [%d, %d), want [%d, %d)", r.From, r.To, tt.from, tt.to)
			}
			if got := fmt.Sprint(r.OnlyInCopy.List); got != tt.only {
				t.Errorf("only in copy %s, want %s", got, tt.only)
			}
			if got := fmt.Sprint(r.NotCopied.List); got != tt.notCopied {
				t.Errorf("not copied %s, want %s", got, tt.notCopied)
			}
		})
	}
}
