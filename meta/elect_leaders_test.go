package meta

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// A preferred election moves leadership to the first replica when it is
// live and in sync; an unclean one gives a partition without a live
// leader its first live replica, in sync first; each says why when it
// changes nothing.
func TestElectLeadersRules(t *testing.T) {
	t.Parallel()
	liveAll := func(int32) bool { return true }
	not := func(dead int32) func(int32) bool { return func(id int32) bool { return id != dead } }
	p := func(leader int32, isr ...int32) state.PartitionAssignment {
		return state.PartitionAssignment{Replicas: []int32{1, 2, 3}, ISR: isr, Leader: leader, LeaderEpoch: 4, PartitionEpoch: 7}
	}
	for _, c := range []struct {
		name       string
		a          state.PartitionAssignment
		live       func(int32) bool
		unclean    bool
		err        *kerr.Error
		leader     int32
		isr        []int32
		epochMoved bool
	}{
		{"preferred back", p(2, 1, 2, 3), liveAll, false, nil, 1, []int32{1, 2, 3}, true},
		{"preferred already leads", p(1, 1, 2, 3), liveAll, false, kerr.ElectionNotNeeded, 1, []int32{1, 2, 3}, false},
		{"preferred out of sync", p(2, 2, 3), liveAll, false, kerr.PreferredLeaderNotAvailable, 2, []int32{2, 3}, false},
		{"preferred fenced", p(2, 1, 2, 3), not(1), false, kerr.PreferredLeaderNotAvailable, 2, []int32{1, 2, 3}, false},
		{"unclean, a live leader", p(2, 2), liveAll, true, kerr.ElectionNotNeeded, 2, []int32{2}, false},
		{"unclean, offline, an ISR member live", p(-1, 2, 3), not(1), true, nil, 2, []int32{2, 3}, true},
		{"unclean, offline, out of sync", p(-1, 1), not(1), true, nil, 2, []int32{2}, true},
		{"unclean, nothing live", p(-1, 1), func(int32) bool { return false }, true, kerr.EligibleLeadersNotAvailable, -1, []int32{1}, false},
	} {
		q, err := elect(c.a, c.live, c.unclean)
		if err != c.err || q.Leader != c.leader || !slices.Equal(q.ISR, c.isr) || (q.LeaderEpoch != c.a.LeaderEpoch) != c.epochMoved {
			t.Errorf("%s: leader %d ISR %v epoch %d, %v; want leader %d ISR %v, epoch moved %v, %v",
				c.name, q.Leader, q.ISR, q.LeaderEpoch, err, c.leader, c.isr, c.epochMoved, c.err)
		}
		if c.epochMoved && q.PartitionEpoch != c.a.PartitionEpoch+1 {
			t.Errorf("%s: partition epoch %d, want %d", c.name, q.PartitionEpoch, c.a.PartitionEpoch+1)
		}
	}
}

// The partitions sent back to their preferred leader are those of a
// broker past the imbalance percentage, and only those whose preferred
// replica is live and in sync.
func TestImbalanced(t *testing.T) {
	t.Parallel()
	var parts []state.PartitionAssignment
	add := func(n int, replicas []int32, leader int32, isr ...int32) {
		for range n {
			parts = append(parts, state.PartitionAssignment{TopicID: [16]byte{1}, Partition: int32(len(parts)),
				Replicas: replicas, Leader: leader, ISR: isr})
		}
	}
	add(8, []int32{1, 2}, 1, 1, 2)
	add(2, []int32{1, 2}, 2, 1, 2) // 2 of 10 not led by 1: 20% > 10%
	add(19, []int32{2, 1}, 2, 1, 2)
	add(1, []int32{2, 1}, 1, 1, 2) // 1 of 20: 5%, under 10%
	add(3, []int32{3, 1}, 1, 1)    // 3 out of sync: never
	live := func(int32) bool { return true }
	got := Imbalanced(parts, live, 10)
	if len(got) != 2 || got[0].Partition != 8 || got[1].Partition != 9 {
		t.Fatalf("imbalanced %v, want partitions 8 and 9 (broker 1's)", got)
	}
	if got := Imbalanced(parts, func(id int32) bool { return id != 1 }, 10); len(got) != 0 {
		t.Fatalf("with broker 1 fenced: %v", got)
	}
	if got := Imbalanced(parts, live, 20); len(got) != 0 {
		t.Fatalf("at 20%%: %v", got)
	}
}
