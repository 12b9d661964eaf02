package broker

import (
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/state"
	"github.com/kmirror/kmirror/storage"
)

// The broker's side of mirroring: mirror topics are read-only topics with
// the source's name, topic ID and partition count, written by the fetchers
// (fetch/) through MirrorPartition. The control plane (control/) creates,
// grows, configures and releases them through the Go API below.

// MirrorPartition is what a mirror fetcher writes: it matches
// fetch.Partition without the broker importing fetch.
type MirrorPartition interface {
	Log() *storage.Log
	LeaderEpoch() int32
	RaiseLeaderEpoch(epoch int32) error
	Appended()
	// TopicID is the topic's id (the source's, for a mirror topic).
	TopicID() [16]byte
	// AppendControl appends a control batch built for the log end and
	// the leader epoch (failover's ABORT markers and MIRROR_PID_RESET).
	AppendControl(build func(base int64, epoch int32) []byte) error
}

// CreateMirrorTopic creates a topic owned by cluster mirror mirror, with
// the source's topic ID and partition count. Clients cannot produce to it
// (POLICY_VIOLATION, errReadOnlyTopic) until the mirror releases it.
func (b *Broker) CreateMirrorTopic(name string, id [16]byte, partitions int32, mirror string) error {
	if mirror == "" {
		return errors.New("broker: a mirror topic needs a mirror name")
	}
	if err := validateTopicName(name); err != nil {
		return fmt.Errorf("broker: mirror topic %q: %w", name, err)
	}
	if partitions < 1 {
		return fmt.Errorf("broker: mirror topic %s: %d partitions", name, partitions)
	}
	_, err := b.createTopicFor(name, partitions, nil, id, mirror)
	return err
}

// MirrorPartition returns partition p of mirror topic name for a fetcher.
func (b *Broker) MirrorPartition(name string, p int32) (MirrorPartition, error) {
	t := b.topicByName(name)
	switch {
	case t == nil:
		return nil, fmt.Errorf("broker: no topic %s", name)
	case !t.readOnly():
		return nil, fmt.Errorf("broker: topic %s is not a mirror topic", name)
	case p < 0 || int(p) >= len(t.parts()):
		return nil, fmt.Errorf("broker: topic %s has no partition %d", name, p)
	}
	return mirrorPartition{b: b, p: t.parts()[p]}, nil
}

// PartitionLog returns the log of partition p of topic name, writable or
// not, to read only: the dry run of a start (control/align_preview.go)
// reads the log of a topic that is still writable. Writes go through
// MirrorPartition or the produce path, never through this.
func (b *Broker) PartitionLog(name string, p int32) (*storage.Log, error) {
	t := b.topicByName(name)
	switch {
	case t == nil:
		return nil, fmt.Errorf("broker: no topic %s", name)
	case p < 0 || int(p) >= len(t.parts()):
		return nil, fmt.Errorf("broker: topic %s has no partition %d", name, p)
	}
	return t.parts()[p].log, nil
}

// mirrorPartition adapts a partition to MirrorPartition.
type mirrorPartition struct {
	b *Broker
	p *partition
}

func (m mirrorPartition) Log() *storage.Log  { return m.p.log }
func (m mirrorPartition) LeaderEpoch() int32 { return m.p.leaderEpoch() }
func (m mirrorPartition) Appended()          { m.p.appended() }
func (m mirrorPartition) TopicID() [16]byte  { return m.p.topic.id }

// RaiseLeaderEpoch persists a higher local leader epoch before the
// batches that need it are appended (DESIGN.md decision 3).
func (m mirrorPartition) RaiseLeaderEpoch(epoch int32) error {
	stored, err := m.b.store.PutLeaderEpoch(m.p.topic.id, m.p.index, epoch)
	if err != nil {
		return err
	}
	m.p.epochFloor.Store(stored)
	m.b.epochMoved(m.p)
	return nil
}

// TopicInfo describes a topic for the mirror control plane.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
	// Mirror is the cluster mirror that owns the topic, "" when writable.
	Mirror string
}

// Topic returns a topic's info; ok is false when it does not exist.
func (b *Broker) Topic(name string) (TopicInfo, bool) {
	t := b.topicByName(name)
	if t == nil {
		return TopicInfo{}, false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return TopicInfo{Name: t.name, ID: t.id, Partitions: int32(len(t.parts())), Mirror: t.mirrorName()}, true
}

// SetTopicMirror hands a topic to a cluster mirror (read-only from then
// on) or, with mirror "", releases it (writable: failover).
func (b *Broker) SetTopicMirror(name, mirror string) error {
	t := b.topicByName(name)
	if t == nil {
		return fmt.Errorf("broker: no topic %s", name)
	}
	// Waits for a maintenance pass over the topic to finish (see
	// topic.maintainMu), outside b.mu so handlers are not held up.
	t.maintainMu.Lock()
	defer t.maintainMu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.topics[name] != t {
		return fmt.Errorf("broker: topic %s was deleted", name)
	}
	if t.mirrorName() == mirror {
		return nil
	}
	st := state.Topic{Name: t.name, ID: t.id, Partitions: int32(len(t.parts())), Configs: t.configs, Mirror: mirror}
	if err := b.store.PutTopic(st); err != nil {
		return fmt.Errorf("broker: handing topic %s to mirror %q: %w", name, mirror, err)
	}
	t.setMirror(mirror)
	return nil
}

// AppendControl appends a control batch (a transaction marker, a
// MIRROR_PID_RESET) built by the caller to a partition, at its log end,
// with the partition's leader epoch, and wakes its consumers.
func (m mirrorPartition) AppendControl(build func(base int64, epoch int32) []byte) error {
	raw := build(m.p.log.LogEndOffset(), m.p.leaderEpoch())
	if _, err := m.p.log.AppendControl(raw, m.p.leaderEpoch()); err != nil {
		return err
	}
	m.p.appended()
	return nil
}

// Store is the node's state store, shared with the mirror control plane.
func (b *Broker) Store() *state.Store { return b.store }

// GrowMirrorTopic adds partitions to a mirror topic so it has as many as
// its source topic (the mirror's metadata sync: partition growth at the
// source is mirrored, never the other way round).
func (b *Broker) GrowMirrorTopic(name string, partitions int32) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.topicByName(name)
	switch {
	case t == nil:
		return fmt.Errorf("broker: no topic %s", name)
	case !t.readOnly():
		return fmt.Errorf("broker: topic %s is not a mirror topic", name)
	}
	if err := b.growTopic(t, partitions); err != nil {
		return err
	}
	b.log.Info("mirror topic partitions added", "topic", name, "partitions", partitions)
	return nil
}

// TopicConfigs copies a topic's dynamic configs (those set on the topic,
// not defaults); ok is false when the topic does not exist.
func (b *Broker) TopicConfigs(name string) (map[string]string, bool) {
	t := b.topicByName(name)
	if t == nil {
		return nil, false
	}
	return b.topicConfigsSnapshot(t), true
}

// MergeTopicConfigs sets configs on a topic and keeps the others (a
// mirror's topic config sync never deletes). Each value is checked alone:
// unknown or invalid ones are left out and returned by name, so one config
// this node does not know never blocks the rest. The valid ones are applied
// in one change.
func (b *Broker) MergeTopicConfigs(name string, set map[string]string) (rejected map[string]error, err error) {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.topicByName(name)
	if t == nil {
		return nil, fmt.Errorf("broker: no topic %s", name)
	}
	next := b.topicConfigsSnapshot(t)
	if next == nil {
		next = map[string]string{}
	}
	changed := false
	for k, v := range set {
		if err := validateTopicConfig(k, v); err != nil {
			if rejected == nil {
				rejected = map[string]error{}
			}
			rejected[k] = err
			continue
		}
		if old, ok := next[k]; !ok || old != v {
			next[k], changed = v, true
		}
	}
	if !changed {
		return rejected, nil
	}
	if err := b.setTopicConfigs(t, next); err != nil {
		return rejected, fmt.Errorf("broker: setting configs of %s: %w", name, err)
	}
	return rejected, nil
}
