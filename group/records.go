package group

import (
	"encoding/binary"
	"errors"
	"fmt"

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
// generation; kmirror's members rejoin after a coordinator moves, so none
// are written). A null value is a tombstone: an offset deleted, a group
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

// OffsetsRecord is one record of a group's state in __consumer_offsets.
type OffsetsRecord struct {
	Key, Value []byte // Value nil: a tombstone
}

// OffsetRecord is the record of a committed offset of group.
func OffsetRecord(group string, o state.GroupOffset) OffsetsRecord {
	return OffsetsRecord{Key: offsetKey(group, o.Topic, o.Partition), Value: offsetValue(o)}
}

// OffsetTombstone is the record that deletes a committed offset.
func OffsetTombstone(group, topic string, partition int32) OffsetsRecord {
	return OffsetsRecord{Key: offsetKey(group, topic, partition)}
}

// GroupRecord is the record of a group's protocol type and generation.
func GroupRecord(m state.GroupMeta) OffsetsRecord {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = groupKeyVersion, m.Group
	v := kmsg.NewGroupMetadataValue()
	v.Version, v.ProtocolType, v.Generation = groupValueVersion, m.ProtocolType, m.Generation
	return OffsetsRecord{Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
}

// GroupTombstone is the record that deletes a group (its offsets are
// deleted by their own tombstones).
func GroupTombstone(group string) OffsetsRecord {
	k := kmsg.NewGroupMetadataKey()
	k.Version, k.Group = groupKeyVersion, group
	return OffsetsRecord{Key: k.AppendTo(nil)}
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

// AppendOffsetsBatch appends recs as one uncompressed RecordBatch (magic
// 2, no producer), base offset 0 and leader epoch 0: the leader's append
// stamps both.
func AppendOffsetsBatch(dst []byte, recs []OffsetsRecord, timestamp int64) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, batch.HeaderSize)...)
	var body []byte
	for i, r := range recs {
		body = body[:0]
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, 0)        // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = binary.AppendVarint(body, int64(len(r.Key)))
		body = append(body, r.Key...)
		if r.Value == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(r.Value)))
			body = append(body, r.Value...)
		}
		body = binary.AppendVarint(body, 0) // headers
		dst = binary.AppendVarint(dst, int64(len(body)))
		dst = append(dst, body...)
	}
	h := dst[start : start+batch.HeaderSize]
	binary.BigEndian.PutUint32(h[8:], uint32(len(dst)-start-batch.LogOverhead))
	h[16] = 2                                               // magic
	binary.BigEndian.PutUint32(h[23:], uint32(len(recs)-1)) // last offset delta
	binary.BigEndian.PutUint64(h[27:], uint64(timestamp))
	binary.BigEndian.PutUint64(h[35:], uint64(timestamp))
	binary.BigEndian.PutUint64(h[43:], ^uint64(0)) // producer id -1
	binary.BigEndian.PutUint16(h[51:], 0xFFFF)     // producer epoch -1
	binary.BigEndian.PutUint32(h[53:], ^uint32(0)) // base sequence -1
	binary.BigEndian.PutUint32(h[57:], uint32(len(recs)))
	binary.BigEndian.PutUint32(h[17:], batch.Checksum(dst[start+21:]))
	return dst
}

// GroupsState is the state a partition's records leave: each group's
// metadata and committed offsets, latest record winning.
type GroupsState struct {
	Metas   map[string]state.GroupMeta
	Offsets map[string]map[topicPartition]state.GroupOffset
}

// NewGroupsState returns an empty state.
func NewGroupsState() *GroupsState {
	return &GroupsState{Metas: map[string]state.GroupMeta{}, Offsets: map[string]map[topicPartition]state.GroupOffset{}}
}

// ErrOffsetsRecord marks a record of __consumer_offsets that does not
// decode.
var ErrOffsetsRecord = errors.New("group: malformed __consumer_offsets record")

// Apply applies one record. Keys of other types (Kafka 4's consumer and
// share group records, key versions 3 and up) are skipped: kmirror writes
// none, and a log that holds them came from elsewhere.
func (s *GroupsState) Apply(key, value []byte) error {
	if len(key) < 2 {
		return fmt.Errorf("%w: a key of %d bytes", ErrOffsetsRecord, len(key))
	}
	switch int16(binary.BigEndian.Uint16(key)) {
	case offsetKeyVersionOld, offsetKeyVersion:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("%w: offset key: %v", ErrOffsetsRecord, err)
		}
		tp := topicPartition{k.Topic, k.Partition}
		if value == nil {
			delete(s.Offsets[k.Group], tp)
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
		offs := s.Offsets[k.Group]
		if offs == nil {
			offs = map[topicPartition]state.GroupOffset{}
			s.Offsets[k.Group] = offs
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
		s.Metas[k.Group] = state.GroupMeta{Group: k.Group, ProtocolType: v.ProtocolType, Generation: max(v.Generation, 0)}
	}
	return nil
}

// ApplyBatch applies every record of b, an uncompressed data batch; a
// control batch (a transaction marker) holds no group state. A batch whose
// records do not decode is an error: the caller does not serve a
// partition it cannot read whole.
func (s *GroupsState) ApplyBatch(b batch.Batch) error {
	if b.IsControl() {
		return nil
	}
	if b.Codec() != batch.CodecNone {
		return fmt.Errorf("%w: a %s-compressed batch at offset %d (kmirror writes them uncompressed)", ErrOffsetsRecord,
			b.Codec(), b.BaseOffset())
	}
	recs := b.Records()
	for i := range b.RecordCount() {
		n, w := binary.Varint(recs)
		if w <= 0 || n < 0 || n > int64(len(recs)-w) {
			return fmt.Errorf("%w: record %d of the batch at offset %d: bad length", ErrOffsetsRecord, i, b.BaseOffset())
		}
		var r kmsg.Record
		if err := r.ReadFrom(recs[:w+int(n)]); err != nil {
			return fmt.Errorf("%w: record %d of the batch at offset %d: %v", ErrOffsetsRecord, i, b.BaseOffset(), err)
		}
		recs = recs[w+int(n):]
		if err := s.Apply(r.Key, r.Value); err != nil {
			return err
		}
	}
	return nil
}
