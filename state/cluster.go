package state

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
)

// The cluster's records, written by the controller through the metadata
// log (meta/): the registered brokers and every partition's assignment
// (replicas, ISR, leader and epochs), Kafka's BrokerRegistrationRecord and
// PartitionRecord. A single node without them is a cluster of one.

// Keys: v1/broker/<id as 8 hex digits> and
// v1/partition/<topic id as 32 hex digits>/<partition as 8 hex digits>, so
// a scan yields brokers by id and one topic's partitions in order.
const (
	keyBrokerPrefix    = "v1/broker/"
	keyPartitionPrefix = "v1/partition/"
)

// BrokerEndpoint is one advertised listener of a registered broker.
type BrokerEndpoint struct {
	Name string
	Host string
	Port int32
}

// BrokerRegistration is a broker as the controller knows it.
type BrokerRegistration struct {
	ID int32
	// Incarnation is random per start of the broker's process, so the
	// controller tells a restarted broker from a late heartbeat of its
	// previous life.
	Incarnation [16]byte
	// Epoch is the broker epoch: the metadata log index of this
	// registration. Requests from an older epoch are stale.
	Epoch int64
	// Rack is broker.rack, nil when unset.
	Rack      *string
	Listeners []BrokerEndpoint
	// Fenced: the broker's heartbeats stopped (or it has not caught up
	// with the log yet); it leads nothing and is not in any ISR.
	Fenced bool
	// ShuttingDown: a controlled shutdown is moving leadership off it.
	ShuttingDown bool
}

// PartitionAssignment is one partition's replicas and leadership.
type PartitionAssignment struct {
	TopicID   [16]byte
	Partition int32
	// Replicas are the brokers holding the partition, the preferred
	// leader first; ISR those in sync with the leader.
	Replicas []int32
	ISR      []int32
	// Leader is -1 while the partition is offline.
	Leader int32
	// LeaderEpoch grows at every leader change, PartitionEpoch at every
	// change of the record (leader, ISR or replicas), which fences an
	// AlterPartition from a stale leader.
	LeaderEpoch    int32
	PartitionEpoch int32
	// Adding and Removing are an ongoing reassignment's (Kafka's
	// AddingReplicas and RemovingReplicas): Replicas holds both the
	// target and the replicas leaving it until the target is in sync.
	Adding, Removing []int32
}

// Reassigning reports whether a reassignment of p is under way.
func (p PartitionAssignment) Reassigning() bool { return len(p.Adding) > 0 || len(p.Removing) > 0 }

// partitionFormatV2 leads an assignment with a reassignment under way: v1
// and the Adding and Removing lists. One without keeps v1, so records
// written before v2 existed are unchanged.
const partitionFormatV2 byte = 2

func brokerKey(id int32) []byte { return fmt.Appendf([]byte(keyBrokerPrefix), "%08x", uint32(id)) }

func partitionKey(topicID [16]byte, p int32) []byte {
	k := hex.AppendEncode([]byte(keyPartitionPrefix), topicID[:])
	return fmt.Appendf(k, "/%08x", uint32(p))
}

const (
	brokerFenced       = 1 << 0
	brokerShuttingDown = 1 << 1
	brokerHasRack      = 1 << 2
)

// appendBroker appends b's value. REQUIRES: checkBroker(&b) == nil.
func appendBroker(dst []byte, b BrokerRegistration) []byte {
	dst = append(dst, formatV1)
	dst = binary.BigEndian.AppendUint32(dst, uint32(b.ID))
	dst = append(dst, b.Incarnation[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.Epoch))
	var flags byte
	rack := ""
	if b.Fenced {
		flags |= brokerFenced
	}
	if b.ShuttingDown {
		flags |= brokerShuttingDown
	}
	if b.Rack != nil {
		flags |= brokerHasRack
		rack = *b.Rack
	}
	dst = append(dst, flags)
	dst = appendString(dst, rack)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b.Listeners)))
	for _, l := range b.Listeners {
		dst = appendString(dst, l.Name)
		dst = appendString(dst, l.Host)
		dst = binary.BigEndian.AppendUint32(dst, uint32(l.Port))
	}
	return dst
}

func decodeBroker(v []byte) (BrokerRegistration, error) {
	r := reader{b: v, what: "broker registration"}
	r.version()
	var b BrokerRegistration
	b.ID = int32(r.u32())
	copy(b.Incarnation[:], r.bytes(16))
	b.Epoch = int64(r.u64())
	flags := r.i8()
	rack := r.str()
	if flags&brokerHasRack != 0 {
		b.Rack = &rack
	} else if rack != "" {
		r.fail("a rack without the rack flag")
	}
	if flags&^(brokerFenced|brokerShuttingDown|brokerHasRack) != 0 {
		r.fail("unknown flags %#x", uint8(flags))
	}
	b.Fenced, b.ShuttingDown = flags&brokerFenced != 0, flags&brokerShuttingDown != 0
	n := r.count(12)
	for i := uint32(0); i < n && r.err == nil; i++ {
		b.Listeners = append(b.Listeners, BrokerEndpoint{Name: r.str(), Host: r.str(), Port: int32(r.u32())})
	}
	if err := r.complete(); err != nil {
		return BrokerRegistration{}, err
	}
	if err := checkBroker(&b); err != nil {
		return BrokerRegistration{}, fmt.Errorf("%w: broker registration: %v", ErrCorrupt, err)
	}
	return b, nil
}

func checkBroker(b *BrokerRegistration) error {
	switch {
	case b.ID < 0:
		return fmt.Errorf("broker id %d", b.ID)
	case b.Epoch < 0:
		return fmt.Errorf("broker %d: epoch %d", b.ID, b.Epoch)
	case len(b.Listeners) == 0:
		return fmt.Errorf("broker %d: no listener", b.ID)
	}
	for i, l := range b.Listeners {
		if l.Name == "" || l.Port < 0 || l.Port > 65535 {
			return fmt.Errorf("broker %d: listener %q port %d", b.ID, l.Name, l.Port)
		}
		if slices.ContainsFunc(b.Listeners[:i], func(o BrokerEndpoint) bool { return o.Name == l.Name }) {
			return fmt.Errorf("broker %d: listener %q twice", b.ID, l.Name)
		}
	}
	return nil
}

// appendPartition appends p's value. REQUIRES: checkPartition(&p) == nil.
func appendPartition(dst []byte, p PartitionAssignment) []byte {
	format := formatV1
	if p.Reassigning() {
		format = partitionFormatV2
	}
	dst = append(dst, format)
	dst = append(dst, p.TopicID[:]...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.Partition))
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.Leader))
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.LeaderEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(p.PartitionEpoch))
	lists := [][]int32{p.Replicas, p.ISR}
	if format == partitionFormatV2 {
		lists = append(lists, p.Adding, p.Removing)
	}
	for _, ids := range lists {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(ids)))
		for _, id := range ids {
			dst = binary.BigEndian.AppendUint32(dst, uint32(id))
		}
	}
	return dst
}

func decodePartition(v []byte) (PartitionAssignment, error) {
	r := reader{b: v, what: "partition assignment"}
	v2 := len(v) > 0 && v[0] == partitionFormatV2
	if v2 {
		r.b = r.b[1:]
	} else {
		r.version()
	}
	var p PartitionAssignment
	copy(p.TopicID[:], r.bytes(16))
	p.Partition = int32(r.u32())
	p.Leader = int32(r.u32())
	p.LeaderEpoch = int32(r.u32())
	p.PartitionEpoch = int32(r.u32())
	ids := func() []int32 {
		n := r.count(4)
		out := make([]int32, 0, n)
		for i := uint32(0); i < n && r.err == nil; i++ {
			out = append(out, int32(r.u32()))
		}
		return out
	}
	p.Replicas = ids()
	p.ISR = ids()
	if v2 {
		p.Adding, p.Removing = ids(), ids()
		if !p.Reassigning() {
			r.fail("v2 without a reassignment")
		}
	}
	if err := r.complete(); err != nil {
		return PartitionAssignment{}, err
	}
	if err := checkPartition(&p); err != nil {
		return PartitionAssignment{}, fmt.Errorf("%w: partition assignment: %v", ErrCorrupt, err)
	}
	return p, nil
}

func checkPartition(p *PartitionAssignment) error {
	switch {
	case p.TopicID == [16]byte{}:
		return fmt.Errorf("all-zero topic id")
	case p.Partition < 0:
		return fmt.Errorf("partition %d", p.Partition)
	case len(p.Replicas) == 0:
		return fmt.Errorf("partition %d: no replica", p.Partition)
	case p.LeaderEpoch < 0 || p.PartitionEpoch < 0:
		return fmt.Errorf("partition %d: epochs %d, %d", p.Partition, p.LeaderEpoch, p.PartitionEpoch)
	case p.Leader != -1 && !slices.Contains(p.ISR, p.Leader):
		return fmt.Errorf("partition %d: leader %d not in the ISR %v", p.Partition, p.Leader, p.ISR)
	}
	for i, id := range p.Replicas {
		if id < 0 || slices.Contains(p.Replicas[:i], id) {
			return fmt.Errorf("partition %d: replicas %v", p.Partition, p.Replicas)
		}
	}
	for i, id := range p.ISR {
		if !slices.Contains(p.Replicas, id) || slices.Contains(p.ISR[:i], id) {
			return fmt.Errorf("partition %d: ISR %v of replicas %v", p.Partition, p.ISR, p.Replicas)
		}
	}
	for i, id := range p.Adding {
		if !slices.Contains(p.Replicas, id) || slices.Contains(p.Adding[:i], id) {
			return fmt.Errorf("partition %d: adding %v of replicas %v", p.Partition, p.Adding, p.Replicas)
		}
	}
	for i, id := range p.Removing {
		if !slices.Contains(p.Replicas, id) || slices.Contains(p.Removing[:i], id) || slices.Contains(p.Adding, id) {
			return fmt.Errorf("partition %d: removing %v of replicas %v (adding %v)", p.Partition, p.Removing, p.Replicas, p.Adding)
		}
	}
	return nil
}

// BrokerOp is the Op that registers (or re-registers, fences, unfences) b.
func BrokerOp(b BrokerRegistration) (Op, error) {
	if err := checkBroker(&b); err != nil {
		return Op{}, fmt.Errorf("state: %v", err)
	}
	return Op{Key: brokerKey(b.ID), Value: appendBroker(nil, b)}, nil
}

// UnregisterBrokerOp is the Op that removes broker id.
func UnregisterBrokerOp(id int32) Op { return Op{Key: brokerKey(id)} }

// PartitionOp is the Op that sets p's assignment.
func PartitionOp(p PartitionAssignment) (Op, error) {
	if err := checkPartition(&p); err != nil {
		return Op{}, fmt.Errorf("state: %v", err)
	}
	return Op{Key: partitionKey(p.TopicID, p.Partition), Value: appendPartition(nil, p)}, nil
}

// TopicOps are the Ops that create or change topic t (its record and its
// id index entry), as PutTopic writes them.
func TopicOps(t Topic) ([]Op, error) {
	if err := checkTopic(&t); err != nil {
		return nil, fmt.Errorf("state: %v", err)
	}
	return []Op{{Key: topicKey(t.Name), Value: appendTopic(nil, t)}, {Key: topicIDKey(t.ID), Value: appendTopicIndex(nil, t.Name)}}, nil
}

// Brokers returns the registered brokers by id.
func (s *Store) Brokers() ([]BrokerRegistration, error) {
	var out []BrokerRegistration
	err := s.view(func(txn tx) error {
		out = out[:0]
		return scanPrefix(txn, keyBrokerPrefix, func(suffix string, v []byte) error {
			b, err := decodeBroker(v)
			if err == nil && keyBrokerPrefix+suffix != string(brokerKey(b.ID)) {
				err = fmt.Errorf("%w: broker registration of broker %d", ErrCorrupt, b.ID)
			}
			out = append(out, b)
			return err
		})
	})
	return out, err
}

// PartitionAssignments returns every partition's assignment, by topic id
// and partition.
func (s *Store) PartitionAssignments() ([]PartitionAssignment, error) {
	var out []PartitionAssignment
	err := s.view(func(txn tx) error {
		out = out[:0]
		return scanPrefix(txn, keyPartitionPrefix, func(suffix string, v []byte) error {
			p, err := decodePartition(v)
			if err == nil && keyPartitionPrefix+suffix != string(partitionKey(p.TopicID, p.Partition)) {
				err = fmt.Errorf("%w: assignment of partition %d under another key", ErrCorrupt, p.Partition)
			}
			out = append(out, p)
			return err
		})
	})
	return out, err
}

// deletePartitionAssignments deletes the assignments of topic id's
// partitions, with the topic (DeleteTopic).
func deletePartitionAssignments(txn tx, id [16]byte) error {
	prefix := hex.AppendEncode([]byte(keyPartitionPrefix), id[:])
	var keys [][]byte
	if err := scanPrefix(txn, string(prefix)+"/", func(suffix string, _ []byte) error {
		keys = append(keys, []byte(string(prefix)+"/"+suffix))
		return nil
	}); err != nil {
		return err
	}
	for _, k := range keys {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// NextProducerID is the first producer id not yet handed out, for the
// controller's block allocation (NextProducerIDOp).
func (s *Store) NextProducerID() (int64, error) {
	var next int64
	err := s.view(func(txn tx) error {
		var err error
		next, err = readNextProducerID(txn)
		return err
	})
	return next, err
}

// NextProducerIDOp is the Op that moves the producer-id allocator to next,
// handing out the ids below it.
func NextProducerIDOp(next int64) (Op, error) {
	if next < firstProducerID || next > producerIDLimit {
		return Op{}, fmt.Errorf("state: producer ids exhausted: next id %d outside [%d, %d]", next, firstProducerID, producerIDLimit)
	}
	return Op{Key: []byte(keyNextProducerID), Value: appendNextProducerID(nil, next)}, nil
}
