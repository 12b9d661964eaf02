package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share groups over the wire: listed in ApiVersions only with "share" in
// group.coordinator.rebalance.protocols; a member joins and gets every
// partition, the group is described and listed as a share group, and its
// GROUP configs (share.heartbeat.interval.ms) reach its members.
func TestShareGroupOverTheWire(t *testing.T) {
	t.Parallel()
	apiKeys := func(b *Broker) []int16 {
		cl, _ := cfgAdmin(t, b)
		resp := rawRequest(t, cl, b, kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
		var keys []int16
		for _, k := range resp.ApiKeys {
			keys = append(keys, k.ApiKey)
		}
		return keys
	}
	off := newTestBroker(t)
	if keys := apiKeys(off); slices.Contains(keys, shareGroupHeartbeatKey) || slices.Contains(keys, shareGroupDescribeKey) {
		t.Fatalf("share group keys listed with share groups off: %v", keys)
	}
	// Sent anyway, they are refused: share groups loaded from the log
	// are not served either.
	raw := dialRaw(t, off)
	hbOff := kmsg.NewPtrShareGroupHeartbeatRequest()
	hbOff.Version, hbOff.GroupID, hbOff.MemberID, hbOff.SubscribedTopicNames = 1, "g", "m", []string{"t"}
	wantCode(t, "ShareGroupHeartbeat with share groups off", raw.roundTrip(hbOff).(*kmsg.ShareGroupHeartbeatResponse).ErrorCode,
		kerr.UnsupportedVersion.Code)
	dOff := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	dOff.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "g"}}
	wantCode(t, "DescribeShareGroupOffsets with share groups off",
		raw.roundTrip(dOff).(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0].ErrorCode, kerr.UnsupportedVersion.Code)
	fOff := kmsg.NewPtrShareFetchRequest()
	fOff.Version, fOff.GroupID, fOff.MemberID = 2, kmsg.StringPtr("g"), kmsg.StringPtr("m")
	wantCode(t, "ShareFetch with share groups off", raw.roundTrip(fOff).(*kmsg.ShareFetchResponse).ErrorCode,
		kerr.UnsupportedVersion.Code)

	b := newTestBroker(t, shareGroupsOn)
	if keys := apiKeys(b); !slices.Contains(keys, shareGroupHeartbeatKey) || !slices.Contains(keys, shareGroupDescribeKey) {
		t.Fatalf("share group keys not listed with share groups on: %v", keys)
	}
	cfgTopic(t, b, "orders", 3, nil)
	cl, _ := cfgAdmin(t, b)
	join := func(member string) *kmsg.ShareGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.Version = 1
		req.GroupID, req.MemberID, req.SubscribedTopicNames = "readers", member, []string{"orders"}
		resp := rawRequest(t, cl, b, req).(*kmsg.ShareGroupHeartbeatResponse)
		wantCode(t, "ShareGroupHeartbeat", resp.ErrorCode, 0)
		return resp
	}
	resp := join("m1")
	if resp.MemberEpoch != 1 || resp.HeartbeatIntervalMillis != 5000 || resp.Assignment == nil ||
		len(resp.Assignment.TopicPartitions) != 1 || len(resp.Assignment.TopicPartitions[0].Partitions) != 3 {
		t.Fatalf("join: %+v", resp)
	}
	describe := kmsg.NewPtrShareGroupDescribeRequest()
	describe.Version, describe.GroupIDs = 1, []string{"readers", "nobody"}
	groups := rawRequest(t, cl, b, describe).(*kmsg.ShareGroupDescribeResponse).Groups
	if g := groups[0]; g.ErrorCode != 0 || g.GroupState != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != "m1" ||
		g.Members[0].Assignment.TopicPartitions[0].Topic != "orders" {
		t.Fatalf("described %+v", g)
	}
	wantCode(t, "ShareGroupDescribe of no group", groups[1].ErrorCode, kerr.GroupIDNotFound.Code)
	list := kmsg.NewPtrListGroupsRequest()
	list.Version, list.TypesFilter = 5, []string{"share"}
	if gs := rawRequest(t, cl, b, list).(*kmsg.ListGroupsResponse).Groups; len(gs) != 1 || gs[0].Group != "readers" ||
		gs[0].GroupType != "share" || gs[0].GroupState != "Stable" {
		t.Fatalf("ListGroups of share groups: %+v", gs)
	}

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "readers"
	for _, kv := range [][2]string{{"share.heartbeat.interval.ms", "7000"}, {"share.session.timeout.ms", "50000"}} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = kv[0], kmsg.IncrementalAlterConfigOpSet, &kv[1]
		rr.Configs = append(rr.Configs, c)
	}
	alter.Resources = append(alter.Resources, rr)
	res := rawRequest(t, cl, b, alter).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	wantCode(t, "setting the share group's configs", res.ErrorCode, 0)
	if got := join("m2").HeartbeatIntervalMillis; got != 7000 {
		t.Fatalf("a share member was told to heartbeat every %d ms, want the group's 7000", got)
	}
	rr.Configs = rr.Configs[:1]
	bad := "1000"
	rr.Configs[0].Value = &bad
	res = rawRequest(t, cl, b, alter).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	if res.ErrorCode != kerr.InvalidConfig.Code || res.ErrorMessage == nil ||
		*res.ErrorMessage != "share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms (5000) and less than or equal to group.share.max.heartbeat.interval.ms (15000)" {
		t.Fatalf("share.heartbeat.interval.ms=1000: %s %v", errName(res.ErrorCode), res.ErrorMessage)
	}
}

// Share group RPCs under ACLs: ShareGroupHeartbeat and
// AlterShareGroupOffsets need READ on the group, ShareGroupDescribe and
// DescribeShareGroupOffsets DESCRIBE, DeleteShareGroupOffsets DELETE; the
// offsets RPCs then check each topic (READ to set or delete, DESCRIBE to
// read), and a describe of every topic leaves out the topics denied.
func TestAuthzShareGroups(t *testing.T) {
	t.Parallel()
	b := authzFixture(t, shareGroupsOn)
	alice, bob, admin := rawAs(t, b, aliceIP), rawAs(t, b, bobIP), rawAs(t, b, adminIP)

	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, "alice.sg", "m1", []string{"alice.t"}
	wantCode(t, "ShareGroupHeartbeat denied", bob.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse).ErrorCode, codeGroupAuth)
	hb.SubscribedTopicNames = []string{"alice.t", "other"}
	wantCode(t, "ShareGroupHeartbeat subscribing a topic not described", alice.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse).ErrorCode,
		codeTopicAuth)
	hb.SubscribedTopicNames = []string{"alice.t"}
	wantCode(t, "ShareGroupHeartbeat allowed", alice.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse).ErrorCode, 0)
	desc := kmsg.NewPtrShareGroupDescribeRequest()
	desc.Version, desc.GroupIDs = 1, []string{"alice.sg"}
	wantCode(t, "ShareGroupDescribe denied", bob.roundTrip(desc).(*kmsg.ShareGroupDescribeResponse).Groups[0].ErrorCode, codeGroupAuth)
	wantCode(t, "ShareGroupDescribe allowed", alice.roundTrip(desc).(*kmsg.ShareGroupDescribeResponse).Groups[0].ErrorCode, 0)
	// admin's member subscribes to a topic alice may not describe: her
	// describe of the group is refused, not told of it.
	hbOther := kmsg.NewPtrShareGroupHeartbeatRequest()
	hbOther.Version, hbOther.GroupID, hbOther.MemberID, hbOther.SubscribedTopicNames = 1, "alice.sg", "m2", []string{"other"}
	wantCode(t, "admin's heartbeat", admin.roundTrip(hbOther).(*kmsg.ShareGroupHeartbeatResponse).ErrorCode, 0)
	wantCode(t, "ShareGroupDescribe of a group with a topic alice cannot describe",
		alice.roundTrip(desc).(*kmsg.ShareGroupDescribeResponse).Groups[0].ErrorCode, codeTopicAuth)
	hbOther.MemberEpoch = -1
	wantCode(t, "admin's member leaving", admin.roundTrip(hbOther).(*kmsg.ShareGroupHeartbeatResponse).ErrorCode, 0)
	hb.MemberEpoch = -1
	wantCode(t, "leaving", alice.roundTrip(hb).(*kmsg.ShareGroupHeartbeatResponse).ErrorCode, 0)

	alter := func(rc *rawConn, topics ...string) *kmsg.AlterShareGroupOffsetsResponse {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = "alice.sg"
		for _, n := range topics {
			req.Topics = append(req.Topics, kmsg.AlterShareGroupOffsetsRequestTopic{Topic: n,
				Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 0, StartOffset: 0}}})
		}
		return rc.roundTrip(req).(*kmsg.AlterShareGroupOffsetsResponse)
	}
	wantCode(t, "AlterShareGroupOffsets, group denied", alter(bob, "alice.t").ErrorCode, codeGroupAuth)
	codes := map[string]int16{}
	for _, rt := range alter(alice, "alice.t", "other").Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if codes["alice.t"] != 0 || codes["other"] != codeTopicAuth {
		t.Fatalf("AlterShareGroupOffsets as alice: %v", codes)
	}
	if resp := alter(admin, "other"); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AlterShareGroupOffsets as admin: %+v", resp)
	}

	describe := func(rc *rawConn, topics ...string) kmsg.DescribeShareGroupOffsetsResponseGroup {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		req.Version = 1
		rg := kmsg.DescribeShareGroupOffsetsRequestGroup{GroupID: "alice.sg"}
		for _, n := range topics {
			rg.Topics = append(rg.Topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: n, Partitions: []int32{0}})
		}
		req.Groups = append(req.Groups, rg)
		return rc.roundTrip(req).(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0]
	}
	wantCode(t, "DescribeShareGroupOffsets, group denied", describe(bob).ErrorCode, codeGroupAuth)
	if g := describe(alice); g.ErrorCode != 0 || len(g.Topics) != 1 || g.Topics[0].Topic != "alice.t" {
		t.Fatalf("DescribeShareGroupOffsets of every topic as alice: %+v (other must be left out)", g)
	}
	if g := describe(alice, "other"); len(g.Topics) != 1 || g.Topics[0].Partitions[0].ErrorCode != codeTopicAuth {
		t.Fatalf("DescribeShareGroupOffsets of a denied topic: %+v", g)
	}
	if g := describe(admin); len(g.Topics) != 2 {
		t.Fatalf("DescribeShareGroupOffsets as admin: %+v", g)
	}

	del := func(rc *rawConn, topics ...string) *kmsg.DeleteShareGroupOffsetsResponse {
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.GroupID = "alice.sg"
		for _, n := range topics {
			req.Topics = append(req.Topics, kmsg.DeleteShareGroupOffsetsRequestTopic{Topic: n})
		}
		return rc.roundTrip(req).(*kmsg.DeleteShareGroupOffsetsResponse)
	}
	wantCode(t, "DeleteShareGroupOffsets, group denied", del(bob, "alice.t").ErrorCode, codeGroupAuth)
	codes = map[string]int16{}
	for _, rt := range del(alice, "alice.t", "other").Topics {
		codes[rt.Topic] = rt.ErrorCode
	}
	if codes["alice.t"] != 0 || codes["other"] != codeTopicAuth {
		t.Fatalf("DeleteShareGroupOffsets as alice: %v", codes)
	}
	if g := describe(admin); len(g.Topics) != 1 || g.Topics[0].Topic != "other" {
		t.Fatalf("after alice's delete: %+v", g)
	}
}
