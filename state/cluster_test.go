package state

import (
	"reflect"
	"testing"
)

// Broker and partition records written as Ops read back by id and by
// topic and partition; invalid ones are refused before they become Ops.
func TestClusterRecords(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	rack := "r2"
	brokers := []BrokerRegistration{
		{ID: 2, Epoch: 9, Rack: &rack, Fenced: true, Listeners: []BrokerEndpoint{{Name: "PLAINTEXT", Host: "b", Port: 9092}}},
		{ID: 1, Epoch: 3, Listeners: []BrokerEndpoint{{Name: "PLAINTEXT", Host: "a", Port: 9092}}},
	}
	parts := []PartitionAssignment{
		{TopicID: tid(1), Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 2, PartitionEpoch: 3},
		{TopicID: tid(1), Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1},
	}
	var ops []Op
	for _, b := range brokers {
		op, err := BrokerOp(b)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	for _, p := range parts {
		op, err := PartitionOp(p)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	topicOps, err := TopicOps(Topic{Name: "orders", ID: tid(1), Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyOps(1, append(ops, topicOps...)); err != nil {
		t.Fatal(err)
	}
	gotB, err := s.Brokers()
	if err != nil || !reflect.DeepEqual(gotB, []BrokerRegistration{brokers[1], brokers[0]}) {
		t.Fatalf("brokers %+v, %v", gotB, err)
	}
	gotP, err := s.PartitionAssignments()
	if err != nil || !reflect.DeepEqual(gotP, []PartitionAssignment{parts[1], parts[0]}) {
		t.Fatalf("partitions %+v, %v", gotP, err)
	}
	if tp, err := s.Topic("orders"); err != nil || tp.ID != tid(1) {
		t.Fatalf("topic from TopicOps: %+v, %v", tp, err)
	}
	if tp, err := s.TopicByID(tid(1)); err != nil || tp.Name != "orders" {
		t.Fatalf("id index from TopicOps: %+v, %v", tp, err)
	}
	if err := s.ApplyOps(2, []Op{UnregisterBrokerOp(2)}); err != nil {
		t.Fatal(err)
	}
	if gotB, _ := s.Brokers(); len(gotB) != 1 || gotB[0].ID != 1 {
		t.Fatalf("after unregistering broker 2: %+v", gotB)
	}
	for _, bad := range []PartitionAssignment{
		{TopicID: tid(1), Replicas: []int32{1}, ISR: []int32{2}, Leader: 2},    // ISR outside the replicas
		{TopicID: tid(1), Replicas: []int32{1, 1}, ISR: []int32{1}, Leader: 1}, // a replica twice
		{TopicID: tid(1), Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 2}, // leader out of sync
		{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},                     // no topic id
	} {
		if _, err := PartitionOp(bad); err == nil {
			t.Errorf("PartitionOp(%+v) accepted", bad)
		}
	}
	if _, err := BrokerOp(BrokerRegistration{ID: 1}); err == nil {
		t.Error("a broker without listeners accepted")
	}
}

// A topic's assignments are written with it and deleted with it.
func TestTopicAssignmentsLiveAndDieWithTheTopic(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	id := [16]byte{1}
	other := [16]byte{2}
	tp := Topic{Name: "t", ID: id, Partitions: 2, Configs: map[string]string{}}
	a := []PartitionAssignment{{TopicID: id, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		{TopicID: id, Partition: 1, Replicas: []int32{2}, ISR: []int32{2}, Leader: 2}}
	if err := s.PutTopic(tp, PartitionAssignment{TopicID: id, Partition: 2, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}); err == nil {
		t.Fatal("an assignment past the topic's partitions was stored")
	}
	if err := s.PutTopic(Topic{Name: "u", ID: other, Partitions: 1, Configs: map[string]string{}},
		PartitionAssignment{TopicID: other, Partition: 0, Replicas: []int32{3}, ISR: []int32{3}, Leader: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTopic(tp, a...); err != nil {
		t.Fatal(err)
	}
	got, err := s.PartitionAssignments()
	if err != nil || len(got) != 3 {
		t.Fatalf("assignments %v, %v; want 3", got, err)
	}
	if err := s.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	got, err = s.PartitionAssignments()
	if err != nil || len(got) != 1 || got[0].TopicID != other {
		t.Fatalf("after the delete: assignments %v, %v; want only topic u's", got, err)
	}
}
