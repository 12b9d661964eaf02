package fetch

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/storage"

	"github.com/kmirror/kmirror/internal/retry"
)

// State is what a partition's fetcher is doing, for Status: the
// partition's lifecycle (the KIP-1279 states, FAILED and its retries) is
// the control plane's, which learns of a failure from EventFailed.
type State int8

const (
	// StateResolving: looking for the source leader.
	StateResolving State = iota
	// StateFetching: owned by a fetcher.
	StateFetching
	// StateBackoff: a retriable error; fetching resumes after a backoff.
	StateBackoff
	// StateFailed: stopped on an error a fetch retry cannot fix (a
	// corrupt batch, storage failure), reported as EventFailed; the
	// control plane restarts it with StartPartition.
	StateFailed
)

var stateNames = [...]string{"resolving", "fetching", "backoff", "failed"}

func (s State) String() string { return stateNames[s] }

// Status is a snapshot of a mirrored partition.
type Status struct {
	Mirror    string
	Topic     string
	Partition int32
	State     State
	Err       error
	// SourceLeader and SourceEpoch are the source leader and its epoch.
	SourceLeader int32
	SourceEpoch  int32
	// SourceHighWatermark and SourceLogStart are from the last response.
	SourceHighWatermark int64
	SourceLogStart      int64
	LogEndOffset        int64
	// Lag is the source high watermark minus the local log end (0 until
	// the first response). It is only as fresh as SourceUpdated.
	Lag int64
	// LagSince is when the oldest source record the copy lacks reached
	// the source, at the latest: now - LagSince is the lag in seconds, an
	// upper bound that keeps growing while no answer comes (zero: unknown,
	// nothing answered or copied yet). LagBytes estimates the bytes of
	// Lag. partition_lag.go says how both are measured.
	LagSince time.Time
	LagBytes int64
	// SourceUpdated is when SourceHighWatermark was last read from the
	// source (zero: never). LastFetch is the last Fetch answer for this
	// partition without an error; Stalled is set when the partition has
	// gone without one for longer than request.timeout.ms since it
	// started (a dead source broker, a leader that cannot be found), so a
	// stale lag is never taken for a current one.
	SourceUpdated time.Time
	LastFetch     time.Time
	Stalled       bool
	// NoSourceTopicIDs is set once the source metadata showed no topic id
	// for the topic (Kafka before 2.8): it is fetched by name and its
	// local topic id is one this node assigned.
	NoSourceTopicIDs bool
	// Aligning is set while a partition started with StartAlign has not
	// had its fetch position accepted by the source yet: it may still cut
	// its log to the source's.
	Aligning bool
}

// epochMargin: the local leader epoch stays at least this far above every
// appended source epoch, and is bumped by epochBump when the gap shrinks
// below it (DESIGN.md decision 3).
const (
	epochMargin = 3
	epochBump   = 10
)

// partState is one mirrored partition. Its fields are guarded by mu: the
// fetcher that owns it writes them, Status reads them.
type partState struct {
	tp     topicPartition
	local  partition.Follower
	mirror *mirror

	mu             sync.Mutex
	state          State
	err            error
	retryAt        time.Time
	leader         int32
	sourceEpoch    int32
	sourceHW       int64
	sourceLogStart int64
	sourceUpdated  time.Time // when sourceHW was read
	lastFetch      time.Time // last answer without an error
	started        time.Time
	fetcher        *fetcher
	stopped        bool
	fetched        bool // EventFetching was sent
	checkEpoch     bool // run OffsetForLeaderEpoch before fetching
	// align is set by StartAlign until the source first accepts the
	// fetch position: only then may the local log be cut to the
	// source's (LOG_ALIGNMENT, ULE_RECOVERY). Afterwards every sign that
	// the source lost records we hold fails the partition instead.
	align bool
	// sourceTopicID is the source's id for the topic, checked equal to
	// the local one by the resolver; zero for sources without topic ids
	// (before Kafka 2.8), which are fetched by name.
	sourceTopicID [16]byte
	// verifyTopic asks the resolver to check again that the source topic
	// is still the one copied (the source answered UNKNOWN_TOPIC_ID or
	// UNKNOWN_TOPIC_OR_PARTITION).
	verifyTopic bool
	noSourceIDs bool // the source metadata had no id for the topic
	lag         lagTracker
}

func (ps *partState) status() Status {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	st := Status{Mirror: ps.mirror.cfg.Name, Topic: ps.tp.topic, Partition: ps.tp.partition, State: ps.state, Err: ps.err,
		SourceLeader: ps.leader, SourceEpoch: ps.sourceEpoch, SourceHighWatermark: ps.sourceHW,
		SourceLogStart: ps.sourceLogStart, LogEndOffset: ps.local.LogEndOffset(),
		SourceUpdated: ps.sourceUpdated, LastFetch: ps.lastFetch, Aligning: ps.align, NoSourceTopicIDs: ps.noSourceIDs}
	if ps.sourceHW >= 0 {
		st.Lag = max(ps.sourceHW-st.LogEndOffset, 0)
	}
	st.LagSince, st.LagBytes = ps.lag.since(st.LogEndOffset), ps.lag.lagBytes(st.Lag)
	since := ps.started
	if ps.lastFetch.After(since) {
		since = ps.lastFetch
	}
	// A fetch may wait fetch.wait.max.ms at the source before it answers,
	// then up to request.timeout.ms on the wire.
	st.Stalled = ps.state != StateFailed && time.Since(since) > ps.mirror.cfg.RequestTimeout+ps.mirror.cfg.FetchWaitMax
	return st
}

func (ps *partState) needsLeader() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return !ps.stopped && ps.fetcher == nil && (ps.state == StateResolving ||
		ps.state == StateBackoff && !time.Now().Before(ps.retryAt))
}

func (ps *partState) takeEpochCheck() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	c := ps.checkEpoch
	ps.checkEpoch = false
	return c
}

// ownedBy reports whether f is the partition's current fetcher.
// Lock order: a fetcher's mu, then ps.mu.
func (ps *partState) ownedBy(f *fetcher) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.fetcher == f
}

func (ps *partState) assigned(f *fetcher, li leaderInfo) {
	ps.mu.Lock()
	ps.fetcher, ps.leader, ps.sourceEpoch, ps.state, ps.err = f, li.leader, li.epoch, StateFetching, nil
	ps.mu.Unlock()
}

// fail stops the partition: for good (an operator restarts it) or, when
// retry is set, until the resolver picks it up after a backoff.
func (ps *partState) fail(err error, retriable bool) {
	// One jittered delay for both the retry time and the resolver's
	// wake-up: a wake-up before retryAt finds nothing due, and nothing
	// else would wake the resolver again.
	delay := retry.Jitter(ps.mirror.cfg.FetchBackoff)
	ps.mu.Lock()
	ps.err, ps.fetcher = err, nil
	if retriable {
		ps.state, ps.retryAt = StateBackoff, time.Now().Add(delay)
	} else {
		ps.state = StateFailed
	}
	stopped := ps.stopped
	ps.mu.Unlock()
	if !retriable && !stopped {
		ps.event(EventFailed, err)
	}
	lvl := "mirrored partition stopped"
	if retriable {
		lvl = "mirrored partition backing off"
	}
	ps.mirror.m.log.Warn(lvl, "mirror", ps.mirror.cfg.Name, "topic", ps.tp.topic, "partition", ps.tp.partition, "err", err)
	if retriable {
		ps.mirror.wakeResolverAfter(delay)
	}
}

// backoff sends a partition of fetcher f back to the resolver after
// delay, without a log line of its own (the fetcher logs once for all its
// partitions). It reports whether ps was f's.
// The caller wakes the resolver once delay has passed.
func (ps *partState) backoff(f *fetcher, err error, delay time.Duration) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	mine := ps.fetcher == f && !ps.stopped
	if mine {
		ps.err, ps.fetcher, ps.leader = err, nil, -1
		ps.state, ps.retryAt = StateBackoff, time.Now().Add(delay)
	}
	return mine
}

// topicID is the source topic id the partition is fetched by (zero: by
// name).
func (ps *partState) topicID() [16]byte {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.sourceTopicID
}

// rehome sends the partition back to the resolver: its leader moved.
func (ps *partState) rehome(reason error) {
	ps.mu.Lock()
	ps.fetcher, ps.state, ps.err, ps.leader = nil, StateResolving, reason, -1
	ps.mu.Unlock()
	ps.mirror.wakeResolver()
}

// fetchPosition is what the next Fetch asks for this partition.
func (ps *partState) fetchPosition() (offset int64, currentEpoch, lastFetchedEpoch int32) {
	l := ps.local
	lastFetchedEpoch = -1
	if e, ok := l.LatestEpoch(); ok {
		lastFetchedEpoch = e
	}
	ps.mu.Lock()
	currentEpoch = ps.sourceEpoch
	ps.mu.Unlock()
	return l.LogEndOffset(), currentEpoch, lastFetchedEpoch
}

// handle applies one partition of the answer to a Fetch sent at sent. It
// returns true when the fetcher must drop the partition (rehomed or
// failed).
func (ps *partState) handle(f *fetcher, rp *kmsg.FetchResponseTopicPartition, sent time.Time) (drop bool) {
	if rp.ErrorCode != 0 {
		return ps.handleError(f, rp)
	}
	ps.mu.Lock()
	ps.sourceHW, ps.sourceLogStart, ps.sourceUpdated = rp.HighWatermark, rp.LogStartOffset, time.Now()
	ps.mu.Unlock()
	if rp.DivergingEpoch.EndOffset >= 0 {
		if err := ps.truncateDiverged(rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset, "diverging epoch in Fetch"); err != nil {
			ps.fail(err, false)
			return true
		}
		return false
	}
	if err := ps.appendBatches(rp.RecordBatches, rp.HighWatermark, &f.chunk); err != nil {
		ps.fail(err, false)
		return true
	}
	if err := ps.followLogStart(rp.LogStartOffset); err != nil {
		ps.fail(err, false)
		return true
	}
	leo := ps.local.LogEndOffset()
	ps.mu.Lock()
	ps.lastFetch, ps.align = time.Now(), false
	ps.lag.observe(rp.HighWatermark, sent, leo)
	first := !ps.fetched
	ps.fetched = true
	ps.mu.Unlock()
	if first {
		ps.event(EventFetching, nil)
	}
	return false
}

func (ps *partState) handleError(f *fetcher, rp *kmsg.FetchResponseTopicPartition) (drop bool) {
	err := kerr.ErrorForCode(rp.ErrorCode)
	switch rp.ErrorCode {
	case kerr.FencedLeaderEpoch.Code:
		// The source moved on: adopt the epoch it names if the leader is
		// still this broker, else find the new leader.
		cl := rp.CurrentLeader
		ps.mu.Lock()
		adopt := cl.LeaderID == f.key.broker && cl.LeaderEpoch > ps.sourceEpoch
		if adopt {
			ps.sourceEpoch = cl.LeaderEpoch
		}
		ps.mu.Unlock()
		if adopt {
			return false
		}
		ps.rehome(err)
		return true
	case kerr.UnknownTopicID.Code, kerr.InconsistentTopicID.Code:
		// Fetched by topic id and refused: the source topic of that id is
		// gone (deleted, perhaps recreated under the same name). The
		// resolver compares the ids again before anything else happens.
		fallthrough
	case kerr.UnknownTopicOrPartition.Code:
		ps.mu.Lock()
		ps.verifyTopic = true
		ps.mu.Unlock()
		ps.rehome(err)
		return true
	case kerr.NotLeaderForPartition.Code, kerr.ReplicaNotAvailable.Code, kerr.LeaderNotAvailable.Code:
		ps.rehome(err)
		return true
	case kerr.OffsetOutOfRange.Code:
		if err := ps.resetOutOfRange(); err != nil {
			ps.fail(err, !errors.Is(err, ErrNotRetriable))
			return true
		}
		return false
	}
	if kerr.IsRetriable(err) || rp.ErrorCode == kerr.UnknownLeaderEpoch.Code {
		ps.fail(err, true)
		return true
	}
	ps.fail(fmt.Errorf("source answered %w", err), false)
	return true
}

// appendBatches checks and appends the whole batches of a response.
// Batches ending below the log end (the source answered from inside a
// batch we hold) are skipped; a partial trailing batch is left for the
// next fetch. A corrupt batch is never appended: the batches before it
// are, and the error names its offset.
//
// Offsets are checked before anything is appended: batches must follow
// each other (each starts past the last one's end) and end below the
// source high watermark. The base offset lies outside the CRC, so a batch
// whose offset changed in transit passes the CRC check; appended, it
// would leave a hole or a duplicate no consumer can read past.
//
// The walk that checks the CRCs collects the batches' summary into c (the
// fetcher's, reused), which the log appends without walking them again.
func (ps *partState) appendBatches(records []byte, sourceHW int64, c *batch.Chunk) error {
	if len(records) == 0 {
		return nil
	}
	l := ps.local
	leo := l.LogEndOffset()
	it := batch.NewIterator(records)
	it.Collect(c)
	defer c.Reset()
	start, end, lastFrom := -1, 0, 0
	// The batches yielded so far, and the first and past-last of those
	// to append, as indexes into c.
	n, first, past := 0, -1, 0
	maxEpoch := int32(-1)
	rewrite := ps.mirror.cfg.ProducerIDRewrite
	prevLast := int64(-1)
	var refused error
	for {
		from := it.Consumed()
		b, ok := it.Next()
		if !ok {
			break
		}
		n++
		if b.BaseOffset() <= prevLast || b.LastOffset() < b.BaseOffset() {
			refused = fmt.Errorf("source batch at %d-%d does not follow the batch before it (ending at %d); "+
				"nothing from it on appended", b.BaseOffset(), b.LastOffset(), prevLast)
			break
		}
		prevLast = b.LastOffset()
		if sourceHW >= 0 && b.LastOffset() >= sourceHW {
			refused = fmt.Errorf("source batch at %d-%d lies beyond the source high watermark %d; nothing from it on appended",
				b.BaseOffset(), b.LastOffset(), sourceHW)
			break
		}
		if b.LastOffset() < leo && start < 0 {
			continue
		}
		if b.BaseOffset() < leo {
			// An empty log restarted at a source log start that lies
			// inside a batch (DeleteRecords lands mid-batch): the source
			// answers with the whole batch. As a Kafka follower does,
			// restart the log at the batch's base offset; followLogStart
			// then moves the log start back up to the source's.
			if start >= 0 || leo != l.LogStartOffset() {
				return fmt.Errorf("source batch at %d-%d overlaps the local log end %d", b.BaseOffset(), b.LastOffset(), leo)
			}
			if err := l.RestartAt(b.BaseOffset()); err != nil {
				return fmt.Errorf("restarting the empty log at %d: %w", b.BaseOffset(), err)
			}
			leo = b.BaseOffset()
		}
		if start < 0 {
			start, first = from, n-1
		}
		if rewrite {
			// Leaves c right: the summary holds no producer id, and a
			// mapped id is set iff the source's was.
			b.RewriteProducerID()
		}
		maxEpoch = max(maxEpoch, b.PartitionLeaderEpoch())
		lastFrom, end, past = from, it.Consumed(), n
	}
	iterErr := it.Err()
	if refused != nil {
		iterErr = nil
	}
	if start >= 0 {
		if err := ps.raiseEpoch(maxEpoch); err != nil {
			return err
		}
		run := c.Slice(first, past)
		res, err := l.AppendChunk(&run)
		if err != nil {
			return fmt.Errorf("appending at %d: %w", leo, err)
		}
		last := batch.Batch(records[lastFrom:end])
		ps.mu.Lock()
		ps.lag.copied(int64(end-start), l.LogEndOffset()-leo, last.MaxTimestamp())
		ps.mu.Unlock()
		stats := &ps.mirror.m.stats
		stats.BytesMirrored.Add(int64(end - start))
		stats.BatchesMirrored.Add(int64(res.Batches))
		ps.mirror.throttle.spend(int64(end - start))
	}
	if refused != nil {
		return refused
	}
	if iterErr != nil {
		var be *batch.Error
		if errors.As(iterErr, &be) {
			return fmt.Errorf("source batch at offset %d refused, nothing after it appended: %w", be.Offset, iterErr)
		}
		return fmt.Errorf("source records refused: %w", iterErr)
	}
	return nil
}

// raiseEpoch keeps the local leader epoch epochMargin above the newest
// source epoch about to be appended, in steps of epochBump, so a client's
// cached epoch stays valid across several source epoch changes.
func (ps *partState) raiseEpoch(sourceEpoch int32) error {
	if sourceEpoch < 0 {
		return nil
	}
	if local := ps.local.LeaderEpoch(); local-sourceEpoch < epochMargin {
		if err := ps.local.RaiseLeaderEpoch(sourceEpoch + epochBump); err != nil {
			return fmt.Errorf("raising the local leader epoch: %w", err)
		}
	}
	return nil
}

// truncateDiverged handles a divergence from the source as a Kafka
// follower would, at the source's end offset for the epoch, or at ours
// when our history of that epoch ends earlier, but cuts the local log
// only while aligning (mayTruncate); otherwise it returns a
// SourceTruncatedError and the log stays as it is.
func (ps *partState) truncateDiverged(epoch int32, endOffset int64, how string) error {
	to, cut := divergence(wholeLog(ps.local), epoch, endOffset)
	if !cut {
		return nil
	}
	return ps.truncateTo(to, fmt.Sprintf("%s, epoch %d", how, epoch))
}

// truncateTo cuts the local log back to offset to, the source's end,
// when the partition is aligning; a mirroring partition gets a
// SourceTruncatedError instead. For a source without topic ids, the
// source partition is first checked to still be the one copied.
func (ps *partState) truncateTo(to int64, how string) error {
	l := ps.local
	ps.mu.Lock()
	align, noIDs, leader := ps.align, ps.sourceTopicID == [16]byte{}, ps.leader
	ps.mu.Unlock()
	if !align {
		if noIDs {
			// A source without topic ids gives no other sign of a
			// recreated topic: say so if that is what happened.
			if _, err := ps.mirror.sameTopic(ps, leader, [16]byte{}); errors.Is(err, ErrNotRetriable) {
				return err
			}
		}
		return &SourceTruncatedError{Topic: ps.tp.topic, Partition: ps.tp.partition, LocalEnd: l.LogEndOffset(),
			SourceEnd: to, How: how}
	}
	if noIDs {
		if _, err := ps.mirror.sameTopic(ps, leader, [16]byte{}); err != nil {
			return err
		}
	}
	ps.mirror.m.log.Warn("source log ends below the local log end while aligning; truncating", "mirror", ps.mirror.cfg.Name,
		"topic", ps.tp.topic, "partition", ps.tp.partition, "why", how, "to", to, "log_end", l.LogEndOffset())
	if err := l.TruncateTo(to); err != nil {
		return fmt.Errorf("truncating to %d: %w", to, err)
	}
	return nil
}

// followLogStart moves the local log start up to the source's (retention
// or DeleteRecords at the source).
func (ps *partState) followLogStart(sourceStart int64) error {
	l := ps.local
	if sourceStart <= l.LogStartOffset() {
		return nil
	}
	to := min(sourceStart, l.HighWatermark())
	if to <= l.LogStartOffset() {
		return nil
	}
	if err := l.AdvanceLogStart(to); err != nil && !errors.Is(err, storage.ErrOffsetOutOfRange) {
		return fmt.Errorf("following the source log start %d: %w", sourceStart, err)
	}
	return nil
}

// resetOutOfRange handles OFFSET_OUT_OF_RANGE as a Kafka follower does:
// below the source log start, restart there (DESIGN.md decision 1); above
// the source log end (the source lost data), truncate to it.
func (ps *partState) resetOutOfRange() error {
	start, end, err := ps.mirror.sourceOffsets(ps.tp)
	if err != nil {
		return err
	}
	l := ps.local
	leo := l.LogEndOffset()
	switch {
	case leo < start:
		ps.mirror.m.log.Warn("source log start passed the local log end; restarting there", "mirror", ps.mirror.cfg.Name,
			"topic", ps.tp.topic, "partition", ps.tp.partition, "log_end", leo, "source_start", start)
		return l.RestartAt(start)
	case leo > end:
		return ps.truncateTo(end, "OFFSET_OUT_OF_RANGE")
	}
	return fmt.Errorf("offset %d out of range at the source, which holds [%d, %d]", leo, start, end)
}
