package group

import (
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
)

// stableMeta is a Stable generation of two members, one static.
func stableMeta() state.GroupMeta {
	return state.GroupMeta{Group: "g", ProtocolType: "consumer", Generation: 7, Protocol: "range", Leader: "m-1",
		Members: []state.GroupMember{
			{ID: "m-1", ClientID: "c1", ClientHost: "/10.0.0.1", SessionTimeout: longSession, RebalanceTimeout: longRebalance,
				Subscription: []byte("sub-1"), Assignment: []byte("assign-1")},
			{ID: "m-2", InstanceID: "i-2", ClientID: "c2", ClientHost: "/10.0.0.2", SessionTimeout: longSession,
				RebalanceTimeout: longRebalance, Subscription: []byte("sub-2"), Assignment: []byte("assign-2")},
		}}
}

// A Stable generation's record holds its protocol, leader and members
// (Kafka's GroupMetadataValue v3), and replays as it was written; a value
// without a leader among its members, or written by a Kafka too old to
// record session timeouts, replays without members (they rejoin).
func TestGroupRecordCarriesTheMembership(t *testing.T) {
	t.Parallel()
	want := stableMeta()
	rec := GroupRecord(want)
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(rec.Value); err != nil || v.Version != 3 || len(v.Members) != 2 || *v.Leader != "m-1" {
		t.Fatalf("value v%d, %d members, err %v", v.Version, len(v.Members), err)
	}
	st := NewGroupsState()
	raw := batch.AppendRecords(nil, 1, []batch.Record{rec})
	b, err := batch.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplyBatch(b); err != nil {
		t.Fatal(err)
	}
	if got := st.Metas["g"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed %+v\nwant     %+v", got, want)
	}

	strip := state.GroupMeta{Group: "g", ProtocolType: "consumer", Generation: 7}
	noLeader := stableMeta()
	noLeader.Leader = "gone"
	old := kmsg.NewGroupMetadataValue()
	old.Version, old.ProtocolType, old.Generation, old.Protocol, old.Leader = 0, "consumer", 7, kmsg.StringPtr("range"), kmsg.StringPtr("m-1")
	old.Members = []kmsg.GroupMetadataValueMember{{MemberID: "m-1", Subscription: []byte("s")}}
	for name, value := range map[string][]byte{
		"leader not a member": GroupRecord(noLeader).Value,
		"v0, no session":      old.AppendTo(nil),
	} {
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(value); err != nil {
			t.Fatal(err)
		}
		if got := groupMetaOf("g", &v); !reflect.DeepEqual(got, strip) {
			t.Errorf("%s: replayed %+v, want no members", name, got)
		}
	}
}

// A coordinator that loads a Stable generation serves its members as
// they were: a heartbeat of the generation is answered without a
// rebalance, a SyncGroup returns the member's assignment, the static
// member keeps its instance id, and DescribeGroups shows them Stable. A
// member that does not come back is expired on its session timeout, and
// the group rebalances without it. It used to come back Empty: every
// member's heartbeat answered UNKNOWN_MEMBER_ID, and the group rebalanced
// from scratch after every coordinator move.
func TestLoadedStableGenerationNeedsNoRebalance(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, nil, Config{})
	st := NewGroupsState()
	m := stableMeta()
	m.Members[1].SessionTimeout = 200 * time.Millisecond // m-2 does not come back
	st.Metas["g"] = m
	c.Load(func(string) bool { return true }, st)

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, "g", "m-1", 7
	wantCode(t, "heartbeat of the loaded generation", c.Heartbeat(hb).ErrorCode, nil)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, "g", "m-1", 7
	if resp := c.SyncGroup(sync); resp.ErrorCode != 0 || string(resp.MemberAssignment) != "assign-1" {
		t.Fatalf("SyncGroup of the loaded generation: %s, assignment %q", errName(resp.ErrorCode), resp.MemberAssignment)
	}
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Version, d.Groups = 5, []string{"g"}
	dg := c.DescribeGroups(d).Groups[0]
	if dg.State != "Stable" || dg.Protocol != "range" || len(dg.Members) != 2 {
		t.Fatalf("described %s, protocol %s, %d members", dg.State, dg.Protocol, len(dg.Members))
	}
	for _, dm := range dg.Members {
		if dm.MemberID == "m-2" && (dm.InstanceID == nil || *dm.InstanceID != "i-2") {
			t.Fatalf("the static member lost its instance id: %+v", dm)
		}
	}
	// m-2 never heartbeats: its session ends, and m-1 is told to rejoin.
	deadline := time.Now().Add(waitFor)
	for {
		resp := c.Heartbeat(hb)
		if resp.ErrorCode != 0 {
			wantCode(t, "heartbeat once m-2 expired", resp.ErrorCode, kerr.RebalanceInProgress)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the member that did not come back was never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
