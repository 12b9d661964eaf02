package broker

import (
	"fmt"

	"github.com/kmirror/kmirror/state"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The mirror's group offset sync (sync/groups) writes through these: it
// must not touch a group that has members here, and commits as an admin
// tool does (generation -1, no member), which the coordinator refuses for
// an active group, so a group that becomes active meanwhile wins.

// GroupActive reports whether group has members on this node.
func (b *Broker) GroupActive(group string) bool {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp := b.groups.DescribeGroups(req)
	if len(resp.Groups) != 1 {
		return false
	}
	switch resp.Groups[0].State {
	case "Stable", "PreparingRebalance", "CompletingRebalance":
		return true
	}
	return false
}

// CommitGroupOffsets commits offsets for group as a simple (memberless)
// commit.
func (b *Broker) CommitGroupOffsets(group string, offs []state.GroupOffset) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.Generation = group, -1
	byTopic := map[string]int{}
	for _, o := range offs {
		i, ok := byTopic[o.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[o.Topic] = i
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = o.Topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		meta := o.Metadata
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Partition, o.Offset, o.LeaderEpoch, &meta
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	resp := b.groups.OffsetCommit(req)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s-%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}
