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

	"github.com/kmirror/kmirror/internal/settings"
	"github.com/kmirror/kmirror/mirrorapi"
)

// Per-RPC authorization tests, continued (the fixture is in
// authz_rpc_test.go): groups, mirror RPCs, kgo clients, transactions.

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

func (f *fakeMirrorAdmin) ValidateMirrorConfig(string, string) error   { return nil }
func (f *fakeMirrorAdmin) MirrorConfigDef(string) (settings.Def, bool) { return settings.Def{}, false }
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
