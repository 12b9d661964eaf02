package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/internal/vfs"
	"github.com/kmirror/kmirror/state"
	"github.com/kmirror/kmirror/storage"
)

// Config configures a Manager.
type Config struct {
	// Store is the node's state store: the topic registry and the
	// persisted leader epochs.
	Store *state.Store
	// LogDirs are log.dirs; a new partition goes to the one holding the
	// fewest partitions.
	LogDirs []string
	// SpaceGuards is the space guard of a log dir, by cleaned path, for
	// the log dirs that have one; a topic in CoordinatorTopics gets the
	// one in CoordinatorSpaceGuards instead, when there is one.
	SpaceGuards map[string]storage.SpaceGuard
	// CoordinatorTopics are the topics that hold coordinators' state
	// (__consumer_offsets), and CoordinatorSpaceGuards their guards by
	// log dir: that state is written on for a margin after producers and
	// mirrors are refused, as when it lived in the state store.
	CoordinatorTopics      []string
	CoordinatorSpaceGuards map[string]storage.SpaceGuard
	// FS is the filesystem of the high watermark checkpoints; nil means
	// the operating system's.
	FS vfs.FS
	// LogConfig resolves a topic's dynamic configs into its log's config
	// and the settings the node enforces. It is called under the
	// registry's lock.
	LogConfig func(configs map[string]string) (storage.Config, Settings, error)
	// TopicsChanged is called, with the registry's lock held for writing,
	// after every change to the topics or their partition counts, with
	// all the topics: a metadata image built from them is published in
	// the order of the changes. Nil: nothing is told.
	TopicsChanged func(all []*Topic)
	// EpochMoved is called when a partition's leader epoch is no longer
	// its published one (Partition.SetPublishedEpoch): after an append in
	// a newer epoch or a raised floor. The registry's lock may be held.
	EpochMoved func(p *Partition)
	// RaiseAssignedEpochs raises, through the controller, the leader
	// epochs of topic id's partitions to at least epochs, and returns once
	// this node applied the change: in a cluster the controller's epoch
	// is the one followers and clients use (broker.EpochBumper). It is
	// asked only for partitions with an assignment, before their local
	// floor is raised. Nil (a node alone): the local floor alone, the
	// image showing the larger of it and the assignment's.
	RaiseAssignedEpochs func(epochs map[[16]byte]map[int32]int32) error
	// Place assigns replicas to new partitions from..to-1 of topic id as
	// pl asks (the controller's placement, meta.PlaceReplicas, or a manual
	// assignment), written with the topic's record; nil, or no
	// assignments returned, leaves them unassigned (a node alone leads
	// what has no assignment).
	Place func(id [16]byte, from, to int32, pl Placement) ([]state.PartitionAssignment, error)
	// Removed is called, without the registry's lock, after a topic is
	// taken off this node, by Delete or by Sync (another node's
	// controller deleted it): what the node keeps of the topic outside
	// the registry (committed offsets, group assignments) goes with it.
	// Nil: nothing is told.
	Removed func(name string)
	// Logger receives topic creations and maintenance failures; nil
	// discards them.
	Logger *slog.Logger
}

// Placement is how Create and Grow ask Config.Place to assign the new
// partitions' replicas: RF replicas each, placed by the controller's
// rules, or, when Replicas is set (a manual assignment, as CreateTopics
// and CreatePartitions may give), new partition i on Replicas[i], the
// first leading.
type Placement struct {
	RF       int
	Replicas [][]int32
}

// Manager is the node's partition registry (Kafka's ReplicaManager): the
// topics the node hosts and, for each, its partitions' logs.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu         sync.RWMutex
	topics     map[string]*Topic
	topicsByID map[[16]byte]*Topic
	// deleted are deleted topics' logs kept open a while (Delete).
	deleted []deletedLog
	// hw are the high watermark checkpoints (hw_checkpoint.go).
	hw hwCheckpoints
}

// ErrTopicExists is Create's answer for a name in use
// (TOPIC_ALREADY_EXISTS).
var ErrTopicExists = errors.New("topic already exists")

// ErrTopicGone: the topic was deleted while a change to it was prepared.
var ErrTopicGone = errors.New("topic was deleted")

// deletedSuffix marks a partition directory whose topic was deleted: it is
// renamed first, so a crash never leaves a half-removed log under its live
// name, then removed in the background (and at the next start).
const deletedSuffix = "-delete"

// Open opens the logs of every registered topic, each partition from its
// checkpointed high watermark, and removes the directories an interrupted
// topic deletion left.
func Open(cfg Config) (*Manager, error) {
	if cfg.FS == nil {
		cfg.FS = vfs.Default
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, topics: map[string]*Topic{}, topicsByID: map[[16]byte]*Topic{}}
	for _, dir := range cfg.LogDirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("log.dirs: reading %s: %w", dir, err)
		}
		for _, e := range entries {
			if e.IsDir() && strings.HasSuffix(e.Name(), deletedSuffix) {
				m.removeDeletedDir(filepath.Join(dir, e.Name()))
			}
		}
	}
	ts, err := cfg.Store.Topics()
	if err != nil {
		return nil, fmt.Errorf("loading topics: %w", err)
	}
	// Only the partitions opened now start from the checkpoints: a topic
	// created later under the name of a deleted one is a new log.
	m.hw.load(cfg.FS, cfg.LogDirs, m.log)
	defer m.hw.loaded()
	for _, st := range ts {
		t, err := m.openTopic(st)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.topics[t.name] = t
		m.topicsByID[t.id] = t
	}
	return m, nil
}

// Topic looks a topic up by name; nil when there is none.
func (m *Manager) Topic(name string) *Topic {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.topics[name]
}

// TopicByID looks a topic up by ID; nil when there is none.
func (m *Manager) TopicByID(id [16]byte) *Topic {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.topicsByID[id]
}

// Topics returns every topic, in no order.
func (m *Manager) Topics() []*Topic {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Collect(maps.Values(m.topics))
}

// Partitions returns every partition of every topic.
func (m *Manager) Partitions() []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*Partition
	for _, t := range m.topics {
		out = append(out, t.Partitions()...)
	}
	return out
}

// Republish calls TopicsChanged for a change the registry does not see
// (the node's listeners, bound after Open).
func (m *Manager) Republish() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.changedLocked()
}

// changedLocked tells TopicsChanged. REQUIRES: m.mu held for writing.
func (m *Manager) changedLocked() {
	if m.cfg.TopicsChanged != nil {
		m.cfg.TopicsChanged(slices.Collect(maps.Values(m.topics)))
	}
}

// partitionDir is where partition p of topic name lives: the log
// directory holding it already, else the one with the fewest partitions.
func (m *Manager) partitionDir(name string, p int32) string {
	base := name + "-" + strconv.Itoa(int(p))
	dirs := m.cfg.LogDirs
	best, bestN := dirs[0], -1
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, base)); err == nil {
			return filepath.Join(d, base)
		}
		if len(dirs) == 1 {
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
func (m *Manager) openTopic(st state.Topic) (*Topic, error) {
	t := NewTopic(st.Name, st.ID)
	t.m, t.configs = m, st.Configs
	t.setMirror(st.Mirror)
	if t.configs == nil {
		t.configs = map[string]string{}
	}
	epochs, err := m.cfg.Store.LeaderEpochs(st.ID)
	if err != nil {
		return nil, fmt.Errorf("topic %s: loading leader epochs: %w", st.Name, err)
	}
	if err := m.addPartitions(t, st.Partitions); err != nil {
		return nil, err
	}
	for _, p := range t.Partitions() {
		p.epochFloor.Store(epochs[p.index])
	}
	return t, nil
}

// addPartitions opens (creating) partitions len(t.Partitions())..n-1 of t
// and publishes the longer list. On error the partitions it opened are
// closed and the list is unchanged.
// REQUIRES: m.mu held for writing, or t not yet visible to handlers.
func (m *Manager) addPartitions(t *Topic, n int32) error {
	cfg, settings, err := m.cfg.LogConfig(t.configs)
	if err != nil {
		return fmt.Errorf("topic %s: %w", t.name, err)
	}
	old := t.Partitions()
	parts := slices.Clip(old)
	for i := int32(len(old)); i < n; i++ {
		dir := m.partitionDir(t.name, i)
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
		guards := m.cfg.SpaceGuards
		if slices.Contains(m.cfg.CoordinatorTopics, t.name) && m.cfg.CoordinatorSpaceGuards != nil {
			guards = m.cfg.CoordinatorSpaceGuards
		}
		if g := guards[filepath.Dir(dir)]; g != nil {
			l.SetSpaceGuard(g)
		}
		p := &Partition{topic: t, index: i, log: l}
		p.applySettings(settings)
		m.hw.start(p)
		parts = append(parts, p)
	}
	t.partList.Store(&parts)
	return nil
}

// Create registers and opens a topic, owned by cluster mirror mirror when
// that is not "" (then read-only to clients), its replicas placed as pl
// asks. configs must be validated; a zero id gets a random one.
func (m *Manager) Create(name string, partitions int32, configs map[string]string, id [16]byte, mirror string, pl Placement) (*Topic, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.topics[name]; ok {
		return nil, ErrTopicExists
	}
	if id == ([16]byte{}) {
		var err error
		if id, err = NewTopicID(); err != nil {
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
	assigned, err := m.place(id, 0, partitions, pl)
	if err != nil {
		return nil, err
	}
	t, err := m.openTopic(st)
	if err != nil {
		return nil, err
	}
	if err := m.cfg.Store.PutTopic(st, assigned...); err != nil {
		for _, p := range t.Partitions() {
			p.log.Close()
		}
		return nil, fmt.Errorf("registering topic %s: %w", name, err)
	}
	m.topics[name] = t
	m.topicsByID[id] = t
	m.changedLocked()
	m.log.Info("topic created", "topic", name, "partitions", partitions)
	return t, nil
}

// place is Config.Place, none without it.
func (m *Manager) place(id [16]byte, from, to int32, pl Placement) ([]state.PartitionAssignment, error) {
	if m.cfg.Place == nil {
		return nil, nil
	}
	assigned, err := m.cfg.Place(id, from, to, pl)
	if err != nil {
		return nil, fmt.Errorf("placing the replicas of partitions %d-%d: %w", from, to-1, err)
	}
	return assigned, nil
}

// Delete unregisters a topic and removes its logs and leader epochs. The
// directories are renamed at once, under mu, so a topic re-created with
// the same name starts empty; the logs stay open for deletedLogDelay,
// like Kafka's file.delete.delay.ms, because a Fetch may be sending a
// region of them with sendfile right now. deleted is false when t was no
// longer registered.
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
func (m *Manager) Delete(t *Topic) (deleted bool, err error) {
	return m.remove(t, true)
}

// remove takes t off the node: its record too when unregister is set
// (Delete), only its logs when the record is already gone (Sync: another
// node's controller deleted it). deleted is false when t was no longer
// registered here.
func (m *Manager) remove(t *Topic, unregister bool) (deleted bool, err error) {
	t.maintainMu.Lock()
	defer t.maintainMu.Unlock()
	m.mu.Lock()
	if m.topics[t.name] != t {
		m.mu.Unlock()
		return false, nil
	}
	if !unregister {
		// Sync decided without the lock held since: the store may name
		// this topic again (a store read under mu agrees with the
		// registry).
		if st, err := m.cfg.Store.Topic(t.name); err == nil && st.ID == t.id {
			m.mu.Unlock()
			return false, nil
		}
	}
	if unregister {
		if err := m.cfg.Store.DeleteTopic(t.name); err != nil && !errors.Is(err, state.ErrNotFound) {
			m.mu.Unlock()
			return false, fmt.Errorf("unregistering topic %s: %w", t.name, err)
		}
	}
	delete(m.topics, t.name)
	delete(m.topicsByID, t.id)
	m.changedLocked()
	t.deleted = true
	now := time.Now()
	for _, p := range t.Partitions() {
		p.log.MarkDeleted()
		dir := p.log.Dir()
		gone := dir + "." + strconv.FormatInt(now.UnixNano(), 36) + deletedSuffix
		if err := os.Rename(dir, gone); err != nil {
			m.log.Warn("renaming a deleted partition", "dir", dir, "err", err)
			gone = ""
		}
		m.deleted = append(m.deleted, deletedLog{log: p.log, dir: gone, at: now})
	}
	m.mu.Unlock()
	for _, p := range t.Partitions() {
		p.wake() // wake long polls so they see the topic gone
	}
	if err := m.cfg.Store.DeleteLeaderEpochs(t.id); err != nil {
		m.log.Warn("deleting the leader epochs of a deleted topic", "topic", t.name, "err", err)
	}
	if m.cfg.Removed != nil {
		m.cfg.Removed(t.name)
	}
	return true, nil
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
func (m *Manager) reapDeletedLogs(now time.Time, force bool) {
	m.mu.Lock()
	var due []deletedLog
	keep := m.deleted[:0]
	for _, d := range m.deleted {
		if force || now.Sub(d.at) >= deletedLogDelay {
			due = append(due, d)
		} else {
			keep = append(keep, d)
		}
	}
	m.deleted = keep
	m.mu.Unlock()
	for _, d := range due {
		if err := d.log.Close(); err != nil {
			m.log.Debug("closing a deleted partition", "dir", d.dir, "err", err)
		}
		if d.dir != "" {
			m.removeDeletedDir(d.dir)
		}
	}
}

func (m *Manager) removeDeletedDir(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		m.log.Warn("removing a deleted partition", "dir", dir, "err", err)
	}
}

// Grow adds partitions (CreatePartitions, a mirror's partition growth) up
// to n in total, their replicas placed as pl asks.
func (m *Manager) Grow(t *Topic, n int32, pl Placement) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.topics[t.name] != t {
		return ErrTopicGone
	}
	old := t.Partitions()
	if n <= int32(len(old)) {
		return fmt.Errorf("topic %s already has %d partitions", t.name, len(old))
	}
	assigned, err := m.place(t.id, int32(len(old)), n, pl)
	if err != nil {
		return err
	}
	if err := m.addPartitions(t, n); err != nil {
		return err
	}
	st := state.Topic{Name: t.name, ID: t.id, Partitions: n, Configs: t.configs, Mirror: t.Mirror()}
	if err := m.cfg.Store.PutTopic(st, assigned...); err != nil {
		for _, p := range t.Partitions()[len(old):] {
			p.log.Close()
		}
		t.partList.Store(&old)
		return fmt.Errorf("registering partitions of %s: %w", t.name, err)
	}
	m.changedLocked()
	return nil
}

// SetConfigs replaces a topic's dynamic configs (validated) and applies
// them to every partition.
func (m *Manager) SetConfigs(t *Topic, configs map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.topics[t.name] != t {
		return ErrTopicGone
	}
	// Resolved before storing, under mu, so that configs the node cannot
	// apply are never stored and a concurrent change of the defaults
	// cannot come between.
	if _, _, err := m.cfg.LogConfig(configs); err != nil {
		return err
	}
	st := state.Topic{Name: t.name, ID: t.id, Partitions: int32(len(t.Partitions())), Configs: configs, Mirror: t.Mirror()}
	if err := m.cfg.Store.PutTopic(st); err != nil {
		return fmt.Errorf("storing configs of %s: %w", t.name, err)
	}
	return m.applyConfigsLocked(t, configs)
}

// applyConfigsLocked makes configs t's and applies them to every
// partition. REQUIRES: m.mu held for writing.
func (m *Manager) applyConfigsLocked(t *Topic, configs map[string]string) error {
	cfg, settings, err := m.cfg.LogConfig(configs)
	if err != nil {
		return fmt.Errorf("topic %s: %w", t.name, err)
	}
	t.configs = configs
	for _, p := range t.Partitions() {
		if err := p.log.SetConfig(cfg); err != nil {
			return err
		}
		p.applySettings(settings)
	}
	return nil
}

// ReapplyConfigs resolves every topic's log config again, after the
// defaults LogConfig resolves against changed. mu is held (read)
// throughout so a concurrent SetConfigs applies wholly before or after a
// topic's turn here.
func (m *Manager) ReapplyConfigs() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var errs []error
	for _, t := range m.topics {
		cfg, settings, err := m.cfg.LogConfig(t.configs)
		if err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", t.name, err))
			continue
		}
		for _, p := range t.Partitions() {
			if err := p.log.SetConfig(cfg); err != nil {
				errs = append(errs, fmt.Errorf("%s-%d: %w", t.name, p.index, err))
				continue
			}
			p.applySettings(settings)
		}
	}
	return errors.Join(errs...)
}

// SetMirror hands a topic to a cluster mirror (read-only from then on)
// or, with mirror "", releases it (writable: failover).
func (m *Manager) SetMirror(name, mirror string) error { return m.SetMirrorOf([]string{name}, mirror) }

// SetMirrorOf is SetMirror for many topics with one write of the store
// per topicsPerWrite (a failover releases all its topics at once). A
// topic that belongs to mirror already is left as it is; on an error the
// topics of the writes before it have changed, and no other.
func (m *Manager) SetMirrorOf(names []string, mirror string) error {
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	topics := make([]*Topic, 0, len(names))
	for _, name := range names {
		t := m.Topic(name)
		if t == nil {
			return fmt.Errorf("partition: no topic %s", name)
		}
		topics = append(topics, t)
	}
	// Waits for a maintenance pass over each topic to finish (see
	// Topic.maintainMu), outside mu so handlers are not held up; in name
	// order, the only order any path takes more than one.
	for _, t := range topics {
		t.maintainMu.Lock()
		defer t.maintainMu.Unlock()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var changed []*Topic
	var sts []state.Topic
	for _, t := range topics {
		if m.topics[t.name] != t {
			return fmt.Errorf("partition: topic %s was deleted", t.name)
		}
		if t.Mirror() == mirror {
			continue
		}
		changed = append(changed, t)
		sts = append(sts, state.Topic{Name: t.name, ID: t.id, Partitions: int32(len(t.Partitions())), Configs: t.configs,
			Mirror: mirror})
	}
	for len(sts) > 0 {
		n := min(len(sts), topicsPerWrite)
		if err := m.cfg.Store.PutTopics(sts[:n]); err != nil {
			return fmt.Errorf("partition: handing topics to mirror %q: %w", mirror, err)
		}
		for _, t := range changed[:n] {
			t.setMirror(mirror)
		}
		sts, changed = sts[n:], changed[n:]
	}
	return nil
}

// topicsPerWrite bounds the topics of one state.Store.PutTopics.
const topicsPerWrite = 500

// Maintain runs one maintenance pass: retention, compaction, time-based
// flush and producer expiry on every partition (Partition.maintain), and
// closes the deleted logs whose delay is over. Failures are logged per
// partition; the pass goes on.
func (m *Manager) Maintain(now time.Time) {
	for _, p := range m.Partitions() {
		if err := p.maintain(now); err != nil {
			m.log.Warn("log maintenance failed", "topic", p.topic.name, "partition", p.index, "err", err)
		}
	}
	m.reapDeletedLogs(now, false)
}

// Close closes every log cleanly (writing the clean-shutdown markers),
// the deleted ones' too.
func (m *Manager) Close() error {
	m.reapDeletedLogs(time.Now(), true)
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, t := range m.topics {
		for _, p := range t.Partitions() {
			if err := p.log.Close(); err != nil {
				errs = append(errs, fmt.Errorf("closing %s-%d: %w", t.name, p.index, err))
			}
		}
	}
	return errors.Join(errs...)
}

// MirrorPartition returns partition p of mirror topic name, for a
// fetcher: an error when the topic does not exist, is not a mirror topic
// (writable topics are written by Produce only), or has no partition p.
func (m *Manager) MirrorPartition(name string, p int32) (Follower, error) {
	t := m.Topic(name)
	switch {
	case t == nil:
		return nil, fmt.Errorf("partition: no topic %s", name)
	case !t.ReadOnly():
		return nil, fmt.Errorf("partition: topic %s is not a mirror topic", name)
	case t.Partition(p) == nil:
		return nil, fmt.Errorf("partition: topic %s has no partition %d", name, p)
	}
	return t.Partition(p), nil
}

// View returns partition p of topic name, writable or not, to read only:
// the dry run of a start (control/align_preview.go) reads a topic that is
// still writable. Writes go through MirrorPartition or the produce path,
// never through this.
func (m *Manager) View(name string, p int32) (View, error) {
	t := m.Topic(name)
	switch {
	case t == nil:
		return nil, fmt.Errorf("partition: no topic %s", name)
	case t.Partition(p) == nil:
		return nil, fmt.Errorf("partition: topic %s has no partition %d", name, p)
	}
	return t.Partition(p), nil
}

// TopicInfo describes a topic for the mirror control plane.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
	// Mirror is the cluster mirror that owns the topic, "" when writable.
	Mirror string
}

// Info describes topic name; ok is false when there is none.
func (m *Manager) Info(name string) (TopicInfo, bool) {
	t := m.Topic(name)
	if t == nil {
		return TopicInfo{}, false
	}
	return TopicInfo{Name: t.Name(), ID: t.ID(), Partitions: int32(len(t.Partitions())), Mirror: t.Mirror()}, true
}

// RaiseLeaderEpochs raises the leader epochs of several partitions of
// mirror topic name in one write (Follower.RaiseLeaderEpoch for each, at
// the cost of one): a failover raises every partition's above the
// mirrored epochs.
func (m *Manager) RaiseLeaderEpochs(name string, epochs map[int32]int32) error {
	return m.raiseLeaderEpochs(name, epochs, true)
}

// AdoptLeaderEpochs raises the local leader epochs of topic name's
// partitions to epochs the controller already gave them (their
// assignments'), so that their appends are stamped with them: the local
// floor alone, without asking the controller (RaiseLeaderEpochs would ask
// it for what it wrote, and block a reconcile on it).
func (m *Manager) AdoptLeaderEpochs(name string, epochs map[int32]int32) error {
	return m.raiseLeaderEpochs(name, epochs, false)
}

func (m *Manager) raiseLeaderEpochs(name string, epochs map[int32]int32, throughController bool) error {
	return m.raiseTopicsEpochs(map[string]map[int32]int32{name: epochs}, throughController)
}

// RaiseLeaderEpochsOfTopics is RaiseLeaderEpochs for several topics (by
// name) at once: one request to the controller for all of them, which
// a failover of many topics needs (one metadata log entry and one
// reconcile, not one per topic).
func (m *Manager) RaiseLeaderEpochsOfTopics(epochs map[string]map[int32]int32) error {
	return m.raiseTopicsEpochs(epochs, true)
}

func (m *Manager) raiseTopicsEpochs(epochs map[string]map[int32]int32, throughController bool) error {
	topics := make(map[string]*Topic, len(epochs))
	for name, es := range epochs {
		t := m.Topic(name)
		if t == nil {
			return fmt.Errorf("partition: no topic %s", name)
		}
		for p := range es {
			if t.Partition(p) == nil {
				return fmt.Errorf("partition: topic %s has no partition %d", name, p)
			}
		}
		topics[name] = t
	}
	if throughController {
		if err := m.raiseAssigned(topics, epochs); err != nil {
			return err
		}
	}
	for name, t := range topics {
		stored, err := m.cfg.Store.PutLeaderEpochs(t.id, epochs[name])
		if err != nil {
			return err
		}
		for p, e := range stored {
			pt := t.Partition(p)
			pt.epochFloor.Store(e)
			pt.epochMaybeMoved()
		}
	}
	return nil
}

// raiseAssigned raises, through the controller, the epochs of the
// partitions of topics (by name) that have an assignment
// (Config.RaiseAssignedEpochs), when it is set: one call for all.
func (m *Manager) raiseAssigned(topics map[string]*Topic, epochs map[string]map[int32]int32) error {
	if m.cfg.RaiseAssignedEpochs == nil {
		return nil
	}
	assigned := map[[16]byte]map[int32]int32{}
	var names []string
	for name, t := range topics {
		for p, e := range epochs[name] {
			if _, ok := t.Partition(p).Assignment(); ok {
				if assigned[t.id] == nil {
					assigned[t.id] = map[int32]int32{}
					names = append(names, name)
				}
				assigned[t.id][p] = e
			}
		}
	}
	if len(assigned) == 0 {
		return nil
	}
	if err := m.cfg.RaiseAssignedEpochs(assigned); err != nil {
		slices.Sort(names)
		return fmt.Errorf("partition: raising the leader epochs of %s through the controller: %w", strings.Join(names, ", "), err)
	}
	return nil
}
