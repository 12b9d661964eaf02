package group

import "slices"

// How a consumer group member (KIP-848) moves from the partitions it has
// to its target assignment, as Kafka's CurrentAssignmentBuilder moves it.
// A partition has one holder at a time: a member gives up what leaves its
// target first (it revokes, and says so by heartbeating without it), and
// a member gets a partition of its target only once no other member holds
// it, so no partition is ever consumed by two members at once. The
// member's epoch reaches the target's epoch once it has revoked all it
// had to.

// memberState is where a consumer group member is in its reconciliation.
type memberState uint8

const (
	// memberStable: the member has its whole target assignment.
	memberStable memberState = iota
	// memberUnrevoked: the member must revoke partitions (revoking)
	// before it gets anything new; its epoch stays behind the target's.
	memberUnrevoked
	// memberUnreleased: the member is at the target's epoch but some of
	// its target partitions are still held by others; it gets each
	// once released.
	memberUnreleased
)

var memberStateNames = [...]string{"STABLE", "UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"}

func (s memberState) String() string { return memberStateNames[s] }

// reconciliation is a member's assignment state.
type reconciliation struct {
	epoch, previousEpoch int32
	state                memberState
	// assigned is what the member may consume; revoking is what it must
	// give up (it still holds it until it says it does not).
	assigned, revoking Assignment
}

// reconcile returns m moved toward target, the group's target assignment
// for the member at targetEpoch. held reports whether another member
// holds a partition (assigned or revoking). owned is what the member's
// heartbeat said it owns; nil when the heartbeat did not say (it is then
// taken to own what it was assigned).
func (m reconciliation) reconcile(targetEpoch int32, target Assignment, held func(TopicID, int32) bool, owned Assignment) reconciliation {
	switch m.state {
	case memberStable:
		if m.epoch == targetEpoch {
			return m
		}
	case memberUnrevoked:
		if ownsAny(owned, m.revoking) {
			return m
		}
	case memberUnreleased:
		// Either the target moved, or partitions may have been
		// released since: look again.
	}
	return m.next(targetEpoch, target, held, owned)
}

// next is Kafka's computeNextAssignment: keep what is in both, revoke
// what left the target (unless the member already let it go), and take
// the target's free partitions once nothing is left to revoke.
func (m reconciliation) next(targetEpoch int32, target Assignment, held func(TopicID, int32) bool, owned Assignment) reconciliation {
	kept, revoke := Assignment{}, Assignment{}
	for topic, ps := range m.assigned {
		for _, p := range ps {
			if slices.Contains(target[topic], p) {
				kept[topic] = append(kept[topic], p)
			} else {
				revoke[topic] = append(revoke[topic], p)
			}
		}
	}
	if len(revoke) > 0 && ownsAny(owned, revoke) {
		return reconciliation{epoch: m.epoch, previousEpoch: m.previousEpoch, state: memberUnrevoked,
			assigned: kept, revoking: revoke}
	}
	state := memberStable
	for topic, ps := range target {
		for _, p := range ps {
			switch {
			case slices.Contains(kept[topic], p):
			case held(topic, p):
				state = memberUnreleased
			default:
				kept[topic] = append(kept[topic], p)
			}
		}
	}
	for topic := range kept {
		slices.Sort(kept[topic])
	}
	prev := m.previousEpoch
	if m.epoch != targetEpoch {
		prev = m.epoch
	}
	return reconciliation{epoch: targetEpoch, previousEpoch: prev, state: state, assigned: kept, revoking: Assignment{}}
}

// ownsAny reports whether owned (nil: unknown, taken as yes) holds a
// partition of parts.
func ownsAny(owned, parts Assignment) bool {
	if owned == nil {
		return len(parts) > 0
	}
	for topic, ps := range parts {
		for _, p := range ps {
			if slices.Contains(owned[topic], p) {
				return true
			}
		}
	}
	return false
}
