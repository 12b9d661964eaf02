package broker

import (
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// The broker's side of mirroring: mirror topics are read-only topics with
// the source's name, topic ID and partition count, written by the fetchers
// (fetch/) through MirrorPartition's partition.Follower. The control plane
// (control/) creates, grows, configures and releases them through the Go
// API below.

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
	_, err := b.partitions.Create(name, partitions, nil, id, mirror)
	return err
}

// MirrorPartition returns partition p of mirror topic name for a fetcher.
func (b *Broker) MirrorPartition(name string, p int32) (partition.Follower, error) {
	t := b.partitions.Topic(name)
	switch {
	case t == nil:
		return nil, fmt.Errorf("broker: no topic %s", name)
	case !t.ReadOnly():
		return nil, fmt.Errorf("broker: topic %s is not a mirror topic", name)
	case t.Partition(p) == nil:
		return nil, fmt.Errorf("broker: topic %s has no partition %d", name, p)
	}
	return t.Partition(p), nil
}

// PartitionView returns partition p of topic name, writable or not, to
// read only: the dry run of a start (control/align_preview.go) reads a
// topic that is still writable. Writes go through MirrorPartition or the
// produce path, never through this.
func (b *Broker) PartitionView(name string, p int32) (partition.View, error) {
	t := b.partitions.Topic(name)
	switch {
	case t == nil:
		return nil, fmt.Errorf("broker: no topic %s", name)
	case t.Partition(p) == nil:
		return nil, fmt.Errorf("broker: topic %s has no partition %d", name, p)
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

// Topic returns a topic's info; ok is false when it does not exist.
func (b *Broker) Topic(name string) (TopicInfo, bool) {
	t := b.partitions.Topic(name)
	if t == nil {
		return TopicInfo{}, false
	}
	return TopicInfo{Name: t.Name(), ID: t.ID(), Partitions: int32(len(t.Partitions())), Mirror: t.Mirror()}, true
}

// SetTopicMirror hands a topic to a cluster mirror (read-only from then
// on) or, with mirror "", releases it (writable: failover).
func (b *Broker) SetTopicMirror(name, mirror string) error {
	return b.partitions.SetMirror(name, mirror)
}

// Store is the node's state store, shared with the mirror control plane.
func (b *Broker) Store() *state.Store { return b.store }

// GrowMirrorTopic adds partitions to a mirror topic so it has as many as
// its source topic (the mirror's metadata sync: partition growth at the
// source is mirrored, never the other way round).
func (b *Broker) GrowMirrorTopic(name string, partitions int32) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.partitions.Topic(name)
	switch {
	case t == nil:
		return fmt.Errorf("broker: no topic %s", name)
	case !t.ReadOnly():
		return fmt.Errorf("broker: topic %s is not a mirror topic", name)
	}
	if err := b.partitions.Grow(t, partitions); err != nil {
		return err
	}
	b.log.Info("mirror topic partitions added", "topic", name, "partitions", partitions)
	return nil
}

// TopicConfigs copies a topic's dynamic configs (those set on the topic,
// not defaults); ok is false when the topic does not exist.
func (b *Broker) TopicConfigs(name string) (map[string]string, bool) {
	t := b.partitions.Topic(name)
	if t == nil {
		return nil, false
	}
	return t.Configs(), true
}

// MergeTopicConfigs sets configs on a topic and keeps the others (a
// mirror's topic config sync never deletes). Each value is checked alone:
// unknown or invalid ones are left out and returned by name, so one config
// this node does not know never blocks the rest. The valid ones are applied
// in one change.
func (b *Broker) MergeTopicConfigs(name string, set map[string]string) (rejected map[string]error, err error) {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t := b.partitions.Topic(name)
	if t == nil {
		return nil, fmt.Errorf("broker: no topic %s", name)
	}
	next := t.Configs()
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
	if err := b.partitions.SetConfigs(t, next); err != nil {
		return rejected, fmt.Errorf("broker: setting configs of %s: %w", name, err)
	}
	return rejected, nil
}
