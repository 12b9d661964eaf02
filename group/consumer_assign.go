package group

import (
	"bytes"
	"cmp"
	"slices"
)

// The server-side assignors of the consumer group protocol (KIP-848): the
// coordinator, not a member, computes every member's target assignment
// when the group's epoch moves past the target's. Kafka ships two, named
// by group.consumer.assignors (the first is the default, a member may ask
// for another with ServerAssignor): "uniform" and "range". Both are
// sticky: a member keeps what it owns as long as the balance allows, so a
// rebalance revokes as few partitions as it can; each revoked partition
// is a pause of its consumption.

// TopicID is a topic's id: the protocol names topics by id.
type TopicID = [16]byte

// Assignment is a member's partitions by topic, each list ascending.
type Assignment map[TopicID][]int32

// AssignMember is one member as an assignor sees it.
type AssignMember struct {
	// Topics are the member's subscribed topics that exist.
	Topics []TopicID
	// Current is what the member is assigned now (the previous target).
	Current Assignment
}

// AssignSpec is an assignor's input: the partition count of every
// subscribed topic and the members.
type AssignSpec struct {
	Partitions map[TopicID]int32
	Members    map[string]AssignMember
}

// Assignor computes a target assignment.
type Assignor interface {
	Name() string
	// Assign gives every member of spec its partitions; every partition
	// of a topic some member subscribes goes to exactly one of its
	// subscribers.
	Assign(spec AssignSpec) map[string]Assignment
}

// Assignors are the server-side assignors by name.
var Assignors = map[string]Assignor{"uniform": uniformAssignor{}, "range": rangeAssignor{}}

// DefaultAssignors is group.consumer.assignors' default, in order.
var DefaultAssignors = []string{"uniform", "range"}

// topicPartitionID is a partition of a topic named by id.
type topicPartitionID struct {
	topic     TopicID
	partition int32
}

func compareTP(a, b topicPartitionID) int {
	if c := bytes.Compare(a.topic[:], b.topic[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.partition, b.partition)
}

// sortedMemberIDs are spec's member ids, ascending.
func sortedMemberIDs(spec AssignSpec) []string {
	ids := make([]string, 0, len(spec.Members))
	for id := range spec.Members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// uniformAssignor spreads all subscribed partitions so that no member
// holds two more than another member that could take one of them (Kafka's
// UniformAssignor balance), keeping owned partitions where it can.
type uniformAssignor struct{}

func (uniformAssignor) Name() string { return "uniform" }

func (uniformAssignor) Assign(spec AssignSpec) map[string]Assignment {
	ids := sortedMemberIDs(spec)
	subscribes := make(map[string]map[TopicID]bool, len(ids))
	subscribers := map[TopicID]int{}
	for _, id := range ids {
		set := map[TopicID]bool{}
		for _, t := range spec.Members[id].Topics {
			if _, ok := spec.Partitions[t]; ok && !set[t] {
				set[t] = true
				subscribers[t]++
			}
		}
		subscribes[id] = set
	}
	owner := map[topicPartitionID]string{}
	owned := make(map[string][]topicPartitionID, len(ids))
	// Keep what each member owns and may still have, once.
	for _, id := range ids {
		for t, ps := range spec.Members[id].Current {
			if !subscribes[id][t] {
				continue
			}
			for _, p := range ps {
				tp := topicPartitionID{t, p}
				if p < 0 || p >= spec.Partitions[t] || owner[tp] != "" {
					continue
				}
				owner[tp] = id
				owned[id] = append(owned[id], tp)
			}
		}
	}
	// Hand out the rest, the topics with the fewest subscribers first
	// (they have the fewest places to go), each to its least loaded
	// subscriber.
	var free []topicPartitionID
	for t, n := range spec.Partitions {
		if subscribers[t] == 0 {
			continue
		}
		for p := range n {
			if tp := (topicPartitionID{t, p}); owner[tp] == "" {
				free = append(free, tp)
			}
		}
	}
	slices.SortFunc(free, func(a, b topicPartitionID) int {
		if c := cmp.Compare(subscribers[a.topic], subscribers[b.topic]); c != 0 {
			return c
		}
		return compareTP(a, b)
	})
	for _, tp := range free {
		best := ""
		for _, id := range ids {
			if subscribes[id][tp.topic] && (best == "" || len(owned[id]) < len(owned[best])) {
				best = id
			}
		}
		owner[tp] = best
		owned[best] = append(owned[best], tp)
	}
	// Then move partitions from the most to the least loaded members
	// until no member holds two more than one that subscribes to a
	// partition it holds. Each move lowers the sum of squared loads, so
	// this ends.
	for moved := true; moved; {
		moved = false
		byLoad := slices.Clone(ids)
		slices.SortStableFunc(byLoad, func(a, b string) int { return cmp.Compare(len(owned[b]), len(owned[a])) })
	search:
		for i, from := range byLoad {
			for j := len(byLoad) - 1; j > i; j-- {
				to := byLoad[j]
				if len(owned[from]) < len(owned[to])+2 {
					break
				}
				// Move the highest partition the receiver can take: the
				// lowest ones stay, as stable as the balance allows.
				for k := len(owned[from]) - 1; k >= 0; k-- {
					tp := owned[from][k]
					if !subscribes[to][tp.topic] {
						continue
					}
					owned[from] = slices.Delete(owned[from], k, k+1)
					owned[to] = append(owned[to], tp)
					owner[tp] = to
					moved = true
					break search
				}
			}
		}
	}
	return collectAssignments(ids, owned)
}

// collectAssignments turns each member's partitions into an Assignment
// (every member gets one, maybe empty).
func collectAssignments(ids []string, owned map[string][]topicPartitionID) map[string]Assignment {
	out := make(map[string]Assignment, len(ids))
	for _, id := range ids {
		a := Assignment{}
		for _, tp := range owned[id] {
			a[tp.topic] = append(a[tp.topic], tp.partition)
		}
		for t := range a {
			slices.Sort(a[t])
		}
		out[id] = a
	}
	return out
}

// rangeAssignor gives each topic's subscribers, in member id order,
// consecutive ranges of its partitions (the first n mod s of s members one
// more), as the client-side range assignor does, so that topics of the
// same partition count are co-partitioned; a member keeps owned
// partitions within its share (Kafka's server-side RangeAssignor is
// sticky the same way), the rest filling the shares in partition order.
type rangeAssignor struct{}

func (rangeAssignor) Name() string { return "range" }

func (rangeAssignor) Assign(spec AssignSpec) map[string]Assignment {
	ids := sortedMemberIDs(spec)
	owned := make(map[string][]topicPartitionID, len(ids))
	topics := make([]TopicID, 0, len(spec.Partitions))
	for t := range spec.Partitions {
		topics = append(topics, t)
	}
	slices.SortFunc(topics, func(a, b TopicID) int { return bytes.Compare(a[:], b[:]) })
	for _, t := range topics {
		n := spec.Partitions[t]
		var subs []string
		for _, id := range ids {
			if slices.Contains(spec.Members[id].Topics, t) {
				subs = append(subs, id)
			}
		}
		if len(subs) == 0 || n <= 0 {
			continue
		}
		base, extra := int(n)/len(subs), int(n)%len(subs)
		share := func(i int) int {
			if i < extra {
				return base + 1
			}
			return base
		}
		taken := make([]bool, n)
		got := make([]int, len(subs))
		for i, id := range subs {
			for _, p := range spec.Members[id].Current[t] {
				if p >= 0 && p < n && !taken[p] && got[i] < share(i) {
					taken[p] = true
					got[i]++
					owned[id] = append(owned[id], topicPartitionID{t, p})
				}
			}
		}
		next := int32(0)
		for i, id := range subs {
			for ; got[i] < share(i); got[i]++ {
				for taken[next] {
					next++
				}
				taken[next] = true
				owned[id] = append(owned[id], topicPartitionID{t, next})
			}
		}
	}
	return collectAssignments(ids, owned)
}
