package broker

import (
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// The broker's side of mirroring: mirror topics are read-only topics with
// the source's name, topic ID and partition count, written by the fetchers
// (fetch/) through partition.Manager.MirrorPartition's Follower. The
// control plane (control/) creates, grows, configures and releases them
// through the Go API below, which serialises with clients' admin requests
// (adminMu).

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
	// default.replication.factor replicas, as a topic created without
	// one: the mirror's fetchers write each partition on its leader, and
	// its followers copy it as any other (DESIGN.md "Mirroring").
	rf := int(b.cfg.DefaultReplicationFactor)
	msg, err := b.replicationFactorMsg(rf)
	if err != nil {
		return err
	}
	if msg != "" {
		return fmt.Errorf("broker: mirror topic %s (default.replication.factor=%d): %s", name, rf, msg)
	}
	_, err = b.partitions.Create(name, partitions, nil, id, mirror, partition.Placement{RF: rf})
	return err
}

// SetTopicsMirror hands topics to a cluster mirror (read-only from then
// on) or, with mirror "", releases them (writable: failover).
func (b *Broker) SetTopicsMirror(names []string, mirror string) error {
	return b.partitions.SetMirrorOf(names, mirror)
}

// Store is the node's state store, shared with the mirror control plane,
// which owns the mirror records in it.
func (b *Broker) Store() *state.Store { return b.store }

// Partitions is the node's partitions, which the control plane reads.
func (b *Broker) Partitions() *partition.Manager { return b.partitions }

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
	if err := b.partitions.Grow(t, partitions, partition.Placement{RF: b.replicationFactor(t)}); err != nil {
		return err
	}
	b.log.Info("mirror topic partitions added", "topic", name, "partitions", partitions)
	return nil
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
