package group

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

func topicID(b byte) TopicID { return TopicID{15: b} }

// checkAssignment checks what every assignor owes: each partition of a
// subscribed topic goes to exactly one member, a subscriber of its topic,
// and nothing else is assigned.
func checkAssignment(t *testing.T, spec AssignSpec, got map[string]Assignment) {
	t.Helper()
	if len(got) != len(spec.Members) {
		t.Fatalf("%d members assigned, want %d", len(got), len(spec.Members))
	}
	holder := map[topicPartitionID]string{}
	for id, a := range got {
		m, ok := spec.Members[id]
		if !ok {
			t.Fatalf("assigned unknown member %s", id)
		}
		for topic, ps := range a {
			if !slices.Contains(m.Topics, topic) {
				t.Fatalf("member %s got topic %x it does not subscribe", id, topic)
			}
			if !slices.IsSorted(ps) {
				t.Fatalf("member %s: partitions %v not ascending", id, ps)
			}
			for _, p := range ps {
				tp := topicPartitionID{topic, p}
				if p < 0 || p >= spec.Partitions[topic] {
					t.Fatalf("member %s got %x/%d, beyond the topic's %d partitions", id, topic, p, spec.Partitions[topic])
				}
				if other, dup := holder[tp]; dup {
					t.Fatalf("%x/%d assigned to both %s and %s", topic, p, other, id)
				}
				holder[tp] = id
			}
		}
	}
	for topic, n := range spec.Partitions {
		subscribed := false
		for _, m := range spec.Members {
			subscribed = subscribed || slices.Contains(m.Topics, topic)
		}
		for p := range n {
			if _, ok := holder[topicPartitionID{topic, p}]; subscribed && !ok {
				t.Fatalf("%x/%d subscribed but assigned to no member", topic, p)
			}
		}
	}
}

// checkUniformBalance checks the uniform assignor's balance: no member
// holds two more partitions than a member subscribing to one of them.
func checkUniformBalance(t *testing.T, spec AssignSpec, got map[string]Assignment) {
	t.Helper()
	load := func(id string) int {
		n := 0
		for _, ps := range got[id] {
			n += len(ps)
		}
		return n
	}
	for from, a := range got {
		for topic := range a {
			for to, m := range spec.Members {
				if slices.Contains(m.Topics, topic) && load(from) >= load(to)+2 {
					t.Fatalf("member %s holds %d partitions, %s (which subscribes %x) only %d", from, load(from), to, topic, load(to))
				}
			}
		}
	}
}

func members(topics []TopicID, ids ...string) map[string]AssignMember {
	out := map[string]AssignMember{}
	for _, id := range ids {
		out[id] = AssignMember{Topics: topics}
	}
	return out
}

// withCurrent makes got the members' current assignments.
func withCurrent(spec AssignSpec, got map[string]Assignment) AssignSpec {
	next := AssignSpec{Partitions: spec.Partitions, Members: map[string]AssignMember{}}
	for id, m := range spec.Members {
		m.Current = got[id]
		next.Members[id] = m
	}
	return next
}

func moved(before, after map[string]Assignment) int {
	n := 0
	for id, a := range after {
		for topic, ps := range a {
			for _, p := range ps {
				if !slices.Contains(before[id][topic], p) {
					n++
				}
			}
		}
	}
	return n
}

func TestUniformAssignorBalancesAndSticks(t *testing.T) {
	t.Parallel()
	a, b := topicID(1), topicID(2)
	spec := AssignSpec{Partitions: map[TopicID]int32{a: 7, b: 5}, Members: members([]TopicID{a, b}, "m1", "m2", "m3")}
	first := uniformAssignor{}.Assign(spec)
	checkAssignment(t, spec, first)
	checkUniformBalance(t, spec, first)

	// Nothing changed: nothing moves.
	again := uniformAssignor{}.Assign(withCurrent(spec, first))
	if !maps.EqualFunc(first, again, func(x, y Assignment) bool { return maps.EqualFunc(x, y, slices.Equal) }) {
		t.Fatalf("same group, new assignment: %v then %v", first, again)
	}

	// A fourth member takes 12/4 = 3 partitions, and only those move.
	grown := withCurrent(spec, first)
	grown.Members["m4"] = AssignMember{Topics: []TopicID{a, b}}
	after := uniformAssignor{}.Assign(grown)
	checkAssignment(t, grown, after)
	checkUniformBalance(t, grown, after)
	if n := moved(first, after); n != 3 {
		t.Errorf("a fourth member moved %d partitions, want the 3 it takes: %v -> %v", n, first, after)
	}

	// A member leaving: only its partitions move.
	shrunk := withCurrent(spec, first)
	delete(shrunk.Members, "m2")
	left := uniformAssignor{}.Assign(shrunk)
	checkAssignment(t, shrunk, left)
	checkUniformBalance(t, shrunk, left)
	if n, want := moved(first, left), len(first["m2"][a])+len(first["m2"][b]); n != want {
		t.Errorf("m2 leaving moved %d partitions, want its %d", n, want)
	}
}

// Members subscribing to different topics: each topic goes to its own
// subscribers, and the shared one balances the loads.
func TestUniformAssignorHeterogeneous(t *testing.T) {
	t.Parallel()
	a, b, c := topicID(1), topicID(2), topicID(3)
	spec := AssignSpec{Partitions: map[TopicID]int32{a: 6, b: 2, c: 4}, Members: map[string]AssignMember{
		"m1": {Topics: []TopicID{a}},
		"m2": {Topics: []TopicID{a, b}},
		"m3": {Topics: []TopicID{b, c}},
	}}
	got := uniformAssignor{}.Assign(spec)
	checkAssignment(t, spec, got)
	checkUniformBalance(t, spec, got)
	// An owned partition of a topic no longer subscribed is dropped.
	spec.Members["m1"] = AssignMember{Topics: []TopicID{a}, Current: Assignment{c: {0, 1}}}
	got = uniformAssignor{}.Assign(spec)
	checkAssignment(t, spec, got)
}

func TestRangeAssignorRangesAndCoPartitioning(t *testing.T) {
	t.Parallel()
	a, b := topicID(1), topicID(2)
	spec := AssignSpec{Partitions: map[TopicID]int32{a: 5, b: 5}, Members: members([]TopicID{a, b}, "m2", "m1")}
	got := rangeAssignor{}.Assign(spec)
	checkAssignment(t, spec, got)
	want := map[string]Assignment{"m1": {a: {0, 1, 2}, b: {0, 1, 2}}, "m2": {a: {3, 4}, b: {3, 4}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("range: %v, want %v", got, want)
	}
	// A third member: each keeps what its share allows.
	grown := withCurrent(spec, got)
	grown.Members["m3"] = AssignMember{Topics: []TopicID{a, b}}
	after := rangeAssignor{}.Assign(grown)
	checkAssignment(t, grown, after)
	for _, id := range []string{"m1", "m2", "m3"} {
		if n := len(after[id][a]); n < 1 || n > 2 {
			t.Errorf("%s holds %d partitions of a, want 1 or 2 (5 over 3)", id, n)
		}
	}
	if n := moved(got, after); n != 2 {
		t.Errorf("a third member moved %d partitions, want 2 (one per topic): %v -> %v", n, got, after)
	}
}
