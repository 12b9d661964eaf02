package group

import (
	"fmt"
	"testing"
)

// checkShareBalance fails unless target is a balanced share assignment
// of spec: per topic, every partition has a subscribed member; with at
// least as many partitions as subscribers each has exactly one and the
// members' counts differ by one at most, else each member has exactly
// one and the partitions' counts differ by one at most.
func checkShareBalance(t *testing.T, spec AssignSpec, target map[string]Assignment) {
	t.Helper()
	for tid, n := range spec.Partitions {
		var subs []string
		for id, m := range spec.Members {
			for _, st := range m.Topics {
				if st == tid {
					subs = append(subs, id)
				}
			}
		}
		if len(subs) == 0 || n <= 0 {
			continue
		}
		perPartition := make([]int, n)
		minOf, maxOf := int(n)+1, -1
		for _, id := range subs {
			ps := target[id][tid]
			minOf, maxOf = min(minOf, len(ps)), max(maxOf, len(ps))
			for _, p := range ps {
				if p < 0 || p >= n {
					t.Fatalf("%s has partition %d of a topic of %d", id, p, n)
				}
				perPartition[p]++
			}
		}
		lo, hi := len(subs)+1, -1
		for _, k := range perPartition {
			lo, hi = min(lo, k), max(hi, k)
		}
		switch {
		case lo < 1:
			t.Fatalf("a partition has no member: %v (target %v)", perPartition, target)
		case int(n) >= len(subs) && (hi != 1 || maxOf-minOf > 1):
			t.Fatalf("%d partitions on %d members: per partition %v, per member %d..%d", n, len(subs), perPartition, minOf, maxOf)
		case int(n) < len(subs) && (minOf != 1 || maxOf != 1 || hi-lo > 1):
			t.Fatalf("%d partitions on %d members: per partition %v, per member %d..%d", n, len(subs), perPartition, minOf, maxOf)
		}
	}
	for id := range target {
		for tid := range target[id] {
			subscribed := false
			for _, st := range spec.Members[id].Topics {
				subscribed = subscribed || st == tid
			}
			if !subscribed {
				t.Fatalf("%s is assigned a topic it does not subscribe to", id)
			}
		}
	}
}

// FuzzShareAssignor: any members, subscriptions, partition counts and
// previous targets give a balanced assignment, and a balanced target
// given back as the members' current one comes back unchanged (a load
// relies on it: shareTargetHolds).
func FuzzShareAssignor(f *testing.F) {
	f.Add([]byte{4, 2, 1, 3})
	f.Add([]byte{1, 6, 0, 0, 0, 9})
	f.Add([]byte{7, 3, 2, 0x55, 0xaa, 0x0f, 0xf0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		spec := AssignSpec{Partitions: map[TopicID]int32{topicID(1): int32(data[0] % 12), topicID(2): int32(data[0] / 12 % 5)},
			Members: map[string]AssignMember{}}
		members := int(data[1]%9) + 1
		for i := range members {
			var b byte = 0xff
			if 2+i < len(data) {
				b = data[2+i]
			}
			am := AssignMember{Current: Assignment{}}
			if b&1 != 0 || b&2 == 0 {
				am.Topics = append(am.Topics, topicID(1))
			}
			if b&2 != 0 {
				am.Topics = append(am.Topics, topicID(2))
			}
			// A previous target that may be anything, even out of range.
			am.Current[topicID(1)] = []int32{int32(b >> 4), int32(b>>2) % 13}
			spec.Members[fmt.Sprintf("m%d", i)] = am
		}
		target := assignShare(spec)
		checkShareBalance(t, spec, target)
		for id, am := range spec.Members {
			am.Current = target[id]
			spec.Members[id] = am
		}
		again := assignShare(spec)
		for id := range target {
			if !sameAssignment(target[id], again[id]) {
				t.Fatalf("%s: %v, then %v from it", id, target[id], again[id])
			}
		}
	})
}

// A member keeps what it had when the balance allows: the third member
// takes one partition from each of the two that had three, and the
// others keep the rest.
func TestShareAssignorIsSticky(t *testing.T) {
	t.Parallel()
	orders := topicID(1)
	spec := AssignSpec{Partitions: map[TopicID]int32{orders: 6}, Members: map[string]AssignMember{
		"a": {Topics: []TopicID{orders}, Current: Assignment{orders: {1, 3, 5}}},
		"b": {Topics: []TopicID{orders}, Current: Assignment{orders: {0, 2, 4}}},
		"c": {Topics: []TopicID{orders}},
	}}
	target := assignShare(spec)
	checkShareBalance(t, spec, target)
	if fmt.Sprint(target["a"][orders], target["b"][orders], target["c"][orders]) != "[1 3] [0 2] [4 5]" {
		t.Fatalf("target %v", target)
	}
	// Five members on two partitions: those that had partition 0 keep it
	// while it has room (three), the others go to partition 1.
	spec = AssignSpec{Partitions: map[TopicID]int32{orders: 2}, Members: map[string]AssignMember{}}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		spec.Members[id] = AssignMember{Topics: []TopicID{orders}, Current: Assignment{orders: {0}}}
	}
	target = assignShare(spec)
	checkShareBalance(t, spec, target)
	if got := fmt.Sprint(target["a"][orders], target["b"][orders], target["c"][orders], target["d"][orders],
		target["e"][orders]); got != "[0] [0] [0] [1] [1]" {
		t.Fatalf("target %s", got)
	}
}
