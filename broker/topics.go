package broker

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
	"github.com/kmirror/kmirror/storage"
)

// deletedSuffix marks a partition directory whose topic was deleted: it is
// renamed first, so a crash never leaves a half-removed log under its live
// name, then removed in the background (and at the next start).
const deletedSuffix = "-delete"

// topic is a topic and its partitions.
type topic struct {
	b       *Broker // the node, for image publication (nil in tests' stand-ins)
	name    string
	id      [16]byte
	configs map[string]string // dynamic topic configs (explicitly set keys)
	// mirror is the cluster mirror owning the topic (nil or "" if none).
	// It is atomic because handlers and the maintenance pass read it
	// without b.mu while SetTopicMirror changes it (failover, failback).
	mirror atomic.Pointer[string]
	// maintainMu is read-held by a maintenance pass over a partition, and
	// write-held by SetTopicMirror and deleteTopic: a topic handed to a
	// mirror (failback) is never cleaned by a pass that checked it just
	// before, after its first mirrored appends, and a deleted topic's
	// partitions are never touched by a pass again (deleted). Taken after
	// Broker.adminMu, before Broker.mu.
	maintainMu sync.RWMutex
	// deleted is set by deleteTopic. Guarded by maintainMu.
	deleted bool
	// partList is replaced (never modified) under Broker.mu when partitions
	// are added, so handlers read it without a lock.
	partList atomic.Pointer[[]*partition]
}

// parts returns the topic's partitions, in index order.
func (t *topic) parts() []*partition {
	if p := t.partList.Load(); p != nil {
		return *p
	}
	return nil
}

// mirrorName is the cluster mirror owning the topic, "" if none.
func (t *topic) mirrorName() string {
	if m := t.mirror.Load(); m != nil {
		return *m
	}
	return ""
}

func (t *topic) setMirror(name string) { t.mirror.Store(&name) }

// readOnly reports whether clients may not write: the topic belongs to a
// cluster mirror (SPEC.md: READ_ONLY_TOPIC until failover, answered as
// POLICY_VIOLATION: see errReadOnlyTopic).
func (t *topic) readOnly() bool { return t.mirrorName() != "" }

// partition is one partition's log and its local leader epoch.
type partition struct {
	topic *topic
	index int32
	log   *storage.Log
	// maxMessageBytes is the topic's max.message.bytes for Produce.
	maxMessageBytes atomic.Int32
	// compact mirrors cleanup.policy for maintenance.
	compact atomic.Bool
	// appendTimestamps is message.timestamp.type=LogAppendTime.
	appendTimestamps atomic.Bool
	// epochFloor is the persisted local leader epoch of a mirrored
	// partition (state.PutLeaderEpoch): the epoch never goes below it,
	// even when a truncation removes the batches that carried higher ones.
	epochFloor atomic.Int32
	// published is the leader epoch of the partition in the last image
	// published (image.go), so an append sees at the cost of one load
	// whether it moved the epoch.
	published atomic.Int32

	waitMu  sync.Mutex
	waiters []chan struct{}
}

// leaderEpoch is this node's leader epoch for the partition: the newest
// epoch in the log's epoch cache (0 for a new log). A single node never
// changes leaders; the mirror control plane bumps epochs by appending.
func (p *partition) leaderEpoch() int32 {
	epoch := p.epochFloor.Load()
	if e, ok := p.log.Epochs().Latest(); ok && e.Epoch > epoch {
		return e.Epoch
	}
	return epoch
}

// checkLeaderEpoch checks a client's CurrentLeaderEpoch (-1: not given)
// against the partition's leader epoch in the metadata image, as Kafka
// does: an older one is FENCED_LEADER_EPOCH (the client must refresh its
// metadata), a newer one UNKNOWN_LEADER_EPOCH (it saw an epoch this node
// has not reached yet).
func checkLeaderEpoch(current, epoch int32) int16 {
	switch {
	case current >= 0 && current < epoch:
		return kerr.FencedLeaderEpoch.Code
	case current > epoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// wait registers ch to be signalled at the next append.
func (p *partition) wait(ch chan struct{}) {
	p.waitMu.Lock()
	p.waiters = append(p.waiters, ch)
	p.waitMu.Unlock()
}

// unwait removes ch if it is still registered.
func (p *partition) unwait(ch chan struct{}) {
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

// appended is called after every append the node makes to p (produce,
// mirror appends, transaction markers and other control batches). On one
// node the appended records are committed at once, so it raises the high
// watermark to the log end (see hw_checkpoint.go), publishes p's leader
// epoch if the append moved it, then wakes p's waiters.
func (p *partition) appended() {
	p.log.SetHighWatermark(p.log.LogEndOffset())
	if b := p.topic.b; b != nil {
		b.epochMoved(p)
	}
	p.wake()
}

// wake wakes every long-poll Fetch and acks=all produce waiting on the
// partition.
func (p *partition) wake() {
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
// arrive compacted, gaps included. After failover (SetTopicMirror(name,
// "")) the topic is this node's and both run as for any topic.
//
// A pass may have listed the partition just before its topic was deleted;
// under maintainMu it sees the deletion and does nothing (deleteTopic).
func (p *partition) maintain(now time.Time) error {
	p.topic.maintainMu.RLock()
	defer p.topic.maintainMu.RUnlock()
	if p.topic.deleted {
		return nil
	}
	var errs []error
	if !p.topic.readOnly() {
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

// newTopicID returns a random topic ID that is neither zero nor, like
// Kafka's Uuid.randomUuid, one whose base64 form starts with '-'.
func newTopicID() ([16]byte, error) {
	for {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return id, err
		}
		if id != ([16]byte{}) && base64.RawURLEncoding.EncodeToString(id[:])[0] != '-' {
			return id, nil
		}
	}
}

// partitionDir is where partition p of topic name lives: the log
// directory holding it already, else the one with the fewest partitions.
func (b *Broker) partitionDir(name string, p int32) string {
	base := name + "-" + strconv.Itoa(int(p))
	best, bestN := b.cfg.LogDirs[0], -1
	for _, d := range b.cfg.LogDirs {
		if _, err := os.Stat(filepath.Join(d, base)); err == nil {
			return filepath.Join(d, base)
		}
		if len(b.cfg.LogDirs) == 1 {
			break
		}
		entries, _ := os.ReadDir(d)
		if bestN < 0 || len(entries) < bestN {
			best, bestN = d, len(entries)
		}
	}
	return filepath.Join(best, base)
}

// openTopic opens the logs of a registered topic.
func (b *Broker) openTopic(st state.Topic) (*topic, error) {
	t := &topic{b: b, name: st.Name, id: st.ID, configs: st.Configs}
	t.setMirror(st.Mirror)
	if t.configs == nil {
		t.configs = map[string]string{}
	}
	epochs, err := b.store.LeaderEpochs(st.ID)
	if err != nil {
		return nil, fmt.Errorf("topic %s: loading leader epochs: %w", st.Name, err)
	}
	if err := b.addPartitions(t, st.Partitions); err != nil {
		return nil, err
	}
	for _, p := range t.parts() {
		p.epochFloor.Store(epochs[p.index])
	}
	return t, nil
}

// addPartitions opens (creating) partitions len(t.parts())..n-1 of t and
// publishes the longer list. On error the partitions it opened are closed
// and the list is unchanged.
// REQUIRES: b.mu held for writing, or t not yet visible to handlers.
func (b *Broker) addPartitions(t *topic, n int32) error {
	cfg, eff, err := b.logConfig(t.configs)
	if err != nil {
		return fmt.Errorf("topic %s: %w", t.name, err)
	}
	old := t.parts()
	parts := slices.Clip(old)
	for i := int32(len(old)); i < n; i++ {
		dir := b.partitionDir(t.name, i)
		l, err := storage.Open(dir, cfg)
		if err == nil {
			// partition.metadata names the topic id, for `kmirror
			// storage rebuild`; a partition from before it gets one now.
			if err = l.SetTopicID(t.id); err != nil {
				l.Close()
			}
		}
		if err != nil {
			for _, p := range parts[len(old):] {
				p.log.Close()
			}
			return fmt.Errorf("opening %s-%d: %w", t.name, i, err)
		}
		if g := b.logSpace[filepath.Dir(dir)]; g != nil {
			l.SetSpaceGuard(g)
		}
		p := &partition{topic: t, index: i, log: l}
		p.applyEffective(eff)
		b.startHighWatermark(p)
		parts = append(parts, p)
	}
	t.partList.Store(&parts)
	return nil
}

// applyEffective sets the partition's broker-enforced topic configs.
func (p *partition) applyEffective(eff effectiveTopicConfig) {
	p.maxMessageBytes.Store(eff.maxMessageBytes)
	p.compact.Store(eff.compact)
	p.appendTimestamps.Store(eff.logAppendTime)
}

// topicByName looks a topic up.
func (b *Broker) topicByName(name string) *topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.topics[name]
}

// topicByID looks a topic up by ID.
func (b *Broker) topicByID(id [16]byte) *topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.topicsByID[id]
}

// errTopicExists is CreateTopics' TOPIC_ALREADY_EXISTS.
var errTopicExists = errors.New("topic already exists")

// errTopicGone: the topic was deleted while a change to it was prepared.
var errTopicGone = errors.New("topic was deleted")

// createTopic registers and opens a topic. configs must be validated.
func (b *Broker) createTopic(name string, partitions int32, configs map[string]string, id [16]byte) (*topic, error) {
	return b.createTopicFor(name, partitions, configs, id, "")
}

// createTopicFor creates a topic, owned by a cluster mirror when mirror is
// not empty (then read-only to clients).
func (b *Broker) createTopicFor(name string, partitions int32, configs map[string]string, id [16]byte, mirror string) (*topic, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.topics[name]; ok {
		return nil, errTopicExists
	}
	if id == ([16]byte{}) {
		var err error
		if id, err = newTopicID(); err != nil {
			return nil, err
		}
	}
	st := state.Topic{Name: name, ID: id, Partitions: partitions, Configs: maps.Clone(configs), Mirror: mirror}
	if st.Configs == nil {
		st.Configs = map[string]string{}
	}
	// Logs first, registry second: a crash in between leaves empty
	// directories the next create reuses, never a registered topic
	// without logs.
	t, err := b.openTopic(st)
	if err != nil {
		return nil, err
	}
	if err := b.store.PutTopic(st); err != nil {
		for _, p := range t.parts() {
			p.log.Close()
		}
		return nil, fmt.Errorf("registering topic %s: %w", name, err)
	}
	b.topics[name] = t
	b.topicsByID[id] = t
	b.publishImageLocked()
	b.log.Info("topic created", "topic", name, "partitions", partitions)
	return t, nil
}

// deleteTopic unregisters a topic and removes its logs. The directories
// are renamed at once, under mu, so a topic re-created with the same name
// starts empty; the logs stay open for deletedLogDelay, like Kafka's
// file.delete.delay.ms, because a Fetch may be sending a region of them
// with sendfile right now.
//
// Nothing may write to a log once its directory is renamed: the writes
// would go to the old path (gone, or the re-created topic's). So, before
// the renames:
//  1. maintainMu is write-held: a maintenance pass running on one of the
//     partitions finishes first, and a later pass (the partition may still
//     be in the list it took) sees t.deleted and skips it.
//  2. Each log is marked deleted (storage.Log.MarkDeleted): a Produce or
//     mirror append still holding the partition gets ErrClosed, and the
//     Close at the end of the delay writes nothing.
func (b *Broker) deleteTopic(t *topic) error {
	t.maintainMu.Lock()
	defer t.maintainMu.Unlock()
	b.mu.Lock()
	if b.topics[t.name] != t {
		b.mu.Unlock()
		return nil
	}
	if err := b.store.DeleteTopic(t.name); err != nil && !errors.Is(err, state.ErrNotFound) {
		b.mu.Unlock()
		return fmt.Errorf("unregistering topic %s: %w", t.name, err)
	}
	delete(b.topics, t.name)
	delete(b.topicsByID, t.id)
	b.publishImageLocked()
	t.deleted = true
	now := time.Now()
	for _, p := range t.parts() {
		p.log.MarkDeleted()
		dir := p.log.Dir()
		gone := dir + "." + strconv.FormatInt(now.UnixNano(), 36) + deletedSuffix
		if err := os.Rename(dir, gone); err != nil {
			b.log.Warn("renaming a deleted partition", "dir", dir, "err", err)
			gone = ""
		}
		b.deleted = append(b.deleted, deletedLog{log: p.log, dir: gone, at: now})
	}
	b.mu.Unlock()
	for _, p := range t.parts() {
		p.wake() // wake long polls so they see the topic gone
	}
	// Kafka drops a deleted topic's committed offsets too.
	if _, err := b.store.DeleteTopicOffsets(t.name); err != nil {
		b.log.Warn("deleting the offsets of a deleted topic", "topic", t.name, "err", err)
	}
	b.groups.TopicDeleted(t.name)
	if err := b.store.DeleteLeaderEpochs(t.id); err != nil {
		b.log.Warn("deleting the leader epochs of a deleted topic", "topic", t.name, "err", err)
	}
	b.log.Info("topic deleted", "topic", t.name)
	return nil
}

// deletedLogDelay is how long a deleted topic's logs stay open (Kafka's
// file.delete.delay.ms).
const deletedLogDelay = 60 * time.Second

// deletedLog is a deleted partition waiting to be closed and removed.
type deletedLog struct {
	log *storage.Log
	dir string // renamed directory, "" if the rename failed
	at  time.Time
}

// reapDeletedLogs closes and removes deleted logs older than the delay
// (all of them when force is set, at shutdown).
func (b *Broker) reapDeletedLogs(now time.Time, force bool) {
	b.mu.Lock()
	var due []deletedLog
	keep := b.deleted[:0]
	for _, d := range b.deleted {
		if force || now.Sub(d.at) >= deletedLogDelay {
			due = append(due, d)
		} else {
			keep = append(keep, d)
		}
	}
	b.deleted = keep
	b.mu.Unlock()
	for _, d := range due {
		if err := d.log.Close(); err != nil {
			b.log.Debug("closing a deleted partition", "dir", d.dir, "err", err)
		}
		if d.dir != "" {
			b.removeDeletedDir(d.dir)
		}
	}
}

func (b *Broker) removeDeletedDir(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		b.log.Warn("removing a deleted partition", "dir", dir, "err", err)
	}
}

// growTopic adds partitions (CreatePartitions) up to n in total.
func (b *Broker) growTopic(t *topic, n int32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.topics[t.name] != t {
		return errTopicGone
	}
	old := t.parts()
	if n <= int32(len(old)) {
		return fmt.Errorf("topic %s already has %d partitions", t.name, len(old))
	}
	if err := b.addPartitions(t, n); err != nil {
		return err
	}
	st := state.Topic{Name: t.name, ID: t.id, Partitions: n, Configs: t.configs, Mirror: t.mirrorName()}
	if err := b.store.PutTopic(st); err != nil {
		for _, p := range t.parts()[len(old):] {
			p.log.Close()
		}
		t.partList.Store(&old)
		return fmt.Errorf("registering partitions of %s: %w", t.name, err)
	}
	b.publishImageLocked()
	return nil
}

// setTopicConfigs replaces a topic's dynamic configs (validated) and
// applies them to every partition.
func (b *Broker) setTopicConfigs(t *topic, configs map[string]string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.topics[t.name] != t {
		return errTopicGone
	}
	// Resolved under mu so a concurrent broker-default change cannot be
	// applied between resolving and storing (logConfig takes only dynMu).
	cfg, eff, err := b.logConfig(configs)
	if err != nil {
		return err
	}
	st := state.Topic{Name: t.name, ID: t.id, Partitions: int32(len(t.parts())), Configs: configs, Mirror: t.mirrorName()}
	if err := b.store.PutTopic(st); err != nil {
		return fmt.Errorf("storing configs of %s: %w", t.name, err)
	}
	t.configs = configs
	for _, p := range t.parts() {
		if err := p.log.SetConfig(cfg); err != nil {
			return err
		}
		p.applyEffective(eff)
	}
	return nil
}
