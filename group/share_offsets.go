package group

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/share"
)

// A share group's start offsets (KIP-932's share-partition start offset,
// SPSO): where each share partition's consumers begin, per topic id and
// partition (a recreated topic starts over). kafka-share-groups.sh
// --describe and --reset-offsets read and set them
// (DescribeShareGroupOffsets, AlterShareGroupOffsets,
// DeleteShareGroupOffsets), and the mirror's share group sync sets them
// from the source's (KIP-1279), so that share consumers resume here where
// they stopped there.
//
// Kafka keeps them with the rest of a share partition's state in
// __share_group_state, at a share coordinator of its own. kmirror keeps
// them with the group, in the group's partition of __consumer_offsets
// (key type 1000, a kmirror record Kafka's loader skips as unknown):
// until share partitions have in-flight state there is nothing else to
// keep, and the group's coordinator then answers the three RPCs alone,
// with the group's own records, and deletes them with the group.
const shareOffsetKey = 1000

// ShareOffset is one share partition's start offset.
type ShareOffset struct {
	// StartOffset is -1 once deleted (DeleteShareGroupOffsets): the
	// record stays, so that its state epoch does.
	StartOffset int64
	// LeaderEpoch is the partition's leader epoch when it was set (-1
	// when unknown).
	LeaderEpoch int32
	// StateEpoch moves at every reset or delete of the start offset by
	// an admin (AlterShareGroupOffsets, DeleteShareGroupOffsets, the
	// mirror's sync): a partition's leader that loaded an older one is
	// fenced (FENCED_STATE_EPOCH) and loads the new one, instead of
	// writing its own start offset back over the reset.
	StateEpoch int32
	// Batches are the in-flight records past StartOffset that its leader
	// last wrote (package share): a new leader restores them. An admin's
	// reset clears them.
	Batches []share.StateBatch
}

func sameShareOffset(a, b ShareOffset) bool {
	return a.StartOffset == b.StartOffset && a.LeaderEpoch == b.LeaderEpoch && a.StateEpoch == b.StateEpoch &&
		slices.Equal(a.Batches, b.Batches)
}

// shareOffsetRecord is the record of tp's start offset; o nil is its
// tombstone.
func shareOffsetRecord(group string, tp topicPartitionID, o *ShareOffset) batch.Record {
	k := kbin.AppendInt16(nil, shareOffsetKey)
	k = kbin.AppendString(k, group)
	k = kbin.AppendUuid(k, tp.topic)
	k = kbin.AppendInt32(k, tp.partition)
	if o == nil {
		return batch.Record{Key: k}
	}
	v := kbin.AppendInt64(valueStart(), o.StartOffset)
	v = kbin.AppendInt32(v, o.LeaderEpoch)
	v = kbin.AppendInt32(v, o.StateEpoch)
	v = kbin.AppendCompactArrayLen(v, len(o.Batches))
	for _, b := range o.Batches {
		v = kbin.AppendInt64(v, b.First)
		v = kbin.AppendInt64(v, b.Last)
		v = kbin.AppendInt8(v, b.State)
		v = kbin.AppendInt16(v, b.DeliveryCount)
	}
	return batch.Record{Key: k, Value: noTags(v)}
}

// applyShareOffset applies a start offset record to s.
func (s *GroupsState) applyShareOffset(key, value []byte) error {
	kr := kbin.Reader{Src: key[2:]}
	group, topic, partition := kr.String(), kr.Uuid(), kr.Int32()
	if err := kr.Complete(); err != nil || len(kr.Src) > 0 {
		return fmt.Errorf("%w: %w: a share start offset key", ErrOffsetsRecord, errShareRecord)
	}
	tp := topicPartitionID{topic, partition}
	if value == nil {
		delete(s.ShareOffsets[group], tp)
		return nil
	}
	r := kbin.Reader{Src: value}
	if v := r.Int16(); v != 0 && r.Ok() {
		return fmt.Errorf("%w: %w: share start offset value version %d of group %q", ErrOffsetsRecord, errShareRecord, v, group)
	}
	o := ShareOffset{StartOffset: r.Int64(), LeaderEpoch: r.Int32(), StateEpoch: r.Int32()}
	for n := r.CompactArrayLen(); n > 0 && r.Ok(); n-- {
		o.Batches = append(o.Batches, share.StateBatch{First: r.Int64(), Last: r.Int64(), State: r.Int8(), DeliveryCount: r.Int16()})
	}
	readTags(&r, nil)
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: %w: share start offset of group %q: %v", ErrOffsetsRecord, errShareRecord, group, err)
	}
	if s.ShareOffsets[group] == nil {
		s.ShareOffsets[group] = map[topicPartitionID]ShareOffset{}
	}
	s.ShareOffsets[group][tp] = o
	return nil
}

// DescribeShareGroupOffsets answers the start offsets of share groups: of
// the partitions asked for, or (no topics, v1) of every partition that has
// one. A partition without one is StartOffset -1, as Kafka answers. A
// group that does not exist here, or is not a share group, is
// GROUP_ID_NOT_FOUND and a partition that does not exist
// UNKNOWN_TOPIC_OR_PARTITION, where Kafka answers -1 without an error: an
// operator asking of a group or topic that is not there is told so. Lag is
// -1 (not known here).
func (c *Coordinator) DescribeShareGroupOffsets(req *kmsg.DescribeShareGroupOffsetsRequest) *kmsg.DescribeShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	byName, byID := c.topicsByName()
	for _, rg := range req.Groups {
		dg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		dg.GroupID = rg.GroupID
		g := c.group(rg.GroupID, false)
		if g != nil {
			g.mu.Lock()
		}
		if g == nil || g.share == nil || g.state == stateDead {
			msg := "group " + rg.GroupID + " is not a share group"
			dg.ErrorCode, dg.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
			if g != nil {
				g.mu.Unlock()
			}
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		part := func(p int32, o ShareOffset, ok bool) kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition {
			dp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			dp.Partition, dp.StartOffset, dp.LeaderEpoch, dp.Lag = p, -1, -1, -1
			if ok {
				dp.StartOffset, dp.LeaderEpoch = o.StartOffset, o.LeaderEpoch
			}
			return dp
		}
		if rg.Topics == nil {
			held := g.shareOffsetsByTopic()
			for _, id := range sortedTopicIDs(held) {
				t, known := byID[id]
				if !known {
					continue // deleted: its state goes with the group
				}
				dt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
				dt.Topic, dt.TopicID = t.Name, id
				for _, p := range held[id] {
					o := g.shareOffsets[topicPartitionID{id, p}]
					dt.Partitions = append(dt.Partitions, part(p, o, true))
				}
				dg.Topics = append(dg.Topics, dt)
			}
		}
		for _, rt := range rg.Topics {
			dt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			dt.Topic = rt.Topic
			t, known := byName[rt.Topic]
			dt.TopicID = t.ID
			for _, p := range rt.Partitions {
				if !known || p < 0 || p >= t.Partitions {
					dp := part(p, ShareOffset{}, false)
					dp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					dt.Partitions = append(dt.Partitions, dp)
					continue
				}
				o, ok := g.shareOffsets[topicPartitionID{t.ID, p}]
				dt.Partitions = append(dt.Partitions, part(p, o, ok && o.StartOffset >= 0))
			}
			dg.Topics = append(dg.Topics, dt)
		}
		g.mu.Unlock()
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// AlterShareGroupOffsets sets start offsets of an empty share group,
// creating the group if it does not exist (as Kafka does, so that a
// mirror's sync may set a group before its consumers come). A group with
// members is NON_EMPTY_GROUP; a classic or consumer group is
// GROUP_ID_NOT_FOUND (KIP-1279's name conflict).
func (c *Coordinator) AlterShareGroupOffsets(req *kmsg.AlterShareGroupOffsetsRequest) *kmsg.AlterShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	fail := func(err *kerr.Error, msg string) *kmsg.AlterShareGroupOffsetsResponse {
		resp.ErrorCode, resp.ErrorMessage = err.Code, &msg
		return resp
	}
	if !c.cfg.ShareProtocol {
		return fail(kerr.UnsupportedVersion, "share groups are not in group.coordinator.rebalance.protocols")
	}
	if req.GroupID == "" {
		return fail(kerr.InvalidGroupID, "the group id is empty")
	}
	g := c.group(req.GroupID, true)
	if g == nil {
		return fail(kerr.CoordinatorNotAvailable, "the coordinator is closing")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.state == stateDead:
		return fail(kerr.CoordinatorNotAvailable, "the group is being deleted or unloaded")
	case g.share == nil && g.inUse():
		return fail(kerr.GroupIDNotFound, "group "+g.name+" is not a share group")
	case g.share != nil && len(g.share.members) > 0:
		return fail(kerr.NonEmptyGroup, "group "+g.name+" has members: stop its consumers first")
	}
	created, mark := g.share == nil, 0
	if !created {
		mark = len(g.share.unwritten)
	}
	if created {
		g.share, g.protocolType = newShareGroup(), "share"
		g.share.unwritten = append(g.share.unwritten, shareEpochRecord(g.name, 0))
	}
	byName, _ := c.topicsByName()
	set := map[topicPartitionID]ShareOffset{}
	for _, rt := range req.Topics {
		at := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		at.Topic = rt.Topic
		t, known := byName[rt.Topic]
		at.TopicID = t.ID
		for _, rp := range rt.Partitions {
			ap := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			ap.Partition = rp.Partition
			switch {
			case !known || rp.Partition < 0 || rp.Partition >= t.Partitions:
				ap.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.StartOffset < 0:
				msg := fmt.Sprintf("start offset %d is negative", rp.StartOffset)
				ap.ErrorCode, ap.ErrorMessage = kerr.InvalidRequest.Code, &msg
			case g.shareOffsets[topicPartitionID{t.ID, rp.Partition}].StartOffset == rp.StartOffset &&
				len(g.shareOffsets[topicPartitionID{t.ID, rp.Partition}].Batches) == 0 &&
				rp.StartOffset >= 0 && hasShareOffset(g, topicPartitionID{t.ID, rp.Partition}):
				// Already there, with nothing in flight (the mirror's sync
				// sets the same start every cycle): nothing to write, no
				// leader to fence.
			default:
				tp := topicPartitionID{t.ID, rp.Partition}
				o := ShareOffset{StartOffset: rp.StartOffset, LeaderEpoch: -1, StateEpoch: g.shareOffsets[tp].StateEpoch + 1}
				set[tp] = o
				g.share.unwritten = append(g.share.unwritten, shareOffsetRecord(g.name, topicPartitionID{t.ID, rp.Partition}, &o))
			}
			at.Partitions = append(at.Partitions, ap)
		}
		resp.Topics = append(resp.Topics, at)
	}
	if err := g.writeShare(); err != nil {
		if created {
			// Nothing of the group was there: it goes, rather than stay
			// listed as an empty classic group.
			g.share, g.protocolType, g.state = nil, "", stateDead
			c.removeIfDead(g)
		} else {
			g.share.unwritten = g.share.unwritten[:mark] // refused: nothing of it may go out later
		}
		return fail(err, "writing the start offsets to __consumer_offsets failed")
	}
	maps.Copy(g.shareOffsets, set)
	c.log.Info("share group start offsets set", "group", g.name, "partitions", len(set))
	return resp
}

// DeleteShareGroupOffsets deletes an empty share group's start offsets of
// whole topics; its consumers then start where share.auto.offset.reset
// says.
func (c *Coordinator) DeleteShareGroupOffsets(req *kmsg.DeleteShareGroupOffsetsRequest) *kmsg.DeleteShareGroupOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	fail := func(err *kerr.Error, msg string) *kmsg.DeleteShareGroupOffsetsResponse {
		resp.ErrorCode, resp.ErrorMessage = err.Code, &msg
		return resp
	}
	g := c.group(req.GroupID, false)
	if g == nil {
		return fail(kerr.GroupIDNotFound, "group "+req.GroupID+" does not exist")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.share == nil || g.state == stateDead:
		return fail(kerr.GroupIDNotFound, "group "+g.name+" is not a share group")
	case len(g.share.members) > 0:
		return fail(kerr.NonEmptyGroup, "group "+g.name+" has members: stop its consumers first")
	}
	byName, _ := c.topicsByName()
	mark, held := len(g.share.unwritten), g.shareOffsetsByTopic()
	var gone []topicPartitionID
	for _, rt := range req.Topics {
		dt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		dt.Topic = rt.Topic
		t, known := byName[rt.Topic]
		dt.TopicID = t.ID
		if !known {
			dt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		for _, p := range held[t.ID] {
			tp := topicPartitionID{t.ID, p}
			gone = append(gone, tp)
			deleted := ShareOffset{StartOffset: -1, LeaderEpoch: -1, StateEpoch: g.shareOffsets[tp].StateEpoch + 1}
			g.share.unwritten = append(g.share.unwritten, shareOffsetRecord(g.name, tp, &deleted))
		}
		resp.Topics = append(resp.Topics, dt)
	}
	if err := g.writeShare(); err != nil {
		g.share.unwritten = g.share.unwritten[:mark] // refused: nothing of it may go out later
		return fail(err, "writing to __consumer_offsets failed")
	}
	for _, tp := range gone {
		g.shareOffsets[tp] = ShareOffset{StartOffset: -1, LeaderEpoch: -1, StateEpoch: g.shareOffsets[tp].StateEpoch + 1}
	}
	return resp
}

// hasShareOffset reports whether tp has a start offset record. REQUIRES:
// g.mu held.
func hasShareOffset(g *Group, tp topicPartitionID) bool {
	_, ok := g.shareOffsets[tp]
	return ok
}

// shareOffsetsByTopic lists the partitions with a start offset, by topic,
// ascending. REQUIRES: g.mu held.
func (g *Group) shareOffsetsByTopic() Assignment {
	out := Assignment{}
	for tp, o := range g.shareOffsets {
		if o.StartOffset >= 0 {
			out[tp.topic] = append(out[tp.topic], tp.partition)
		}
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}

// shareOffsetTombstones delete every start offset of g. REQUIRES: g.mu
// held.
func (g *Group) shareOffsetTombstones() []batch.Record {
	var recs []batch.Record
	for tp := range g.shareOffsets { // deleted ones too: their records go
		recs = append(recs, shareOffsetRecord(g.name, tp, nil))
	}
	slices.SortFunc(recs, func(a, b batch.Record) int { return bytes.Compare(a.Key, b.Key) })
	return recs
}

// SetShareStart records the start offset a share partition's leader moved
// to (WriteShareGroupState): the group's members may be active. A group
// that is not a share group here is GROUP_ID_NOT_FOUND (it was deleted); a
// write at another state epoch than the partition's is FENCED_STATE_EPOCH
// (an admin reset or deleted it since the leader loaded it), and one from
// an older leader epoch FENCED_LEADER_EPOCH: the leader drops its state and
// loads the partition's again.
func (c *Coordinator) SetShareStart(group string, topic TopicID, partition int32, o ShareOffset) *kerr.Error {
	g := c.group(group, false)
	if g == nil {
		return kerr.GroupIDNotFound
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.share == nil || g.state == stateDead {
		return kerr.GroupIDNotFound
	}
	tp := topicPartitionID{topic, partition}
	cur, ok := g.shareOffsets[tp]
	switch {
	case o.StateEpoch != cur.StateEpoch: // an absent one is at epoch 0
		return kerr.FencedStateEpoch
	case ok && o.LeaderEpoch < cur.LeaderEpoch:
		return kerr.FencedLeaderEpoch
	case ok && sameShareOffset(cur, o):
		return nil
	}
	mark := len(g.share.unwritten)
	g.share.unwritten = append(g.share.unwritten, shareOffsetRecord(g.name, tp, &o))
	if err := g.writeShare(); err != nil {
		g.share.unwritten = g.share.unwritten[:mark] // the leader writes it again
		return err
	}
	g.shareOffsets[tp] = o
	return nil
}

// ShareStart is a share partition's start offset and state epoch, for its
// leader's first fetch; StartOffset is -1 when none is set
// (share.auto.offset.reset decides), and ok is false when the partition
// has no record at all (its state epoch is 0). A group that is not a share
// group here is GROUP_ID_NOT_FOUND.
func (c *Coordinator) ShareStart(group string, topic TopicID, partition int32) (o ShareOffset, ok bool, err *kerr.Error) {
	g := c.group(group, false)
	if g == nil {
		return o, false, kerr.GroupIDNotFound
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.share == nil || g.state == stateDead {
		return o, false, kerr.GroupIDNotFound
	}
	o, ok = g.shareOffsets[topicPartitionID{topic, partition}]
	return o, ok, nil
}
