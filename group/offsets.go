package group

import (
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// OffsetCommit stores a group's committed offsets. A member commits within
// its generation; generation -1 with no member id is a "simple" commit
// (a consumer assigning partitions itself, an admin tool, the mirror sync
// loop), allowed while the group has no members. Commits to mirror topics
// are allowed.
func (c *Coordinator) OffsetCommit(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	code := int16(0)
	g := c.group(req.Group, req.Group != "")
	switch {
	case req.Group == "":
		code = kerr.InvalidGroupID.Code
	case g == nil:
		code = kerr.CoordinatorNotAvailable.Code
	}
	if code != 0 {
		return fillCommitResponse(resp, req, code)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	partitionCheck, err := g.commitCheck(req)
	if err != nil {
		return fillCommitResponse(resp, req, err.Code)
	}
	now := c.cfg.Now().UnixMilli()
	var offs []state.GroupOffset
	codes := make([][]int16, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		codes[i] = make([]int16, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			meta := ""
			if rp.Metadata != nil {
				meta = *rp.Metadata
			}
			switch {
			case partitionCheck != nil && !partitionCheck(rt.Topic, rp.Partition):
				codes[i][j] = kerr.StaleMemberEpoch.Code
			case len(meta) > c.cfg.MaxMetadataBytes:
				codes[i][j] = kerr.OffsetMetadataTooLarge.Code
			case !c.cfg.PartitionExists(rt.Topic, rp.Partition):
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			default:
				epoch := rp.LeaderEpoch
				if req.Version < 6 {
					epoch = -1
				}
				offs = append(offs, state.GroupOffset{Topic: rt.Topic, Partition: rp.Partition, Offset: rp.Offset,
					LeaderEpoch: epoch, Metadata: meta, CommitTimestamp: now})
			}
		}
	}
	if len(offs) > 0 {
		if err := c.store.CommitOffsets(g.name, offs); err != nil {
			c.log.Warn("storing committed offsets failed", "group", g.name, "err", err)
			return fillCommitResponse(resp, req, storeErrorCode(err))
		}
		for _, o := range offs {
			tp := topicPartition{o.Topic, o.Partition}
			g.offsets[tp] = o
			g.supersedePending(tp)
		}
	}
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for j := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rt.Partitions[j].Partition, codes[i][j]
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// storeErrorCode is the error code of a failed Store write: the Kafka
// error it carries (a write to __consumer_offsets that lost the
// partition's leadership is NOT_COORDINATOR), else COORDINATOR_NOT_AVAILABLE,
// which clients retry.
func storeErrorCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// commitCheck validates who commits; a consumer group member's commit at
// an older epoch is valid by partition, which partition (non-nil then)
// reports. REQUIRES: g.mu held.
func (g *Group) commitCheck(req *kmsg.OffsetCommitRequest) (partition func(topic string, p int32) bool, err *kerr.Error) {
	if g.consumer.active() {
		return g.consumerMemberCheck(req.MemberID, req.Generation, req.Version >= 9)
	}
	if g.share != nil {
		// A share group keeps no committed offsets (its consumers
		// acknowledge records).
		return nil, kerr.GroupIDNotFound
	}
	if req.Generation < 0 && req.MemberID == "" {
		if len(g.members) > 0 {
			// Kafka refuses a simple commit into an active group: it
			// would race the members' own commits.
			return nil, kerr.UnknownMemberID
		}
		return nil, nil
	}
	m, err := g.memberCheck(req.MemberID, req.InstanceID, req.Generation)
	if err != nil {
		return nil, err
	}
	if g.state == stateCompletingRebalance {
		return nil, kerr.RebalanceInProgress
	}
	if m.join == nil {
		g.resetExpiry(m)
	}
	return nil, nil
}

func fillCommitResponse(resp *kmsg.OffsetCommitResponse, req *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// fetchTopics is the topics-and-partitions shape both OffsetFetch layouts
// share: nil means every committed offset.
type fetchTopic struct {
	topic      string
	partitions []int32
}

// OffsetFetch returns committed offsets: one group before v8, several
// since. An unknown group or partition answers offset -1, no error.
func (c *Coordinator) OffsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		var topics []fetchTopic
		if req.Topics != nil {
			topics = make([]fetchTopic, 0, len(req.Topics))
			for _, t := range req.Topics {
				topics = append(topics, fetchTopic{t.Topic, t.Partitions})
			}
		}
		for _, rt := range c.fetchOffsets(req.Group, topics, req.Topics == nil) {
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = rt.Topic
			for _, p := range rt.Partitions {
				tp := kmsg.NewOffsetFetchResponseTopicPartition()
				tp.Partition, tp.Offset, tp.LeaderEpoch, tp.Metadata = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata
				t.Partitions = append(t.Partitions, tp)
			}
			resp.Topics = append(resp.Topics, t)
		}
		if req.Group == "" {
			resp.ErrorCode = kerr.InvalidGroupID.Code
		}
		return resp
	}
	for _, rg := range req.Groups {
		var topics []fetchTopic
		if rg.Topics != nil {
			for _, t := range rg.Topics {
				topics = append(topics, fetchTopic{t.Topic, t.Partitions})
			}
		}
		og := kmsg.NewOffsetFetchResponseGroup()
		og.Group = rg.Group
		if rg.Group == "" {
			og.ErrorCode = kerr.InvalidGroupID.Code
		}
		og.Topics = c.fetchOffsets(rg.Group, topics, rg.Topics == nil)
		resp.Groups = append(resp.Groups, og)
	}
	return resp
}

// fetchOffsets answers one group in the v8+ shape.
func (c *Coordinator) fetchOffsets(name string, topics []fetchTopic, all bool) []kmsg.OffsetFetchResponseGroupTopic {
	g := c.group(name, false)
	var committed map[topicPartition]state.GroupOffset
	if g != nil {
		g.mu.Lock()
		defer g.mu.Unlock()
		committed = g.offsets
	}
	if all {
		byTopic := map[string][]int32{}
		var names []string
		for tp := range committed {
			if _, ok := byTopic[tp.topic]; !ok {
				names = append(names, tp.topic)
			}
			byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
		}
		slices.Sort(names)
		for _, n := range names {
			ps := byTopic[n]
			slices.Sort(ps)
			topics = append(topics, fetchTopic{n, ps})
		}
	}
	out := make([]kmsg.OffsetFetchResponseGroupTopic, 0, len(topics))
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = t.topic
		for _, p := range t.partitions {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			meta := ""
			if o, ok := committed[topicPartition{t.topic, p}]; ok {
				rp.Offset, rp.LeaderEpoch, meta = o.Offset, o.LeaderEpoch, o.Metadata
			}
			rp.Metadata = &meta
			rt.Partitions = append(rt.Partitions, rp)
		}
		out = append(out, rt)
	}
	return out
}

// OffsetDelete deletes committed offsets of a group, refusing partitions
// of topics the group's members are subscribed to.
func (c *Coordinator) OffsetDelete(req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	g := c.group(req.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.state == stateDead:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	case g.state != stateEmpty && g.protocolType != "consumer":
		// Kafka cannot tell what an active non-consumer group uses.
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		return resp
	}
	subscribed := g.subscribedTopics()
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		var del []int32
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			if subscribed[rt.Topic] {
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			} else {
				del = append(del, rp.Partition)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		if len(del) > 0 {
			if err := c.store.DeleteOffsets(g.name, rt.Topic, del); err != nil {
				c.log.Warn("deleting offsets failed", "group", g.name, "err", err)
				for i := range st.Partitions {
					if st.Partitions[i].ErrorCode == 0 {
						st.Partitions[i].ErrorCode = storeErrorCode(err)
					}
				}
			} else {
				for _, p := range del {
					delete(g.offsets, topicPartition{rt.Topic, p})
				}
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// subscribedTopics reads the consumer-protocol subscriptions of the
// members (any protocol type other than "consumer" subscribes to nothing
// kmirror can tell).
func (g *Group) subscribedTopics() map[string]bool {
	out := map[string]bool{}
	if g.consumer != nil {
		if g.consumer.active() {
			for _, t := range g.consumer.topics {
				out[t.Name] = true
			}
		}
		return out
	}
	if g.protocolType != "consumer" {
		return out
	}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if p.Name != g.protocol && g.protocol != "" {
				continue
			}
			var meta kmsg.ConsumerMemberMetadata
			if meta.ReadFrom(p.Metadata) == nil {
				for _, t := range meta.Topics {
					out[t] = true
				}
			}
		}
	}
	return out
}

// TopicDeleted forgets a deleted topic's offsets in every group's cache
// and returns the partitions it forgot, by group; the broker removes them
// from the store.
func (c *Coordinator) TopicDeleted(topic string) map[string][]int32 {
	forgot := map[string][]int32{}
	for _, g := range c.sortedGroups() {
		g.mu.Lock()
		for tp := range g.offsets {
			if tp.topic == topic {
				delete(g.offsets, tp)
				forgot[g.name] = append(forgot[g.name], tp.partition)
			}
		}
		g.mu.Unlock()
	}
	return forgot
}
