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
// on a partition leaves it in fetch.StateFailed; watchFailures persists
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
//     .max.backoff.ms), up to mirror.failed.retry.max.attempts. FAILED is
//     persisted, and shown, between attempts; the attempt count goes on
//     rising across attempts and is cleared only once the partition
//     fetches successfully again.

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
	attempt int32     // attempts so far: the failure being waited out is attempt's
	at      time.Time // when the next attempt is due
	started time.Time // when the last attempt started (zero: none yet)
}

// failureTick is how often watchFailures looks at the fetchers.
const failureTick = 250 * time.Millisecond

// watchFailures runs checkFailures every failureTick.
func (c *Controller) watchFailures() {
	defer c.wg.Done()
	t := time.NewTicker(failureTick)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.checkFailures(time.Now())
	}
}

// checkFailures records new fetcher failures, runs the retries that are
// due and forgets the schedules of partitions that fetch again.
func (c *Controller) checkFailures(now time.Time) {
	byMirror := map[string][]fetch.Status{}
	for _, st := range c.fm.Statuses() {
		byMirror[st.Mirror] = append(byMirror[st.Mirror], st)
	}
	mirrors, err := c.store.Mirrors()
	if err != nil {
		return
	}
	for _, m := range mirrors {
		c.checkMirrorFailures(m.Name, byMirror[m.Name], now)
	}
}

// checkMirrorFailures is checkFailures for one mirror, under its lock.
func (c *Controller) checkMirrorFailures(mirror string, statuses []fetch.Status, now time.Time) {
	defer c.lockMirror(mirror)()
	c.finishAlignments(mirror)
	retries := c.ctl(mirror).retries
	for _, st := range statuses {
		key := partitionKey{st.Mirror, st.Topic, st.Partition}
		if st.State == fetch.StateFetching {
			if r := retries[key]; r != nil && !r.started.IsZero() && st.LastFetch.After(r.started) {
				delete(retries, key) // fetching again: the count starts over at the next failure
			}
			continue
		}
		if st.State != fetch.StateFailed {
			continue
		}
		// The snapshot above was taken without the lock: a Recover, Start,
		// Pause or Stop may have restarted or removed the fetcher since.
		// Acting on the stale status would persist FAILED over a
		// partition that mirrors again.
		cur, err := c.fm.Status(st.Mirror, st.Topic, st.Partition)
		if err != nil || cur.State != fetch.StateFailed {
			continue
		}
		m, err := c.store.GetMirror(st.Mirror)
		if err != nil {
			continue
		}
		ps := c.partitionState(st.Mirror, st.Topic, st.Partition)
		switch ps.State {
		case state.StateMirroring, state.StateLogAlignment, state.StateEpochFencing, state.StateULERecovery:
			c.recordFailure(m, ps, cur, now)
		case state.StateFailed:
			c.retryIfDue(m, ps, now)
		}
	}
}

// recordFailure persists a fresh fetcher failure. REQUIRES: the mirror's lock held.
func (c *Controller) recordFailure(m state.Mirror, ps state.MirrorPartitionState, st fetch.Status, now time.Time) {
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
		delete(c.ctl(ps.Mirror).retries, key)
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

// scheduleRetry sets the next attempt after a failure counted as attempt,
// if attempts are left. REQUIRES: the mirror's lock held.
func (c *Controller) scheduleRetry(ps state.MirrorPartitionState, attempt int32) {
	key, retries := partitionKey{ps.Mirror, ps.Topic, ps.Partition}, c.ctl(ps.Mirror).retries
	r := retries[key]
	if r == nil {
		r = &retrySchedule{}
		retries[key] = r
	}
	r.attempt, r.at = attempt, time.Now().Add(backoff(c.cfg, attempt))
}

// retryIfDue restarts a FAILED, retriable partition whose backoff has
// passed. REQUIRES: the mirror's lock held.
func (c *Controller) retryIfDue(m state.Mirror, ps state.MirrorPartitionState, now time.Time) {
	r := c.ctl(ps.Mirror).retries[partitionKey{ps.Mirror, ps.Topic, ps.Partition}]
	if ps.RetryAttempt <= 0 || c.cfg.RetryMaxAttempts < 0 || ps.RetryAttempt >= c.cfg.RetryMaxAttempts {
		return // not retried: an operator recovers it
	}
	if r == nil {
		c.scheduleRetry(ps, ps.RetryAttempt)
		return
	}
	if now.Before(r.at) {
		return
	}
	r.started = now
	if err := c.startPartition(m, ps.Topic, ps.Partition); err != nil {
		c.log.Warn("retrying a failed partition", "mirror", ps.Mirror, "topic", ps.Topic, "partition", ps.Partition,
			"attempt", r.attempt+1, "err", err)
	}
}

// uncleanRecovery runs ULE_RECOVERY: the operator allowed the copy to
// follow a source that lost records. REQUIRES: the mirror's lock held.
func (c *Controller) uncleanRecovery(m state.Mirror, ps state.MirrorPartitionState, e *fetch.SourceTruncatedError) {
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
