package group

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
)

// testTopics is a broker's topic set that tests change.
type testTopics struct {
	mu     sync.Mutex
	topics []TopicMeta
}

func (tt *testTopics) all() []TopicMeta {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return slices.Clone(tt.topics)
}

// set creates topic name (id b) with n partitions, or changes its count.
func (tt *testTopics) set(name string, b byte, n int32) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	for i := range tt.topics {
		if tt.topics[i].Name == name {
			tt.topics[i].Partitions = n
			return
		}
	}
	tt.topics = append(tt.topics, TopicMeta{Name: name, ID: topicID(b), Partitions: n, Internal: name[0] == '_'})
}

// newConsumerCoordinator is a coordinator with the consumer protocol on
// and topic "orders" (4 partitions).
func newConsumerCoordinator(t *testing.T, cfg Config) (*Coordinator, *testTopics) {
	tt := &testTopics{}
	tt.set("orders", 1, 4)
	cfg.ConsumerProtocol, cfg.Topics = true, tt.all
	return newCoordinator(t, nil, cfg), tt
}

// cgMember is a consumer-protocol member as a client runs it: it
// remembers its epoch and owns what it was last assigned.
type cgMember struct {
	t        *testing.T
	c        *Coordinator
	group    string
	id       string
	instance *string
	topics   []string
	regex    *string
	// rebalanceMs is the rebalance timeout it asks for (default 60 s).
	rebalanceMs int32
	epoch       int32
	owned       Assignment
}

func newCGMember(t *testing.T, c *Coordinator, group, id string, topics ...string) *cgMember {
	return &cgMember{t: t, c: c, group: group, id: id, topics: topics}
}

func (m *cgMember) request(epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = m.group, m.id, epoch, m.instance
	req.RebalanceTimeoutMillis = cmpOr(m.rebalanceMs, 60000)
	req.SubscribedTopicNames, req.SubscribedTopicRegex = m.topics, m.regex
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, id := range sortedTopicIDs(m.owned) {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = id, m.owned[id]
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// send sends req and, on success, takes the answer as a client does: the
// new epoch, and the assignment as what it owns (it revokes at once).
func (m *cgMember) send(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	resp := m.c.ConsumerGroupHeartbeat(req, "client-"+m.id, "/127.0.0.1")
	if resp.ErrorCode == 0 {
		m.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			m.owned = Assignment{}
			for _, at := range resp.Assignment.Topics {
				m.owned[at.TopicID] = at.Partitions
			}
		}
	}
	return resp
}

func (m *cgMember) join() *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	m.owned = nil
	resp := m.send(m.request(joinEpoch))
	wantCode(m.t, m.id+" joining", resp.ErrorCode, nil)
	return resp
}

func (m *cgMember) heartbeat() *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	resp := m.send(m.request(m.epoch))
	wantCode(m.t, m.id+" heartbeating", resp.ErrorCode, nil)
	return resp
}

func (m *cgMember) ownedOf(topic TopicID) []int32 { return m.owned[topic] }

// describeCG describes one consumer group.
func describeCG(t *testing.T, c *Coordinator, name string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{name}
	return c.ConsumerGroupDescribe(req).Groups[0]
}

// checkNoneShared fails if two members own a partition at once.
func checkNoneShared(t *testing.T, members ...*cgMember) {
	t.Helper()
	seen := map[topicPartitionID]string{}
	for _, m := range members {
		for tid, ps := range m.owned {
			for _, p := range ps {
				if other, ok := seen[topicPartitionID{tid, p}]; ok {
					t.Fatalf("partition %d owned by %s and %s at once", p, other, m.id)
				}
				seen[topicPartitionID{tid, p}] = m.id
			}
		}
	}
}

func TestConsumerGroupFirstMemberGetsEveryPartition(t *testing.T) {
	t.Parallel()
	c, _ := newConsumerCoordinator(t, Config{})
	m := newCGMember(t, c, "g", "m1", "orders")
	resp := m.join()
	if resp.MemberEpoch != 1 || resp.HeartbeatIntervalMillis != 5000 || resp.MemberID == nil || *resp.MemberID != "m1" {
		t.Fatalf("join: epoch %d, interval %d, id %v; want epoch 1, 5000 ms, m1", resp.MemberEpoch,
			resp.HeartbeatIntervalMillis, resp.MemberID)
	}
	if got := m.ownedOf(topicID(1)); fmt.Sprint(got) != "[0 1 2 3]" {
		t.Fatalf("assigned %v, want [0 1 2 3]", got)
	}
	g := describeCG(t, c, "g")
	if g.ErrorCode != 0 || g.State != "Stable" || g.Epoch != 1 || g.AssignmentEpoch != 1 || g.AssignorName != "uniform" ||
		len(g.Members) != 1 || g.Members[0].ClientID != "client-m1" || g.Members[0].MemberType != 1 {
		t.Fatalf("described %+v", g)
	}
	if tp := g.Members[0].Assignment.TopicPartitions; len(tp) != 1 || tp[0].Topic != "orders" || len(tp[0].Partitions) != 4 {
		t.Fatalf("described assignment %+v", tp)
	}
}

// A second member gets partitions only as the first revokes them: no
// partition is owned twice at any step, and each ends with two.
func TestConsumerGroupMovesPartitionsOnlyOnceRevoked(t *testing.T) {
	t.Parallel()
	c, _ := newConsumerCoordinator(t, Config{})
	m1, m2 := newCGMember(t, c, "g", "m1", "orders"), newCGMember(t, c, "g", "m2", "orders")
	m1.join()
	if resp := m2.join(); resp.MemberEpoch != 2 || len(m2.ownedOf(topicID(1))) != 0 {
		t.Fatalf("m2 joined at epoch %d owning %v; want epoch 2 owning nothing (m1 holds all)", resp.MemberEpoch, m2.owned)
	}
	checkNoneShared(t, m1, m2)
	if g := describeCG(t, c, "g"); g.State != "Reconciling" {
		t.Fatalf("state %s, want Reconciling", g.State)
	}
	// m1 hears it must give up two partitions; its epoch stays until it has.
	if resp := m1.heartbeat(); resp.MemberEpoch != 1 || len(m1.ownedOf(topicID(1))) != 2 {
		t.Fatalf("m1 at epoch %d owning %v; want epoch 1 owning two", resp.MemberEpoch, m1.owned)
	}
	checkNoneShared(t, m1, m2)
	// Its next heartbeat says it let them go: it moves to epoch 2.
	if resp := m1.heartbeat(); resp.MemberEpoch != 2 {
		t.Fatalf("m1 at epoch %d after revoking, want 2", resp.MemberEpoch)
	}
	m2.heartbeat()
	checkNoneShared(t, m1, m2)
	if len(m1.ownedOf(topicID(1))) != 2 || len(m2.ownedOf(topicID(1))) != 2 {
		t.Fatalf("m1 owns %v, m2 %v; want two each", m1.owned, m2.owned)
	}
	if g := describeCG(t, c, "g"); g.State != "Stable" || g.Epoch != 2 {
		t.Fatalf("state %s at epoch %d, want Stable at 2", g.State, g.Epoch)
	}
	// m2 leaves: m1 gets everything back at the next epoch.
	leave := m2.request(leaveEpoch)
	if resp := m2.send(leave); resp.ErrorCode != 0 || resp.MemberEpoch != leaveEpoch {
		t.Fatalf("leave: %s, epoch %d", errName(resp.ErrorCode), resp.MemberEpoch)
	}
	if resp := m1.heartbeat(); resp.MemberEpoch != 3 || len(m1.ownedOf(topicID(1))) != 4 {
		t.Fatalf("after the leave m1 is at epoch %d owning %v, want 3 owning all four", resp.MemberEpoch, m1.owned)
	}
}

func TestConsumerGroupFencesWrongEpochs(t *testing.T) {
	t.Parallel()
	c, _ := newConsumerCoordinator(t, Config{})
	m := newCGMember(t, c, "g", "m1", "orders")
	m.join()
	wantCode(t, "an epoch ahead", m.c.ConsumerGroupHeartbeat(m.request(5), "", "").ErrorCode, kerr.FencedMemberEpoch)
	stranger := newCGMember(t, c, "g", "nobody", "orders")
	wantCode(t, "an unknown member", stranger.send(stranger.request(1)).ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "an unknown group", c.ConsumerGroupHeartbeat(newCGMember(t, c, "other", "x", "orders").request(3), "", "").ErrorCode,
		kerr.UnknownMemberID)
	// A fenced member rejoins under its id with epoch 0, and gets its
	// partitions back with no new group epoch.
	if resp := m.join(); resp.MemberEpoch != 1 || len(m.ownedOf(topicID(1))) != 4 {
		t.Fatalf("rejoin: epoch %d owning %v", resp.MemberEpoch, m.owned)
	}
}

// A heartbeat at the previous epoch from a member that missed the answer
// moving it on is answered again, not fenced.
func TestConsumerGroupForgivesALostResponse(t *testing.T) {
	t.Parallel()
	c, tt := newConsumerCoordinator(t, Config{})
	m := newCGMember(t, c, "g", "m1", "orders")
	m.join()
	tt.set("orders", 1, 6)
	req := m.request(m.epoch)
	if resp := c.ConsumerGroupHeartbeat(req, "", ""); resp.ErrorCode != 0 || resp.MemberEpoch != 2 {
		t.Fatalf("heartbeat after partitions were added: %s at epoch %d", errName(resp.ErrorCode), resp.MemberEpoch)
	}
	// The answer is lost: the member sends epoch 1 again.
	resp := m.send(m.request(1))
	wantCode(t, "the retried heartbeat", resp.ErrorCode, nil)
	if resp.MemberEpoch != 2 || len(m.ownedOf(topicID(1))) != 6 {
		t.Fatalf("retried heartbeat: epoch %d owning %v, want 2 owning six", resp.MemberEpoch, m.owned)
	}
}

func TestConsumerGroupSessionExpiryFreesPartitions(t *testing.T) {
	t.Parallel()
	c, _ := newConsumerCoordinator(t, Config{ConsumerSessionTimeout: 100 * time.Millisecond})
	m1, m2 := newCGMember(t, c, "g", "m1", "orders"), newCGMember(t, c, "g", "m2", "orders")
	m1.join()
	m2.join()
	m1.heartbeat() // revokes two
	// m1 goes silent; m2 keeps heartbeating and ends with all four.
	testutil.CheckFor(t, waitFor, func() error {
		m2.heartbeat()
		if n := len(m2.ownedOf(topicID(1))); n != 4 {
			return fmt.Errorf("m2 owns %d partitions", n)
		}
		return nil
	})
	wantCode(t, "the expired member", m1.send(m1.request(m1.epoch)).ErrorCode, kerr.UnknownMemberID)
}

// A member that does not revoke within its rebalance timeout is fenced,
// so that the partitions it holds reach their new owner.
func TestConsumerGroupFencesAMemberThatDoesNotRevoke(t *testing.T) {
	t.Parallel()
	c, _ := newConsumerCoordinator(t, Config{})
	m1, m2 := newCGMember(t, c, "g", "m1", "orders"), newCGMember(t, c, "g", "m2", "orders")
	m1.rebalanceMs = 100
	m1.join()
	m2.join()
	// m1 hears it must revoke, and keeps owning all four.
	req := m1.request(m1.epoch)
	if resp := c.ConsumerGroupHeartbeat(req, "", ""); resp.ErrorCode != 0 || resp.Assignment == nil {
		t.Fatalf("m1's heartbeat: %s", errName(resp.ErrorCode))
	}
	testutil.CheckFor(t, waitFor, func() error {
		if resp := c.ConsumerGroupHeartbeat(m1.request(m1.epoch), "", ""); resp.ErrorCode != kerr.UnknownMemberID.Code {
			return fmt.Errorf("m1 still a member (%s)", errName(resp.ErrorCode))
		}
		return nil
	})
	m2.heartbeat()
	if n := len(m2.ownedOf(topicID(1))); n != 4 {
		t.Fatalf("m2 owns %d partitions after m1 was fenced, want 4", n)
	}
}

// A static member that leaves with epoch -2 keeps its partitions for its
// instance: the instance's next member takes them over at the same epoch,
// and no one else can use the instance id while it is held.
func TestConsumerGroupStaticMemberComesBackWithoutARebalance(t *testing.T) {
	t.Parallel()
	c, _ := newConsumerCoordinator(t, Config{})
	inst := "pod-0"
	m1, m2 := newCGMember(t, c, "g", "m1", "orders"), newCGMember(t, c, "g", "m2", "orders")
	m1.instance = &inst
	m1.join()
	m2.join()
	m1.heartbeat()
	m1.heartbeat()
	m2.heartbeat()
	before := describeCG(t, c, "g")
	owned := fmt.Sprint(m1.owned)

	impostor := newCGMember(t, c, "g", "m9", "orders")
	impostor.instance = &inst
	wantCode(t, "a second member of the instance", impostor.send(impostor.request(joinEpoch)).ErrorCode,
		kerr.UnreleasedInstanceID)

	if resp := m1.send(m1.request(staticLeaveEpoch)); resp.ErrorCode != 0 || resp.MemberEpoch != staticLeaveEpoch {
		t.Fatalf("static leave: %s, epoch %d", errName(resp.ErrorCode), resp.MemberEpoch)
	}
	back := newCGMember(t, c, "g", "m1-restarted", "orders")
	back.instance = &inst
	resp := back.join()
	after := describeCG(t, c, "g")
	if resp.MemberEpoch != before.Epoch || fmt.Sprint(back.owned) != owned || after.Epoch != before.Epoch {
		t.Fatalf("the instance came back at epoch %d owning %v (group epoch %d); want epoch %d owning %s, no new epoch",
			resp.MemberEpoch, back.owned, after.Epoch, before.Epoch, owned)
	}
	if len(after.Members) != 2 || !slices.ContainsFunc(after.Members, func(m kmsg.ConsumerGroupDescribeResponseGroupMember) bool {
		return m.MemberID == "m1-restarted"
	}) {
		t.Fatalf("members after the comeback: %+v", after.Members)
	}
}

// A regex subscription takes topics as they are created, never internal
// ones; a topic's new partitions reach the group too.
func TestConsumerGroupFollowsTopicsAndPartitions(t *testing.T) {
	t.Parallel()
	c, tt := newConsumerCoordinator(t, Config{})
	re := "ord.*"
	m := newCGMember(t, c, "g", "m1")
	m.regex = &re
	m.join()
	if len(m.owned) != 1 || len(m.ownedOf(topicID(1))) != 4 {
		t.Fatalf("owned %v, want orders' four partitions", m.owned)
	}
	tt.set("ordinals", 2, 2)
	tt.set("__ord_internal", 3, 1)
	tt.set("orders", 1, 5)
	m.heartbeat()
	if len(m.owned) != 2 || len(m.ownedOf(topicID(2))) != 2 || len(m.ownedOf(topicID(1))) != 5 {
		t.Fatalf("owned %v, want orders' five partitions and ordinals' two", m.owned)
	}
	bad := "ord("
	m.regex = &bad
	wantCode(t, "an invalid regex", m.send(m.request(m.epoch)).ErrorCode, kerr.InvalidRegularExpression)
}

func TestConsumerGroupHeartbeatValidation(t *testing.T) {
	t.Parallel()
	c, _ := newConsumerCoordinator(t, Config{})
	empty, unknown := "", "sticky"
	for _, tc := range []struct {
		name string
		edit func(*kmsg.ConsumerGroupHeartbeatRequest)
		want *kerr.Error
	}{
		{"no group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }, kerr.InvalidRequest},
		{"no member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest},
		{"empty instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = &empty }, kerr.InvalidRequest},
		{"epoch -3", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest},
		{"no rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest},
		{"no subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, kerr.InvalidRequest},
		{"owned partitions on a join", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topicID(1), Partitions: []int32{0}}}
		}, kerr.InvalidRequest},
		{"static leave without instance", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 }, kerr.InvalidRequest},
		{"unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = &unknown }, kerr.UnsupportedAssignor},
	} {
		req := newCGMember(t, c, "g", "m1", "orders").request(joinEpoch)
		tc.edit(req)
		wantCode(t, tc.name, c.ConsumerGroupHeartbeat(req, "", "").ErrorCode, tc.want)
	}
	if _, _, n := stateOf(c, "g"); n != 0 {
		t.Fatalf("a refused heartbeat left %d classic members", n)
	}
	off, _ := newConsumerCoordinator(t, Config{})
	off.cfg.ConsumerProtocol = false
	wantCode(t, "the protocol off", off.ConsumerGroupHeartbeat(newCGMember(t, off, "g", "m1", "orders").request(0), "", "").ErrorCode,
		kerr.UnsupportedVersion)
}

// The range assignor is used when the members ask for it.
func TestConsumerGroupUsesTheAssignorMembersAskFor(t *testing.T) {
	t.Parallel()
	c, _ := newConsumerCoordinator(t, Config{})
	rng := "range"
	req := newCGMember(t, c, "g", "m1", "orders").request(joinEpoch)
	req.ServerAssignor = &rng
	wantCode(t, "join", c.ConsumerGroupHeartbeat(req, "", "").ErrorCode, nil)
	if g := describeCG(t, c, "g"); g.AssignorName != "range" {
		t.Fatalf("assignor %s, want range", g.AssignorName)
	}
}

// A group is classic or consumer: the other protocol cannot join while it
// has members; an empty group changes type with its first member.
func TestConsumerGroupAndClassicMembersDoNotMix(t *testing.T) {
	t.Parallel()
	c, _ := newConsumerCoordinator(t, Config{})
	m := newCGMember(t, c, "g", "m1", "orders")
	m.join()
	classic := newClient(t, c, "g", "classic")
	wantCode(t, "a classic join into a consumer group", c.JoinGroup(classic.joinRequest(), "classic", "/10.0.0.1").ErrorCode,
		kerr.InconsistentGroupProtocol)
	m.send(m.request(leaveEpoch))
	form(t, classic)
	other := newCGMember(t, c, "g", "m2", "orders")
	wantCode(t, "a consumer join into a classic group", other.send(other.request(joinEpoch)).ErrorCode, kerr.GroupIDNotFound)
	if g := describeCG(t, c, "g"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupDescribe of a classic group: %s", errName(g.ErrorCode))
	}
}

// Members commit at their epoch; a commit at an older one is
// STALE_MEMBER_EPOCH, and a memberless commit waits for the group to be
// empty (the mirror's offset sync is one).
func TestConsumerGroupCommitsAtTheMemberEpoch(t *testing.T) {
	t.Parallel()
	c, _ := newConsumerCoordinator(t, Config{PartitionExists: func(string, int32) bool { return true }})
	m := newCGMember(t, c, "g", "m1", "orders")
	m.join()
	commitAt := func(member string, epoch, partition int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group, req.MemberID, req.Generation = "g", member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "orders"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = partition, 7
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.OffsetCommit(req).Topics[0].Partitions[0].ErrorCode
	}
	commit := func(member string, epoch int32) int16 { return commitAt(member, epoch, 0) }
	wantCode(t, "a member's commit", commit("m1", 1), nil)
	wantCode(t, "a commit at an epoch before the partition was assigned", commit("m1", 0), kerr.StaleMemberEpoch)
	wantCode(t, "a commit at an epoch ahead", commit("m1", 2), kerr.StaleMemberEpoch)
	wantCode(t, "a commit of a stranger", commit("x", 1), kerr.UnknownMemberID)
	wantCode(t, "a memberless commit into an active group", commit("", -1), kerr.UnknownMemberID)

	// KIP-1251: once m1 gave two partitions to m2 and moved to epoch 2,
	// its commit at epoch 1 (sent before it heard of epoch 2) still
	// counts for the partitions it kept, not for those it gave away.
	m2 := newCGMember(t, c, "g", "m2", "orders")
	m2.join()
	m.heartbeat()
	if m.heartbeat(); m.epoch != 2 {
		t.Fatalf("m1 at epoch %d, want 2", m.epoch)
	}
	kept := m.ownedOf(topicID(1))
	gone := slices.DeleteFunc([]int32{0, 1, 2, 3}, func(p int32) bool { return slices.Contains(kept, p) })
	wantCode(t, "an epoch-1 commit of a partition kept since epoch 1", commitAt("m1", 1, kept[0]), nil)
	wantCode(t, "an epoch-1 commit of a partition given away", commitAt("m1", 1, gone[0]), kerr.StaleMemberEpoch)

	m.send(m.request(leaveEpoch))
	m2.send(m2.request(leaveEpoch))
	wantCode(t, "a memberless commit into the empty group", commit("", -1), nil)
}

func TestConsumerGroupListedAndDescribedByType(t *testing.T) {
	t.Parallel()
	c, _ := newConsumerCoordinator(t, Config{})
	newCGMember(t, c, "modern", "m1", "orders").join()
	form(t, newClient(t, c, "old", "c1"))
	list := func(types ...string) (out []string) {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.TypesFilter = 5, types
		for _, g := range c.ListGroups(req).Groups {
			out = append(out, g.Group+":"+g.GroupType+":"+g.GroupState)
		}
		return out
	}
	if got := fmt.Sprint(list()); got != "[modern:consumer:Stable old:classic:Stable]" {
		t.Fatalf("ListGroups: %s", got)
	}
	if got := fmt.Sprint(list("consumer")); got != "[modern:consumer:Stable]" {
		t.Fatalf("ListGroups of consumer groups: %s", got)
	}
	if d := describe(t, c, "modern"); d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != "uniform" ||
		len(d.Members) != 1 {
		t.Fatalf("DescribeGroups of a consumer group: %+v", d)
	}
}
