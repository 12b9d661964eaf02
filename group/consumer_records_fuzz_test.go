package group

import (
	"fmt"
	"testing"
	"time"
)

// FuzzConsumerGroupRecords feeds consumer group records (key types 3 to
// 8) that may be anything: a replay errors or applies and never panics;
// what kmirror wrote reads back as written.
func FuzzConsumerGroupRecords(f *testing.F) {
	m := &consumerMember{id: "m", instanceID: "i", clientID: "c", clientHost: "/h", topicNames: []string{"a", "b"},
		regex: "x.*", serverAssignor: "range", rebalanceTimeout: time.Second,
		rec: reconciliation{epoch: 3, previousEpoch: 2, state: memberUnrevoked, assigned: Assignment{topicID(1): {0, 2}},
			revoking: Assignment{topicID(1): {1}}},
		assignedAt: map[topicPartitionID]int32{{topicID(1), 0}: 1, {topicID(1), 1}: 2, {topicID(1), 2}: 3}}
	for _, r := range []struct{ key, value []byte }{
		{consumerEpochRecord("g", 4).Key, consumerEpochRecord("g", 4).Value},
		{consumerTargetEpochRecord("g", 4).Key, consumerTargetEpochRecord("g", 4).Value},
		{consumerMemberRecord("g", m).Key, consumerMemberRecord("g", m).Value},
		{consumerTargetMemberRecord("g", "m", m.rec.assigned).Key, consumerTargetMemberRecord("g", "m", m.rec.assigned).Value},
		{consumerCurrentRecord("g", m).Key, consumerCurrentRecord("g", m).Value},
		{consumerMemberTombstones("g", "m")[0].Key, nil},
		{[]byte{0, 4, 0, 1, 'g'}, []byte{0, 0, 1, 0}},
		// A member key naming the member "" (it used to panic).
		{consumerKey(consumerMemberKey, "g", new(string)), consumerMemberRecord("g", m).Value},
	} {
		f.Add(r.key, r.value)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		st := NewGroupsState()
		_ = st.Apply(key, value)
	})
}

// What kmirror writes of a member reads back whole.
func TestConsumerGroupRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	m := &consumerMember{id: "m", instanceID: "i", rackID: "r", clientID: "c", clientHost: "/h",
		topicNames: []string{"a", "b"}, regex: "x.*", serverAssignor: "range", rebalanceTimeout: 1500 * time.Millisecond,
		rec: reconciliation{epoch: 3, previousEpoch: 2, state: memberUnrevoked, assigned: Assignment{topicID(1): {0, 2}},
			revoking: Assignment{topicID(2): {1}}},
		assignedAt: map[topicPartitionID]int32{{topicID(1), 0}: 1, {topicID(1), 2}: 3, {topicID(2), 1}: 2}}
	st := NewGroupsState()
	for _, r := range append([]struct{ k, v []byte }{},
		struct{ k, v []byte }{consumerEpochRecord("g", 4).Key, consumerEpochRecord("g", 4).Value},
		struct{ k, v []byte }{consumerTargetEpochRecord("g", 3).Key, consumerTargetEpochRecord("g", 3).Value},
		struct{ k, v []byte }{consumerMemberRecord("g", m).Key, consumerMemberRecord("g", m).Value},
		struct{ k, v []byte }{consumerTargetMemberRecord("g", "m", Assignment{topicID(1): {0, 2}}).Key,
			consumerTargetMemberRecord("g", "m", Assignment{topicID(1): {0, 2}}).Value},
		struct{ k, v []byte }{consumerCurrentRecord("g", m).Key, consumerCurrentRecord("g", m).Value},
	) {
		if err := st.Apply(r.k, r.v); err != nil {
			t.Fatal(err)
		}
	}
	cg := st.Consumer["g"]
	got := cg.Members["m"]
	want := &ConsumerMemberState{HasMetadata: true, InstanceID: "i", RackID: "r", ClientID: "c", ClientHost: "/h",
		TopicNames: []string{"a", "b"}, Regex: "x.*", ServerAssignor: "range", RebalanceTimeoutMs: 1500,
		Target: Assignment{topicID(1): {0, 2}}, Epoch: 3, PreviousEpoch: 2, State: 1,
		Assigned: m.rec.assigned, Revoking: m.rec.revoking, AssignedAt: m.assignedAt}
	if cg.Epoch != 4 || cg.TargetEpoch != 3 || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("read back epoch %d, target %d, member\n%+v\nwant\n%+v", cg.Epoch, cg.TargetEpoch, got, want)
	}
	for _, ts := range consumerMemberTombstones("g", "m") {
		if err := st.Apply(ts.Key, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(cg.Members) != 0 {
		t.Fatalf("members after the tombstones: %+v", cg.Members)
	}
}
