package state

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// GroupOffset is a committed offset of a consumer group.
type GroupOffset struct {
	Topic     string
	Partition int32
	// Offset is the committed offset: the next record to consume, or -1
	// for none.
	Offset int64
	// LeaderEpoch is the leader epoch of the record before Offset, -1 if
	// unknown.
	LeaderEpoch int32
	// Metadata is the client's free-form string; Kafka turns a null one
	// into "".
	Metadata string
	// CommitTimestamp is the commit time in ms since the epoch, never
	// negative: the coordinator resolves OffsetCommit v1's -1 ("now").
	CommitTimestamp int64
}

// GroupMeta is what survives a restart of a group besides its offsets.
type GroupMeta struct {
	Group string
	// ProtocolType is "consumer", "connect", ...; "" for a group that only
	// commits offsets (a simple consumer with a group id).
	ProtocolType string
	// Generation is the group's generation id, never negative.
	Generation int32
	// Protocol, Leader and Members are the membership of a Stable
	// generation, as its SyncGroup left it (Kafka's GroupMetadataValue):
	// a new coordinator serves those members without a rebalance. Empty
	// for a generation that is not Stable. They travel in
	// __consumer_offsets only: this store keeps the three fields above
	// (a group's copy here is what replaying its partition rebuilds).
	Protocol string
	Leader   string
	Members  []GroupMember
}

// GroupMember is one member of a Stable generation.
type GroupMember struct {
	ID, InstanceID       string // InstanceID "" for a dynamic member
	ClientID, ClientHost string
	// SessionTimeout and RebalanceTimeout are the member's, as it joined.
	SessionTimeout, RebalanceTimeout time.Duration
	// Subscription is its metadata for the generation's protocol, and
	// Assignment what the leader's SyncGroup gave it.
	Subscription, Assignment []byte
}

// CommitOffsets stores offs as group's committed offsets, replacing the
// ones of the same partitions, in one transaction: all or none. A later
// entry for the same partition in offs wins. Unlike every other write it
// does not fsync (see updateNoSync): a commit survives kill -9 but not
// necessarily a power loss, Kafka's guarantee for __consumer_offsets.
//
// It refuses the whole commit if the group name is empty or longer than
// 32767 bytes, a topic name is one Kafka would refuse, or a partition, an
// offset (below -1), a leader epoch (below -1) or a commit timestamp (below
// 0) is out of range. A commit of thousands of partitions may fail with
// ErrTooLarge.
func (s *Store) CommitOffsets(group string, offs []GroupOffset) error {
	if err := checkGroupName(group); err != nil {
		return fmt.Errorf("state: commit offsets: %v", err)
	}
	size := 0
	for i := range offs {
		o := &offs[i]
		if err := checkGroupOffsetKey(groupOffsetKey{group, o.Topic, o.Partition}); err != nil {
			return fmt.Errorf("state: commit offsets of group %q: %v", group, err)
		}
		if err := checkGroupOffsetValue(o); err != nil {
			return fmt.Errorf("state: commit offsets of group %q: topic %q partition %d: %v",
				group, o.Topic, o.Partition, err)
		}
		size += groupOffsetKeyLen(group, o.Topic) + groupOffsetValueLen(o.Metadata)
	}
	// Every key and value goes into one buffer, one allocation per commit.
	// Badger keeps the slices until the commit; a sub-slice stays valid
	// even if a wrong size estimate made append move the buffer, since
	// append never rewrites bytes below len.
	buf := make([]byte, 0, size)
	return s.updateNoSync(func(txn tx) error {
		buf = buf[:0]
		for i := range offs {
			o := &offs[i]
			start := len(buf)
			buf = appendGroupOffsetKey(buf, groupOffsetKey{group, o.Topic, o.Partition})
			mid := len(buf)
			buf = appendGroupOffset(buf, *o)
			if err := txn.Set(buf[start:mid:mid], buf[mid:len(buf):len(buf)]); err != nil {
				return fmt.Errorf("state: commit offsets of group %q: %w", group, err)
			}
		}
		return nil
	})
}

// GroupOffsets returns group's committed offsets sorted by topic, then
// partition; none is an empty result, not an error.
func (s *Store) GroupOffsets(group string) ([]GroupOffset, error) {
	if err := checkGroupName(group); err != nil {
		return nil, fmt.Errorf("state: group offsets: %v", err)
	}
	return scanTopicPartitions(s, groupOffsetPrefix(group), "group offset key", decodeGroupOffset,
		func(o *GroupOffset, topic string, partition int32) { o.Topic, o.Partition = topic, partition })
}

// DeleteOffsets deletes group's committed offsets of the given partitions
// of topic (OffsetDelete), in one fsynced transaction. Partitions without
// an offset are ignored. It refuses an invalid group or topic name and a
// negative partition.
func (s *Store) DeleteOffsets(group string, topic string, partitions []int32) error {
	if err := checkGroupName(group); err != nil {
		return fmt.Errorf("state: delete offsets: %v", err)
	}
	if err := checkTopicName(topic); err != nil {
		return fmt.Errorf("state: delete offsets of group %q: %v", group, err)
	}
	for _, p := range partitions {
		if p < 0 {
			return fmt.Errorf("state: delete offsets of group %q: topic %q partition %d", group, topic, p)
		}
	}
	return s.update(func(txn tx) error {
		for _, p := range partitions {
			// Deleting an absent key only writes a tombstone.
			if err := txn.Delete(appendGroupOffsetKey(nil, groupOffsetKey{group, topic, p})); err != nil {
				return fmt.Errorf("state: delete offsets of group %q: %w", group, err)
			}
		}
		return nil
	})
}

// DeleteTopicOffsets deletes the committed offsets of topic in every group,
// for a deleted topic, and returns how many it deleted. Offsets go in
// fsynced transactions of a few thousand keys each: a failure or a crash
// may leave some behind, and calling it again finishes the work. Values are
// not read, so corrupt ones are deleted too.
func (s *Store) DeleteTopicOffsets(topic string) (int, error) {
	if err := checkTopicName(topic); err != nil {
		return 0, fmt.Errorf("state: delete topic offsets: %v", err)
	}
	total := 0
	for {
		var n int
		var more bool
		err := s.updateFreeing(func(txn tx) error {
			kb := s.newKeyBatch(0)
			var err error
			if more, err = collectTopicOffsetKeys(txn, topic, &kb); err != nil {
				return err
			}
			n = len(kb.keys)
			return kb.deleteAll(txn)
		})
		if err != nil {
			return total, err
		}
		total += n
		if !more {
			return total, nil
		}
	}
}

// PutGroupMeta inserts or replaces the meta of group m.Group, fsynced. It
// refuses an invalid group name and a negative generation.
func (s *Store) PutGroupMeta(m GroupMeta) error {
	if err := checkGroupMeta(&m); err != nil {
		return fmt.Errorf("state: put group meta: %v", err)
	}
	key, val := groupKey(m.Group), appendGroupMeta(nil, m)
	return s.update(func(txn tx) error { return txn.Set(key, val) })
}

// DeleteGroup deletes group's meta and all its committed offsets in one
// fsynced transaction; deleting an unknown group is a no-op. Values are not
// read, so corrupt ones (and offset keys of the group that fail to decode)
// are deleted too: this is the repair path for a group.
//
// A group with more offsets than one transaction holds (several thousand)
// is deleted in several: offsets first, the meta with the last of them. A
// failure or crash in between leaves the meta and some offsets, and calling
// DeleteGroup again finishes the work.
func (s *Store) DeleteGroup(group string) error {
	if err := checkGroupName(group); err != nil {
		return fmt.Errorf("state: delete group: %v", err)
	}
	prefix := groupOffsetPrefix(group)
	metaKey := groupKey(group)
	for {
		var more bool
		err := s.update(func(txn tx) error {
			kb := s.newKeyBatch(1) // room for the meta key
			var err error
			if more, err = collectKeys(txn, prefix, &kb); err != nil {
				return err
			}
			if err := kb.deleteAll(txn); err != nil {
				return err
			}
			if more {
				return nil
			}
			return txn.Delete(metaKey)
		})
		if err != nil || !more {
			return err
		}
	}
}

// Groups returns every group that has a meta or committed offsets, sorted
// by name. A group with offsets but no meta has ProtocolType "" and
// Generation 0.
func (s *Store) Groups() ([]GroupMeta, error) {
	var gs []GroupMeta
	err := s.view(func(txn tx) error {
		gs = gs[:0]
		seen := make(map[string]bool)
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte(keyGroupPrefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(opts.Prefix); it.ValidForPrefix(opts.Prefix); it.Next() {
			item := it.Item()
			key := item.Key()
			name, err := decodeGroupKey(key)
			if err != nil {
				return fmt.Errorf("state: key %q: %w", key, err)
			}
			var m GroupMeta
			if err := item.Value(func(v []byte) error {
				var err error
				m, err = decodeGroupMeta(v)
				return err
			}); err != nil {
				return fmt.Errorf("state: key %q: %w", key, err)
			}
			if m.Group != name {
				return fmt.Errorf("state: key %q: %w: group meta: value names group %q", key, ErrCorrupt, m.Group)
			}
			gs = append(gs, m)
			seen[name] = true
		}
		return eachOffsetGroup(txn, func(name string) error {
			if !seen[name] {
				gs = append(gs, GroupMeta{Group: name})
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	// Keys order names by length first (the uvarint), so sort here.
	slices.SortFunc(gs, func(a, b GroupMeta) int { return strings.Compare(a.Group, b.Group) })
	return gs, nil
}

// eachOffsetGroup calls fn with the name of every group that has committed
// offsets, once each, in key order. It reads keys only and seeks past each
// group's offsets, so it costs a seek per group, not a step per offset.
func eachOffsetGroup(txn tx, fn func(name string) error) error {
	family := []byte(keyGroupOffsetPrefix)
	opts := badger.IteratorOptions{Prefix: family}
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Seek(family); it.ValidForPrefix(family); {
		key := it.Item().Key()
		prefix, name, err := offsetKeyGroup(key)
		if err != nil {
			return err
		}
		if err := fn(name); err != nil {
			return err
		}
		it.Seek(prefixEnd(prefix))
	}
	return nil
}

// offsetKeyGroup splits a committed offset key into its group's prefix
// (family prefix and group field, copied) and the group's name.
func offsetKeyGroup(key []byte) (prefix []byte, name string, err error) {
	r := reader{b: key[len(keyGroupOffsetPrefix):], what: "group offset key"}
	name = r.name()
	if r.err != nil {
		return nil, "", fmt.Errorf("state: key %q: %w", key, r.err)
	}
	if err := checkGroupName(name); err != nil {
		return nil, "", fmt.Errorf("state: key %q: %w: group offset key: %v", key, ErrCorrupt, err)
	}
	return slices.Clone(key[:len(key)-len(r.b)]), name, nil
}

// collectTopicOffsetKeys adds to kb the committed offset keys of topic in
// every group, visiting each group's range of topic only. more reports
// that kb filled up before the last of them.
func collectTopicOffsetKeys(txn tx, topic string, kb *keyBatch) (more bool, err error) {
	family := []byte(keyGroupOffsetPrefix)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: family})
	defer it.Close()
	for it.Seek(family); it.ValidForPrefix(family); {
		prefix, _, err := offsetKeyGroup(it.Item().Key())
		if err != nil {
			return false, err
		}
		topicPrefix := appendGroupName(slices.Clip(prefix), topic)
		for it.Seek(topicPrefix); it.ValidForPrefix(topicPrefix); it.Next() {
			if !kb.add(it.Item().KeyCopy(nil)) {
				return true, nil
			}
		}
		it.Seek(prefixEnd(prefix))
	}
	return false, nil
}

// collectKeys adds to kb every key under prefix; more reports that kb filled
// up before the last of them.
func collectKeys(txn tx, prefix []byte, kb *keyBatch) (more bool, err error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		if !kb.add(it.Item().KeyCopy(nil)) {
			return true, nil
		}
	}
	return false, nil
}

// keyBatch collects keys to delete, up to what one transaction holds.
// Badger refuses a transaction past MaxBatchCount entries or MaxBatchSize
// estimated bytes (key, two meta bytes and a 10-byte version per delete);
// a batch takes half of each, which leaves room to spare.
type keyBatch struct {
	keys              [][]byte
	count, size       int64
	maxCount, maxSize int64
}

// newKeyBatch returns an empty batch leaving room for reserve more deletes
// of short keys.
func (s *Store) newKeyBatch(reserve int64) keyBatch {
	return keyBatch{
		maxCount: s.db.MaxBatchCount()/2 - reserve,
		maxSize:  s.db.MaxBatchSize()/2 - reserve*(maxGroupNameLen+64),
	}
}

// add adds key, or reports false if the batch is full.
func (kb *keyBatch) add(key []byte) bool {
	cost := int64(len(key)) + 12
	if kb.count+1 > kb.maxCount || kb.size+cost > kb.maxSize {
		if kb.count == 0 {
			// The caller would loop forever on an empty full batch.
			panic(fmt.Sprintf("BUG: state: key of %d bytes fills a delete batch", len(key)))
		}
		return false
	}
	kb.keys = append(kb.keys, key)
	kb.count++
	kb.size += cost
	return true
}

// deleteAll deletes the batch's keys in txn.
func (kb *keyBatch) deleteAll(txn tx) error {
	for _, k := range kb.keys {
		if err := txn.Delete(k); err != nil {
			return fmt.Errorf("state: deleting key %q: %w", k, err)
		}
	}
	return nil
}

// prefixEnd returns the first key after every key that starts with prefix.
// REQUIRES: prefix is not all 0xff bytes (keys start with "v1/").
func prefixEnd(prefix []byte) []byte {
	end := slices.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	panic(fmt.Sprintf("BUG: state: no key follows prefix %q", prefix))
}

// groupOffsetKeyLen is the length of a committed offset key.
func groupOffsetKeyLen(group, topic string) int {
	return len(keyGroupOffsetPrefix) + uvarintLen(len(group)) + len(group) +
		uvarintLen(len(topic)) + len(topic) + 4
}

// groupOffsetValueLen is the length of a committed offset value.
func groupOffsetValueLen(metadata string) int { return 1 + 8 + 4 + 8 + 4 + len(metadata) }

// uvarintLen is the length of the uvarint encoding of n >= 0.
func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}
