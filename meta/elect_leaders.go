package meta

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// Leader elections an operator asks for (ElectLeaders, kafka-leader-election.sh)
// and the controller's own preferred-leader balancing
// (auto.leader.rebalance.enable), as Kafka's ReplicationControlManager
// runs them: a preferred election moves leadership back to a partition's
// first replica when it is live and in the ISR; an unclean one gives a
// partition without a live leader one, out of sync if need be.

// PartitionRef names a partition by topic id.
type PartitionRef struct {
	TopicID   [16]byte
	Partition int32
}

// ElectionResult is one partition's outcome: Err nil when its leader
// changed.
type ElectionResult struct {
	PartitionRef
	Err *kerr.Error
}

// ElectLeaders runs a preferred (unclean false) or unclean election on
// parts, every partition when parts is nil (whose results then leave out
// the partitions that needed none, as Kafka's). The leaders that change
// are one metadata log entry, each bumping the leader and partition
// epochs. Per partition: ELECTION_NOT_NEEDED when the leader is already
// the one the election would pick, PREFERRED_LEADER_NOT_AVAILABLE when
// the preferred replica is fenced or out of sync, ELIGIBLE_LEADERS_NOT_AVAILABLE
// when no replica is live, UNKNOWN_TOPIC_OR_PARTITION for one that does
// not exist.
func (c *Controller) ElectLeaders(ctx context.Context, unclean bool, parts []PartitionRef) ([]ElectionResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx); err != nil {
		return nil, err
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
	all := parts == nil
	if all {
		for _, a := range assigned {
			parts = append(parts, PartitionRef{a.TopicID, a.Partition})
		}
	}
	var results []ElectionResult
	var changed []state.PartitionAssignment
	for _, ref := range parts {
		a, ok := byRef[ref]
		if !ok {
			results = append(results, ElectionResult{ref, kerr.UnknownTopicOrPartition})
			continue
		}
		q, kerrOf := elect(a, live, unclean)
		if kerrOf == kerr.ElectionNotNeeded && all {
			continue
		}
		if kerrOf == nil {
			changed = append(changed, q)
			byRef[ref] = q // a partition named twice changes once
		}
		results = append(results, ElectionResult{ref, kerrOf})
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

// elect is one partition's election: the changed assignment, or why
// there is none.
func elect(a state.PartitionAssignment, live func(int32) bool, unclean bool) (state.PartitionAssignment, *kerr.Error) {
	if unclean {
		if a.Leader >= 0 && live(a.Leader) {
			return a, kerr.ElectionNotNeeded
		}
		q, ok := Elect(a, live, true)
		if !ok || q.Leader < 0 {
			return a, kerr.EligibleLeadersNotAvailable
		}
		return q, nil
	}
	if len(a.Replicas) == 0 {
		return a, kerr.EligibleLeadersNotAvailable
	}
	preferred := a.Replicas[0]
	switch {
	case a.Leader == preferred:
		return a, kerr.ElectionNotNeeded
	case !live(preferred) || !slices.Contains(a.ISR, preferred):
		return a, kerr.PreferredLeaderNotAvailable
	}
	q, _ := change(a, a.ISR, preferred)
	return q, nil
}

// Imbalanced are the partitions whose preferred leader is live and in
// sync but does not lead, when they are more than percent of the
// partitions some broker is preferred for (Kafka's
// leader.imbalance.per.broker.percentage): the controller moves them
// back (auto.leader.rebalance.enable). None when no broker is past it.
func Imbalanced(parts []state.PartitionAssignment, live func(int32) bool, percent int) []PartitionRef {
	preferred, notLeading := map[int32]int{}, map[int32][]PartitionRef{}
	for _, a := range parts {
		if len(a.Replicas) == 0 {
			continue
		}
		p := a.Replicas[0]
		preferred[p]++
		if a.Leader != p && live(p) && slices.Contains(a.ISR, p) {
			notLeading[p] = append(notLeading[p], PartitionRef{a.TopicID, a.Partition})
		}
	}
	var out []PartitionRef
	for id, refs := range notLeading {
		if len(refs)*100 > percent*preferred[id] {
			out = append(out, refs...)
		}
	}
	return out
}

// BalanceLeaders moves leadership back to the preferred replicas of the
// brokers past percent (Imbalanced), as one entry; it returns how many
// partitions moved.
func (c *Controller) BalanceLeaders(ctx context.Context, percent int) (int, error) {
	c.mu.Lock()
	live, err := c.liveness(-1)
	var parts []state.PartitionAssignment
	if err == nil {
		parts, err = c.store.PartitionAssignments()
	}
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	refs := Imbalanced(parts, live, percent)
	if len(refs) == 0 {
		return 0, nil
	}
	results, err := c.ElectLeaders(ctx, false, refs)
	moved := 0
	for _, r := range results {
		if r.Err == nil {
			moved++
		}
	}
	return moved, err
}
