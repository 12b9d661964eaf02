package group

import (
	"bytes"
	"maps"
	"slices"
)

// The share groups' assignor (KIP-932, Kafka's "simple", the only one of
// group.share.assignors). A share partition's records go to whichever of
// its consumers fetches them, so a partition may have several members
// and the assignor balances load, not ownership. Topic by topic, among
// the members subscribed to it:
//   - with at least as many partitions as members, each partition goes to
//     one member and the members' counts differ by one at most;
//   - with more members than partitions, each member gets one partition
//     and the partitions' member counts differ by one at most.
//
// Both keep what a member had (Current) as far as the balance allows:
// a move costs the member's in-flight records of the partition, which are
// released to the others.

// assignShare computes the target of a share group.
func assignShare(spec AssignSpec) map[string]Assignment {
	out := map[string]Assignment{}
	subscribers := map[TopicID][]string{}
	for _, id := range slices.Sorted(maps.Keys(spec.Members)) {
		out[id] = Assignment{}
		for _, t := range spec.Members[id].Topics {
			if spec.Partitions[t] > 0 {
				subscribers[t] = append(subscribers[t], id)
			}
		}
	}
	topics := slices.Collect(maps.Keys(subscribers))
	slices.SortFunc(topics, func(a, b TopicID) int { return bytes.Compare(a[:], b[:]) })
	for _, t := range topics {
		n, members := spec.Partitions[t], subscribers[t]
		previous := func(id string) []int32 {
			var ps []int32
			for _, p := range spec.Members[id].Current[t] {
				if p >= 0 && p < n {
					ps = append(ps, p)
				}
			}
			return ps
		}
		var got map[string][]int32
		if int(n) >= len(members) {
			got = spreadPartitions(n, members, previous)
		} else {
			got = spreadMembers(n, members, previous)
		}
		for id, ps := range got {
			if len(ps) > 0 {
				slices.Sort(ps)
				out[id][t] = ps
			}
		}
	}
	return out
}

// spreadPartitions gives each of n partitions to one member (n >=
// len(members)): each gets n/len(members), the first n%len(members) to
// fill one more, keeping previous partitions first.
func spreadPartitions(n int32, members []string, previous func(string) []int32) map[string][]int32 {
	base, extra := int(n)/len(members), int(n)%len(members)
	got := map[string][]int32{}
	taken := make([]bool, n)
	quota := func(id string) int {
		if len(got[id]) < base {
			return base
		}
		if extra > 0 {
			return base + 1
		}
		return base
	}
	give := func(id string, p int32) {
		if len(got[id]) == base {
			extra-- // this member takes one of the extra partitions
		}
		got[id] = append(got[id], p)
		taken[p] = true
	}
	for _, id := range members {
		for _, p := range previous(id) {
			if !taken[p] && len(got[id]) < quota(id) {
				give(id, p)
			}
		}
	}
	for p := range n {
		if taken[p] {
			continue
		}
		// The member with the fewest partitions that may take one more.
		best := ""
		for _, id := range members {
			if len(got[id]) < quota(id) && (best == "" || len(got[id]) < len(got[best])) {
				best = id
			}
		}
		give(best, p)
	}
	return got
}

// spreadMembers gives each member one of n partitions (n <
// len(members)): each partition gets len(members)/n members, the first
// len(members)%n to fill one more, keeping a member's previous partition
// first.
func spreadMembers(n int32, members []string, previous func(string) []int32) map[string][]int32 {
	base, extra := len(members)/int(n), len(members)%int(n)
	count := make([]int, n)
	quota := func(p int32) int {
		if count[p] < base || extra > 0 {
			return base + 1
		}
		return base
	}
	got := map[string][]int32{}
	give := func(id string, p int32) {
		if count[p] == base {
			extra--
		}
		count[p]++
		got[id] = []int32{p}
	}
	var rest []string
	for _, id := range members {
		kept := false
		for _, p := range previous(id) {
			if count[p] < quota(p) {
				give(id, p)
				kept = true
				break
			}
		}
		if !kept {
			rest = append(rest, id)
		}
	}
	for _, id := range rest {
		best := int32(-1)
		for p := range n {
			if count[p] < quota(p) && (best < 0 || count[p] < count[best]) {
				best = p
			}
		}
		give(id, best)
	}
	return got
}
