package meta

import (
	"slices"

	"github.com/kmirror/kmirror/state"
)

// ImageFromRecords builds the image a node answers from out of the
// cluster's records, as applied from the metadata log: the unfenced
// brokers (Kafka's Metadata lists no fenced broker), every topic with its
// partitions' leaders, epochs, replicas and ISRs. self is the node
// building it, controller the controller's id (-1 while none is known).
// A topic partition without an assignment record is one a single node
// held before it had a metadata log: while the cluster has at most one
// broker it is led by self, its only replica; in a larger cluster it is
// offline (leader -1) until the controller assigns it, so that no two
// nodes both claim it. A partition whose recorded leader is fenced is
// offline too.
//
// localEpoch, when not nil, is the leader epoch of self's own log for a
// partition self leads: the image shows the larger of it and the
// assignment's, since a mirrored log carries the source's epochs, which
// may be above any the controller gave.
func ImageFromRecords(clusterID string, self, controller int32, brokers []state.BrokerRegistration,
	topics []state.Topic, parts []state.PartitionAssignment, localEpoch func(topic string, p int32) int32) *Image {
	bd := NewBuilder(clusterID, self, controller)
	hosts := make([]int32, len(brokers))
	for i, b := range brokers {
		hosts[i] = b.ID
	}
	bd.SetCoordinatorHosts(hosts)
	live := map[int32]bool{}
	for _, b := range brokers {
		if b.Fenced {
			continue
		}
		live[b.ID] = true
		mb := Broker{ID: b.ID, Rack: b.Rack}
		for _, l := range b.Listeners {
			mb.Listeners = append(mb.Listeners, Listener{Name: l.Name, Host: l.Host, Port: l.Port})
		}
		bd.AddBroker(mb)
	}
	byTopic := map[[16]byte][]state.PartitionAssignment{}
	for _, p := range parts {
		byTopic[p.TopicID] = append(byTopic[p.TopicID], p)
	}
	unassigned := Partition{Leader: self, Replicas: []int32{self}, ISR: []int32{self}}
	if len(brokers) > 1 {
		unassigned = Partition{Leader: -1}
	}
	for _, t := range topics {
		mt := &Topic{Name: t.Name, ID: t.ID, Partitions: make([]Partition, t.Partitions)}
		for i := range mt.Partitions {
			mt.Partitions[i] = unassigned
		}
		for _, p := range byTopic[t.ID] {
			if p.Partition < t.Partitions {
				leader := p.Leader
				if !live[leader] {
					// A leader fenced before its fencing moved this
					// partition (placed as it was fenced): offline
					// until it is back, never a broker clients cannot
					// find.
					leader = -1
				}
				mt.Partitions[p.Partition] = Partition{Leader: leader, LeaderEpoch: p.LeaderEpoch,
					Replicas: slices.Clone(p.Replicas), ISR: slices.Clone(p.ISR)}
			}
		}
		if localEpoch != nil {
			for i := range mt.Partitions {
				if p := &mt.Partitions[i]; p.Leader == self {
					p.LeaderEpoch = max(p.LeaderEpoch, localEpoch(t.Name, int32(i)))
				}
			}
		}
		bd.AddTopic(mt)
	}
	return bd.Build()
}
