package state

import (
	"reflect"
	"testing"
)

func FuzzDecodeBroker(f *testing.F) {
	rack := "r1"
	for _, b := range []BrokerRegistration{
		{ID: 1, Epoch: 7, Listeners: []BrokerEndpoint{{Name: "PLAINTEXT", Host: "10.0.0.1", Port: 9092}}},
		{ID: 2, Incarnation: tid(9), Epoch: 1 << 40, Rack: &rack, Fenced: true, ShuttingDown: true,
			Listeners: []BrokerEndpoint{{Name: "PLAINTEXT", Host: "h", Port: 9092}, {Name: "SSL", Host: "h", Port: 9093}}},
	} {
		f.Add(appendBroker(nil, b))
	}
	f.Add([]byte{1, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodeBroker, appendBroker, func(a, b BrokerRegistration) bool { return reflect.DeepEqual(a, b) })
	})
}

func FuzzDecodePartition(f *testing.F) {
	for _, p := range []PartitionAssignment{
		{TopicID: tid(1), Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		{TopicID: tid(2), Partition: 7, Replicas: []int32{3, 1, 2}, ISR: []int32{1}, Leader: -1, LeaderEpoch: 4, PartitionEpoch: 9},
		{TopicID: tid(3), Partition: 2, Replicas: []int32{4, 5, 1}, ISR: []int32{1, 4}, Leader: 1, LeaderEpoch: 2, PartitionEpoch: 3,
			Adding: []int32{4, 5}, Removing: []int32{1}},
	} {
		f.Add(appendPartition(nil, p))
	}
	f.Add([]byte{1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRecord(t, data, decodePartition, appendPartition, func(a, b PartitionAssignment) bool { return reflect.DeepEqual(a, b) })
	})
}
