package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// AlterPartition is how a partition's leader changes its ISR (Kafka's
// ReplicationControlManager.alterPartition): the leader shrinks the ISR
// when a follower falls behind and expands it when one catches up, and
// the controller writes the change only if the leader's view is the
// current one. The leader names the epochs it holds (leader epoch and
// partition epoch); any change of the record since, by this controller or
// another, bumped the partition epoch, so a change from a stale view is
// refused instead of undoing a fencing or an election.

// ISRChange is one partition's ISR change as its leader asks for it.
type ISRChange struct {
	TopicID   [16]byte
	Partition int32
	// LeaderEpoch and PartitionEpoch are the epochs of the assignment the
	// leader holds.
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
	// BrokerEpochs, nil or one per NewISR member, are the broker epochs
	// the leader saw its followers at (AlterPartition v3+); -1 is
	// unknown, not checked.
	BrokerEpochs []int64
}

// ISRChangeResult is the answer for one ISRChange: Err is nil and
// Assignment the partition's assignment after the change (the current
// one when the ISR did not change), or Err is the Kafka error of the
// refusal.
type ISRChangeResult struct {
	Err        *kerr.Error
	Assignment state.PartitionAssignment
}

type partitionKey struct {
	topicID   [16]byte
	partition int32
}

// assignments reads every partition assignment, by partition.
// REQUIRES: c.mu held.
func (c *Controller) assignments() (map[partitionKey]state.PartitionAssignment, error) {
	all, err := c.store.PartitionAssignments()
	if err != nil {
		return nil, err
	}
	parts := make(map[partitionKey]state.PartitionAssignment, len(all))
	for _, p := range all {
		parts[partitionKey{p.TopicID, p.Partition}] = p
	}
	return parts, nil
}

// AlterPartition is Kafka's AlterPartition from broker brokerID at
// brokerEpoch: one result per change of reqs, in order. A broker epoch
// that is not the sender's registration fails the whole request
// (ErrStaleBrokerEpoch, ErrUnknownBroker). Each accepted change keeps the
// leader and the leader epoch and bumps the partition epoch; they are
// written as one metadata log entry, and nothing when no ISR changes.
// A partition named twice is changed once: the second sees the epoch
// the first moved (INVALID_UPDATE_VERSION).
func (c *Controller) AlterPartition(ctx context.Context, brokerID int32, brokerEpoch int64, reqs []ISRChange) ([]ISRChangeResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx); err != nil {
		return nil, err
	}
	sender, ok, err := c.broker(brokerID)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, fmt.Errorf("%w: broker %d", ErrUnknownBroker, brokerID)
	case sender.Epoch != brokerEpoch:
		return nil, fmt.Errorf("%w: broker %d AlterPartition at epoch %d, registered at %d", ErrStaleBrokerEpoch, brokerID, brokerEpoch, sender.Epoch)
	}
	brokers, err := c.store.Brokers()
	if err != nil {
		return nil, err
	}
	regs := make(map[int32]state.BrokerRegistration, len(brokers))
	for _, b := range brokers {
		regs[b.ID] = b
	}
	parts, err := c.assignments()
	if err != nil {
		return nil, err
	}
	results := make([]ISRChangeResult, len(reqs))
	var changed []state.PartitionAssignment
	for i, r := range reqs {
		k := partitionKey{r.TopicID, r.Partition}
		cur, ok := parts[k]
		if !ok {
			results[i].Err, err = c.unknownPartition(r.TopicID)
			if err != nil {
				return nil, err
			}
			continue
		}
		if e := checkISRChange(cur, brokerID, r, regs); e != nil {
			results[i].Err = e
			continue
		}
		if sameMembers(cur.ISR, r.NewISR) {
			results[i].Assignment = cur
			continue
		}
		next, _ := change(cur, r.NewISR, cur.Leader)
		// A reassignment whose target is now in sync completes here
		// (reassign.go).
		next = completeReassignment(next, func(id int32) bool {
			b, ok := regs[id]
			return ok && !b.Fenced && !b.ShuttingDown
		})
		parts[k] = next
		changed = append(changed, next)
		results[i].Assignment = next
	}
	ops, err := partitionOps(changed)
	if err != nil {
		return nil, err
	}
	if _, err := c.apply(ctx, ops); err != nil {
		return nil, err
	}
	return results, nil
}

// unknownPartition is the error of a partition without an assignment:
// UNKNOWN_TOPIC_ID when no topic has that id, else
// UNKNOWN_TOPIC_OR_PARTITION. REQUIRES: c.mu held.
func (c *Controller) unknownPartition(topicID [16]byte) (*kerr.Error, error) {
	_, err := c.store.TopicByID(topicID)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return kerr.UnknownTopicID, nil
	case err != nil:
		return nil, err
	}
	return kerr.UnknownTopicOrPartition, nil
}

// checkISRChange is the error of r against the current assignment cur,
// from sender, or nil when the change may be written. The leader checks
// come first: a leader of an older epoch is fenced (it was replaced),
// anyone else is not the leader; then the partition epoch, which fences
// a leader whose view of the ISR is stale. A new ISR must hold the
// leader; its members must be replicas, and those it adds must be able
// to follow (registered, unfenced, not shutting down): a member already
// in the ISR may stay though, as a fenced last member does, so that the
// leader's shrink of the others is not refused for it. A broker epoch the
// leader names must be the member's registration: another is a previous
// incarnation, whose log the leader's view of its progress describes no
// more.
func checkISRChange(cur state.PartitionAssignment, sender int32, r ISRChange, regs map[int32]state.BrokerRegistration) *kerr.Error {
	switch {
	case r.LeaderEpoch < cur.LeaderEpoch:
		return kerr.FencedLeaderEpoch
	case cur.Leader != sender || r.LeaderEpoch > cur.LeaderEpoch:
		return kerr.NotLeaderForPartition // NOT_LEADER_OR_FOLLOWER, code 6
	case r.PartitionEpoch != cur.PartitionEpoch:
		return kerr.InvalidUpdateVersion
	case len(r.NewISR) == 0 || !slices.Contains(r.NewISR, sender):
		return kerr.InvalidRequest
	case r.BrokerEpochs != nil && len(r.BrokerEpochs) != len(r.NewISR):
		return kerr.InvalidRequest
	}
	for i, id := range r.NewISR {
		if slices.Contains(r.NewISR[:i], id) {
			return kerr.InvalidRequest
		}
		if !slices.Contains(cur.Replicas, id) {
			return kerr.IneligibleReplica
		}
		b, registered := regs[id]
		if r.BrokerEpochs != nil && r.BrokerEpochs[i] != -1 && (!registered || b.Epoch != r.BrokerEpochs[i]) {
			return kerr.IneligibleReplica
		}
		if slices.Contains(cur.ISR, id) {
			continue
		}
		if !registered || b.Fenced || b.ShuttingDown {
			return kerr.IneligibleReplica
		}
	}
	return nil
}

// sameMembers reports whether a and b (without duplicates) hold the same
// brokers: an ISR in another order is no change (leaders are elected in
// the replicas' order, not the ISR's), so it writes nothing.
func sameMembers(a, b []int32) bool {
	return len(a) == len(b) && !slices.ContainsFunc(b, func(id int32) bool { return !slices.Contains(a, id) })
}
