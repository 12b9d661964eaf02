package group

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/kmirror/kmirror/batch"
)

// A share group (KIP-932) travels in __consumer_offsets in Kafka 4's
// records, encoded as the consumer group's are (consumer_records.go):
//
//	10 ShareGroupMemberMetadata (group, member): rack, client, subscription
//	11 ShareGroupMetadata (group): the group epoch (and a topics hash,
//	   written 0 and not read: the coordinator resolves subscriptions
//	   against the topics as they are)
//	12 ShareGroupTargetAssignmentMetadata (group): the target's epoch
//	13 ShareGroupTargetAssignmentMember (group, member): its target
//	14 ShareGroupCurrentMemberAssignment (group, member): its epochs and
//	   partitions
//
// Type 15 (ShareGroupStatePartitionMetadata, which share partitions have
// state) is read past: kmirror keeps no share-partition state yet. A
// member leaves as three tombstones (10, 13, 14) and a group as two (12,
// 11).
const (
	shareMemberKey       = 10
	shareGroupKey        = 11
	shareTargetKey       = 12
	shareTargetMemberKey = 13
	shareCurrentKey      = 14
	shareStatePartsKey   = 15
)

// ShareGroupState is a share group as its records left it.
type ShareGroupState struct {
	Epoch, TargetEpoch int32
	Members            map[string]*ShareMemberState
}

// ShareMemberState is one member as its records left it; a member comes
// back only with its metadata (type 10).
type ShareMemberState struct {
	HasMetadata          bool
	RackID               string
	ClientID, ClientHost string
	TopicNames           []string
	Target               Assignment
	Epoch, PreviousEpoch int32
	Assigned             Assignment
}

// errShareRecord marks a share group record that does not decode.
var errShareRecord = errors.New("share group record")

func shareEpochRecord(group string, epoch int32) batch.Record {
	v := kbin.AppendInt32(valueStart(), epoch)
	v = kbin.AppendInt64(v, 0) // MetadataHash
	return batch.Record{Key: consumerKey(shareGroupKey, group, nil), Value: noTags(v)}
}

func shareTargetEpochRecord(group string, epoch int32) batch.Record {
	v := kbin.AppendInt32(valueStart(), epoch)
	return batch.Record{Key: consumerKey(shareTargetKey, group, nil), Value: noTags(v)}
}

func shareMemberRecord(group string, m *shareMember) batch.Record {
	v := kbin.AppendCompactNullableString(valueStart(), nullable(m.rackID))
	v = kbin.AppendCompactString(v, m.clientID)
	v = kbin.AppendCompactString(v, m.clientHost)
	v = kbin.AppendCompactArrayLen(v, len(m.topicNames))
	for _, n := range m.topicNames {
		v = kbin.AppendCompactString(v, n)
	}
	return batch.Record{Key: consumerKey(shareMemberKey, group, &m.id), Value: noTags(v)}
}

func shareTargetMemberRecord(group, id string, target Assignment) batch.Record {
	v := appendTopicPartitions(valueStart(), target, nil)
	return batch.Record{Key: consumerKey(shareTargetMemberKey, group, &id), Value: noTags(v)}
}

// shareCurrentRecord is m's epochs and partitions; its state is always 0
// (STABLE): a share member never waits for a revocation.
func shareCurrentRecord(group string, m *shareMember) batch.Record {
	v := kbin.AppendInt32(valueStart(), m.epoch)
	v = kbin.AppendInt32(v, m.previousEpoch)
	v = kbin.AppendInt8(v, int8(memberStable))
	v = appendTopicPartitions(v, m.assigned, nil)
	return batch.Record{Key: consumerKey(shareCurrentKey, group, &m.id), Value: noTags(v)}
}

func shareMemberTombstones(group, id string) []batch.Record {
	return []batch.Record{{Key: consumerKey(shareMemberKey, group, &id)},
		{Key: consumerKey(shareTargetMemberKey, group, &id)}, {Key: consumerKey(shareCurrentKey, group, &id)}}
}

// shareGroupTombstones delete the group's own records (its members' go
// first).
func shareGroupTombstones(group string) []batch.Record {
	return []batch.Record{{Key: consumerKey(shareTargetKey, group, nil)}, {Key: consumerKey(shareGroupKey, group, nil)}}
}

// applyShare applies a record of type typ (10 to 15) to s.
func (s *GroupsState) applyShare(typ int16, key, value []byte) error {
	kr := kbin.Reader{Src: key[2:]}
	group := kr.String()
	var member string
	perMember := typ == shareMemberKey || typ == shareTargetMemberKey || typ == shareCurrentKey
	if perMember {
		member = kr.String()
	}
	if err := kr.Complete(); err != nil || len(kr.Src) > 0 {
		return fmt.Errorf("%w: %w: a key of type %d", ErrOffsetsRecord, errShareRecord, typ)
	}
	if typ == shareStatePartsKey {
		return nil
	}
	sg := s.Share[group]
	if value == nil {
		switch {
		case sg == nil:
		case typ == shareGroupKey:
			delete(s.Share, group)
		case typ == shareMemberKey:
			delete(sg.Members, member)
		case typ == shareTargetMemberKey:
			if m := sg.Members[member]; m != nil {
				m.Target = nil
			}
		case typ == shareCurrentKey:
			if m := sg.Members[member]; m != nil {
				m.Assigned, m.Epoch, m.PreviousEpoch = nil, 0, 0
			}
		}
		return nil
	}
	if sg == nil {
		sg = &ShareGroupState{Members: map[string]*ShareMemberState{}}
		s.Share[group] = sg
	}
	var m *ShareMemberState
	if perMember {
		if m = sg.Members[member]; m == nil {
			m = &ShareMemberState{}
			sg.Members[member] = m
		}
	}
	r := kbin.Reader{Src: value}
	if v := r.Int16(); v != 0 && r.Ok() {
		return fmt.Errorf("%w: %w: type %d value version %d of group %q", ErrOffsetsRecord, errShareRecord, typ, v, group)
	}
	switch typ {
	case shareGroupKey:
		sg.Epoch = r.Int32()
		r.Int64() // MetadataHash
	case shareTargetKey:
		sg.TargetEpoch = r.Int32()
	case shareMemberKey:
		m.HasMetadata = true
		m.RackID = deref(r.CompactNullableString())
		m.ClientID, m.ClientHost = r.CompactString(), r.CompactString()
		m.TopicNames = nil
		for n := r.CompactArrayLen(); n > 0 && r.Ok(); n-- {
			m.TopicNames = append(m.TopicNames, r.CompactString())
		}
		slices.Sort(m.TopicNames)
		m.TopicNames = slices.Compact(m.TopicNames)
	case shareTargetMemberKey:
		m.Target = readTopicPartitions(&r, nil)
	case shareCurrentKey:
		m.Epoch, m.PreviousEpoch = r.Int32(), r.Int32()
		r.Int8() // State: a share member is always STABLE
		m.Assigned = readTopicPartitions(&r, nil)
	}
	readTags(&r, nil)
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: %w: type %d value of group %q: %v", ErrOffsetsRecord, errShareRecord, typ, group, err)
	}
	return nil
}

// restoreShare makes g the share group ss holds, as a new coordinator of
// the group loads it: its members keep their ids, epochs and assignments,
// each on a fresh session. A member without its metadata record is left
// out: its next heartbeat is UNKNOWN_MEMBER_ID and it rejoins. REQUIRES:
// g not shared yet.
func (g *Group) restoreShare(ss *ShareGroupState) {
	sg := newShareGroup()
	sg.epoch, sg.targetEpoch = ss.Epoch, ss.TargetEpoch
	g.share, g.protocolType = sg, "share"
	for id, ms := range ss.Members {
		if !ms.HasMetadata {
			continue
		}
		m := &shareMember{id: id, rackID: ms.RackID, clientID: ms.ClientID, clientHost: ms.ClientHost,
			topicNames: ms.TopicNames, epoch: ms.Epoch, previousEpoch: ms.PreviousEpoch, assigned: ms.Assigned}
		sg.members[id] = m
		if ms.Target != nil {
			sg.target[id] = ms.Target
		}
		// An epoch record lost to a failed write must not leave the
		// group behind its members.
		sg.epoch = max(sg.epoch, m.epoch)
	}
	sg.epoch = max(sg.epoch, sg.targetEpoch)
	g.refreshShareTopics()
	if sg.epoch == sg.targetEpoch && !g.shareTargetHolds() {
		// The topics changed while no one coordinated the group (or the
		// target was never written whole): a new target, whose records
		// go out with the next heartbeat's.
		g.bumpShareEpoch()
	}
	if sg.epoch > sg.targetEpoch {
		g.computeShareTarget()
	}
	for _, m := range sg.members {
		g.armShareSession(m)
	}
	if len(sg.members) > 0 {
		g.c.log.Info("share group loaded", "group", g.name, "epoch", sg.epoch, "members", len(sg.members))
	}
}
