package fetch

import "time"

// The RPO of a mirrored partition, in seconds and bytes (issue 18 item 2).
//
// Lag in seconds is the age of the oldest source record the copy lacks,
// the record at the local log end. Its timestamp is unknown until it is
// fetched, and a record timestamp (CreateTime, set by the producer) says
// little about when the record reached the source anyway: a replay job
// writes records stamped last year. So the age is measured on this node's
// clock, as "how long ago did that record reach the source log, at the
// latest":
//
//	A Fetch sent at time S whose answer names source high watermark H says
//	that at some moment after S the source had committed nothing at or
//	above H. So every record at an offset >= H was committed after S.
//	(Across a source leader change the high watermark can go down for a
//	moment; observe says how that is handled.)
//
// Each answer is such a mark (H, S). For the local log end L, the latest
// mark with H <= L bounds the oldest missing record: it reached the source
// after S, so the lag is at most now - S. That is an upper bound by
// construction (the age is never under-reported, whatever the clocks of
// producers and source brokers say), and it is tight: a caught-up
// partition (L == H at the last answer) is at most one fetch round old
// (mirror.fetch.wait.max.ms plus a round trip, since the source holds an
// idle fetch that long), and while the copy is behind, L passes the marks
// of older answers in order, so the bound tracks the catch-up. A partition
// that gets no answer (a dead source, FAILED, a leader that cannot be
// found) keeps its last mark, and its lag grows with the clock.
//
// Only when no mark bounds L, which happens when the copy has been behind
// ever since its fetcher started (a new mirror copying history, a node
// restarted behind the source), is the lag estimated from the
// MaxTimestamp of the last batch copied: the record at L came after it in
// the source log. That estimate is as good as the source's timestamps; it
// ends at the first answer whose high watermark the copy reaches. Before
// anything is copied or bounded the lag is unknown, and so it may be
// after the log is cut below every mark kept (only while aligning).
//
// Lag in bytes cannot be had exactly: Kafka's Fetch answer tells the
// source's offsets, not the bytes between two of them. So it is an
// estimate: the lag in records times the bytes per offset of the batches
// this fetcher copied (compaction gaps count as offsets, as they do in the
// record lag), 0 until it copied any.

// lagMarks is how many marks a partition keeps. When they are all in use,
// every other one is dropped: a dropped mark only makes the bound coarser
// (an older S is used for the offsets it covered), never wrong, and
// halving keeps marks spread over a long catch-up.
const lagMarks = 16

// hwMark says that every record at offset >= hw reached the source after
// sent (unix nanoseconds, when the Fetch that read hw was sent).
type hwMark struct {
	hw, sent int64
}

// lagTracker holds a partition's marks and copy statistics. Guarded by
// partState.mu; no allocation.
type lagTracker struct {
	marks [lagMarks]hwMark
	n     int
	// lastTimestamp is the MaxTimestamp (unix milliseconds) of the last
	// batch appended, -1 when none was.
	lastTimestamp int64
	// bytes and offsets copied by this fetcher: the bytes per offset.
	bytes, offsets int64
}

func newLagTracker() lagTracker { return lagTracker{lastTimestamp: -1} }

// observe records the answer of a Fetch sent at sent that named source
// high watermark hw, after which the local log ends at leo.
//
// Marks stay strictly increasing in both hw and sent. The same hw again
// moves its mark's time forward (the statement holds later too). A lower
// hw is ignored: Kafka's high watermark is not monotonic across a leader
// change (a new leader's lags the old one's until its followers fetch), so
// records below the highest hw seen may have been committed long before;
// a mark for them would under-report. The marks below leo but the latest
// are of no more use (leo only goes back when the log is cut, and then an
// older bound is still a bound, just a coarser one).
//
// Caveat: a new source leader can also name the highest hw seen while the
// old one had already committed past it, unseen; records committed in
// that election window can then be counted up to one fetch round younger.
func (t *lagTracker) observe(hw int64, sent time.Time, leo int64) {
	if hw < 0 || t.n > 0 && hw < t.marks[t.n-1].hw {
		return
	}
	if k := t.covering(leo); k > 0 {
		t.n = copy(t.marks[:], t.marks[k:t.n])
	}
	if t.n > 0 && t.marks[t.n-1].hw == hw {
		t.marks[t.n-1].sent = sent.UnixNano()
		return
	}
	if t.n == lagMarks {
		for i := 0; i < lagMarks/2; i++ {
			t.marks[i] = t.marks[2*i]
		}
		t.n = lagMarks / 2
	}
	t.marks[t.n] = hwMark{hw: hw, sent: sent.UnixNano()}
	t.n++
}

// covering is the index of the latest mark at or below leo, -1 if none.
func (t *lagTracker) covering(leo int64) int {
	for i := t.n - 1; i >= 0; i-- {
		if t.marks[i].hw <= leo {
			return i
		}
	}
	return -1
}

// copied records an append of bytes bytes covering offsets offsets, whose
// last batch has MaxTimestamp maxTimestamp.
func (t *lagTracker) copied(bytes, offsets, maxTimestamp int64) {
	t.bytes += bytes
	t.offsets += offsets
	if maxTimestamp >= 0 {
		t.lastTimestamp = maxTimestamp
	}
}

// since is when the oldest record missing from a copy ending at leo
// reached the source, at the latest (see above); zero when unknown.
func (t *lagTracker) since(leo int64) time.Time {
	if k := t.covering(leo); k >= 0 {
		return time.Unix(0, t.marks[k].sent)
	}
	if t.lastTimestamp >= 0 {
		return time.UnixMilli(t.lastTimestamp)
	}
	return time.Time{}
}

// lagBytes estimates the bytes of lag records (see above).
func (t *lagTracker) lagBytes(lag int64) int64 {
	if t.offsets <= 0 || lag <= 0 {
		return 0
	}
	return int64(float64(lag) * float64(t.bytes) / float64(t.offsets))
}
