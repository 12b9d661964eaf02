package meta

import (
	"fmt"
	"slices"

	"github.com/kmirror/kmirror/state"
)

// The controller's decisions on partitions, as functions of the cluster's
// records: where a new topic's replicas go, who leads a partition after a
// broker is fenced or returns. They are pure, so the controller that
// writes their results to the metadata log and the tests that check them
// see the same rules. Kafka's rules (ReplicaPlacer, PartitionChangeBuilder)
// are the model; kmirror has no racks-aware placement yet.

// ErrReplicationFactor is the error of a replication factor the cluster
// cannot hold: Kafka's INVALID_REPLICATION_FACTOR.
var ErrReplicationFactor = fmt.Errorf("meta: invalid replication factor")

// PlaceReplicas chooses the replicas of n new partitions with rf replicas
// each among the unfenced brokers live (any order), spreading leadership:
// each partition's leader (its first replica, the preferred leader) is
// the broker that leads the fewest partitions so far (leaders holds the
// counts of the existing partitions, and is updated), the lowest id on a
// tie; the other replicas follow it round-robin in id order. So a topic's
// leaders rotate over the brokers and a new broker takes leaders first.
func PlaceReplicas(live []int32, leaders map[int32]int, n int32, rf int) ([][]int32, error) {
	ids := slices.Clone(live)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	switch {
	case n < 1:
		return nil, fmt.Errorf("meta: placing %d partitions", n)
	case rf < 1:
		return nil, fmt.Errorf("%w: %d", ErrReplicationFactor, rf)
	case rf > len(ids):
		return nil, fmt.Errorf("%w: %d is larger than the %d available brokers", ErrReplicationFactor, rf, len(ids))
	}
	out := make([][]int32, 0, n)
	for range n {
		first := 0
		for i, id := range ids {
			if leaders[id] < leaders[ids[first]] {
				first = i
			}
		}
		replicas := make([]int32, rf)
		for j := range rf {
			replicas[j] = ids[(first+j)%len(ids)]
		}
		leaders[replicas[0]]++
		out = append(out, replicas)
	}
	return out, nil
}

// PlaceNew assigns partitions from..from+n-1 of topic id, rf replicas
// each, on the registered brokers that may lead (unfenced, not shutting
// down), leaders spread over what parts already assign (PlaceReplicas).
func PlaceNew(brokers []state.BrokerRegistration, parts []state.PartitionAssignment, id [16]byte, from, n int32, rf int) ([]state.PartitionAssignment, error) {
	var live []int32
	for _, b := range brokers {
		if !b.Fenced && !b.ShuttingDown {
			live = append(live, b.ID)
		}
	}
	placed, err := PlaceReplicas(live, LeaderCounts(parts), n, rf)
	if err != nil {
		return nil, err
	}
	out := make([]state.PartitionAssignment, len(placed))
	for i, replicas := range placed {
		out[i] = NewPartition(id, from+int32(i), replicas)
	}
	return out, nil
}

// LeaderCounts counts the partitions each broker leads.
func LeaderCounts(parts []state.PartitionAssignment) map[int32]int {
	counts := map[int32]int{}
	for _, p := range parts {
		if p.Leader >= 0 {
			counts[p.Leader]++
		}
	}
	return counts
}

// NewPartition is the assignment of a new partition on replicas: all in
// the ISR, the first leading, epochs 0.
func NewPartition(topicID [16]byte, p int32, replicas []int32) state.PartitionAssignment {
	return state.PartitionAssignment{TopicID: topicID, Partition: p, Replicas: replicas,
		ISR: slices.Clone(replicas), Leader: replicas[0]}
}

// Elect chooses p's leader among the live brokers: the current one while
// it is live and in the ISR, else the first replica (preferred order) in
// the ISR and live; with none, the partition goes offline (leader -1)
// unless unclean (unclean.leader.election.enable), which takes the first
// live replica, out of sync or not, as the whole ISR. changed reports
// whether p changed (see change for the epochs).
func Elect(p state.PartitionAssignment, live func(id int32) bool, unclean bool) (_ state.PartitionAssignment, changed bool) {
	if p.Leader >= 0 && live(p.Leader) && slices.Contains(p.ISR, p.Leader) {
		return p, false
	}
	leader, isr := electFrom(p.Replicas, p.ISR, live, unclean)
	return change(p, isr, leader)
}

// electFrom is the leader Elect chooses among replicas, and the ISR with it.
func electFrom(replicas, isr []int32, live func(int32) bool, unclean bool) (int32, []int32) {
	for _, id := range replicas {
		if slices.Contains(isr, id) && live(id) {
			return id, isr
		}
	}
	if unclean {
		for _, id := range replicas {
			if live(id) {
				return id, []int32{id}
			}
		}
	}
	return -1, isr
}

// change is p with the ISR and leader given: a leader change (to or from
// none too) bumps the leader epoch, which fences the old leader's clients
// and followers; any change bumps the partition epoch, which fences an
// ISR change from a stale leader.
func change(p state.PartitionAssignment, isr []int32, leader int32) (state.PartitionAssignment, bool) {
	if leader == p.Leader && slices.Equal(isr, p.ISR) {
		return p, false
	}
	q := p
	q.ISR, q.Leader = slices.Clone(isr), leader
	if leader != p.Leader {
		q.LeaderEpoch++
	}
	q.PartitionEpoch++
	return q, true
}

// Unclean tells, per topic, whether an election with no live in-sync
// replica may take an out-of-sync one (unclean.leader.election.enable
// as the controller resolves it: Controller.uncleanElection).
type Unclean func(topicID [16]byte) bool

// UncleanFor is the same answer for every topic.
func UncleanFor(all bool) Unclean { return func([16]byte) bool { return all } }

// Fence is what fencing broker id changes: it leaves the ISR of every
// partition whose ISR keeps another member (the last member stays, so
// that the partition comes back when it returns, as Kafka keeps it), and
// every partition it led elects another leader. live must already say
// false for id.
func Fence(parts []state.PartitionAssignment, id int32, live func(int32) bool, unclean Unclean) []state.PartitionAssignment {
	var changed []state.PartitionAssignment
	for _, p := range parts {
		if !slices.Contains(p.Replicas, id) {
			continue
		}
		isr := p.ISR
		if len(isr) > 1 && slices.Contains(isr, id) {
			isr = slices.DeleteFunc(slices.Clone(isr), func(r int32) bool { return r == id })
		}
		leader := p.Leader
		if leader == id || leader < 0 {
			leader, isr = electFrom(p.Replicas, isr, live, unclean(p.TopicID))
		}
		if q, ok := change(p, isr, leader); ok {
			changed = append(changed, q)
		}
	}
	return changed
}

// Unfence is what a broker's return changes (live already says true for
// it): the offline partitions whose ISR holds it elect it, or a preferred
// live member. It rejoins the other ISRs by catching up with their
// leaders (replication).
func Unfence(parts []state.PartitionAssignment, live func(int32) bool, unclean Unclean) []state.PartitionAssignment {
	var changed []state.PartitionAssignment
	for _, p := range parts {
		if p.Leader >= 0 {
			continue
		}
		if q, ok := Elect(p, live, unclean(p.TopicID)); ok {
			changed = append(changed, q)
		}
	}
	return changed
}
