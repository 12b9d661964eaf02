package broker

import (
	"errors"
	"fmt"

	"github.com/kmirror/kmirror/storage"
)

// The broker's side of mirroring: mirror topics are read-only topics with
// the source's name, topic ID and partition count, written by the fetchers
// (fetch/) through MirrorPartition. The control plane (the mirror RPCs)
// will create and release them; until then the Go API below does.

// MirrorPartition is what a mirror fetcher writes: it matches
// fetch.Partition without the broker importing fetch.
type MirrorPartition interface {
	Log() *storage.Log
	LeaderEpoch() int32
	RaiseLeaderEpoch(epoch int32) error
	Appended()
}

// CreateMirrorTopic creates a topic owned by cluster mirror mirror, with
// the source's topic ID and partition count. Clients cannot produce to it
// (READ_ONLY_TOPIC) until the mirror releases it.
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

// mirrorPartition adapts a partition to MirrorPartition.
type mirrorPartition struct {
	b *Broker
	p *partition
}

func (m mirrorPartition) Log() *storage.Log  { return m.p.log }
func (m mirrorPartition) LeaderEpoch() int32 { return m.p.leaderEpoch() }
func (m mirrorPartition) Appended()          { m.p.appended() }

// RaiseLeaderEpoch persists a higher local leader epoch before the
// batches that need it are appended (DESIGN.md decision 3).
func (m mirrorPartition) RaiseLeaderEpoch(epoch int32) error {
	stored, err := m.b.store.PutLeaderEpoch(m.p.topic.id, m.p.index, epoch)
	if err != nil {
		return err
	}
	m.p.epochFloor.Store(stored)
	return nil
}
