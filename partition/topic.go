package partition

import (
	"crypto/rand"
	"encoding/base64"
	"maps"
	"sync"
	"sync/atomic"
)

// Topic is a topic this node hosts and its partitions.
type Topic struct {
	m    *Manager // nil for a stand-in (NewTopic)
	name string
	id   [16]byte
	// configs are the dynamic topic configs (explicitly set keys).
	// Guarded by Manager.mu.
	configs map[string]string
	// mirror is the cluster mirror owning the topic (nil or "" if none).
	// It is atomic because handlers and the maintenance pass read it
	// without Manager.mu while SetMirror changes it (failover, failback).
	mirror atomic.Pointer[string]
	// maintainMu is read-held by a maintenance pass over a partition, and
	// write-held by SetMirror and Delete: a topic handed to a mirror
	// (failback) is never cleaned by a pass that checked it just before,
	// after its first mirrored appends, and a deleted topic's partitions
	// are never touched by a pass again (deleted). Taken before
	// Manager.mu.
	maintainMu sync.RWMutex
	// deleted is set by Delete. Guarded by maintainMu.
	deleted bool
	// partList is replaced (never modified) under Manager.mu when
	// partitions are added, so handlers read it without a lock.
	partList atomic.Pointer[[]*Partition]
}

// NewTopic is a topic of no registry, without partitions or configs (only
// its name and ID are of use): the node's topics are made by its Manager,
// which starts from one; a handler's test uses one to name a topic that
// does not exist.
func NewTopic(name string, id [16]byte) *Topic { return &Topic{name: name, id: id} }

// Name is the topic's name.
func (t *Topic) Name() string { return t.name }

// ID is the topic's ID (the source's, for a mirror topic).
func (t *Topic) ID() [16]byte { return t.id }

// Partitions returns the topic's partitions, in index order. The slice is
// never modified: growth publishes a longer one.
func (t *Topic) Partitions() []*Partition {
	if p := t.partList.Load(); p != nil {
		return *p
	}
	return nil
}

// Partition returns partition i, nil when the topic has none of that
// number.
func (t *Topic) Partition(i int32) *Partition {
	parts := t.Partitions()
	if i < 0 || int(i) >= len(parts) {
		return nil
	}
	return parts[i]
}

// Mirror is the cluster mirror owning the topic, "" if none.
func (t *Topic) Mirror() string {
	if m := t.mirror.Load(); m != nil {
		return *m
	}
	return ""
}

func (t *Topic) setMirror(name string) { t.mirror.Store(&name) }

// ReadOnly reports whether clients may not write: the topic belongs to a
// cluster mirror (SPEC.md: READ_ONLY_TOPIC until failover, answered as
// POLICY_VIOLATION).
func (t *Topic) ReadOnly() bool { return t.Mirror() != "" }

// Configs copies the topic's dynamic configs (those set on the topic, not
// defaults).
func (t *Topic) Configs() map[string]string {
	t.m.mu.RLock()
	defer t.m.mu.RUnlock()
	return maps.Clone(t.configs)
}

// Config is one dynamic config of the topic; ok is false when it is not
// set on the topic.
func (t *Topic) Config(name string) (v string, ok bool) {
	t.m.mu.RLock()
	defer t.m.mu.RUnlock()
	v, ok = t.configs[name]
	return v, ok
}

// NewTopicID returns a random topic ID that is neither zero nor, like
// Kafka's Uuid.randomUuid, one whose base64 form starts with '-'.
func NewTopicID() ([16]byte, error) {
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
