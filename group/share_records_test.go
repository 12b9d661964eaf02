package group

import (
	"fmt"
	"testing"

	"github.com/kmirror/kmirror/share"
)

// FuzzShareGroupRecords feeds share group records (key types 10 to 15)
// that may be anything: a replay errors or applies and never panics.
func FuzzShareGroupRecords(f *testing.F) {
	withBatches := ShareOffset{StartOffset: 7, LeaderEpoch: 3, StateEpoch: 2,
		Batches: []share.StateBatch{{First: 8, Last: 9, State: share.PersistedAcknowledged, DeliveryCount: 1}}}
	m := &shareMember{id: "m", rackID: "r", clientID: "c", clientHost: "/h", topicNames: []string{"a", "b"},
		epoch: 3, previousEpoch: 2, assigned: Assignment{topicID(1): {0, 2}}}
	for _, r := range []struct{ key, value []byte }{
		{shareEpochRecord("g", 4).Key, shareEpochRecord("g", 4).Value},
		{shareTargetEpochRecord("g", 4).Key, shareTargetEpochRecord("g", 4).Value},
		{shareMemberRecord("g", m).Key, shareMemberRecord("g", m).Value},
		{shareTargetMemberRecord("g", "m", m.assigned).Key, shareTargetMemberRecord("g", "m", m.assigned).Value},
		{shareCurrentRecord("g", m).Key, shareCurrentRecord("g", m).Value},
		{shareMemberTombstones("g", "m")[0].Key, nil},
		{[]byte{0, 15, 0, 1, 'g'}, []byte{0, 0, 1, 1, 1, 0}},
		{shareOffsetRecord("g", topicPartitionID{topicID(1), 2}, &withBatches).Key,
			shareOffsetRecord("g", topicPartitionID{topicID(1), 2}, &withBatches).Value},
	} {
		f.Add(r.key, r.value)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		st := NewGroupsState()
		_ = st.Apply(key, value)
	})
}

// What kmirror writes of a share group reads back whole, and its
// tombstones delete it.
func TestShareGroupRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	m := &shareMember{id: "m", rackID: "r", clientID: "c", clientHost: "/h", topicNames: []string{"a", "b"},
		epoch: 3, previousEpoch: 2, assigned: Assignment{topicID(1): {0, 2}}}
	st := NewGroupsState()
	recs := append(append([]struct{ k, v []byte }{},
		struct{ k, v []byte }{shareEpochRecord("g", 4).Key, shareEpochRecord("g", 4).Value},
		struct{ k, v []byte }{shareTargetEpochRecord("g", 3).Key, shareTargetEpochRecord("g", 3).Value},
		struct{ k, v []byte }{shareMemberRecord("g", m).Key, shareMemberRecord("g", m).Value}),
		struct{ k, v []byte }{shareTargetMemberRecord("g", "m", Assignment{topicID(1): {1}}).Key,
			shareTargetMemberRecord("g", "m", Assignment{topicID(1): {1}}).Value},
		struct{ k, v []byte }{shareCurrentRecord("g", m).Key, shareCurrentRecord("g", m).Value})
	for _, r := range recs {
		if err := st.Apply(r.k, r.v); err != nil {
			t.Fatal(err)
		}
	}
	sg := st.Share["g"]
	got := fmt.Sprintf("%d %d %+v", sg.Epoch, sg.TargetEpoch, *sg.Members["m"])
	want := fmt.Sprintf("4 3 %+v", ShareMemberState{HasMetadata: true, RackID: "r", ClientID: "c", ClientHost: "/h",
		TopicNames: []string{"a", "b"}, Target: Assignment{topicID(1): {1}}, Epoch: 3, PreviousEpoch: 2,
		Assigned: Assignment{topicID(1): {0, 2}}})
	if got != want {
		t.Fatalf("read back %s, want %s", got, want)
	}
	for _, r := range append(shareMemberTombstones("g", "m"), shareGroupTombstones("g")...) {
		if err := st.Apply(r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	if len(st.Share) != 0 {
		t.Fatalf("after the tombstones: %+v", st.Share)
	}
	if err := st.Apply(shareEpochRecord("g", 1).Key, []byte{0, 1}); err == nil {
		t.Fatal("a value of version 1 was read")
	}
}

// A share partition's start offset reads back with its state epoch and
// in-flight batches.
func TestShareOffsetRecordRoundTrip(t *testing.T) {
	t.Parallel()
	o := ShareOffset{StartOffset: 7, LeaderEpoch: 3, StateEpoch: 2, Batches: []share.StateBatch{
		{First: 8, Last: 9, State: share.PersistedAcknowledged, DeliveryCount: 1}, {First: 10, Last: 10, DeliveryCount: 3}}}
	tp := topicPartitionID{topicID(1), 2}
	st := NewGroupsState()
	r := shareOffsetRecord("g", tp, &o)
	if err := st.Apply(r.Key, r.Value); err != nil {
		t.Fatal(err)
	}
	if got := st.ShareOffsets["g"][tp]; !sameShareOffset(got, o) {
		t.Fatalf("read back %+v, want %+v", got, o)
	}
}
