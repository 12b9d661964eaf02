package state

import (
	"fmt"

	"github.com/kmirror/kmirror/internal/topicid"
)

// Topic is one entry of the topic registry.
type Topic struct {
	Name string
	// ID is the topic id; never all zero.
	ID         [16]byte
	Partitions int32
	// Configs holds the dynamic topic configs set by CreateTopics or
	// AlterConfigs: only explicitly set keys, never defaults. Topics read
	// from the store always have a non-nil map.
	Configs map[string]string
	// Mirror names the cluster mirror the topic belongs to, "" if none.
	Mirror string
}

// PutTopic inserts t, or replaces the topic of the same name, together with
// its id index entry in one transaction. It refuses an invalid topic (a name
// Kafka would refuse, fewer than 1 partition, an all-zero id, an empty config
// name) and an id that already belongs to a topic of another name.
// assigned are partition assignments (the controller's placement of new
// partitions) written in the same transaction, so a topic never exists in
// the metadata log without the replicas of its partitions; DeleteTopic
// removes them with the topic.
func (s *Store) PutTopic(t Topic, assigned ...PartitionAssignment) error {
	if err := checkTopic(&t); err != nil {
		return fmt.Errorf("state: put topic: %v", err)
	}
	assignOps := make([]Op, len(assigned))
	for i, p := range assigned {
		if p.TopicID != t.ID || p.Partition >= t.Partitions {
			return fmt.Errorf("state: put topic %q: an assignment of partition %d of another topic or past its %d partitions", t.Name, p.Partition, t.Partitions)
		}
		op, err := PartitionOp(p)
		if err != nil {
			return err
		}
		assignOps[i] = op
	}
	return s.update(func(txn tx) error { return s.putTopic(txn, t, assignOps) })
}

// PutTopics is PutTopic for many topics, without assignments, in one
// transaction (in a cluster one entry of the metadata log): a failover
// releases a hundred topics with one write instead of a hundred. Every
// topic is checked first; on an error nothing is written. A topic record
// is at most a few KiB with its configs, so a few hundred stay far below
// Badger's transaction limits: callers batch by that.
func (s *Store) PutTopics(ts []Topic) error {
	for i := range ts {
		if err := checkTopic(&ts[i]); err != nil {
			return fmt.Errorf("state: put topic: %v", err)
		}
	}
	return s.update(func(txn tx) error {
		for _, t := range ts {
			if err := s.putTopic(txn, t, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// putTopic writes a checked topic, its id index entry and assignOps in txn.
func (s *Store) putTopic(txn tx, t Topic, assignOps []Op) error {
	val := appendTopic(nil, t)
	idKey := topicIDKey(t.ID)
	owner, found, err := getTopicIndex(txn, idKey)
	if err != nil {
		return err
	}
	if found && owner != t.Name {
		// The index says another topic has this id. Believe it only
		// if that topic agrees: an entry left behind by a deleted
		// corrupt record (see DeleteTopic) is stale, not a claim.
		other, ok, err := getTopic(txn, owner)
		if err != nil {
			return err
		}
		if ok && other.ID == t.ID {
			return fmt.Errorf("state: put topic %q: topic id %s already belongs to topic %q",
				t.Name, topicid.String(t.ID), owner)
		}
		s.log.Warn("state: replacing stale topic id index entry",
			"key", string(idKey), "stale_topic", owner, "topic", t.Name)
	}
	old, ok, err := getTopic(txn, t.Name)
	if err != nil {
		return err
	}
	if ok && old.ID != t.ID {
		// The topic was recreated under a new id: its old id must
		// stop resolving. Only drop the entry if it still points here.
		oldKey := topicIDKey(old.ID)
		if err := deleteIndexIfOwned(txn, oldKey, t.Name); err != nil {
			return err
		}
	}
	if err := txn.Set(topicKey(t.Name), val); err != nil {
		return err
	}
	for _, op := range assignOps {
		if err := txn.Set(op.Key, op.Value); err != nil {
			return err
		}
	}
	return txn.Set(idKey, appendTopicIndex(nil, t.Name))
}

// Topic returns the topic named name, or an error wrapping ErrNotFound.
func (s *Store) Topic(name string) (Topic, error) {
	var t Topic
	err := s.view(func(txn tx) error {
		var ok bool
		var err error
		t, ok, err = getTopic(txn, name)
		if err == nil && !ok {
			err = fmt.Errorf("%w: topic %q", ErrNotFound, name)
		}
		return err
	})
	if err != nil {
		return Topic{}, err
	}
	return t, nil
}

// TopicByID returns the topic whose id is id, or an error wrapping
// ErrNotFound.
func (s *Store) TopicByID(id [16]byte) (Topic, error) {
	var t Topic
	err := s.view(func(txn tx) error {
		idKey := topicIDKey(id)
		name, found, err := getTopicIndex(txn, idKey)
		if err != nil {
			return err
		}
		ok := false
		if found {
			if t, ok, err = getTopic(txn, name); err != nil {
				return err
			}
			if !ok || t.ID != id {
				// A stale entry (see PutTopic): the id resolves to nothing.
				s.log.Warn("state: stale topic id index entry", "key", string(idKey), "topic", name)
				ok = false
			}
		}
		if !ok {
			return fmt.Errorf("%w: topic id %s", ErrNotFound, topicid.String(id))
		}
		return nil
	})
	if err != nil {
		return Topic{}, err
	}
	return t, nil
}

// Topics returns every topic, sorted by name.
func (s *Store) Topics() ([]Topic, error) {
	var ts []Topic
	err := s.view(func(txn tx) error {
		ts = ts[:0]
		// Keys sort bytewise, so the scan yields names in Go string order.
		return scanPrefix(txn, keyTopicPrefix, func(name string, v []byte) error {
			t, err := decodeTopicFor(name, v)
			if err != nil {
				return err
			}
			ts = append(ts, t)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return ts, nil
}

// DeleteTopic removes the topic named name and its id index entry, or
// returns an error wrapping ErrNotFound. A topic whose record is corrupt is
// deleted too (the repair path for it): its id is unknown, so an index entry
// may stay behind, which lookups and PutTopic treat as stale.
func (s *Store) DeleteTopic(name string) error {
	return s.updateFreeing(func(txn tx) error {
		key := topicKey(name)
		t, ok, err := getTopic(txn, name)
		switch {
		case err != nil && !isCorrupt(err):
			return err
		case err != nil:
			s.log.Warn("state: deleting corrupt topic record", "key", string(key), "err", err)
		case !ok:
			return fmt.Errorf("%w: topic %q", ErrNotFound, name)
		default:
			if err := deleteIndexIfOwned(txn, topicIDKey(t.ID), name); err != nil {
				return err
			}
			if err := deletePartitionAssignments(txn, t.ID); err != nil {
				return err
			}
		}
		return txn.Delete(key)
	})
}

// getTopic reads the topic named name in txn. found is false if absent.
func getTopic(txn tx, name string) (t Topic, found bool, err error) {
	found, err = getRecord(txn, topicKey(name), func(v []byte) error {
		var err error
		t, err = decodeTopicFor(name, v)
		return err
	})
	return t, found, err
}

// decodeTopicFor decodes the value stored under the key of topic name and
// checks that it describes that topic.
func decodeTopicFor(name string, v []byte) (Topic, error) {
	t, err := decodeTopic(v)
	if err != nil {
		return Topic{}, err
	}
	if t.Name != name {
		return Topic{}, fmt.Errorf("%w: topic: value names topic %q", ErrCorrupt, t.Name)
	}
	return t, nil
}

// getTopicIndex reads the topic-id index entry at idKey.
func getTopicIndex(txn tx, idKey []byte) (name string, found bool, err error) {
	found, err = getRecord(txn, idKey, func(v []byte) error {
		var err error
		name, err = decodeTopicIndex(v)
		return err
	})
	return name, found, err
}

// deleteIndexIfOwned deletes the index entry at idKey if it names topic
// name. An entry naming another topic belongs to that topic and stays; a
// corrupt entry is deleted, as nothing can resolve through it anyway.
func deleteIndexIfOwned(txn tx, idKey []byte, name string) error {
	owner, found, err := getTopicIndex(txn, idKey)
	switch {
	case err != nil && !isCorrupt(err):
		return err
	case err == nil && (!found || owner != name):
		return nil
	}
	return txn.Delete(idKey)
}
