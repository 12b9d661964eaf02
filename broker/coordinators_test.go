package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// TestNotCoordinator: with an image whose internal topics give a group's or
// a transactional id's partition to node 2, every group and transaction
// request on that key answers NOT_COORDINATOR (the client then asks
// FindCoordinator again), a key whose partition has no leader answers
// COORDINATOR_NOT_AVAILABLE, and keys this node coordinates are served as
// before, also in the same batched request.
func TestNotCoordinator(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "co-data", 1)
	self := b.cfg.NodeID
	internal := func(name string) *meta.Topic {
		mt := &meta.Topic{Name: name, ID: [16]byte{byte(len(name))}}
		for _, leader := range []int32{2, self, -1} {
			mt.Partitions = append(mt.Partitions, meta.Partition{Leader: leader, Replicas: []int32{2, self}, ISR: []int32{2, self}})
		}
		return mt
	}
	im := installTwoBrokerImage(t, b, nil, internal(meta.GroupTopic), internal(meta.TransactionTopic))
	// keys finds a key of kind coordinated by node 2 (theirs), by this
	// node (ours) and by none.
	keys := func(kind meta.CoordinatorKind) (theirs, ours, none string) {
		for i := 0; theirs == "" || ours == "" || none == ""; i++ {
			k := fmt.Sprintf("key-%d", i)
			switch c, ok := im.Coordinator(kind, k); {
			case !ok:
				none = k
			case c.ID == 2:
				theirs = k
			default:
				ours = k
			}
		}
		return theirs, ours, none
	}
	gTheirs, gOurs, gNone := keys(meta.CoordinatorGroup)
	xTheirs, _, xNone := keys(meta.CoordinatorTransaction)
	notCoord, notAvail := kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code
	rc := dialRaw(t, b)

	commitReq := func(group string) *kmsg.OffsetCommitRequest {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = tp.Name()
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	for group, want := range map[string]int16{gTheirs: notCoord, gOurs: 0, gNone: notAvail} {
		resp := rc.roundTrip(commitReq(group)).(*kmsg.OffsetCommitResponse)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != want {
			t.Errorf("OffsetCommit of group %s: error %d, want %d", group, got, want)
		}
	}

	fetch5 := kmsg.NewPtrOffsetFetchRequest()
	fetch5.Version, fetch5.Group = 5, gTheirs
	if resp := rc.roundTrip(fetch5).(*kmsg.OffsetFetchResponse); resp.ErrorCode != notCoord {
		t.Errorf("OffsetFetch v5: error %d", resp.ErrorCode)
	}
	fetch8 := kmsg.NewPtrOffsetFetchRequest()
	fetch8.Version = 8
	for _, g := range []string{gOurs, gTheirs} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		fetch8.Groups = append(fetch8.Groups, rg)
	}
	got := map[string]int16{}
	for _, g := range rc.roundTrip(fetch8).(*kmsg.OffsetFetchResponse).Groups {
		got[g.Group] = g.ErrorCode
	}
	if len(got) != 2 || got[gOurs] != 0 || got[gTheirs] != notCoord {
		t.Errorf("OffsetFetch v8 of %s (ours) and %s (theirs): %v", gOurs, gTheirs, got)
	}

	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Groups = []string{gOurs, gTheirs}
	got = map[string]int16{}
	for _, g := range rc.roundTrip(describe).(*kmsg.DescribeGroupsResponse).Groups {
		got[g.Group] = g.ErrorCode
	}
	if len(got) != 2 || got[gOurs] != 0 || got[gTheirs] != notCoord {
		t.Errorf("DescribeGroups: %v", got)
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 5, gTheirs, "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	heartbeat := kmsg.NewPtrHeartbeatRequest()
	heartbeat.Group, heartbeat.MemberID = gTheirs, "m"
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = gTheirs, "m"
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID = gTheirs, "m"
	deleteGroups := kmsg.NewPtrDeleteGroupsRequest()
	deleteGroups.Groups = []string{gTheirs}
	offsetDelete := kmsg.NewPtrOffsetDeleteRequest()
	offsetDelete.Group = gTheirs
	txnCommit := kmsg.NewPtrTxnOffsetCommitRequest()
	txnCommit.TransactionalID, txnCommit.Group, txnCommit.ProducerID = "x", gTheirs, 1
	txnCommit.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: tp.Name(), Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}

	initPID := func(id string) *kmsg.InitProducerIDRequest {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		return req
	}
	addParts := kmsg.NewPtrAddPartitionsToTxnRequest()
	addParts.Version, addParts.TransactionalID, addParts.ProducerID = 3, xTheirs, 1
	addParts.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: tp.Name(), Partitions: []int32{0}}}
	addOffsets := kmsg.NewPtrAddOffsetsToTxnRequest()
	addOffsets.TransactionalID, addOffsets.Group, addOffsets.ProducerID = xTheirs, gOurs, 1
	endTxn := kmsg.NewPtrEndTxnRequest()
	endTxn.TransactionalID, endTxn.ProducerID = xTheirs, 1
	describeTxns := kmsg.NewPtrDescribeTransactionsRequest()
	describeTxns.TransactionalIDs = []string{xTheirs}

	for _, c := range []struct {
		api  string
		req  kmsg.Request
		code func(kmsg.Response) int16
		want int16
	}{
		{"JoinGroup", join, func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }, notCoord},
		{"Heartbeat", heartbeat, func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode }, notCoord},
		{"LeaveGroup", leave, func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).ErrorCode }, notCoord},
		{"SyncGroup", sync, func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode }, notCoord},
		{"DeleteGroups", deleteGroups, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode }, notCoord},
		{"OffsetDelete", offsetDelete, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetDeleteResponse).ErrorCode }, notCoord},
		{"TxnOffsetCommit", txnCommit, func(r kmsg.Response) int16 {
			return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		}, notCoord},
		{"InitProducerID", initPID(xTheirs), func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, notCoord},
		{"InitProducerID, no leader", initPID(xNone), func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, notAvail},
		{"AddPartitionsToTxn", addParts, func(r kmsg.Response) int16 {
			return r.(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
		}, notCoord},
		{"AddOffsetsToTxn", addOffsets, func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode }, notCoord},
		{"EndTxn", endTxn, func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode }, notCoord},
		{"DescribeTransactions", describeTxns, func(r kmsg.Response) int16 {
			return r.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
		}, notCoord},
	} {
		if got := c.code(rc.roundTrip(c.req)); got != c.want {
			t.Errorf("%s: error %d, want %d", c.api, got, c.want)
		}
	}
	// Nothing reached the group coordinator for node 2's key: the only
	// group here is ours, which committed.
	var listed []string
	for _, g := range b.groups.ListGroups(kmsg.NewPtrListGroupsRequest()).Groups {
		listed = append(listed, g.Group)
	}
	if len(listed) != 1 || listed[0] != gOurs {
		t.Errorf("groups here: %v, want only %s", listed, gOurs)
	}
}
