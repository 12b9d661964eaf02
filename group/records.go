package group

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
)

// A group's state travels in __consumer_offsets as Kafka writes it, so
// that a partition's log is the state of its groups and any Kafka tool
// can read it: a record keyed OffsetCommitKey (key version 1: group,
// topic, partition) holds an OffsetCommitValue (version 3: offset, leader
// epoch, metadata, commit time), and one keyed GroupMetadataKey (version
// 2: the group) a GroupMetadataValue (version 3: protocol type,
// generation, and for a Stable generation its protocol, leader and
// members with their subscriptions and assignments, so that a new
// coordinator serves them without a rebalance, as Kafka's does). A null
// value is a tombstone: an offset deleted, a group
// deleted. The topic is compacted on these keys, so the latest record of
// each key is the state.

// Key versions of __consumer_offsets records (Kafka's schemas).
const (
	offsetKeyVersionOld = 0 // written by Kafka before 0.9; read only
	offsetKeyVersion    = 1
	groupKeyVersion     = 2
	offsetValueVersion  = 3
	groupValueVersion   = 3
)

// OffsetRecord is the record of a committed offset of group.
func OffsetRecord(group string, o state.GroupOffset) batch.Record {
	return batch.Record{Key: offsetKey(group, o.Topic, o.Partition), Value: offsetValue(o)}
}

// OffsetTombstone is the record that deletes a committed offset.
func OffsetTombstone(group, topic string, partition int32) batch.Record {
	return batch.Record{Key: offsetKey(group, topic, partition)}
}

// GroupRecord is the record of a group's protocol type and generation.
func GroupRecord(m state.GroupMeta) batch.Record {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = groupKeyVersion, m.Group
	v := kmsg.NewGroupMetadataValue()
	v.Version, v.ProtocolType, v.Generation = groupValueVersion, m.ProtocolType, m.Generation
	if len(m.Members) > 0 {
		v.Protocol, v.Leader = &m.Protocol, &m.Leader
	}
	v.CurrentStateTimestamp = -1
	for _, gm := range m.Members {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.ClientID, vm.ClientHost = gm.ID, gm.ClientID, gm.ClientHost
		if gm.InstanceID != "" {
			vm.InstanceID = &gm.InstanceID
		}
		vm.RebalanceTimeoutMillis = int32(gm.RebalanceTimeout / time.Millisecond)
		vm.SessionTimeoutMillis = int32(gm.SessionTimeout / time.Millisecond)
		vm.Subscription, vm.Assignment = gm.Subscription, gm.Assignment
		v.Members = append(v.Members, vm)
	}
	return batch.Record{Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
}

// GroupTombstone is the record that deletes a group (its offsets are
// deleted by their own tombstones).
func GroupTombstone(group string) batch.Record {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = groupKeyVersion, group
	return batch.Record{Key: k.AppendTo(nil)}
}

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = offsetKeyVersion, group, topic, partition
	return k.AppendTo(nil)
}

func offsetValue(o state.GroupOffset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version, v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = offsetValueVersion, o.Offset, o.LeaderEpoch,
		o.Metadata, o.CommitTimestamp
	return v.AppendTo(nil)
}

// GroupsState is the state a partition's records leave: each group's
// metadata and committed offsets, latest record winning, and the offsets
// still pending in open transactions.
type GroupsState struct {
	Metas   map[string]state.GroupMeta
	Offsets map[string]map[topicPartition]state.GroupOffset
	// Pending are the offsets of transactional batches no marker has
	// decided yet: by producer id, then group.
	Pending map[int64]map[string]map[topicPartition]state.GroupOffset
	// Consumer are the consumer groups (KIP-848, consumer_records.go).
	Consumer map[string]*ConsumerGroupState
	// Share are the share groups (KIP-932, share_records.go).
	Share map[string]*ShareGroupState
	// ShareOffsets are the share groups' start offsets (share_offsets.go).
	ShareOffsets map[string]map[topicPartitionID]ShareOffset
}

// NewGroupsState returns an empty state.
func NewGroupsState() *GroupsState {
	return &GroupsState{Metas: map[string]state.GroupMeta{}, Offsets: map[string]map[topicPartition]state.GroupOffset{},
		Pending: map[int64]map[string]map[topicPartition]state.GroupOffset{}, Consumer: map[string]*ConsumerGroupState{},
		Share: map[string]*ShareGroupState{}, ShareOffsets: map[string]map[topicPartitionID]ShareOffset{}}
}

// TxnOffsetRecords are the records of offsets group commits in a
// transaction (written with batch.AppendTxnRecords).
func TxnOffsetRecords(group string, offs []state.GroupOffset) []batch.Record {
	recs := make([]batch.Record, len(offs))
	for i, o := range offs {
		recs[i] = OffsetRecord(group, o)
	}
	return recs
}

// ErrOffsetsRecord marks a record of __consumer_offsets that does not
// decode.
var ErrOffsetsRecord = errors.New("group: malformed __consumer_offsets record")

// Apply applies one record, committed (not in a transaction). Keys of
// types kmirror does not write (Kafka 4's share and streams group records,
// key versions 9 and up) are skipped.
func (s *GroupsState) Apply(key, value []byte) error { return s.apply(key, value, s.Offsets, false) }

// apply applies one record; offset records go into offsets (s.Offsets, or
// a producer's pending offsets when txn). A committed offset record
// supersedes the partition's offsets pending in transactions (the record
// appended last wins, whatever those transactions decide).
func (s *GroupsState) apply(key, value []byte, offsets map[string]map[topicPartition]state.GroupOffset, txn bool) error {
	if len(key) < 2 {
		return fmt.Errorf("%w: a key of %d bytes", ErrOffsetsRecord, len(key))
	}
	switch typ := int16(binary.BigEndian.Uint16(key)); typ {
	case consumerGroupKey, consumerPartitionsKey, consumerMemberKey, consumerTargetKey, consumerTargetMemberKey,
		consumerCurrentKey:
		return s.applyConsumer(typ, key, value)
	case shareMemberKey, shareGroupKey, shareTargetKey, shareTargetMemberKey, shareCurrentKey, shareStatePartsKey:
		return s.applyShare(typ, key, value)
	case shareOffsetKey:
		return s.applyShareOffset(key, value)
	case offsetKeyVersionOld, offsetKeyVersion:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("%w: offset key: %v", ErrOffsetsRecord, err)
		}
		tp := topicPartition{k.Topic, k.Partition}
		if !txn {
			for _, groups := range s.Pending {
				delete(groups[k.Group], tp)
			}
		}
		if value == nil {
			delete(offsets[k.Group], tp)
			return nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			return fmt.Errorf("%w: offset value of group %q: %v", ErrOffsetsRecord, k.Group, err)
		}
		epoch := v.LeaderEpoch
		if v.Version < 3 {
			epoch = -1
		}
		offs := offsets[k.Group]
		if offs == nil {
			offs = map[topicPartition]state.GroupOffset{}
			offsets[k.Group] = offs
		}
		offs[tp] = state.GroupOffset{Topic: k.Topic, Partition: k.Partition, Offset: v.Offset, LeaderEpoch: epoch,
			Metadata: v.Metadata, CommitTimestamp: max(v.CommitTimestamp, 0)}
	case groupKeyVersion:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("%w: group key: %v", ErrOffsetsRecord, err)
		}
		if value == nil {
			delete(s.Metas, k.Group)
			delete(s.Offsets, k.Group)
			return nil
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(value); err != nil {
			return fmt.Errorf("%w: group value of %q: %v", ErrOffsetsRecord, k.Group, err)
		}
		s.Metas[k.Group] = groupMetaOf(k.Group, &v)
	}
	return nil
}

// groupMetaOf is the group state a GroupMetadataValue holds. Members
// come back only with the protocol and leader a Stable generation has
// (what GroupRecord writes), and never from a value whose members lack a
// session timeout (written by a Kafka before 0.10.1, which has no
// rebalance timeout either): they rejoin.
func groupMetaOf(group string, v *kmsg.GroupMetadataValue) state.GroupMeta {
	m := state.GroupMeta{Group: group, ProtocolType: v.ProtocolType, Generation: max(v.Generation, 0)}
	if v.Protocol == nil || v.Leader == nil || len(v.Members) == 0 {
		return m
	}
	m.Protocol, m.Leader = *v.Protocol, *v.Leader
	for _, vm := range v.Members {
		if vm.SessionTimeoutMillis <= 0 || vm.MemberID == "" {
			return state.GroupMeta{Group: group, ProtocolType: v.ProtocolType, Generation: m.Generation}
		}
		gm := state.GroupMember{ID: vm.MemberID, ClientID: vm.ClientID, ClientHost: vm.ClientHost,
			SessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			RebalanceTimeout: time.Duration(max(vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis)) * time.Millisecond,
			// Cloned: the value is read from a buffer the caller reuses.
			Subscription: bytes.Clone(vm.Subscription), Assignment: bytes.Clone(vm.Assignment)}
		if vm.InstanceID != nil {
			gm.InstanceID = *vm.InstanceID
		}
		m.Members = append(m.Members, gm)
	}
	if !slices.ContainsFunc(m.Members, func(gm state.GroupMember) bool { return gm.ID == m.Leader }) {
		return state.GroupMeta{Group: group, ProtocolType: v.ProtocolType, Generation: m.Generation}
	}
	return m
}

// ApplyBatch applies every record of b, an uncompressed data batch: a
// transactional one's offsets are pending for its producer until a
// marker, a control batch, commits them (they become committed, a
// later record of the same key wins over them) or aborts them. A batch
// whose records do not decode is an error: the caller does not serve a
// partition it cannot read whole.
func (s *GroupsState) ApplyBatch(b batch.Batch) error {
	if b.IsControl() {
		return s.applyMarker(b)
	}
	offsets, txn := s.Offsets, b.IsTransactional()
	if txn {
		pid := b.ProducerID()
		if offsets = s.Pending[pid]; offsets == nil {
			offsets = map[string]map[topicPartition]state.GroupOffset{}
			s.Pending[pid] = offsets
		}
	}
	err := batch.EachRecord(b, func(key, value []byte) error { return s.apply(key, value, offsets, txn) })
	if errors.Is(err, batch.ErrRecord) {
		return fmt.Errorf("%w: %w", ErrOffsetsRecord, err)
	}
	return err
}

// applyMarker decides the pending offsets of a marker's producer.
func (s *GroupsState) applyMarker(b batch.Batch) error {
	if !b.IsTransactional() {
		return nil
	}
	typ, err := b.ControlType()
	if err != nil {
		return fmt.Errorf("%w: the control batch at offset %d: %v", ErrOffsetsRecord, b.BaseOffset(), err)
	}
	pid := b.ProducerID()
	pending := s.Pending[pid]
	delete(s.Pending, pid)
	if typ != batch.ControlCommit {
		return nil
	}
	for g, offs := range pending {
		dst := s.Offsets[g]
		if dst == nil {
			dst = map[topicPartition]state.GroupOffset{}
			s.Offsets[g] = dst
		}
		for tp, o := range offs {
			dst[tp] = o
		}
	}
	return nil
}
