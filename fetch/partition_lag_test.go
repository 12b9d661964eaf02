package fetch

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The lag in seconds of a partition, with the clock injected: 0 at a
// caught-up answer, then the time since that answer; while behind, the
// time since the copy last reached a high watermark the source named; a
// partition left without answers keeps growing; before any answer bounds
// it, the last copied batch's timestamp; unknown before anything.
func TestLagTracker(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		observe bool  // observe(hw, sent, leo) or, if false, copied(bytes, offsets, ts)
		hw, leo int64 // observe
		sent    float64
		bytes   int64 // copied
		offsets int64
		ts      int64
	}
	for _, tc := range []struct {
		name  string
		steps []step
		leo   int64
		now   float64
		lag   float64 // seconds; -1: unknown
	}{
		{name: "unknown before anything", leo: 5, now: 3, lag: -1},
		{name: "caught up at the answer", steps: []step{{observe: true, hw: 10, leo: 10, sent: 1}}, leo: 10, now: 1, lag: 0},
		{name: "caught up, then no answer: grows", steps: []step{{observe: true, hw: 10, leo: 10, sent: 1}}, leo: 10, now: 61, lag: 60},
		{name: "behind since the last caught-up answer", steps: []step{
			{observe: true, hw: 10, leo: 10, sent: 1},
			{observe: true, hw: 500, leo: 20, sent: 2},
			{observe: true, hw: 900, leo: 30, sent: 3},
		}, leo: 30, now: 10, lag: 9},
		{name: "catching up passes the marks", steps: []step{
			{observe: true, hw: 10, leo: 10, sent: 1},
			{observe: true, hw: 500, leo: 20, sent: 2},
			{observe: true, hw: 900, leo: 600, sent: 3},
		}, leo: 600, now: 10, lag: 8},
		{name: "caught up again", steps: []step{
			{observe: true, hw: 10, leo: 10, sent: 1},
			{observe: true, hw: 500, leo: 20, sent: 2},
			{observe: true, hw: 900, leo: 900, sent: 3},
		}, leo: 900, now: 3.5, lag: 0.5},
		{name: "behind from the start: the last batch's timestamp", steps: []step{
			{observe: true, hw: 900, leo: 0, sent: 100},
			{bytes: 1000, offsets: 10, ts: at(40).UnixMilli()},
			{observe: true, hw: 950, leo: 10, sent: 101},
		}, leo: 10, now: 102, lag: 62},
		{name: "behind from the start, until the first mark is reached", steps: []step{
			{observe: true, hw: 900, leo: 0, sent: 100},
			{bytes: 1000, offsets: 900, ts: at(99).UnixMilli()},
			{observe: true, hw: 950, leo: 900, sent: 101},
		}, leo: 900, now: 102, lag: 2},
		{name: "a high watermark that went down (a new source leader) is ignored", steps: []step{
			{observe: true, hw: 40, leo: 40, sent: 1},
			{observe: true, hw: 100, leo: 50, sent: 2},
			{observe: true, hw: 60, leo: 60, sent: 3},
		}, leo: 60, now: 5, lag: 4},
		{name: "the same high watermark again: a later mark", steps: []step{
			{observe: true, hw: 100, leo: 100, sent: 1},
			{observe: true, hw: 100, leo: 100, sent: 2},
		}, leo: 100, now: 5, lag: 3},
		{name: "the log cut below every mark: the older bound", steps: []step{
			{observe: true, hw: 10, leo: 10, sent: 1},
			{observe: true, hw: 20, leo: 20, sent: 2},
		}, leo: 15, now: 5, lag: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lt := newLagTracker()
			for _, s := range tc.steps {
				if s.observe {
					lt.observe(s.hw, at(s.sent), s.leo)
				} else {
					lt.copied(s.bytes, s.offsets, s.ts)
				}
			}
			since := lt.since(tc.leo)
			if tc.lag < 0 {
				if !since.IsZero() {
					t.Fatalf("since %v, want unknown", since)
				}
				return
			}
			if got := at(tc.now).Sub(since).Seconds(); got != tc.lag {
				t.Fatalf("lag %vs, want %vs", got, tc.lag)
			}
		})
	}
}

// Whatever the answers, the kept marks never give a lag below the one all
// marks would give (the bound an operator alerts on is never too low),
// and the latest answer the copy reached is exact unless its high
// watermark went down. A log cut below
// every kept mark may leave the lag unknown (reported as such, +Inf),
// never lower.
func TestLagTrackerNeverUnderReports(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 200 {
		lt := newLagTracker()
		var all []hwMark
		hw, leo, top := int64(0), int64(0), int64(0)
		for i := range 300 {
			hw = max(hw+rng.Int64N(50)-5, 0) // mostly up, sometimes down (a new leader)
			if rng.IntN(10) == 0 {
				leo = max(leo-rng.Int64N(20), 0) // a cut log
			} else {
				leo = min(leo+rng.Int64N(60), hw)
			}
			sent := time.Unix(0, int64(i+1)*int64(time.Second))
			top = max(top, hw)
			lt.observe(hw, sent, leo)
			all = append(all, hwMark{hw: hw, sent: sent.UnixNano()})
			exact := int64(-1)
			for _, m := range all {
				if m.hw <= leo {
					exact = max(exact, m.sent)
				}
			}
			got := lt.since(leo)
			if exact < 0 && !got.IsZero() {
				t.Fatalf("run %d step %d: since %v with no mark at or below %d", run, i, got, leo)
			}
			if got.IsZero() {
				continue
			}
			if got.UnixNano() > exact {
				t.Fatalf("run %d step %d: since %v, later than the exact %v (an under-reported lag)",
					run, i, got, time.Unix(0, exact))
			}
			if leo >= hw && hw == top && got.UnixNano() != sent.UnixNano() {
				t.Fatalf("run %d step %d: caught up at %v, since %v", run, i, sent, got)
			}
		}
	}
}

// Lag bytes: the record lag times the bytes per offset copied; 0 before
// anything is copied.
func TestLagTrackerBytes(t *testing.T) {
	t.Parallel()
	lt := newLagTracker()
	if got := lt.lagBytes(100); got != 0 {
		t.Fatalf("nothing copied: %d bytes", got)
	}
	lt.copied(10_000, 100, -1)
	lt.copied(5_000, 100, -1)
	if got := lt.lagBytes(40); got != 3_000 {
		t.Fatalf("lag of 40 offsets at 75 B each: %d bytes", got)
	}
	if got := lt.lagBytes(0); got != 0 {
		t.Fatalf("no lag: %d bytes", got)
	}
}

// The tracker runs for every partition of every Fetch answer: no
// allocation.
func TestLagTrackerAllocs(t *testing.T) {
	lt := newLagTracker()
	hw, sent := int64(0), time.Unix(1, 0)
	if n := testing.AllocsPerRun(1000, func() {
		hw += 7
		sent = sent.Add(time.Millisecond)
		lt.observe(hw, sent, hw-20)
		lt.copied(100, 7, 5)
		_ = lt.since(hw - 20)
	}); n > 0 {
		t.Fatalf("%v allocations per answer", n)
	}
}

// BenchmarkLagTracker is the per-answer cost of the lag tracking: a mark,
// a copy and a read, with the copy behind (marks accumulate and halve) or
// caught up (one mark replaced).
func BenchmarkLagTracker(b *testing.B) {
	for _, behind := range []int64{0, 1000} {
		b.Run(fmt.Sprintf("behind=%d", behind), func(b *testing.B) {
			b.ReportAllocs()
			lt := newLagTracker()
			hw, sent := int64(0), time.Unix(1, 0)
			for b.Loop() {
				hw += 7
				sent = sent.Add(time.Millisecond)
				lt.observe(hw, sent, max(hw-behind, 0))
				lt.copied(100, 7, 5)
				_ = lt.since(max(hw-behind, 0))
			}
		})
	}
}
