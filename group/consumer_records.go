package group

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/kmirror/kmirror/batch"
)

// A consumer group (KIP-848) travels in __consumer_offsets in Kafka 4's
// records, so that a new coordinator of the group serves its members as
// they were, with no one rejoining. A key's version is its record type:
//
//	3 ConsumerGroupMetadata (group): the group epoch
//	5 ConsumerGroupMemberMetadata (group, member): who it is, what it subscribes
//	6 ConsumerGroupTargetAssignmentMetadata (group): the target's epoch
//	7 ConsumerGroupTargetAssignmentMember (group, member): its target
//	8 ConsumerGroupCurrentMemberAssignment (group, member): its epochs,
//	  state, assigned and revoking partitions, with the epoch each
//	  partition was assigned at (tag 0, KIP-1251)
//
// Keys are Kafka's non-flexible encoding (int16-length strings), values
// version 0 in the flexible one (compact strings and arrays, tagged
// fields, of which unknown ones are skipped). Type 4
// (ConsumerGroupPartitionMetadata, deprecated by Kafka 4.1) is read past:
// the coordinator resolves subscriptions against the topics as they are.
// A null value deletes what its key names; a member leaves as three
// tombstones (5, 7, 8) and a group as two (3, 6).
const (
	consumerGroupKey        = 3
	consumerPartitionsKey   = 4
	consumerMemberKey       = 5
	consumerTargetKey       = 6
	consumerTargetMemberKey = 7
	consumerCurrentKey      = 8
)

// ConsumerGroupState is a consumer group as its records left it.
type ConsumerGroupState struct {
	Epoch, TargetEpoch int32
	Members            map[string]*ConsumerMemberState
}

// ConsumerMemberState is one member as its records left it; a member
// comes back only with its metadata (type 5).
type ConsumerMemberState struct {
	HasMetadata           bool
	InstanceID, RackID    string
	ClientID, ClientHost  string
	TopicNames            []string
	Regex, ServerAssignor string
	RebalanceTimeoutMs    int32
	Target                Assignment
	Epoch, PreviousEpoch  int32
	State                 int8
	Assigned, Revoking    Assignment
	AssignedAt            map[topicPartitionID]int32
}

// errConsumerRecord marks a consumer group record that does not decode.
var errConsumerRecord = errors.New("consumer group record")

func consumerKey(typ int16, group string, member *string) []byte {
	k := kbin.AppendInt16(nil, typ)
	k = kbin.AppendString(k, group)
	if member != nil {
		k = kbin.AppendString(k, *member)
	}
	return k
}

// valueStart is a version 0 value.
func valueStart() []byte { return kbin.AppendInt16(nil, 0) }

// noTags ends a flexible struct that carries no tagged fields.
func noTags(dst []byte) []byte { return kbin.AppendUvarint(dst, 0) }

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// consumerEpochRecord is the record of the group epoch.
func consumerEpochRecord(group string, epoch int32) batch.Record {
	v := kbin.AppendInt32(valueStart(), epoch)
	return batch.Record{Key: consumerKey(consumerGroupKey, group, nil), Value: noTags(v)}
}

// consumerTargetEpochRecord is the record of the target's epoch.
func consumerTargetEpochRecord(group string, epoch int32) batch.Record {
	v := kbin.AppendInt32(valueStart(), epoch)
	return batch.Record{Key: consumerKey(consumerTargetKey, group, nil), Value: noTags(v)}
}

// consumerMemberRecord is the record of m's identity and subscription.
func consumerMemberRecord(group string, m *consumerMember) batch.Record {
	v := kbin.AppendCompactNullableString(valueStart(), nullable(m.instanceID))
	v = kbin.AppendCompactNullableString(v, nullable(m.rackID))
	v = kbin.AppendCompactString(v, m.clientID)
	v = kbin.AppendCompactString(v, m.clientHost)
	v = kbin.AppendCompactArrayLen(v, len(m.topicNames))
	for _, n := range m.topicNames {
		v = kbin.AppendCompactString(v, n)
	}
	v = kbin.AppendCompactNullableString(v, nullable(m.regex))
	v = kbin.AppendInt32(v, int32(m.rebalanceTimeout.Milliseconds()))
	v = kbin.AppendCompactNullableString(v, nullable(m.serverAssignor))
	return batch.Record{Key: consumerKey(consumerMemberKey, group, &m.id), Value: noTags(v)}
}

// consumerTargetMemberRecord is the record of member id's target.
func consumerTargetMemberRecord(group, id string, target Assignment) batch.Record {
	v := appendTopicPartitions(valueStart(), target, nil)
	return batch.Record{Key: consumerKey(consumerTargetMemberKey, group, &id), Value: noTags(v)}
}

// consumerCurrentRecord is the record of m's reconciliation.
func consumerCurrentRecord(group string, m *consumerMember) batch.Record {
	v := kbin.AppendInt32(valueStart(), m.rec.epoch)
	v = kbin.AppendInt32(v, m.rec.previousEpoch)
	v = kbin.AppendInt8(v, int8(m.rec.state))
	v = appendTopicPartitions(v, m.rec.assigned, m.assignedAt)
	v = appendTopicPartitions(v, m.rec.revoking, m.assignedAt)
	return batch.Record{Key: consumerKey(consumerCurrentKey, group, &m.id), Value: noTags(v)}
}

// consumerMemberTombstones delete member id's records.
func consumerMemberTombstones(group, id string) []batch.Record {
	return []batch.Record{{Key: consumerKey(consumerMemberKey, group, &id)},
		{Key: consumerKey(consumerTargetMemberKey, group, &id)}, {Key: consumerKey(consumerCurrentKey, group, &id)}}
}

// consumerGroupTombstones delete the group's own records (its members'
// go first).
func consumerGroupTombstones(group string) []batch.Record {
	return []batch.Record{{Key: consumerKey(consumerTargetKey, group, nil)}, {Key: consumerKey(consumerGroupKey, group, nil)}}
}

// appendTopicPartitions appends a []TopicPartitions; with at, each carries
// the epochs its partitions were assigned at (tag 0).
func appendTopicPartitions(dst []byte, a Assignment, at map[topicPartitionID]int32) []byte {
	ids := sortedTopicIDs(a)
	dst = kbin.AppendCompactArrayLen(dst, len(ids))
	for _, id := range ids {
		dst = kbin.AppendUuid(dst, id)
		dst = kbin.AppendCompactArrayLen(dst, len(a[id]))
		for _, p := range a[id] {
			dst = kbin.AppendInt32(dst, p)
		}
		if at == nil {
			dst = noTags(dst)
			continue
		}
		var epochs []byte
		epochs = kbin.AppendCompactArrayLen(epochs, len(a[id]))
		for _, p := range a[id] {
			epochs = kbin.AppendInt32(epochs, at[topicPartitionID{id, p}])
		}
		dst = kbin.AppendUvarint(dst, 1) // one tagged field
		dst = kbin.AppendUvarint(dst, 0) // tag 0: AssignmentEpochs
		dst = kbin.AppendUvarint(dst, uint32(len(epochs)))
		dst = append(dst, epochs...)
	}
	return dst
}

// readTags reads a tagged-fields section, calling field for each tag with
// its bytes.
func readTags(r *kbin.Reader, field func(tag uint32, data []byte)) {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		tag, size := r.Uvarint(), r.Uvarint()
		data := r.Span(int(size))
		if field != nil && r.Ok() {
			field(tag, data)
		}
	}
}

func readTopicPartitions(r *kbin.Reader, at map[topicPartitionID]int32) Assignment {
	a := Assignment{}
	for n := r.CompactArrayLen(); n > 0 && r.Ok(); n-- {
		id := r.Uuid()
		var ps []int32
		for k := r.CompactArrayLen(); k > 0 && r.Ok(); k-- {
			ps = append(ps, r.Int32())
		}
		readTags(r, func(tag uint32, data []byte) {
			if tag != 0 || at == nil {
				return
			}
			er := kbin.Reader{Src: data}
			if k := er.CompactArrayLen(); int(k) == len(ps) {
				for _, p := range ps {
					at[topicPartitionID{id, p}] = er.Int32()
				}
			}
		})
		if r.Ok() {
			slices.Sort(ps)
			a[id] = slices.Compact(ps)
		}
	}
	return a
}

// applyConsumer applies a record of type typ (3 to 8) to s.
func (s *GroupsState) applyConsumer(typ int16, key, value []byte) error {
	kr := kbin.Reader{Src: key[2:]}
	group := kr.String()
	var member string
	perMember := typ == consumerMemberKey || typ == consumerTargetMemberKey || typ == consumerCurrentKey
	if perMember {
		member = kr.String()
	}
	if err := kr.Complete(); err != nil || len(kr.Src) > 0 {
		return fmt.Errorf("%w: %w: a key of type %d", ErrOffsetsRecord, errConsumerRecord, typ)
	}
	if typ == consumerPartitionsKey {
		return nil
	}
	cg := s.Consumer[group]
	if value == nil {
		switch {
		case cg == nil:
		case typ == consumerGroupKey:
			delete(s.Consumer, group)
		case typ == consumerMemberKey:
			delete(cg.Members, member)
		case typ == consumerTargetMemberKey, typ == consumerCurrentKey:
			if m := cg.Members[member]; m != nil {
				if typ == consumerTargetMemberKey {
					m.Target = nil
				} else {
					m.Assigned, m.Revoking, m.AssignedAt, m.Epoch = nil, nil, nil, 0
				}
			}
		}
		return nil
	}
	if cg == nil {
		cg = &ConsumerGroupState{Members: map[string]*ConsumerMemberState{}}
		s.Consumer[group] = cg
	}
	var m *ConsumerMemberState
	if perMember {
		if m = cg.Members[member]; m == nil {
			m = &ConsumerMemberState{}
			cg.Members[member] = m
		}
	}
	r := kbin.Reader{Src: value}
	if v := r.Int16(); v != 0 && r.Ok() {
		return fmt.Errorf("%w: %w: type %d value version %d of group %q", ErrOffsetsRecord, errConsumerRecord, typ, v, group)
	}
	switch typ {
	case consumerGroupKey:
		cg.Epoch = r.Int32()
	case consumerTargetKey:
		cg.TargetEpoch = r.Int32()
	case consumerMemberKey:
		m.HasMetadata = true
		m.InstanceID, m.RackID = deref(r.CompactNullableString()), deref(r.CompactNullableString())
		m.ClientID, m.ClientHost = r.CompactString(), r.CompactString()
		m.TopicNames = nil
		for n := r.CompactArrayLen(); n > 0 && r.Ok(); n-- {
			m.TopicNames = append(m.TopicNames, r.CompactString())
		}
		m.Regex = deref(r.CompactNullableString())
		m.RebalanceTimeoutMs = r.Int32()
		m.ServerAssignor = deref(r.CompactNullableString())
	case consumerTargetMemberKey:
		m.Target = readTopicPartitions(&r, nil)
	case consumerCurrentKey:
		m.Epoch, m.PreviousEpoch, m.State = r.Int32(), r.Int32(), r.Int8()
		m.AssignedAt = map[topicPartitionID]int32{}
		m.Assigned, m.Revoking = readTopicPartitions(&r, m.AssignedAt), readTopicPartitions(&r, m.AssignedAt)
	}
	readTags(&r, nil)
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: %w: type %d value of group %q: %v", ErrOffsetsRecord, errConsumerRecord, typ, group, err)
	}
	if m != nil && int(m.State) >= len(memberStateNames) {
		return fmt.Errorf("%w: %w: member %q of group %q in state %d", ErrOffsetsRecord, errConsumerRecord, member, group, m.State)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// restoreConsumer makes g the consumer group cs holds, as a new
// coordinator of the group loads it: its members keep their ids, epochs
// and assignments, each on a fresh session. A member without its metadata
// record, or with a regex that no longer compiles, is left out: its next
// heartbeat is UNKNOWN_MEMBER_ID and it rejoins. REQUIRES: g not shared
// yet.
func (g *Group) restoreConsumer(cs *ConsumerGroupState) {
	cg := newConsumerGroup()
	cg.epoch, cg.targetEpoch = cs.Epoch, cs.TargetEpoch
	g.consumer, g.protocolType = cg, "consumer"
	for id, ms := range cs.Members {
		if !ms.HasMetadata {
			continue
		}
		m := &consumerMember{id: id, instanceID: ms.InstanceID, rackID: ms.RackID, clientID: ms.ClientID,
			clientHost: ms.ClientHost, topicNames: ms.TopicNames, regex: ms.Regex, serverAssignor: ms.ServerAssignor,
			rebalanceTimeout: time.Duration(ms.RebalanceTimeoutMs) * time.Millisecond, assignedAt: ms.AssignedAt,
			rec: reconciliation{epoch: ms.Epoch, previousEpoch: ms.PreviousEpoch, state: memberState(ms.State),
				assigned: ms.Assigned, revoking: ms.Revoking}}
		if m.regex != "" {
			re, err := regexp.Compile("^(?:" + m.regex + ")$")
			if err != nil {
				continue
			}
			m.matcher = re
		}
		if m.assignedAt == nil {
			m.assignedAt = map[topicPartitionID]int32{}
		}
		m.noteAssignedAt()
		cg.members[id] = m
		if m.instanceID != "" {
			cg.static[m.instanceID] = id
		}
		if ms.Target != nil {
			cg.target[id] = ms.Target
		}
		// An epoch record lost to a failed write must not leave the
		// group behind its members.
		cg.epoch = max(cg.epoch, m.rec.epoch, m.rec.previousEpoch)
	}
	cg.epoch = max(cg.epoch, cg.targetEpoch)
	g.refreshTopics()
	if cg.epoch == cg.targetEpoch && !g.targetCoversTopics() {
		// The topics changed while no one coordinated the group (or
		// the target was never written whole): a new target.
		// Its epoch record goes out with the next heartbeat's.
		g.bumpConsumerEpoch()
	}
	for _, m := range cg.members {
		g.armConsumerTimers(m)
	}
	if len(cg.members) > 0 {
		g.c.log.Info("consumer group loaded", "group", g.name, "epoch", cg.epoch, "members", len(cg.members))
	}
}

// targetCoversTopics reports whether the target assigns every partition of
// the subscribed topics once (both assignors do). REQUIRES: g.mu held.
func (g *Group) targetCoversTopics() bool {
	cg := g.consumer
	seen := map[topicPartitionID]bool{}
	for _, a := range cg.target {
		for t, ps := range a {
			if _, ok := cg.topics[t]; !ok {
				return false
			}
			for _, p := range ps {
				tp := topicPartitionID{t, p}
				if seen[tp] || p >= cg.topics[t].Partitions {
					return false
				}
				seen[tp] = true
			}
		}
	}
	total := 0
	for _, t := range cg.topics {
		total += int(t.Partitions)
	}
	return len(seen) == total
}
