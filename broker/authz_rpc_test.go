package broker

import (
	"context"
	"errors"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// Per-RPC authorization tests. Every test starts a broker with the
// authorizer on (newAuthzBroker) and this fixture:
//
//	User:alice  ALL on topics, groups and cluster mirrors prefixed "alice.",
//	            ALL on the transactional id "alice.txn", DESCRIBE on the
//	            topic "desc.only"
//	User:ops    ALL on the cluster
//	User:admin  super user
//	User:bob    nothing
//
// and the topics alice.t (2 partitions), alice.del, other and desc.only.

const (
	codeTopicAuth   = 29 // TOPIC_AUTHORIZATION_FAILED
	codeGroupAuth   = 30 // GROUP_AUTHORIZATION_FAILED
	codeClusterAuth = 31 // CLUSTER_AUTHORIZATION_FAILED
	codeTxnAuth     = 53 // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
	codeMirrorAuth  = 144
)

func authzFixture(t *testing.T, mutate ...func(*Config)) *Broker {
	t.Helper()
	b := newAuthzBroker(t, mutate...)
	mustTopic(t, b, "alice.t", 2)
	mustTopic(t, b, "alice.del", 1)
	mustTopic(t, b, "other", 1)
	mustTopic(t, b, "desc.only", 1)
	err := b.CreateACLs([]state.ACL{
		aclOf(resTopic, "alice.", patPrefix, "User:alice", "*", opAll, allow),
		aclOf(resGroup, "alice.", patPrefix, "User:alice", "*", opAll, allow),
		aclOf(resTxnID, "alice.txn", patLiteral, "User:alice", "*", opAll, allow),
		aclOf(resMirror, "alice.", patPrefix, "User:alice", "*", opAll, allow),
		aclOf(resTopic, "desc.only", patLiteral, "User:alice", "*", opDescribe, allow),
		aclOf(resCluster, clusterResourceName, patLiteral, "User:ops", "*", opAll, allow),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantCode fails the test when got is not want.
func wantCode(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: error %d (%s), want %d (%s)", what, got, errName(got), want, errName(want))
	}
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return mirrorapi.ErrorName(code)
}

func TestAuthzProduce(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	at, other := b.topicByName("alice.t"), b.topicByName("other")
	alice, bob := rawAs(t, b, aliceIP), rawAs(t, b, bobIP)
	txnBatch := func() []byte {
		return buildBatch(1, 0, 0, attrTxn, time.Now().UnixMilli(), valueRecords(1, 10)...)
	}
	str := func(s string) *string { return &s }
	tests := []struct {
		name string
		rc   *rawConn
		v    int16
		tp   *topic
		recs []byte
		txn  *string
		want int16
	}{
		{"allowed", alice, 9, at, plainBatch(1, 10), nil, 0},
		{"no ACL for the principal", bob, 9, at, plainBatch(1, 10), nil, codeTopicAuth},
		{"no ACL for the topic", alice, 9, other, plainBatch(1, 10), nil, codeTopicAuth},
		{"DESCRIBE is not WRITE", alice, 9, b.topicByName("desc.only"), plainBatch(1, 10), nil, codeTopicAuth},
		{"missing topic without ACL", bob, 9, &topic{name: "nope"}, plainBatch(1, 10), nil, codeTopicAuth},
		{"missing topic with ACL", alice, 9, &topic{name: "alice.nope"}, plainBatch(1, 10), nil, kerr.UnknownTopicOrPartition.Code},
		{"by topic ID, denied", bob, 13, at, plainBatch(1, 10), nil, codeTopicAuth},
		{"by topic ID, allowed", alice, 13, at, plainBatch(1, 10), nil, 0},
		{"unknown topic ID", bob, 13, &topic{name: "x", id: [16]byte{9}}, plainBatch(1, 10), nil, kerr.UnknownTopicID.Code},
		{"transactional without an id", alice, 9, at, txnBatch(), nil, codeTxnAuth},
		{"transactional id without WRITE", alice, 9, at, txnBatch(), str("bob.txn"), codeTxnAuth},
	}
	for _, tc := range tests {
		req := produceReq(tc.v, -1, tc.tp, 0, tc.recs)
		req.TransactionID = tc.txn
		resp := tc.rc.roundTrip(req).(*kmsg.ProduceResponse)
		wantCode(t, tc.name, onlyPartition(t, resp).ErrorCode, tc.want)
	}
	// With WRITE on the transactional id, authorization passes (the
	// batch fails later: no transaction is open).
	req := produceReq(9, -1, at, 0, txnBatch())
	req.TransactionID = str("alice.txn")
	if code := onlyPartition(t, alice.roundTrip(req).(*kmsg.ProduceResponse)).ErrorCode; code == codeTxnAuth || code == codeTopicAuth {
		t.Fatalf("transactional produce with WRITE on its id: error %d", code)
	}
}

func fetchOne(t *testing.T, rc *rawConn, v int16, tp *topic, replicaID int32) int16 {
	t.Helper()
	req := newFetchReq(v)
	req.ReplicaID = replicaID
	if v >= 15 {
		req.ReplicaState.ID = replicaID
	}
	addPart(req, tp, 0, 0)
	resp := rc.roundTrip(req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch: top-level error %d, topics %+v", resp.ErrorCode, resp.Topics)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func TestAuthzFetch(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	at, other := b.topicByName("alice.t"), b.topicByName("other")
	alice, bob, ops := rawAs(t, b, aliceIP), rawAs(t, b, bobIP), rawAs(t, b, opsIP)
	admin := rawAs(t, b, adminIP)
	for _, tp := range []*topic{at, other} {
		wantCode(t, "seeding "+tp.name, onlyPartition(t, admin.roundTrip(produceReq(9, -1, tp, 0, plainBatch(2, 10))).(*kmsg.ProduceResponse)).ErrorCode, 0)
	}
	tests := []struct {
		name    string
		rc      *rawConn
		v       int16
		tp      *topic
		replica int32
		want    int16
	}{
		{"consumer allowed", alice, 12, at, -1, 0},
		{"consumer allowed by ID", alice, 13, at, -1, 0},
		{"consumer denied", bob, 12, at, -1, codeTopicAuth},
		{"consumer denied by ID", bob, 13, at, -1, codeTopicAuth},
		{"consumer, other topic", alice, 12, other, -1, codeTopicAuth},
		{"consumer, DESCRIBE is not READ", alice, 12, b.topicByName("desc.only"), -1, codeTopicAuth},
		{"consumer, missing topic without ACL", bob, 12, &topic{name: "ghost"}, -1, codeTopicAuth},
		{"consumer, missing topic with ACL", alice, 12, &topic{name: "alice.ghost"}, -1, kerr.UnknownTopicOrPartition.Code},
		{"consumer, unknown topic ID", bob, 13, &topic{name: "x", id: [16]byte{7}}, -1, kerr.UnknownTopicID.Code},
		{"follower without CLUSTER_ACTION", alice, 12, at, 1, codeTopicAuth},
		{"follower (v15 replica state) without CLUSTER_ACTION", alice, 15, at, 1, codeTopicAuth},
		{"follower with CLUSTER_ACTION", ops, 12, other, 1, 0},
		{"super user", admin, 12, other, -1, 0},
	}
	for _, tc := range tests {
		wantCode(t, tc.name, fetchOne(t, tc.rc, tc.v, tc.tp, tc.replica), tc.want)
	}

	// A refused partition does not end a long poll on the others; a fetch
	// of refused partitions alone is answered at once.
	poll := newFetchReq(12)
	poll.MaxWaitMillis = 400
	addPart(poll, at, 0, 2) // the log end: nothing to read yet
	addPart(poll, other, 0, 0)
	start := time.Now()
	resp := alice.roundTrip(poll).(*kmsg.FetchResponse)
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("a long poll with a refused partition returned after %v", waited)
	}
	wantCode(t, "long poll, refused partition", mustPart(t, resp, other, 0).ErrorCode, codeTopicAuth)
	refused := newFetchReq(12)
	refused.MaxWaitMillis = 20000
	addPart(refused, other, 0, 0)
	start = time.Now()
	resp = alice.roundTrip(refused).(*kmsg.FetchResponse)
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("a fetch of refused partitions only waited %v", waited)
	}
	wantCode(t, "long poll, every partition refused", mustPart(t, resp, other, 0).ErrorCode, codeTopicAuth)

	// A session's partitions are checked at every fetch: revoking the ACL
	// denies the next incremental fetch.
	sess := rawAs(t, b, aliceIP)
	req := newFetchReq(12)
	req.SessionEpoch = 0
	addPart(req, at, 0, 2)
	resp = sess.roundTrip(req).(*kmsg.FetchResponse)
	wantCode(t, "session open", mustPart(t, resp, at, 0).ErrorCode, 0)
	aliceTopics := aclOf(resTopic, "alice.", patPrefix, "User:alice", "*", opAll, allow)
	if err := b.DeleteACLs([]state.ACL{aliceTopics}); err != nil {
		t.Fatal(err)
	}
	inc := newFetchReq(12)
	inc.SessionID, inc.SessionEpoch = resp.SessionID, 1
	resp = sess.roundTrip(inc).(*kmsg.FetchResponse)
	wantCode(t, "incremental fetch after the ACL is gone", mustPart(t, resp, at, 0).ErrorCode, codeTopicAuth)
}

func TestAuthzOffsets(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	alice, bob, ops := rawAs(t, b, aliceIP), rawAs(t, b, bobIP), rawAs(t, b, opsIP)
	listOffsets := func(rc *rawConn, topic string) int16 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 7
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rc.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
	}
	wantCode(t, "ListOffsets allowed", listOffsets(alice, "alice.t"), 0)
	wantCode(t, "ListOffsets by DESCRIBE alone", listOffsets(alice, "desc.only"), 0)
	wantCode(t, "ListOffsets denied", listOffsets(bob, "alice.t"), codeTopicAuth)
	wantCode(t, "ListOffsets, missing topic without ACL", listOffsets(bob, "ghost"), codeTopicAuth)
	wantCode(t, "ListOffsets, missing topic with ACL", listOffsets(alice, "alice.ghost"), kerr.UnknownTopicOrPartition.Code)

	epochs := func(rc *rawConn, topic string) int16 {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.Version = 4
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.LeaderEpoch, rp.CurrentLeaderEpoch = 0, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rc.roundTrip(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
	}
	wantCode(t, "OffsetForLeaderEpoch allowed", epochs(alice, "alice.t"), 0)
	wantCode(t, "OffsetForLeaderEpoch denied", epochs(bob, "alice.t"), codeTopicAuth)
	wantCode(t, "OffsetForLeaderEpoch with CLUSTER_ACTION", epochs(ops, "other"), 0)
}

func metadataNames(resp *kmsg.MetadataResponse) []string {
	var out []string
	for _, mt := range resp.Topics {
		if mt.Topic != nil {
			out = append(out, *mt.Topic)
		}
	}
	sort.Strings(out)
	return out
}

func TestAuthzMetadata(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	alice, bob, admin, ops := rawAs(t, b, aliceIP), rawAs(t, b, bobIP), rawAs(t, b, adminIP), rawAs(t, b, opsIP)
	at := b.topicByName("alice.t")

	all := func(rc *rawConn) []string {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		return metadataNames(rc.roundTrip(req).(*kmsg.MetadataResponse))
	}
	if got, want := all(alice), []string{"alice.del", "alice.t", "desc.only"}; !slices.Equal(got, want) {
		t.Fatalf("alice lists %v, want %v", got, want)
	}
	if got := all(bob); len(got) != 0 {
		t.Fatalf("bob lists %v, want nothing", got)
	}
	if got := all(admin); len(got) != 4 {
		t.Fatalf("admin lists %v, want every topic", got)
	}

	named := func(rc *rawConn, autoCreate bool, topics ...string) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.AllowAutoTopicCreation = 12, autoCreate
		for _, n := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
		return rc.roundTrip(req).(*kmsg.MetadataResponse)
	}
	resp := named(bob, false, "alice.t", "ghost")
	for _, mt := range resp.Topics {
		wantCode(t, "bob named "+*mt.Topic, mt.ErrorCode, codeTopicAuth)
		if mt.TopicID != ([16]byte{}) || len(mt.Partitions) != 0 {
			t.Fatalf("a denied topic reveals its ID or partitions: %+v", mt)
		}
	}
	resp = named(alice, true, "alice.t", "alice.auto", "desc.only.new", "desc.only")
	wantCode(t, "alice.t", resp.Topics[0].ErrorCode, 0)
	wantCode(t, "auto-created with CREATE", resp.Topics[1].ErrorCode, 0)
	if b.topicByName("alice.auto") == nil {
		t.Fatal("alice.auto was not created")
	}
	wantCode(t, "no ACL at all", resp.Topics[2].ErrorCode, codeTopicAuth)
	wantCode(t, "existing topic with DESCRIBE", resp.Topics[3].ErrorCode, 0)
	if err := b.CreateACLs([]state.ACL{aclOf(resTopic, "desc.", patPrefix, "User:alice", "*", opDescribe, allow)}); err != nil {
		t.Fatal(err)
	}
	resp = named(alice, true, "desc.missing")
	wantCode(t, "auto-create without CREATE", resp.Topics[0].ErrorCode, codeTopicAuth)
	resp = named(alice, false, "desc.missing")
	wantCode(t, "missing, no auto-create", resp.Topics[0].ErrorCode, kerr.UnknownTopicOrPartition.Code)
	resp = named(ops, true, "ops.auto")
	wantCode(t, "auto-create with CREATE on the cluster but no DESCRIBE", resp.Topics[0].ErrorCode, codeTopicAuth)

	// By topic ID: the ID is not hidden, the name is.
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = at.id
	req.Topics = append(req.Topics, rt)
	resp = bob.roundTrip(req).(*kmsg.MetadataResponse)
	if mt := resp.Topics[0]; mt.ErrorCode != codeTopicAuth || mt.Topic != nil || mt.TopicID != at.id {
		t.Fatalf("by ID, denied: %+v", mt)
	}

	// Authorized operations (v8-10 for the cluster).
	ops10 := func(rc *rawConn) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 10
		req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = true, true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("alice.t")
		req.Topics = append(req.Topics, rt)
		return rc.roundTrip(req).(*kmsg.MetadataResponse)
	}
	resp = ops10(alice)
	const allTopicOps = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
	if resp.AuthorizedOperations != 0 || resp.Topics[0].AuthorizedOperations != allTopicOps {
		t.Fatalf("alice: cluster ops %b, topic ops %b; want 0 and %b", resp.AuthorizedOperations,
			resp.Topics[0].AuthorizedOperations, allTopicOps)
	}
	if resp = ops10(ops); resp.AuthorizedOperations != clusterOperations {
		t.Fatalf("ops: cluster ops %b, want %b", resp.AuthorizedOperations, clusterOperations)
	}
}

func TestAuthzCreateDeleteTopics(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	alice, bob, ops := rawAs(t, b, aliceIP), rawAs(t, b, bobIP), rawAs(t, b, opsIP)

	create := func(rc *rawConn, names ...string) []kmsg.CreateTopicsResponseTopic {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		for _, n := range names {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 1, 1
			req.Topics = append(req.Topics, rt)
		}
		return rc.roundTrip(req).(*kmsg.CreateTopicsResponse).Topics
	}
	got := create(alice, "alice.c1", "bob.c", "alice.t")
	wantCode(t, "alice.c1", got[0].ErrorCode, 0)
	if len(got[0].Configs) == 0 || got[0].NumPartitions != 1 || got[0].ConfigErrorCode != 0 {
		t.Fatalf("alice.c1 created without its configs: %+v", got[0])
	}
	wantCode(t, "bob.c", got[1].ErrorCode, codeTopicAuth)
	if got[1].ErrorMessage == nil || *got[1].ErrorMessage != "Authorization failed." {
		t.Fatalf("bob.c message %v", got[1].ErrorMessage)
	}
	wantCode(t, "alice.t exists", got[2].ErrorCode, kerr.TopicAlreadyExists.Code)
	got = create(bob, "alice.t")
	wantCode(t, "bob on an existing topic", got[0].ErrorCode, codeTopicAuth)
	got = create(ops, "ops.c")
	wantCode(t, "CREATE on the cluster", got[0].ErrorCode, 0)
	if got[0].ConfigErrorCode != codeTopicAuth || len(got[0].Configs) != 0 || got[0].NumPartitions != -1 {
		t.Fatalf("configs shown without DESCRIBE_CONFIGS: %+v", got[0])
	}

	type ref struct {
		name string
		id   [16]byte
	}
	del := func(rc *rawConn, refs ...ref) []kmsg.DeleteTopicsResponseTopic {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version = 6
		for _, r := range refs {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			if r.name != "" {
				rt.Topic = kmsg.StringPtr(r.name)
			}
			rt.TopicID = r.id
			req.Topics = append(req.Topics, rt)
		}
		return rc.roundTrip(req).(*kmsg.DeleteTopicsResponse).Topics
	}
	atID, otherID, descID := b.topicByName("alice.t").id, b.topicByName("other").id, b.topicByName("desc.only").id
	res := del(bob, ref{name: "alice.t"}, ref{id: atID}, ref{name: "ghost"})
	for i, r := range res {
		wantCode(t, "bob deletes", r.ErrorCode, codeTopicAuth)
		if r.TopicID != ([16]byte{}) && i != 1 || i == 1 && r.Topic != nil {
			t.Fatalf("a refused deletion reveals too much: %+v", r)
		}
	}
	res = del(alice, ref{name: "alice.del"}, ref{name: "alice.ghost"}, ref{id: otherID}, ref{id: descID})
	wantCode(t, "alice.del", res[0].ErrorCode, 0)
	wantCode(t, "alice.ghost", res[1].ErrorCode, kerr.UnknownTopicOrPartition.Code)
	wantCode(t, "other by ID", res[2].ErrorCode, codeTopicAuth)
	if res[2].Topic != nil {
		t.Fatalf("the name of a topic alice may not describe is revealed: %q", *res[2].Topic)
	}
	wantCode(t, "desc.only by ID", res[3].ErrorCode, codeTopicAuth)
	if res[3].Topic == nil || *res[3].Topic != "desc.only" {
		t.Fatalf("a describable topic refused by ID should carry its name: %+v", res[3])
	}
	if b.topicByName("alice.del") != nil || b.topicByName("alice.t") == nil || b.topicByName("other") == nil {
		t.Fatal("the deletions did not match the authorization")
	}
}

func TestAuthzPartitionsAndRecords(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	alice, bob := rawAs(t, b, aliceIP), rawAs(t, b, bobIP)
	grow := func(rc *rawConn, topic string, count int32) int16 {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Version = 3
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topic, count
		req.Topics = append(req.Topics, rt)
		return rc.roundTrip(req).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
	}
	wantCode(t, "CreatePartitions allowed", grow(alice, "alice.t", 3), 0)
	wantCode(t, "CreatePartitions denied", grow(bob, "alice.t", 4), codeTopicAuth)
	wantCode(t, "CreatePartitions, other topic", grow(alice, "other", 4), codeTopicAuth)
	wantCode(t, "CreatePartitions, missing topic without ACL", grow(bob, "ghost", 4), codeTopicAuth)

	deleteRecords := func(rc *rawConn, topic string) int16 {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.Version = 2
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Offset = 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rc.roundTrip(req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode
	}
	wantCode(t, "DeleteRecords allowed", deleteRecords(alice, "alice.t"), 0)
	wantCode(t, "DeleteRecords denied", deleteRecords(bob, "alice.t"), codeTopicAuth)
	wantCode(t, "DeleteRecords, DESCRIBE is not DELETE", deleteRecords(alice, "desc.only"), codeTopicAuth)
}

func TestAuthzConfigs(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	alice, bob, ops := rawAs(t, b, aliceIP), rawAs(t, b, bobIP), rawAs(t, b, opsIP)
	type res struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	describe := func(rc *rawConn, rs ...res) []int16 {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = 4
		for _, r := range rs {
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = r.typ, r.name
			req.Resources = append(req.Resources, rr)
		}
		var codes []int16
		for _, r := range rc.roundTrip(req).(*kmsg.DescribeConfigsResponse).Resources {
			codes = append(codes, r.ErrorCode)
			if r.ErrorCode != 0 && len(r.Configs) != 0 {
				t.Fatalf("configs of a refused resource: %+v", r)
			}
		}
		return codes
	}
	topicT, broker := kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker
	got := describe(alice, res{topicT, "alice.t"}, res{topicT, "other"}, res{broker, "1"},
		res{configResourceClusterMirror, "bob.m"}, res{topicT, "alice.ghost"})
	want := []int16{0, codeTopicAuth, codeClusterAuth, codeMirrorAuth, kerr.UnknownTopicOrPartition.Code}
	if !slices.Equal(got, want) {
		t.Fatalf("alice DescribeConfigs: codes %v, want %v", got, want)
	}
	if got := describe(ops, res{broker, "1"}, res{broker, ""}); !slices.Equal(got, []int16{0, 0}) {
		t.Fatalf("ops DescribeConfigs of the broker: %v", got)
	}

	inc := func(rc *rawConn, typ kmsg.ConfigResourceType, name, key, value string, dup bool) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.Version = 1
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, name
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = key, kmsg.StringPtr(value)
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		if dup {
			req.Resources = append(req.Resources, rr)
		}
		return rc.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	}
	wantCode(t, "IncrementalAlterConfigs topic allowed", inc(alice, topicT, "alice.t", "retention.ms", "1000", false), 0)
	wantCode(t, "IncrementalAlterConfigs topic denied", inc(bob, topicT, "alice.t", "retention.ms", "1000", false), codeTopicAuth)
	wantCode(t, "IncrementalAlterConfigs, DESCRIBE is not ALTER_CONFIGS", inc(alice, topicT, "desc.only", "retention.ms", "1000", false), codeTopicAuth)
	wantCode(t, "IncrementalAlterConfigs broker denied", inc(alice, broker, "", "log.retention.ms", "1000", false), codeClusterAuth)
	wantCode(t, "IncrementalAlterConfigs broker allowed", inc(ops, broker, "", "log.retention.ms", "1000", false), 0)
	wantCode(t, "IncrementalAlterConfigs mirror denied", inc(bob, configResourceClusterMirror, "m", "x", "1", false), codeMirrorAuth)
	wantCode(t, "IncrementalAlterConfigs duplicate first", inc(bob, topicT, "alice.t", "retention.ms", "1", true), kerr.InvalidRequest.Code)

	legacy := func(rc *rawConn, typ kmsg.ConfigResourceType, name string) int16 {
		req := kmsg.NewPtrAlterConfigsRequest()
		req.Version = 2
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, name
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "retention.ms", kmsg.StringPtr("2000")
		if typ == broker {
			c.Name = "log.retention.ms"
		}
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		return rc.roundTrip(req).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode
	}
	wantCode(t, "AlterConfigs topic allowed", legacy(alice, topicT, "alice.t"), 0)
	wantCode(t, "AlterConfigs topic denied", legacy(bob, topicT, "alice.t"), codeTopicAuth)
	wantCode(t, "AlterConfigs broker denied", legacy(alice, broker, "1"), codeClusterAuth)
	wantCode(t, "AlterConfigs broker allowed", legacy(ops, broker, "1"), 0)
}

func TestAuthzClusterAPIs(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	alice, bob, ops, admin := rawAs(t, b, aliceIP), rawAs(t, b, bobIP), rawAs(t, b, opsIP), rawAs(t, b, adminIP)

	logDirs := func(rc *rawConn) *kmsg.DescribeLogDirsResponse {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.Version = 4
		return rc.roundTrip(req).(*kmsg.DescribeLogDirsResponse)
	}
	if resp := logDirs(alice); resp.ErrorCode != codeClusterAuth || len(resp.Dirs) != 0 {
		t.Fatalf("DescribeLogDirs denied: error %d, %d dirs", resp.ErrorCode, len(resp.Dirs))
	}
	if resp := logDirs(ops); resp.ErrorCode != 0 || len(resp.Dirs) != 1 {
		t.Fatalf("DescribeLogDirs allowed: error %d, %d dirs", resp.ErrorCode, len(resp.Dirs))
	}

	cluster := func(rc *rawConn) *kmsg.DescribeClusterResponse {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = 1
		req.IncludeClusterAuthorizedOperations = true
		return rc.roundTrip(req).(*kmsg.DescribeClusterResponse)
	}
	if resp := cluster(bob); resp.ErrorCode != 0 || len(resp.Brokers) != 1 || resp.ClusterAuthorizedOperations != 0 {
		t.Fatalf("DescribeCluster without DESCRIBE: error %d, %d brokers, ops %b", resp.ErrorCode, len(resp.Brokers),
			resp.ClusterAuthorizedOperations)
	}
	for _, rc := range []*rawConn{ops, admin} {
		if resp := cluster(rc); resp.ErrorCode != 0 || resp.ClusterAuthorizedOperations != clusterOperations {
			t.Fatalf("DescribeCluster with DESCRIBE: error %d, ops %b", resp.ErrorCode, resp.ClusterAuthorizedOperations)
		}
	}

	describeACLs := func(rc *rawConn) *kmsg.DescribeACLsResponse {
		return rc.roundTrip(anyFilter().describe(3)).(*kmsg.DescribeACLsResponse)
	}
	if resp := describeACLs(bob); resp.ErrorCode != codeClusterAuth || len(resp.Resources) != 0 {
		t.Fatalf("DescribeAcls denied: error %d, %d resources", resp.ErrorCode, len(resp.Resources))
	}
	if resp := describeACLs(ops); resp.ErrorCode != 0 || len(resp.Resources) == 0 {
		t.Fatalf("DescribeAcls allowed: error %d, %d resources", resp.ErrorCode, len(resp.Resources))
	}

	grant := aclOf(resTopic, "other", patLiteral, "User:bob", "*", opRead, allow)
	createACL := func(rc *rawConn) int16 {
		req := kmsg.NewPtrCreateACLsRequest()
		req.Version = 3
		req.Creations = append(req.Creations, creationOf(grant), creationOf(grant))
		resp := rc.roundTrip(req).(*kmsg.CreateACLsResponse)
		if resp.Results[0].ErrorCode != resp.Results[1].ErrorCode {
			t.Fatalf("CreateAcls results differ: %+v", resp.Results)
		}
		return resp.Results[0].ErrorCode
	}
	wantCode(t, "CreateAcls denied", createACL(alice), codeClusterAuth)
	if acls, _ := b.ACLs(); slices.Contains(acls, grant) {
		t.Fatal("a denied CreateAcls stored its binding")
	}
	wantCode(t, "CreateAcls allowed", createACL(ops), 0)

	deleteACL := func(rc *rawConn) kmsg.DeleteACLsResponseResult {
		req := kmsg.NewPtrDeleteACLsRequest()
		req.Version = 3
		req.Filters = append(req.Filters, anyFilter().deletion())
		return rc.roundTrip(req).(*kmsg.DeleteACLsResponse).Results[0]
	}
	if r := deleteACL(bob); r.ErrorCode != codeClusterAuth || len(r.MatchingACLs) != 0 {
		t.Fatalf("DeleteAcls denied: error %d, %d matched", r.ErrorCode, len(r.MatchingACLs))
	}
	if acls, _ := b.ACLs(); len(acls) != 7 {
		t.Fatalf("%d ACLs after a denied DeleteAcls, want 7", len(acls))
	}
	if r := deleteACL(ops); r.ErrorCode != 0 || len(r.MatchingACLs) != 7 {
		t.Fatalf("DeleteAcls allowed: error %d, %d matched", r.ErrorCode, len(r.MatchingACLs))
	}
	// ops just deleted its own binding: the next request sees it gone.
	wantCode(t, "CreateAcls after ops lost its ACL", createACL(ops), codeClusterAuth)
}

func TestAuthzInitProducerID(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	alice, bob, ops := rawAs(t, b, aliceIP), rawAs(t, b, bobIP), rawAs(t, b, opsIP)
	initPID := func(rc *rawConn, txnID string) *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = 4
		if txnID != "" {
			req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(txnID), 60000
		}
		return rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
	}
	if resp := initPID(bob, ""); resp.ErrorCode != codeClusterAuth || resp.ProducerID != -1 {
		t.Fatalf("idempotent without WRITE anywhere: error %d, id %d", resp.ErrorCode, resp.ProducerID)
	}
	wantCode(t, "idempotent with WRITE on some topic", initPID(alice, "").ErrorCode, 0)
	wantCode(t, "idempotent with IDEMPOTENT_WRITE", initPID(ops, "").ErrorCode, 0)
	wantCode(t, "transactional id without WRITE", initPID(alice, "bob.txn").ErrorCode, codeTxnAuth)
	wantCode(t, "transactional id, bob", initPID(bob, "alice.txn").ErrorCode, codeTxnAuth)
	if code := initPID(alice, "alice.txn").ErrorCode; code == codeTxnAuth || code == codeClusterAuth {
		t.Fatalf("transactional id with WRITE: error %d", code)
	}
}

func TestAuthzGroups(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	alice, bob, ops, admin := rawAs(t, b, aliceIP), rawAs(t, b, bobIP), rawAs(t, b, opsIP), rawAs(t, b, adminIP)

	// FindCoordinator.
	find := func(rc *rawConn, typ int8, key string) int16 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorType, req.CoordinatorKey = 3, typ, key
		resp := rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
		if resp.ErrorCode != 0 && resp.NodeID != -1 {
			t.Fatalf("a refused FindCoordinator names node %d", resp.NodeID)
		}
		return resp.ErrorCode
	}
	wantCode(t, "FindCoordinator group allowed", find(alice, coordinatorGroup, "alice.g"), 0)
	wantCode(t, "FindCoordinator group denied", find(bob, coordinatorGroup, "alice.g"), codeGroupAuth)
	wantCode(t, "FindCoordinator txn allowed", find(alice, coordinatorTransaction, "alice.txn"), 0)
	wantCode(t, "FindCoordinator txn denied", find(bob, coordinatorTransaction, "alice.txn"), codeTxnAuth)
	batched := kmsg.NewPtrFindCoordinatorRequest()
	batched.Version, batched.CoordinatorKeys = 4, []string{"alice.g", "other.g"}
	if cs := alice.roundTrip(batched).(*kmsg.FindCoordinatorResponse).Coordinators; cs[0].ErrorCode != 0 || cs[1].ErrorCode != codeGroupAuth {
		t.Fatalf("batched FindCoordinator: %+v", cs)
	}

	// Membership: READ on the group.
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 5, "alice.g", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0}}}
	wantCode(t, "JoinGroup denied", bob.roundTrip(join).(*kmsg.JoinGroupResponse).ErrorCode, codeGroupAuth)
	wantCode(t, "JoinGroup allowed", alice.roundTrip(join).(*kmsg.JoinGroupResponse).ErrorCode, kerr.MemberIDRequired.Code)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.Generation, sync.MemberID = 3, "alice.g", 1, "m"
	wantCode(t, "SyncGroup denied", bob.roundTrip(sync).(*kmsg.SyncGroupResponse).ErrorCode, codeGroupAuth)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.Generation, hb.MemberID = 4, "alice.g", 1, "m"
	wantCode(t, "Heartbeat denied", bob.roundTrip(hb).(*kmsg.HeartbeatResponse).ErrorCode, codeGroupAuth)
	if code := alice.roundTrip(hb).(*kmsg.HeartbeatResponse).ErrorCode; code == codeGroupAuth {
		t.Fatal("Heartbeat with READ refused")
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 4, "alice.g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
	if resp := bob.roundTrip(leave).(*kmsg.LeaveGroupResponse); resp.ErrorCode != codeGroupAuth || len(resp.Members) != 0 {
		t.Fatalf("LeaveGroup denied: error %d, members %+v", resp.ErrorCode, resp.Members)
	}

	// OffsetCommit: READ on the group, then READ on each topic.
	commit := func(rc *rawConn, group string, topics ...string) map[string]int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, group, -1
		for _, n := range topics {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = n
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Offset = 1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		out := map[string]int16{}
		for _, rt := range rc.roundTrip(req).(*kmsg.OffsetCommitResponse).Topics {
			out[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		return out
	}
	if got := commit(bob, "alice.g", "alice.t"); got["alice.t"] != codeGroupAuth {
		t.Fatalf("OffsetCommit, group denied: %v", got)
	}
	if got := commit(alice, "alice.g", "alice.t", "other", "alice.ghost"); got["alice.t"] != 0 || got["other"] != codeTopicAuth ||
		got["alice.ghost"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("OffsetCommit as alice: %v", got)
	}
	if got := commit(alice, "alice.g", "other"); got["other"] != codeTopicAuth {
		t.Fatalf("OffsetCommit of only denied topics: %v", got)
	}
	if got := commit(admin, "alice.g", "other"); got["other"] != 0 {
		t.Fatalf("OffsetCommit as admin: %v", got)
	}
	if got := commit(admin, "other.g", "other"); got["other"] != 0 {
		t.Fatalf("OffsetCommit as admin: %v", got)
	}

	// OffsetFetch: DESCRIBE on the group, then DESCRIBE on each topic.
	fetch7 := func(rc *rawConn, group string, topics ...string) *kmsg.OffsetFetchResponse {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = 7, group
		if topics != nil {
			req.Topics = []kmsg.OffsetFetchRequestTopic{}
		}
		for _, n := range topics {
			req.Topics = append(req.Topics, kmsg.OffsetFetchRequestTopic{Topic: n, Partitions: []int32{0}})
		}
		return rc.roundTrip(req).(*kmsg.OffsetFetchResponse)
	}
	if resp := fetch7(bob, "alice.g", "alice.t"); resp.ErrorCode != codeGroupAuth || len(resp.Topics) != 0 {
		t.Fatalf("OffsetFetch v7, group denied: %+v", resp)
	}
	resp := fetch7(alice, "alice.g", "alice.t", "other")
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
		if rt.Topic == "alice.t" && rt.Partitions[0].Offset != 1 {
			t.Fatalf("alice.t committed offset %d, want 1", rt.Partitions[0].Offset)
		}
	}
	if resp.ErrorCode != 0 || codes["alice.t"] != 0 || codes["other"] != codeTopicAuth {
		t.Fatalf("OffsetFetch v7 as alice: error %d, %v", resp.ErrorCode, codes)
	}
	resp = fetch7(alice, "alice.g") // every committed offset
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "alice.t" {
		t.Fatalf("OffsetFetch of every offset shows %+v, want alice.t alone", resp.Topics)
	}
	v1 := kmsg.NewPtrOffsetFetchRequest()
	v1.Version, v1.Group = 1, "alice.g"
	v1.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "alice.t", Partitions: []int32{0}}}
	if r := bob.roundTrip(v1).(*kmsg.OffsetFetchResponse); len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != codeGroupAuth {
		t.Fatalf("OffsetFetch v1, group denied: %+v", r.Topics)
	}
	v8 := kmsg.NewPtrOffsetFetchRequest()
	v8.Version = 8
	v8.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "alice.g"}, {Group: "other.g"},
		{Group: "alice.g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "other", Partitions: []int32{0}}}}}
	gs := alice.roundTrip(v8).(*kmsg.OffsetFetchResponse).Groups
	if len(gs) != 3 || gs[0].ErrorCode != 0 || len(gs[0].Topics) != 1 || gs[0].Topics[0].Topic != "alice.t" ||
		gs[1].ErrorCode != codeGroupAuth || gs[2].ErrorCode != 0 || gs[2].Topics[0].Partitions[0].ErrorCode != codeTopicAuth {
		t.Fatalf("OffsetFetch v8 as alice: %+v", gs)
	}

	// DescribeGroups and ListGroups.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups, dg.IncludeAuthorizedOperations = 5, []string{"alice.g", "other.g"}, true
	groups := alice.roundTrip(dg).(*kmsg.DescribeGroupsResponse).Groups
	if len(groups) != 2 || groups[0].ErrorCode != 0 || groups[0].AuthorizedOperations != 1<<3|1<<6|1<<8 ||
		groups[1].ErrorCode != codeGroupAuth || groups[1].Group != "other.g" || groups[1].State != "" {
		t.Fatalf("DescribeGroups as alice: %+v", groups)
	}
	list := func(rc *rawConn) []string {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 4
		var out []string
		for _, g := range rc.roundTrip(req).(*kmsg.ListGroupsResponse).Groups {
			out = append(out, g.Group)
		}
		sort.Strings(out)
		return out
	}
	if got := list(alice); !slices.Equal(got, []string{"alice.g"}) {
		t.Fatalf("ListGroups as alice: %v", got)
	}
	if got := list(bob); len(got) != 0 {
		t.Fatalf("ListGroups as bob: %v", got)
	}
	if got := list(ops); !slices.Equal(got, []string{"alice.g", "other.g"}) {
		t.Fatalf("ListGroups with DESCRIBE on the cluster: %v", got)
	}

	// OffsetDelete: DELETE on the group, then READ on each topic.
	od := func(rc *rawConn) *kmsg.OffsetDeleteResponse {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = "alice.g"
		for _, n := range []string{"alice.t", "other"} {
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = n
			rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
			req.Topics = append(req.Topics, rt)
		}
		return rc.roundTrip(req).(*kmsg.OffsetDeleteResponse)
	}
	if r := od(bob); r.ErrorCode != codeGroupAuth || len(r.Topics) != 0 {
		t.Fatalf("OffsetDelete denied: %+v", r)
	}
	r := od(alice)
	codes = map[string]int16{}
	for _, rt := range r.Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if r.ErrorCode != 0 || codes["alice.t"] != 0 || codes["other"] != codeTopicAuth {
		t.Fatalf("OffsetDelete as alice: error %d, %v", r.ErrorCode, codes)
	}

	// DeleteGroups.
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"other.g", "alice.g"}
	res := alice.roundTrip(del).(*kmsg.DeleteGroupsResponse).Groups
	if len(res) != 2 || res[0].Group != "other.g" || res[0].ErrorCode != codeGroupAuth || res[1].Group != "alice.g" || res[1].ErrorCode != 0 {
		t.Fatalf("DeleteGroups as alice: %+v", res)
	}
	del.Groups = []string{"other.g"}
	if res := bob.roundTrip(del).(*kmsg.DeleteGroupsResponse).Groups; res[0].ErrorCode != codeGroupAuth {
		t.Fatalf("DeleteGroups as bob: %+v", res)
	}
}

// fakeMirrorAdmin is a control plane that records what reaches it.
type fakeMirrorAdmin struct {
	mu      sync.Mutex
	handled []int16
	mirrors []string
	configs map[string]map[string]string
}

func (f *fakeMirrorAdmin) Handle(req kmsg.Request) (kmsg.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handled = append(f.handled, req.Key())
	switch r := req.(type) {
	case *mirrorapi.ListClusterMirrorsRequest:
		resp := r.ResponseKind().(*mirrorapi.ListClusterMirrorsResponse)
		for _, n := range f.mirrors {
			resp.Mirrors = append(resp.Mirrors, mirrorapi.ListClusterMirrorsResponseMirror{MirrorName: n})
		}
		return resp, nil
	case *mirrorapi.DescribeClusterMirrorsRequest:
		resp := r.ResponseKind().(*mirrorapi.DescribeClusterMirrorsResponse)
		names := r.MirrorNames
		if len(names) == 0 {
			names = f.mirrors
		}
		for _, n := range names {
			m := mirrorapi.NewDescribeClusterMirrorsResponseMirror()
			m.MirrorName = n
			if !slices.Contains(f.mirrors, n) {
				m.ErrorCode = mirrorapi.ErrUnknownClusterMirror
			}
			resp.Mirrors = append(resp.Mirrors, m)
		}
		return resp, nil
	}
	return req.ResponseKind(), nil
}

func (f *fakeMirrorAdmin) MirrorConfigs(name string) (map[string]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.configs[name]
	return c, ok
}

func (f *fakeMirrorAdmin) ValidateMirrorConfig(string, string) error { return nil }
func (f *fakeMirrorAdmin) MirrorConfigIsList(string) bool            { return false }
func (f *fakeMirrorAdmin) SetMirrorConfigs(name string, configs map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configs[name] = configs
	return nil
}

func (f *fakeMirrorAdmin) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.handled)
}

func TestAuthzMirrorRPCs(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	fake := &fakeMirrorAdmin{mirrors: []string{"alice.m", "bob.m"}, configs: map[string]map[string]string{
		"alice.m": {"bootstrap.servers": "src:9092"}, "bob.m": {"bootstrap.servers": "src:9092"}}}
	b.SetMirrorAdmin(fake)
	alice, bob, admin := rawAs(t, b, aliceIP), rawAs(t, b, bobIP), rawAs(t, b, adminIP)

	topics := func(names ...string) []mirrorapi.MirrorTopicsRequestTopic {
		var out []mirrorapi.MirrorTopicsRequestTopic
		for _, n := range names {
			out = append(out, mirrorapi.MirrorTopicsRequestTopic{TopicName: n})
		}
		return out
	}
	// errorOf reads the top-level error of any mirror response that
	// changes a mirror.
	errorOf := func(resp kmsg.Response) (int16, string) {
		var code int16
		var msg *string
		switch r := resp.(type) {
		case *mirrorapi.CreateClusterMirrorResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		case *mirrorapi.DeleteClusterMirrorResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		case *mirrorapi.StartMirrorTopicsResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		case *mirrorapi.StopMirrorTopicsResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		case *mirrorapi.PauseMirrorTopicsResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		case *mirrorapi.ResumeMirrorTopicsResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		case *mirrorapi.RecoverMirrorTopicsResponse:
			code, msg = r.ErrorCode, r.ErrorMessage
		default:
			t.Fatalf("unexpected response %T", resp)
		}
		if msg == nil {
			return code, ""
		}
		return code, *msg
	}
	start := func(mirror string, ts ...string) kmsg.Request {
		req := mirrorapi.NewPtrStartMirrorTopicsRequest()
		req.MirrorName = mirror
		for _, n := range ts {
			req.Topics = append(req.Topics, mirrorapi.StartMirrorTopicsRequestTopic{TopicName: n, NumPartitions: 1})
		}
		return req
	}
	stop := func(mirror string, ts ...string) kmsg.Request {
		req := mirrorapi.NewPtrStopMirrorTopicsRequest()
		req.MirrorName, req.Topics = mirror, topics(ts...)
		return req
	}
	pause := func(mirror string, ts ...string) kmsg.Request {
		req := mirrorapi.NewPtrPauseMirrorTopicsRequest()
		req.MirrorName, req.Topics = mirror, topics(ts...)
		return req
	}
	resume := func(mirror string, ts ...string) kmsg.Request {
		req := mirrorapi.NewPtrResumeMirrorTopicsRequest()
		req.MirrorName, req.Topics = mirror, topics(ts...)
		return req
	}
	recoverT := func(mirror string, ts ...string) kmsg.Request {
		req := mirrorapi.NewPtrRecoverMirrorTopicsRequest()
		req.MirrorName, req.Topics = mirror, topics(ts...)
		return req
	}
	create := func(mirror string) kmsg.Request {
		req := mirrorapi.NewPtrCreateClusterMirrorRequest()
		req.MirrorName = mirror
		return req
	}
	deleteM := func(mirror string) kmsg.Request {
		req := mirrorapi.NewPtrDeleteClusterMirrorRequest()
		req.MirrorName = mirror
		return req
	}
	tests := []struct {
		name    string
		rc      *rawConn
		req     kmsg.Request
		want    int16
		forward bool
	}{
		{"create allowed", alice, create("alice.new"), 0, true},
		{"create denied", bob, create("bob.new"), codeMirrorAuth, false},
		{"create by a cluster admin without a mirror ACL", rawAs(t, b, opsIP), create("ops.new"), codeMirrorAuth, false},
		{"start allowed", alice, start("alice.m", "alice.t"), 0, true},
		{"start denied", bob, start("alice.m", "alice.t"), codeMirrorAuth, false},
		{"start, a topic without ALTER_CONFIGS", alice, start("alice.m", "alice.t", "other"), codeTopicAuth, false},
		{"start by patterns only", alice, start("alice.m"), 0, true},
		{"stop allowed", alice, stop("alice.m", "alice.t"), 0, true},
		{"stop denied", bob, stop("alice.m", "alice.t"), codeMirrorAuth, false},
		{"stop, another mirror", alice, stop("bob.m", "alice.t"), codeMirrorAuth, false},
		{"stop, a topic without ALTER_CONFIGS", alice, stop("alice.m", "desc.only"), codeTopicAuth, false},
		{"pause allowed", alice, pause("alice.m", "alice.t"), 0, true},
		{"pause denied", bob, pause("alice.m", "alice.t"), codeMirrorAuth, false},
		{"resume allowed", alice, resume("alice.m", "alice.t"), 0, true},
		{"resume denied", bob, resume("alice.m", "alice.t"), codeMirrorAuth, false},
		{"recover allowed", alice, recoverT("alice.m", "alice.t"), 0, true},
		{"recover denied", bob, recoverT("alice.m", "alice.t"), codeMirrorAuth, false},
		{"recover, a topic without ALTER_CONFIGS", alice, recoverT("alice.m", "other"), codeTopicAuth, false},
		{"delete allowed", alice, deleteM("alice.m"), 0, true},
		{"delete denied", bob, deleteM("alice.m"), codeMirrorAuth, false},
		{"super user", admin, deleteM("bob.m"), 0, true},
	}
	for _, tc := range tests {
		before := fake.count()
		code, msg := errorOf(tc.rc.roundTrip(tc.req))
		wantCode(t, tc.name, code, tc.want)
		if forwarded := fake.count() > before; forwarded != tc.forward {
			t.Fatalf("%s: reached the control plane %v, want %v", tc.name, forwarded, tc.forward)
		}
		if tc.want == codeTopicAuth && !strings.Contains(msg, "other") && !strings.Contains(msg, "desc.only") {
			t.Fatalf("%s: message %q does not name the topic", tc.name, msg)
		}
	}

	list := func(rc *rawConn) []string {
		resp := rc.roundTrip(mirrorapi.NewPtrListClusterMirrorsRequest()).(*mirrorapi.ListClusterMirrorsResponse)
		var out []string
		for _, m := range resp.Mirrors {
			out = append(out, m.MirrorName)
		}
		return out
	}
	if got := list(alice); !slices.Equal(got, []string{"alice.m"}) {
		t.Fatalf("ListClusterMirrors as alice: %v", got)
	}
	if got := list(bob); len(got) != 0 {
		t.Fatalf("ListClusterMirrors as bob: %v", got)
	}
	if got := list(admin); !slices.Equal(got, []string{"alice.m", "bob.m"}) {
		t.Fatalf("ListClusterMirrors as admin: %v", got)
	}

	describe := func(rc *rawConn, names ...string) []mirrorapi.DescribeClusterMirrorsResponseMirror {
		req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
		req.MirrorNames, req.IncludeAuthorizedOperations = names, true
		return rc.roundTrip(req).(*mirrorapi.DescribeClusterMirrorsResponse).Mirrors
	}
	const allMirrorOps = 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
	if ms := describe(alice); len(ms) != 1 || ms[0].MirrorName != "alice.m" || ms[0].AuthorizedOperations != allMirrorOps {
		t.Fatalf("DescribeClusterMirrors of all as alice: %+v", ms)
	}
	ms := describe(alice, "alice.m", "bob.m", "alice.gone")
	if len(ms) != 3 || ms[0].ErrorCode != 0 || ms[1].ErrorCode != codeMirrorAuth || ms[1].MirrorName != "bob.m" ||
		ms[2].ErrorCode != mirrorapi.ErrUnknownClusterMirror {
		t.Fatalf("DescribeClusterMirrors of named mirrors as alice: %+v", ms)
	}

	// The CLUSTER_MIRROR config resource.
	inc := func(rc *rawConn, mirror string) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.Version = 1
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = configResourceClusterMirror, mirror
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "mirror.topics.include", kmsg.StringPtr(".*")
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		return rc.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	}
	wantCode(t, "alter mirror configs allowed", inc(alice, "alice.m"), 0)
	wantCode(t, "alter mirror configs denied", inc(bob, "alice.m"), codeMirrorAuth)
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dreq.Version = 4
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = configResourceClusterMirror, "alice.m"
	dreq.Resources = append(dreq.Resources, rr)
	wantCode(t, "describe mirror configs allowed", alice.roundTrip(dreq).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode, 0)
	wantCode(t, "describe mirror configs denied", bob.roundTrip(dreq).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode, codeMirrorAuth)
}

// TestAuthzClients drives the authorizer with franz-go's own clients, as
// an application would: alice produces and consumes in a group, bob is
// refused, and an admin grants bob access.
func TestAuthzClients(t *testing.T) {
	t.Parallel()
	b := authzFixture(t, func(c *Config) { c.GroupInitialRebalanceDelay = 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	as := func(ip string, opts ...kgo.Opt) *kgo.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		return newTestClient(t, b, append([]kgo.Opt{kgo.Dialer(d.DialContext)}, opts...)...)
	}

	// alice: an idempotent producer (WRITE on her topics stands for
	// IDEMPOTENT_WRITE) and a group consumer.
	p := as(aliceIP, kgo.DefaultProduceTopic("alice.t"))
	for i := range 10 {
		if err := p.ProduceSync(ctx, kgo.StringRecord(string(rune('a'+i)))).FirstErr(); err != nil {
			t.Fatalf("alice produces: %v", err)
		}
	}
	c := as(aliceIP, kgo.ConsumerGroup("alice.g"), kgo.ConsumeTopics("alice.t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 10 {
		fs := c.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("alice consumes: %v", err)
		}
		got += fs.NumRecords()
	}
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice commits: %v", err)
	}

	// bob is refused.
	bp := as(bobIP, kgo.DefaultProduceTopic("alice.t"), kgo.DisableIdempotentWrite(),
		kgo.RecordRetries(1), kgo.UnknownTopicRetries(1))
	if err := bp.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob produces: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	badm := kadm.NewClient(as(bobIP))
	described, err := badm.DescribeACLs(ctx, kadm.NewACLs().Topics("alice.t").Allow().AllowHosts().Operations())
	if err != nil || len(described) != 1 || !errors.Is(described[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob describes ACLs: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, described)
	}
	if tds, err := badm.ListTopics(ctx); err != nil || len(tds) != 0 {
		t.Fatalf("bob lists topics: %v %v, want none", tds.Names(), err)
	}
	if _, err := badm.FetchOffsets(ctx, "alice.g"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("bob fetches alice.g offsets: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}

	// The admin grants bob READ on alice.t; it applies at once.
	aadm := kadm.NewClient(as(adminIP))
	grant := kadm.NewACLs().Allow("User:bob").Topics("alice.t").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := aadm.CreateACLs(ctx, grant); err != nil || res[0].Err != nil {
		t.Fatalf("admin grants: %v %+v", err, res)
	}
	bc := as(bobIP, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"alice.t": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
	got = 0
	for got < 10 {
		fs := bc.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("bob consumes after the grant: %v", err)
		}
		got += fs.NumRecords()
	}
}

func TestAuthzTransactions(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	alice, bob, admin := rawAs(t, b, aliceIP), rawAs(t, b, bobIP), rawAs(t, b, adminIP)
	initTxn := func(rc *rawConn, id string) (int64, int16) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, kmsg.StringPtr(id), 60000
		resp := rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
		return resp.ProducerID, resp.ProducerEpoch
	}
	pid, epoch := initTxn(alice, "alice.txn")
	initTxn(admin, "bob.txn")
	notAuth := func(what string, code int16) {
		t.Helper()
		switch code {
		case codeTopicAuth, codeGroupAuth, codeClusterAuth, codeTxnAuth:
			t.Fatalf("%s: authorization error %d", what, code)
		}
	}

	addParts := func(rc *rawConn, id string, topics ...string) map[string]int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch = 3, id, pid, epoch
		for _, n := range topics {
			req.Topics = append(req.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: n, Partitions: []int32{0}})
		}
		out := map[string]int16{}
		for _, rt := range rc.roundTrip(req).(*kmsg.AddPartitionsToTxnResponse).Topics {
			out[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		return out
	}
	if got := addParts(bob, "alice.txn", "alice.t"); got["alice.t"] != codeTxnAuth {
		t.Fatalf("AddPartitionsToTxn without WRITE on the id: %v", got)
	}
	if got := addParts(alice, "alice.txn", "alice.t", "other", "alice.ghost"); got["alice.t"] != kerr.OperationNotAttempted.Code ||
		got["other"] != codeTopicAuth || got["alice.ghost"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("AddPartitionsToTxn with a topic without WRITE: %v", got)
	}
	notAuth("AddPartitionsToTxn allowed", addParts(alice, "alice.txn", "alice.t")["alice.t"])

	addOffsets := func(rc *rawConn, group string) int16 {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = 3, "alice.txn", pid, epoch, group
		return rc.roundTrip(req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
	}
	wantCode(t, "AddOffsetsToTxn without WRITE on the id", addOffsets(bob, "alice.g"), codeTxnAuth)
	wantCode(t, "AddOffsetsToTxn without READ on the group", addOffsets(alice, "other.g"), codeGroupAuth)
	notAuth("AddOffsetsToTxn allowed", addOffsets(alice, "alice.g"))

	commit := func(rc *rawConn, group string, topics ...string) map[string]int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = 3, "alice.txn", group, pid, epoch
		req.Generation = -1
		for _, n := range topics {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = n
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Offset = 1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		out := map[string]int16{}
		for _, rt := range rc.roundTrip(req).(*kmsg.TxnOffsetCommitResponse).Topics {
			out[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		return out
	}
	if got := commit(bob, "alice.g", "alice.t"); got["alice.t"] != codeTxnAuth {
		t.Fatalf("TxnOffsetCommit without WRITE on the id: %v", got)
	}
	if got := commit(alice, "other.g", "alice.t"); got["alice.t"] != codeGroupAuth {
		t.Fatalf("TxnOffsetCommit without READ on the group: %v", got)
	}
	got := commit(alice, "alice.g", "alice.t", "other")
	if got["other"] != codeTopicAuth {
		t.Fatalf("TxnOffsetCommit with a topic without READ: %v", got)
	}
	notAuth("TxnOffsetCommit allowed topic", got["alice.t"])

	endTxn := func(rc *rawConn) int16 {
		req := kmsg.NewPtrEndTxnRequest()
		req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = 3, "alice.txn", pid, epoch, false
		return rc.roundTrip(req).(*kmsg.EndTxnResponse).ErrorCode
	}
	wantCode(t, "EndTxn without WRITE on the id", endTxn(bob), codeTxnAuth)
	notAuth("EndTxn allowed", endTxn(alice))

	producers := func(rc *rawConn, topics ...string) map[string]int16 {
		req := kmsg.NewPtrDescribeProducersRequest()
		for _, n := range topics {
			req.Topics = append(req.Topics, kmsg.DescribeProducersRequestTopic{Topic: n, Partitions: []int32{0}})
		}
		out := map[string]int16{}
		for _, rt := range rc.roundTrip(req).(*kmsg.DescribeProducersResponse).Topics {
			out[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		return out
	}
	if got := producers(alice, "alice.t", "other", "ghost"); got["alice.t"] != 0 || got["other"] != codeTopicAuth || got["ghost"] != codeTopicAuth {
		t.Fatalf("DescribeProducers as alice: %v", got)
	}

	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"alice.txn", "bob.txn"}
	states := alice.roundTrip(dt).(*kmsg.DescribeTransactionsResponse).TransactionStates
	if len(states) != 2 || states[1].ErrorCode != codeTxnAuth || states[1].State != "" {
		t.Fatalf("DescribeTransactions as alice: %+v", states)
	}
	notAuth("DescribeTransactions allowed", states[0].ErrorCode)

	lt := kmsg.NewPtrListTransactionsRequest()
	var ids []string
	for _, ts := range alice.roundTrip(lt).(*kmsg.ListTransactionsResponse).TransactionStates {
		ids = append(ids, ts.TransactionalID)
	}
	if !slices.Equal(ids, []string{"alice.txn"}) {
		t.Fatalf("ListTransactions as alice: %v", ids)
	}
	ids = nil
	for _, ts := range admin.roundTrip(lt).(*kmsg.ListTransactionsResponse).TransactionStates {
		ids = append(ids, ts.TransactionalID)
	}
	if sort.Strings(ids); !slices.Equal(ids, []string{"alice.txn", "bob.txn"}) {
		t.Fatalf("ListTransactions as admin: %v", ids)
	}
}
