package broker

import (
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/partition"
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
	at, other := b.partitions.Topic("alice.t"), b.partitions.Topic("other")
	alice, bob := rawAs(t, b, aliceIP), rawAs(t, b, bobIP)
	txnBatch := func() []byte {
		return buildBatch(1, 0, 0, attrTxn, time.Now().UnixMilli(), valueRecords(1, 10)...)
	}
	str := func(s string) *string { return &s }
	tests := []struct {
		name string
		rc   *rawConn
		v    int16
		tp   *partition.Topic
		recs []byte
		txn  *string
		want int16
	}{
		{"allowed", alice, 9, at, plainBatch(1, 10), nil, 0},
		{"no ACL for the principal", bob, 9, at, plainBatch(1, 10), nil, codeTopicAuth},
		{"no ACL for the topic", alice, 9, other, plainBatch(1, 10), nil, codeTopicAuth},
		{"DESCRIBE is not WRITE", alice, 9, b.partitions.Topic("desc.only"), plainBatch(1, 10), nil, codeTopicAuth},
		{"missing topic without ACL", bob, 9, partition.NewTopic("nope", [16]byte{}), plainBatch(1, 10), nil, codeTopicAuth},
		{"missing topic with ACL", alice, 9, partition.NewTopic("alice.nope", [16]byte{}), plainBatch(1, 10), nil, kerr.UnknownTopicOrPartition.Code},
		{"by topic ID, denied", bob, 13, at, plainBatch(1, 10), nil, codeTopicAuth},
		{"by topic ID, allowed", alice, 13, at, plainBatch(1, 10), nil, 0},
		{"unknown topic ID", bob, 13, partition.NewTopic("x", [16]byte{9}), plainBatch(1, 10), nil, kerr.UnknownTopicID.Code},
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

func fetchOne(t *testing.T, rc *rawConn, v int16, tp *partition.Topic, replicaID int32) int16 {
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
	at, other := b.partitions.Topic("alice.t"), b.partitions.Topic("other")
	alice, bob, ops := rawAs(t, b, aliceIP), rawAs(t, b, bobIP), rawAs(t, b, opsIP)
	admin := rawAs(t, b, adminIP)
	for _, tp := range []*partition.Topic{at, other} {
		wantCode(t, "seeding "+tp.Name(), onlyPartition(t, admin.roundTrip(produceReq(9, -1, tp, 0, plainBatch(2, 10))).(*kmsg.ProduceResponse)).ErrorCode, 0)
	}
	tests := []struct {
		name    string
		rc      *rawConn
		v       int16
		tp      *partition.Topic
		replica int32
		want    int16
	}{
		{"consumer allowed", alice, 12, at, -1, 0},
		{"consumer allowed by ID", alice, 13, at, -1, 0},
		{"consumer denied", bob, 12, at, -1, codeTopicAuth},
		{"consumer denied by ID", bob, 13, at, -1, codeTopicAuth},
		{"consumer, other topic", alice, 12, other, -1, codeTopicAuth},
		{"consumer, DESCRIBE is not READ", alice, 12, b.partitions.Topic("desc.only"), -1, codeTopicAuth},
		{"consumer, missing topic without ACL", bob, 12, partition.NewTopic("ghost", [16]byte{}), -1, codeTopicAuth},
		{"consumer, missing topic with ACL", alice, 12, partition.NewTopic("alice.ghost", [16]byte{}), -1, kerr.UnknownTopicOrPartition.Code},
		{"consumer, unknown topic ID", bob, 13, partition.NewTopic("x", [16]byte{7}), -1, kerr.UnknownTopicID.Code},
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
	at := b.partitions.Topic("alice.t")

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
	if b.partitions.Topic("alice.auto") == nil {
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
	rt.TopicID = at.ID()
	req.Topics = append(req.Topics, rt)
	resp = bob.roundTrip(req).(*kmsg.MetadataResponse)
	if mt := resp.Topics[0]; mt.ErrorCode != codeTopicAuth || mt.Topic != nil || mt.TopicID != at.ID() {
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
	atID, otherID, descID := b.partitions.Topic("alice.t").ID(), b.partitions.Topic("other").ID(), b.partitions.Topic("desc.only").ID()
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
	if b.partitions.Topic("alice.del") != nil || b.partitions.Topic("alice.t") == nil || b.partitions.Topic("other") == nil {
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

// SCRAM credentials need DESCRIBE (to list) and ALTER (to change) on the
// cluster, as in Kafka: before, any client could list every user and set
// any user's password.
func TestSCRAMCredentialsAuthz(t *testing.T) {
	t.Parallel()
	b := authzFixture(t)
	alice, ops := rawAs(t, b, aliceIP), rawAs(t, b, opsIP)
	alter := func(rc *rawConn, user string) int16 {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations = user, 1, 4096
		u.Salt, u.SaltedPassword = []byte("salt"), []byte("salted-password-bytes")
		req.Upsertions = append(req.Upsertions, u)
		resp := rc.roundTrip(req).(*kmsg.AlterUserSCRAMCredentialsResponse)
		return resp.Results[0].ErrorCode
	}
	describe := func(rc *rawConn) (int16, int) {
		resp := rc.roundTrip(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()).(*kmsg.DescribeUserSCRAMCredentialsResponse)
		return resp.ErrorCode, len(resp.Results)
	}
	wantCode(t, "alter denied", alter(alice, "mallory"), codeClusterAuth)
	if code, n := describe(alice); code != codeClusterAuth || n != 0 {
		t.Fatalf("describe denied: code %d with %d users listed", code, n)
	}
	wantCode(t, "alter allowed", alter(ops, "carol"), 0)
	if code, n := describe(ops); code != 0 || n != 1 {
		t.Fatalf("describe allowed: code %d with %d users, want carol alone (mallory was refused)", code, n)
	}
}
