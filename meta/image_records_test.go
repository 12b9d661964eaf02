package meta

import (
	"reflect"
	"testing"

	"github.com/kmirror/kmirror/state"
)

// The image of a three-broker cluster's records: fenced brokers are not
// listed, each partition carries its assignment, a partition without one
// is offline (only a single node leads what it held before the metadata
// log), and coordinators follow the internal topics' leaders.
func TestImageFromRecords(t *testing.T) {
	t.Parallel()
	ep := func(port int32) []state.BrokerEndpoint {
		return []state.BrokerEndpoint{{Name: "PLAINTEXT", Host: "h", Port: port}}
	}
	brokers := []state.BrokerRegistration{{ID: 1, Listeners: ep(9091)}, {ID: 2, Listeners: ep(9092), Fenced: true},
		{ID: 3, Listeners: ep(9093)}}
	orders, offsets := [16]byte{1}, [16]byte{2}
	topics := []state.Topic{{Name: "orders", ID: orders, Partitions: 3}, {Name: GroupTopic, ID: offsets, Partitions: 1}}
	parts := []state.PartitionAssignment{
		{TopicID: orders, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}, Leader: 1, LeaderEpoch: 2, PartitionEpoch: 5},
		{TopicID: orders, Partition: 1, Replicas: []int32{2, 3, 1}, ISR: []int32{2}, Leader: -1, LeaderEpoch: 4, PartitionEpoch: 4},
		{TopicID: offsets, Partition: 0, Replicas: []int32{3, 1}, ISR: []int32{3, 1}, Leader: 3},
	}
	im := ImageFromRecords("c", 1, 3, brokers, topics, parts, nil)
	var ids []int32
	for _, b := range im.Brokers() {
		ids = append(ids, b.ID)
	}
	if !reflect.DeepEqual(ids, []int32{1, 3}) || im.Controller() != 3 || im.ClusterID() != "c" {
		t.Fatalf("brokers %v, controller %d, cluster %q", ids, im.Controller(), im.ClusterID())
	}
	for p, want := range []Partition{
		{Leader: 1, LeaderEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}},
		{Leader: -1, LeaderEpoch: 4, Replicas: []int32{2, 3, 1}, ISR: []int32{2}},
		{Leader: -1},
	} {
		if got := im.Partition("orders", int32(p)); got == nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("orders-%d: %+v, want %+v", p, got, want)
		}
	}
	if c, ok := im.Coordinator(CoordinatorGroup, "any-group"); !ok || c.ID != 3 {
		t.Fatalf("group coordinator %+v, %v; want broker 3", c, ok)
	}
	single := ImageFromRecords("c", 1, 1, brokers[:1], topics, nil, func(string, int32) int32 { return 7 })
	if p := single.Partition("orders", 2); p == nil || p.Leader != 1 || p.LeaderEpoch != 7 || !reflect.DeepEqual(p.Replicas, []int32{1}) {
		t.Fatalf("a single node's partition without an assignment, its log at epoch 7: %+v", p)
	}
}

// A partition whose recorded leader is fenced (placed on it as it was
// fenced) is offline in the image, not led by a broker it does not list.
func TestImageFencedLeaderIsOffline(t *testing.T) {
	t.Parallel()
	brokers := []state.BrokerRegistration{{ID: 1}, {ID: 2, Fenced: true}}
	topics := []state.Topic{{Name: "t", ID: [16]byte{1}, Partitions: 2}}
	parts := []state.PartitionAssignment{
		{TopicID: [16]byte{1}, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		{TopicID: [16]byte{1}, Partition: 1, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2},
	}
	im := ImageFromRecords("c", 1, 1, brokers, topics, parts, nil)
	if p := im.Partition("t", 0); p.Leader != 1 {
		t.Fatalf("t-0 led by %d, want 1", p.Leader)
	}
	if p := im.Partition("t", 1); p.Leader != -1 {
		t.Fatalf("t-1 led by fenced broker 2 in the image: %+v", p)
	}
}
