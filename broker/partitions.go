package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/storage"
)

// The broker's side of the partition registry (partition.Manager): the
// registry hosts the topics and their logs; the handlers look them up
// there and answer in Kafka's terms.

// partitionConfig is the registry's LogConfig: a topic's log config and
// node-enforced settings, from its dynamic configs over the broker's.
func (b *Broker) partitionConfig(configs map[string]string) (storage.Config, partition.Settings, error) {
	cfg, eff, err := b.logConfig(configs)
	return cfg, partition.Settings{MaxMessageBytes: eff.maxMessageBytes, Compact: eff.compact,
		LogAppendTime: eff.logAppendTime}, err
}

// deleteTopic deletes a topic from the registry, then, as Kafka does, its
// committed offsets and its groups' assignments of it.
func (b *Broker) deleteTopic(t *partition.Topic) error {
	deleted, err := b.partitions.Delete(t)
	if err != nil || !deleted {
		return err
	}
	if _, err := b.store.DeleteTopicOffsets(t.Name()); err != nil {
		b.log.Warn("deleting the offsets of a deleted topic", "topic", t.Name(), "err", err)
	}
	b.groups.TopicDeleted(t.Name())
	b.log.Info("topic deleted", "topic", t.Name())
	return nil
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
