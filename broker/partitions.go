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

// deleteTopic deletes a topic from the registry, which then calls
// topicRemoved.
func (b *Broker) deleteTopic(t *partition.Topic) error {
	_, err := b.partitions.Delete(t)
	return err
}

// topicRemoved is the registry's Removed hook: as Kafka does, a deleted
// topic's committed offsets and its groups' assignments of it go, on the
// node that deleted it and on every node that followed the deletion from
// the metadata log (the offsets are kept where each group is
// coordinated).
func (b *Broker) topicRemoved(name string) {
	if _, err := b.store.DeleteTopicOffsets(name); err != nil {
		b.log.Warn("deleting the offsets of a deleted topic", "topic", name, "err", err)
	}
	if b.groups != nil {
		forgot := b.groups.TopicDeleted(name)
		if len(forgot) > 0 {
			// Tombstones in __consumer_offsets, or a load would bring
			// the offsets back; not under the registry's lock, which
			// holds this hook.
			b.bg.Add(1)
			go func() {
				defer b.bg.Done()
				b.groupLog.tombstoneTopic(name, forgot)
			}()
		}
	}
	b.log.Info("topic deleted", "topic", name)
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
