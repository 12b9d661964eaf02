package partition

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/storage"
)

// Settings are the topic configs the node enforces itself, outside the log
// (the log's own come as a storage.Config).
type Settings struct {
	// MaxMessageBytes is max.message.bytes, checked by Produce.
	MaxMessageBytes int32
	// Compact is cleanup.policy containing compact, for the maintenance
	// pass.
	Compact bool
	// LogAppendTime is message.timestamp.type=LogAppendTime.
	LogAppendTime bool
}

// Partition is one partition this node hosts: its log, its local leader
// epoch and the fetches and produces waiting on it.
type Partition struct {
	topic *Topic
	index int32
	log   *storage.Log

	maxMessageBytes  atomic.Int32
	compact          atomic.Bool
	appendTimestamps atomic.Bool
	// epochFloor is the persisted local leader epoch of a mirrored
	// partition (state.PutLeaderEpoch): the epoch never goes below it,
	// even when a truncation removes the batches that carried higher ones.
	epochFloor atomic.Int32
	// published is the leader epoch of the partition in the node's last
	// metadata image (SetPublishedEpoch), so an append sees at the cost
	// of one load whether it moved the epoch.
	published atomic.Int32

	// replicas is the partition's replica set (replicas.go).
	replicas replicaSet

	waitMu  sync.Mutex
	waiters []chan struct{}
	// wakes counts wake calls: a waiter that read p before it
	// registered compares it to learn of a wake it missed (Wakes).
	wakes atomic.Uint64
}

// Topic is the partition's topic.
func (p *Partition) Topic() *Topic { return p.topic }

// Index is the partition's number in its topic.
func (p *Partition) Index() int32 { return p.index }

// Log is the partition's log. The node's handlers read and write it
// directly (the Fetch and Produce paths); a fetcher that copies another
// log goes through Follower instead.
func (p *Partition) Log() *storage.Log { return p.log }

// MaxMessageBytes is the topic's max.message.bytes.
func (p *Partition) MaxMessageBytes() int32 { return p.maxMessageBytes.Load() }

// Compact reports whether cleanup.policy includes compact.
func (p *Partition) Compact() bool { return p.compact.Load() }

// LogAppendTime reports message.timestamp.type=LogAppendTime.
func (p *Partition) LogAppendTime() bool { return p.appendTimestamps.Load() }

// applySettings sets the partition's node-enforced topic configs.
func (p *Partition) applySettings(s Settings) {
	p.maxMessageBytes.Store(s.MaxMessageBytes)
	p.compact.Store(s.Compact)
	p.appendTimestamps.Store(s.LogAppendTime)
}

// LeaderEpoch is this node's leader epoch for the partition: the newest
// epoch in the log's epoch cache (0 for a new log), or the persisted
// floor when that is higher. A single node never changes leaders; the
// mirror control plane bumps epochs by appending.
func (p *Partition) LeaderEpoch() int32 {
	epoch := p.epochFloor.Load()
	if e, ok := p.log.Epochs().Latest(); ok && e.Epoch > epoch {
		return e.Epoch
	}
	return epoch
}

// SetPublishedEpoch records the leader epoch the node's metadata image now
// holds for the partition.
func (p *Partition) SetPublishedEpoch(epoch int32) { p.published.Store(epoch) }

// PublishedEpoch is the leader epoch last recorded by SetPublishedEpoch.
func (p *Partition) PublishedEpoch() int32 { return p.published.Load() }

// Wait registers ch to be signalled at the next append (or deletion of the
// topic).
func (p *Partition) Wait(ch chan struct{}) {
	p.waitMu.Lock()
	p.waiters = append(p.waiters, ch)
	p.waitMu.Unlock()
}

// Wakes counts the wakes so far (appends, high watermark moves, the
// topic's deletion). A waiter reads it before it reads the partition and
// again once registered with Wait: a change means a wake came in between,
// which no signal will repeat (Kafka's DelayedFetch checks again after
// it starts watching, for the same reason).
func (p *Partition) Wakes() uint64 { return p.wakes.Load() }

// Unwait removes ch if it is still registered.
func (p *Partition) Unwait(ch chan struct{}) {
	p.waitMu.Lock()
	for i, w := range p.waiters {
		if w == ch {
			last := len(p.waiters) - 1
			p.waiters[i] = p.waiters[last]
			p.waiters[last] = nil
			p.waiters = p.waiters[:last]
			break
		}
	}
	p.waitMu.Unlock()
}

// Waiting is how many fetches and produces are registered with Wait.
func (p *Partition) Waiting() int {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	return len(p.waiters)
}

// Appended is called after every append the node makes to p (produce,
// mirror appends, transaction markers and other control batches). A
// partition committed at every append (one without an assignment, or
// whose ISR is this node alone) raises its high watermark to the log end
// (see hw_checkpoint.go); a leader with followers moves it as they fetch
// (replicas.go). Appended has p's leader epoch published if the append
// moved it, then wakes p's waiters.
func (p *Partition) Appended() {
	p.advanceHighWatermark()
	p.epochMaybeMoved()
	p.wake()
}

// WakeWaiters wakes p's waiters without an append: share partitions
// call it when records they released are there to acquire again.
func (p *Partition) WakeWaiters() { p.wake() }

// epochMaybeMoved tells the registry's EpochMoved hook when p's leader
// epoch is no longer the one last published. While the epoch holds it
// costs two atomic loads and no call: it runs after every append.
func (p *Partition) epochMaybeMoved() {
	if p.LeaderEpoch() == p.published.Load() {
		return
	}
	if m := p.topic.m; m != nil && m.cfg.EpochMoved != nil {
		m.cfg.EpochMoved(p)
	}
}

// wake wakes every long-poll Fetch and acks=all produce waiting on the
// partition.
func (p *Partition) wake() {
	p.wakes.Add(1)
	p.waitMu.Lock()
	for i, w := range p.waiters {
		select {
		case w <- struct{}{}:
		default:
		}
		p.waiters[i] = nil
	}
	p.waiters = p.waiters[:0]
	p.waitMu.Unlock()
}

// maintain runs retention, compaction, time-based flush and producer
// expiry for the partition.
//
// A mirrored topic (every mirror state but STOPPED: the topic still
// belongs to its mirror) is neither compacted nor trimmed by retention,
// whatever its cleanup.policy, retention.ms and retention.bytes say: its
// log is the source's, byte for byte and offset for offset (DESIGN.md
// decisions 1 and 2), and the metadata sync copies the source's configs,
// so a local cleaner would rewrite batches the source still holds as they
// are (it once kept 300 records of the source's 400) and retention would
// drop records the source still serves. The source's cleaner and
// retention already act on the copy: the fetcher moves the local log
// start up to the source's (fetch's followLogStart) and compacted batches
// arrive compacted, gaps included. After failover (SetMirror(name, ""))
// the topic is this node's and both run as for any topic.
//
// A pass may have listed the partition just before its topic was deleted;
// under maintainMu it sees the deletion and does nothing (Manager.Delete).
func (p *Partition) maintain(now time.Time) error {
	p.topic.maintainMu.RLock()
	defer p.topic.maintainMu.RUnlock()
	if p.topic.deleted {
		return nil
	}
	var errs []error
	if !p.topic.ReadOnly() {
		if _, err := p.log.ApplyRetention(); err != nil {
			errs = append(errs, fmt.Errorf("retention: %w", err))
		}
		if p.compact.Load() {
			if _, err := p.log.Compact(now); err != nil {
				errs = append(errs, fmt.Errorf("compaction: %w", err))
			}
		}
	}
	if err := p.log.FlushIfDue(); err != nil {
		errs = append(errs, fmt.Errorf("flush: %w", err))
	}
	p.log.Producers().ExpireProducers(now.UnixMilli(), p.log.Config().ProducerIDExpirationMs)
	return errors.Join(errs...)
}
