package control

import (
	"errors"
	"strings"
	"time"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/state"

	"github.com/kmirror/kmirror/internal/retry"
)

// Failed partitions (SPEC.md section 4, FAILED). A fetcher that gives up
// on a partition reports fetch.EventFailed (events.go); handle persists
// FAILED and then, by what the failure was:
//
//   - not retriable (fetch.ErrNotRetriable: the source topic was
//     recreated, the source lost records this copy holds): FAILED with
//     RetryAttempt -1, until an operator recovers, stops or restarts it;
//     the local log is untouched;
//   - the source lost records (fetch.SourceTruncatedError) and the
//     mirror's mirror.unclean.leader.election.enable is true: ULE_RECOVERY,
//     a restart with fetch.StartAlign that cuts the copy to the source's
//     end, then MIRRORING;
//   - anything else: retried after a jittered exponential backoff
//     (mirror.failed.retry.initial.backoff.ms doubling up to
//     .max.backoff.ms), up to mirror.failed.retry.max.attempts, by a
//     timer per partition (scheduleRetry). FAILED is persisted, and
//     shown, between attempts; the attempt count goes on rising across
//     attempts and is cleared only once the partition fetches again
//     (fetch.EventFetching).

// uncleanElectionConfig is the KIP's unclean-election switch, a mirror
// config (default false).
const uncleanElectionConfig = "mirror.unclean.leader.election.enable"

// partitionKey names a mirror partition.
type partitionKey struct {
	mirror, topic string
	partition     int32
}

// retrySchedule is a failed partition's retry bookkeeping.
type retrySchedule struct {
	attempt int32       // attempts so far: the failure being waited out is attempt's
	at      time.Time   // when the next attempt is due
	started bool        // the attempt has started (a fetcher runs it)
	timer   *time.Timer // queues the attempt at at; nil when none is due
	seq     uint64      // counts the timers armed: a firing of an older one is ignored
}

// recordFailure persists a fresh fetcher failure. REQUIRES: the mirror's lock held.
func (c *Plane) recordFailure(m state.Mirror, ps state.MirrorPartitionState, st fetch.Status) {
	key := partitionKey{ps.Mirror, ps.Topic, ps.Partition}
	msg := "fetcher stopped"
	if st.Err != nil {
		msg = st.Err.Error()
	}
	var truncated *fetch.SourceTruncatedError
	switch {
	case errors.As(st.Err, &truncated) && strings.EqualFold(m.Configs[uncleanElectionConfig], "true"):
		c.uncleanRecovery(m, ps, truncated)
		return
	case errors.Is(st.Err, fetch.ErrNotRetriable):
		c.forgetRetry(key)
		c.failNonRetryable(ps, msg)
		return
	}
	attempt := int32(1)
	if r := c.ctl(ps.Mirror).retries[key]; r != nil {
		attempt = r.attempt + 1
	}
	prev := ps.State
	if st.Aligning {
		prev = state.StateLogAlignment // the alignment did not finish: a retry aligns again
	}
	ps.Previous, ps.RetryAttempt = prev, attempt
	if err := c.store.PutMirrorPartitionState(withFailure(ps, msg)); err != nil {
		c.log.Warn("marking a partition failed", "mirror", ps.Mirror, "topic", ps.Topic, "partition", ps.Partition, "err", err)
		c.requeue(key, fetch.EventFailed) // the store may recover
		return
	}
	c.scheduleRetry(ps, attempt)
	c.log.Warn("mirror partition failed", "mirror", ps.Mirror, "topic", ps.Topic, "partition", ps.Partition,
		"attempt", attempt, "max_attempts", c.cfg.RetryMaxAttempts, "retry_in", time.Until(c.ctl(ps.Mirror).retries[key].at).Round(time.Millisecond),
		"err", msg)
}

func withFailure(ps state.MirrorPartitionState, msg string) state.MirrorPartitionState {
	ps.State, ps.ErrorMessage = state.StateFailed, msg
	return ps
}

// scheduleRetry sets the next attempt after a failure counted as attempt
// and, if attempts are left, arms its timer, which queues the attempt
// for the mirror's drain (events.go, retryDue). REQUIRES: the mirror's lock held.
func (c *Plane) scheduleRetry(ps state.MirrorPartitionState, attempt int32) {
	key, retries := partitionKey{ps.Mirror, ps.Topic, ps.Partition}, c.ctl(ps.Mirror).retries
	r := retries[key]
	if r == nil {
		r = &retrySchedule{}
		retries[key] = r
	}
	stopRetry(r)
	d := backoff(c.cfg, attempt)
	r.attempt, r.at, r.started = attempt, time.Now().Add(d), false
	if retriesLeft(c.cfg, attempt) {
		r.seq++
		seq := r.seq
		r.timer = time.AfterFunc(d, func() { c.queue(queued{retry: r, seq: seq, key: key}) })
	}
}

// retriesLeft reports whether a partition whose failure was attempt is
// retried again (not: an operator recovers it).
func retriesLeft(cfg Config, attempt int32) bool {
	return attempt > 0 && cfg.RetryMaxAttempts >= 0 && attempt < cfg.RetryMaxAttempts
}

func stopRetry(r *retrySchedule) {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}

// forgetRetry drops a partition's retry schedule (recovered, failed for
// good). REQUIRES: the mirror's lock held.
func (c *Plane) forgetRetry(key partitionKey) {
	retries := c.ctl(key.mirror).retries
	if r := retries[key]; r != nil {
		stopRetry(r)
		delete(retries, key)
	}
}

// retryDue restarts a FAILED, retriable partition whose backoff has
// passed, unless timer seq of r is no longer its schedule (recovered,
// failed again, the mirror deleted) or the partition left FAILED
// meanwhile. REQUIRES: the mirror's lock held.
func (c *Plane) retryDue(key partitionKey, r *retrySchedule, seq uint64) {
	if c.ctl(key.mirror).retries[key] != r || r.timer == nil || r.seq != seq {
		return
	}
	r.timer = nil
	m, err := c.store.GetMirror(key.mirror)
	if err != nil {
		return
	}
	ps := c.partitionState(key.mirror, key.topic, key.partition)
	if ps.State != state.StateFailed || !retriesLeft(c.cfg, ps.RetryAttempt) {
		return
	}
	r.started = true
	if err := c.startPartition(m, ps.Topic, ps.Partition); err != nil {
		c.log.Warn("retrying a failed partition", "mirror", ps.Mirror, "topic", ps.Topic, "partition", ps.Partition,
			"attempt", r.attempt+1, "err", err)
	}
}

// uncleanRecovery runs ULE_RECOVERY: the operator allowed the copy to
// follow a source that lost records. REQUIRES: the mirror's lock held.
func (c *Plane) uncleanRecovery(m state.Mirror, ps state.MirrorPartitionState, e *fetch.SourceTruncatedError) {
	c.log.Warn("source lost records this copy holds; "+uncleanElectionConfig+"=true: truncating the copy to the source",
		"mirror", ps.Mirror, "topic", ps.Topic, "partition", ps.Partition, "local_end", e.LocalEnd, "source_end", e.SourceEnd)
	if err := c.setState(ps, state.StateULERecovery, e.Error()); err != nil {
		c.failNonRetryable(c.partitionState(ps.Mirror, ps.Topic, ps.Partition), e.Error())
		return
	}
	if err := c.startPartition(m, ps.Topic, ps.Partition); err != nil {
		c.log.Warn("ULE_RECOVERY", "mirror", ps.Mirror, "topic", ps.Topic, "partition", ps.Partition, "err", err)
	}
}

// backoff is the wait before the retry that follows failure n: initial x
// 2^(n-1), capped, with 20% jitter.
func backoff(cfg Config, n int32) time.Duration {
	d := cfg.RetryInitial
	for i := int32(1); i < n && d < cfg.RetryMax; i++ {
		d *= 2
	}
	return retry.Jitter(min(d, cfg.RetryMax))
}
