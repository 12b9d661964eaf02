package control

import (
	"time"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/state"
)

// The fetchers' events (fetch/events.go) and the failed partitions' retry
// timers reach the partitions' state machine here. Each mirror's are
// handled in order, on a goroutine of that mirror's (drain) under its
// lock: the fetchers never wait on the store or a lock of this package,
// no poll of their statuses is needed, and a mirror whose lock a slow
// stop holds delays no other mirror's events. An event can be stale by
// the time it is handled (the partition was restarted, paused or stopped
// since): each is checked against the fetcher's current status first.

// queued is an event or a retry that is due.
type queued struct {
	ev fetch.Event
	// retry, when set, is the schedule whose timer fired for key (and ev
	// is unset).
	retry *retrySchedule
	seq   uint64 // the retry's timer
	key   partitionKey
}

// onFetchEvent is the fetchers' Events callback: it queues, never blocks.
func (c *Plane) onFetchEvent(ev fetch.Event) {
	c.queue(queued{ev: ev, key: partitionKey{ev.Mirror, ev.Topic, ev.Partition}})
}

// queue hands q to its mirror's drain, started if none runs. After
// Close, nothing is queued.
func (c *Plane) queue(q queued) {
	mc := c.ctl(q.key.mirror)
	c.evMu.Lock()
	defer c.evMu.Unlock()
	if c.evClosed {
		return
	}
	mc.events = append(mc.events, q)
	if !mc.draining {
		mc.draining = true
		c.wg.Add(1) // before Close's Wait: evClosed is set under evMu first
		go c.drain(mc)
	}
}

// drain handles a mirror's queued events in order until none is left.
func (c *Plane) drain(mc *mirrorCtl) {
	defer c.wg.Done()
	for {
		c.evMu.Lock()
		qs := mc.events
		mc.events = nil
		if len(qs) == 0 || c.ctx.Err() != nil {
			mc.draining = false
			c.evMu.Unlock()
			return
		}
		c.evMu.Unlock()
		for _, q := range qs {
			c.handle(q)
		}
	}
}

// persistRetry is how soon an event whose transition could not be
// persisted is handled again.
const persistRetry = time.Second

// requeue handles the event of kind for key again after persistRetry:
// its transition could not be persisted, and no other event would come
// (the fetcher reports each occasion once). It is checked against the
// fetcher's status then, as any event.
func (c *Plane) requeue(key partitionKey, kind fetch.EventKind) {
	time.AfterFunc(persistRetry, func() {
		c.queue(queued{ev: fetch.Event{Mirror: key.mirror, Topic: key.topic, Partition: key.partition, Kind: kind}, key: key})
	})
}

// closeEvents stops the queueing; Close then waits for the drains.
func (c *Plane) closeEvents() {
	c.evMu.Lock()
	c.evClosed = true
	c.evMu.Unlock()
}

func (c *Plane) handle(q queued) {
	defer c.lockMirror(q.key.mirror)()
	if q.retry != nil {
		c.retryDue(q.key, q.retry, q.seq)
		return
	}
	cur, err := c.fm.Status(q.key.mirror, q.key.topic, q.key.partition)
	if err != nil {
		return // stopped, paused, or its mirror removed since
	}
	switch q.ev.Kind {
	case fetch.EventFetching:
		if cur.State == fetch.StateFailed || cur.Aligning {
			return // a later fetcher of the partition, not the one that fetched
		}
		c.finishAlignment(q.key)
		if r := c.ctl(q.key.mirror).retries[q.key]; r != nil && r.started {
			c.forgetRetry(q.key) // fetching again: the count starts over at the next failure
		}
	case fetch.EventFailed:
		if cur.State != fetch.StateFailed {
			return // restarted since (a Recover, Start, Pause or Stop)
		}
		m, err := c.store.GetMirror(q.key.mirror)
		if err != nil {
			return
		}
		ps := c.partitionState(q.key.mirror, q.key.topic, q.key.partition)
		switch ps.State {
		case state.StateMirroring, state.StateLogAlignment, state.StateEpochFencing, state.StateULERecovery:
			c.recordFailure(m, ps, cur)
		}
	}
}
