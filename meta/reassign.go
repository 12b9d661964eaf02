package meta

import (
	"context"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// Partition reassignment (AlterPartitionReassignments,
// kafka-reassign-partitions.sh), Kafka's way: the controller makes the
// partition's replicas the target and the replicas leaving it
// (Adding and Removing record the difference); the new replicas fetch
// from the leader like any follower, and the leader takes them into the
// ISR once caught up (AlterPartition). When the whole target is in sync
// the reassignment completes: the replicas become the target, the ISR
// loses the leaving ones, and a leader that is leaving hands over to the
// first target replica in sync. No replica leaves before the target holds
// the partition.

// Reassignment is one partition's requested target replicas; nil Target
// cancels the reassignment under way.
type Reassignment struct {
	PartitionRef
	Target []int32
}

// ReassignResult is one partition's answer: Err nil when accepted.
type ReassignResult struct {
	PartitionRef
	Err *kerr.Error
	Msg string
}

// AlterReassignments starts, replaces or cancels the reassignments of
// reqs, as one metadata log entry. Per partition:
// UNKNOWN_TOPIC_OR_PARTITION for one that does not exist,
// INVALID_REPLICA_ASSIGNMENT for an empty target, one naming a broker
// twice or one not registered, NO_REASSIGNMENT_IN_PROGRESS for a cancel
// with nothing to cancel.
func (c *Controller) AlterReassignments(ctx context.Context, reqs []Reassignment) ([]ReassignResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx); err != nil {
		return nil, err
	}
	brokers, err := c.store.Brokers()
	if err != nil {
		return nil, err
	}
	registered := map[int32]bool{}
	for _, b := range brokers {
		registered[b.ID] = true
	}
	live, err := c.liveness(-1)
	if err != nil {
		return nil, err
	}
	assigned, err := c.store.PartitionAssignments()
	if err != nil {
		return nil, err
	}
	byRef := make(map[PartitionRef]state.PartitionAssignment, len(assigned))
	for _, a := range assigned {
		byRef[PartitionRef{a.TopicID, a.Partition}] = a
	}
	var results []ReassignResult
	changed := map[PartitionRef]state.PartitionAssignment{}
	var order []PartitionRef
	for _, r := range reqs {
		a, ok := byRef[r.PartitionRef]
		if !ok {
			results = append(results, ReassignResult{r.PartitionRef, kerr.UnknownTopicOrPartition, ""})
			continue
		}
		if q, ok := changed[r.PartitionRef]; ok {
			a = q // named twice: the last wins, as in Kafka's map
		}
		q, kerrOf, msg := reassign(a, r.Target, registered, live)
		results = append(results, ReassignResult{r.PartitionRef, kerrOf, msg})
		if kerrOf != nil {
			continue
		}
		if _, ok := changed[r.PartitionRef]; !ok {
			order = append(order, r.PartitionRef)
		}
		changed[r.PartitionRef] = q
	}
	var out []state.PartitionAssignment
	for _, ref := range order {
		if q := changed[ref]; !sameAssignment(q, byRef[ref]) {
			out = append(out, q)
		}
	}
	ops, err := partitionOps(out)
	if err != nil {
		return nil, err
	}
	if _, err := c.apply(ctx, ops); err != nil {
		return nil, err
	}
	return results, nil
}

// sameAssignment reports whether a and b are the same record.
func sameAssignment(a, b state.PartitionAssignment) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch &&
		slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR) &&
		slices.Equal(a.Adding, b.Adding) && slices.Equal(a.Removing, b.Removing)
}

// original is a's replicas before its reassignment: without the ones
// being added.
func original(a state.PartitionAssignment) []int32 {
	return slices.DeleteFunc(slices.Clone(a.Replicas), func(id int32) bool { return slices.Contains(a.Adding, id) })
}

// reassign is a with target as its reassignment (nil: cancelled), and
// completed at once when the target is already in sync.
func reassign(a state.PartitionAssignment, target []int32, registered map[int32]bool, live func(int32) bool) (state.PartitionAssignment, *kerr.Error, string) {
	orig := original(a)
	if target == nil {
		if !a.Reassigning() {
			return a, kerr.NoReassignmentInProgress, ""
		}
		target = orig // back where it was
	}
	if len(target) == 0 {
		return a, kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list."
	}
	for i, id := range target {
		if slices.Contains(target[:i], id) {
			return a, kerr.InvalidReplicaAssignment, "The manual partition assignment includes duplicate replicas."
		}
		if !registered[id] {
			return a, kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker " +
				strconv.Itoa(int(id)) + ", but no such broker is registered."
		}
	}
	q := a
	q.Adding = slices.DeleteFunc(slices.Clone(target), func(id int32) bool { return slices.Contains(orig, id) })
	q.Removing = slices.DeleteFunc(slices.Clone(orig), func(id int32) bool { return slices.Contains(target, id) })
	q.Replicas = append(slices.Clone(target), q.Removing...)
	q.ISR = slices.DeleteFunc(slices.Clone(a.ISR), func(id int32) bool { return !slices.Contains(q.Replicas, id) })
	if len(q.Adding) == 0 {
		q.Adding = nil
	}
	if len(q.Removing) == 0 {
		q.Removing = nil
	}
	if sameAssignment(q, a) {
		return a, nil, "" // nothing to change
	}
	q.PartitionEpoch++
	if !slices.Contains(q.Replicas, q.Leader) {
		// The leader is no longer a replica (an added replica elected
		// meanwhile, then cancelled or dropped from the new target):
		// what is left of the ISR leads, or none when none is live.
		q.Leader, q.LeaderEpoch = firstLive(q.Replicas, q.ISR, live), q.LeaderEpoch+1
	}
	return completeReassignment(q, live), nil, ""
}

// firstLive is the first of replicas in isr and live, -1 when none is.
func firstLive(replicas, isr []int32, live func(int32) bool) int32 {
	for _, id := range replicas {
		if slices.Contains(isr, id) && live(id) {
			return id
		}
	}
	return -1
}

// completeReassignment completes a's reassignment when its whole target
// is in the ISR: the replicas become the target, the leaving ones leave
// the ISR, and a leaving leader hands over to the first target replica
// in sync and live (a new leader epoch). a is returned as it is
// otherwise, and while no target replica in sync is live to take over
// from a leaving leader (the partition keeps its leader rather than going
// offline; the next AlterPartition, as a target replica rejoins the ISR,
// tries again). The partition epoch moves only when a changes here; the
// caller has moved it for its own change.
func completeReassignment(a state.PartitionAssignment, live func(int32) bool) state.PartitionAssignment {
	if !a.Reassigning() {
		return a
	}
	target := slices.DeleteFunc(slices.Clone(a.Replicas), func(id int32) bool { return slices.Contains(a.Removing, id) })
	for _, id := range target {
		if !slices.Contains(a.ISR, id) {
			return a // a target replica is still catching up
		}
	}
	isr := slices.DeleteFunc(slices.Clone(a.ISR), func(id int32) bool { return !slices.Contains(target, id) })
	leader := a.Leader
	if !slices.Contains(target, leader) {
		if leader = firstLive(target, isr, live); leader < 0 {
			return a // no target replica alive to hand over to: the leaving leader goes on until one is
		}
	}
	q := a
	q.Replicas, q.ISR, q.Adding, q.Removing, q.Leader = target, isr, nil, nil, leader
	if leader != a.Leader {
		q.LeaderEpoch++
	}
	return q
}

// Reassignments are the partitions with a reassignment under way among
// parts (every one when parts is nil).
func (c *Controller) Reassignments(parts []PartitionRef) ([]state.PartitionAssignment, error) {
	assigned, err := c.store.PartitionAssignments()
	if err != nil {
		return nil, err
	}
	var out []state.PartitionAssignment
	for _, a := range assigned {
		if a.Reassigning() && (parts == nil || slices.Contains(parts, PartitionRef{a.TopicID, a.Partition})) {
			out = append(out, a)
		}
	}
	return out, nil
}
