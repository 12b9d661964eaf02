package group

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newShareCoordinator is a coordinator with share groups on, topic
// "orders" (4 partitions) and a store that keeps the records.
func newShareCoordinator(t *testing.T, cfg Config) (*Coordinator, *memStore, *testTopics) {
	tt := &testTopics{}
	tt.set("orders", 1, 4)
	store := newMemStore()
	cfg.ShareProtocol, cfg.Topics = true, tt.all
	return newCoordinator(t, store, cfg), store, tt
}

// shareMemberClient is a share group member as a client runs it: it
// remembers its epoch and its assignment.
type shareMemberClient struct {
	t        *testing.T
	c        *Coordinator
	group    string
	id       string
	topics   []string
	epoch    int32
	assigned Assignment
}

func newShareMember(t *testing.T, c *Coordinator, group, id string, topics ...string) *shareMemberClient {
	return &shareMemberClient{t: t, c: c, group: group, id: id, topics: topics}
}

func (m *shareMemberClient) send(epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	m.t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version = 1
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = m.group, m.id, epoch, topics
	resp := m.c.ShareGroupHeartbeat(req, "client-"+m.id, "/127.0.0.1")
	if resp.ErrorCode == 0 {
		m.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			m.assigned = Assignment{}
			for _, tp := range resp.Assignment.TopicPartitions {
				m.assigned[tp.TopicID] = tp.Partitions
			}
		}
	}
	return resp
}

func (m *shareMemberClient) join() *kmsg.ShareGroupHeartbeatResponse {
	m.t.Helper()
	resp := m.send(joinEpoch, m.topics)
	wantCode(m.t, m.id+" joining", resp.ErrorCode, nil)
	return resp
}

// heartbeat heartbeats as the Java client does: the subscription only
// when it changed (nil otherwise).
func (m *shareMemberClient) heartbeat() *kmsg.ShareGroupHeartbeatResponse {
	m.t.Helper()
	resp := m.send(m.epoch, nil)
	wantCode(m.t, m.id+" heartbeating", resp.ErrorCode, nil)
	return resp
}

func describeShare(t *testing.T, c *Coordinator, name string) kmsg.ShareGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{name}
	return c.ShareGroupDescribe(req).Groups[0]
}

// membersOf counts, per partition of topic 1, the members assigned it.
func membersOf(members ...*shareMemberClient) map[int32]int {
	n := map[int32]int{}
	for _, m := range members {
		for _, p := range m.assigned[topicID(1)] {
			n[p]++
		}
	}
	return n
}

// A share group's members take their new assignment at once, with no
// revocation; with more members than partitions, partitions are shared.
func TestShareGroupAssignsAtOnceAndSharesPartitions(t *testing.T) {
	t.Parallel()
	c, _, _ := newShareCoordinator(t, Config{})
	m1 := newShareMember(t, c, "sg", "m1", "orders")
	resp := m1.join()
	if resp.MemberEpoch != 1 || resp.HeartbeatIntervalMillis != 5000 || fmt.Sprint(m1.assigned[topicID(1)]) != "[0 1 2 3]" {
		t.Fatalf("join: epoch %d, interval %d, assigned %v; want 1, 5000, [0 1 2 3]", resp.MemberEpoch,
			resp.HeartbeatIntervalMillis, m1.assigned)
	}
	m2 := newShareMember(t, c, "sg", "m2", "orders")
	m2.join()
	if m2.epoch != 2 || len(m2.assigned[topicID(1)]) != 2 {
		t.Fatalf("m2 joined at epoch %d with %v, want epoch 2 and two partitions", m2.epoch, m2.assigned)
	}
	if resp := m1.heartbeat(); resp.Assignment == nil || m1.epoch != 2 || len(m1.assigned[topicID(1)]) != 2 {
		t.Fatalf("m1's next heartbeat: epoch %d, assignment %v (sent: %v)", m1.epoch, m1.assigned, resp.Assignment != nil)
	}
	if n := membersOf(m1, m2); len(n) != 4 || n[0] != 1 || n[1] != 1 || n[2] != 1 || n[3] != 1 {
		t.Fatalf("members per partition %v, want each of 4 once", n)
	}
	if resp := m1.heartbeat(); resp.Assignment != nil {
		t.Fatalf("an unchanged assignment is sent again: %+v", resp.Assignment)
	}
	members := []*shareMemberClient{m1, m2}
	for i := 3; i <= 6; i++ {
		m := newShareMember(t, c, "sg", fmt.Sprintf("m%d", i), "orders")
		m.join()
		members = append(members, m)
	}
	for _, m := range members {
		m.heartbeat()
		if len(m.assigned[topicID(1)]) != 1 {
			t.Fatalf("%s has %v, want one partition of six members on four", m.id, m.assigned)
		}
	}
	n := membersOf(members...)
	for p := range int32(4) {
		if n[p] < 1 || n[p] > 2 {
			t.Fatalf("members per partition %v: want one or two each", n)
		}
	}
	g := describeShare(t, c, "sg")
	if g.ErrorCode != 0 || g.GroupState != "Stable" || g.GroupEpoch != 6 || g.AssignmentEpoch != 6 || g.Assignor != "simple" ||
		len(g.Members) != 6 || g.Members[0].ClientID != "client-m1" || g.Members[0].Assignment.TopicPartitions[0].Topic != "orders" ||
		fmt.Sprint(g.Members[0].SubscribedTopicNames) != "[orders]" {
		t.Fatalf("described %+v", g)
	}
}

func TestShareGroupFencesWrongEpochs(t *testing.T) {
	t.Parallel()
	c, _, _ := newShareCoordinator(t, Config{})
	m1 := newShareMember(t, c, "sg", "m1", "orders")
	m1.join()
	newShareMember(t, c, "sg", "m2", "orders").join()
	stranger := newShareMember(t, c, "sg", "x", "orders")
	wantCode(t, "a stranger's heartbeat", stranger.send(3, nil).ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "an epoch ahead", m1.send(5, nil).ErrorCode, kerr.FencedMemberEpoch)
	m1.heartbeat() // to epoch 2
	// A member whose answer was lost heartbeats at its previous epoch.
	wantCode(t, "the previous epoch", m1.send(1, nil).ErrorCode, nil)
	m1.heartbeat()
	newShareMember(t, c, "sg", "m3", "orders").join()
	m1.heartbeat() // to epoch 3: epoch 1 is two behind now
	wantCode(t, "an epoch two behind", m1.send(1, nil).ErrorCode, kerr.FencedMemberEpoch)
	// A fenced member rejoins with epoch 0 and gets its assignment whole.
	if resp := m1.send(joinEpoch, m1.topics); resp.ErrorCode != 0 || resp.Assignment == nil || resp.MemberEpoch != 3 {
		t.Fatalf("rejoin: %s, epoch %d, assignment %v", errName(resp.ErrorCode), resp.MemberEpoch, resp.Assignment)
	}
}

func TestShareGroupHeartbeatValidation(t *testing.T) {
	t.Parallel()
	c, _, _ := newShareCoordinator(t, Config{ShareMaxSize: 2})
	send := func(group, member string, epoch int32, topics ...string) (int16, string) {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, member, epoch, topics
		resp := c.ShareGroupHeartbeat(req, "c", "/h")
		return resp.ErrorCode, deref(resp.ErrorMessage)
	}
	for _, tc := range []struct {
		what, group, member string
		epoch               int32
		topics              []string
		want                *kerr.Error
	}{
		{"no group id", "", "m", 0, []string{"orders"}, kerr.InvalidRequest},
		{"no member id", "sg", "", 0, []string{"orders"}, kerr.InvalidRequest},
		{"a join without topics", "sg", "m", 0, nil, kerr.InvalidRequest},
		{"epoch -2 (no static members in share groups)", "sg", "m", -2, nil, kerr.InvalidRequest},
		{"a leave of a stranger", "sg", "m", -1, nil, kerr.UnknownMemberID},
		{"a heartbeat into no group", "none", "m", 4, nil, kerr.UnknownMemberID},
	} {
		code, msg := send(tc.group, tc.member, tc.epoch, tc.topics...)
		wantCode(t, tc.what+" ("+msg+")", code, tc.want)
	}
	wantCode(t, "member 1", firstCode(send("sg", "m1", 0, "orders")), nil)
	wantCode(t, "member 2", firstCode(send("sg", "m2", 0, "orders")), nil)
	wantCode(t, "member 3 of group.share.max.size 2", firstCode(send("sg", "m3", 0, "orders")), kerr.GroupMaxSizeReached)

	off := newCoordinator(t, nil, Config{})
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.SubscribedTopicNames = "sg", "m", []string{"orders"}
	wantCode(t, "share groups off", off.ShareGroupHeartbeat(req, "c", "/h").ErrorCode, kerr.UnsupportedVersion)
}

func firstCode(code int16, _ string) int16 { return code }

// A group name belongs to one kind of group: a share group refuses
// classic and consumer members and offset commits, and a share heartbeat
// into a classic group (even one left with only its offsets) is refused.
func TestShareGroupNameIsNotSharedWithOtherKinds(t *testing.T) {
	t.Parallel()
	c, _, _ := newShareCoordinator(t, Config{ConsumerProtocol: true, PartitionExists: func(string, int32) bool { return true }})
	newShareMember(t, c, "sg", "m1", "orders").join()
	classic := newClient(t, c, "sg", "classic")
	wantCode(t, "a classic join into a share group", c.JoinGroup(classic.joinRequest(), "classic", "/h").ErrorCode,
		kerr.InconsistentGroupProtocol)
	cg := newCGMember(t, c, "sg", "c1", "orders")
	wantCode(t, "a consumer join into a share group", cg.send(cg.request(joinEpoch)).ErrorCode, kerr.GroupIDNotFound)
	wantCode(t, "an offset commit into a share group", classic.commit("orders", 0, 5), kerr.GroupIDNotFound)
	if d := describe(t, c, "sg"); d.State != "Dead" {
		t.Fatalf("DescribeGroups of a share group: %+v, want it Dead as Kafka answers for a non-classic group", d)
	}

	other := newClient(t, c, "classic-group", "c")
	form(t, other)
	wantCode(t, "a commit", other.commit("orders", 0, 5), nil)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group, leave.Members = 3, "classic-group", []kmsg.LeaveGroupRequestMember{{MemberID: other.id}}
	c.LeaveGroup(leave)
	waitState(t, c, "classic-group", "Empty", 0)
	sm := newShareMember(t, c, "classic-group", "s1", "orders")
	wantCode(t, "a share join into an empty classic group with offsets", sm.send(joinEpoch, sm.topics).ErrorCode,
		kerr.GroupIDNotFound)
	if g := describeShare(t, c, "classic-group"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ShareGroupDescribe of a classic group: %s", errName(g.ErrorCode))
	}
}

// A member that leaves, or whose session ends, gives its partitions to
// the others at their next heartbeat; an empty share group is listed as
// such and may be deleted, after which the name is free.
func TestShareGroupLeaveExpiryListAndDelete(t *testing.T) {
	t.Parallel()
	c, _, _ := newShareCoordinator(t, Config{ShareSessionTimeout: 150 * time.Millisecond, ShareHeartbeatInterval: 50 * time.Millisecond})
	m1, m2 := newShareMember(t, c, "sg", "m1", "orders"), newShareMember(t, c, "sg", "m2", "orders")
	m1.join()
	m2.join()
	if resp := m1.send(leaveEpoch, nil); resp.ErrorCode != 0 || resp.MemberEpoch != leaveEpoch {
		t.Fatalf("leave: %s, epoch %d", errName(resp.ErrorCode), resp.MemberEpoch)
	}
	if m2.heartbeat(); len(m2.assigned[topicID(1)]) != 4 {
		t.Fatalf("after m1 left m2 has %v, want all four", m2.assigned)
	}
	list := func() string {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version, req.TypesFilter = 5, []string{"share"}
		var out []string
		for _, g := range c.ListGroups(req).Groups {
			out = append(out, g.Group+":"+g.ProtocolType+":"+g.GroupState)
		}
		return fmt.Sprint(out)
	}
	if got := list(); got != "[sg:share:Stable]" {
		t.Fatalf("ListGroups of share groups: %s", got)
	}
	del := func() int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"sg"}
		return c.DeleteGroups(req).Groups[0].ErrorCode
	}
	wantCode(t, "deleting a share group with a member", del(), kerr.NonEmptyGroup)
	// m2 stops heartbeating: its session ends.
	deadline := time.Now().Add(10 * time.Second)
	for describeShare(t, c, "sg").GroupState != "Empty" {
		if time.Now().After(deadline) {
			t.Fatal("m2's session did not end")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := list(); got != "[sg:share:Empty]" {
		t.Fatalf("ListGroups of share groups: %s", got)
	}
	wantCode(t, "deleting the empty share group", del(), nil)
	if g := describeShare(t, c, "sg"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("described after the delete: %s", errName(g.ErrorCode))
	}
	form(t, newClient(t, c, "sg", "classic")) // the name is free
}

// A coordinator that loads the group's records serves its members as they
// were: same epochs, same assignments, no one rejoins; what was deleted
// stays deleted.
func TestShareGroupLoadsWithoutARejoin(t *testing.T) {
	t.Parallel()
	c, store, tt := newShareCoordinator(t, Config{})
	m1, m2, m3 := newShareMember(t, c, "sg", "m1", "orders"), newShareMember(t, c, "sg", "m2", "orders"),
		newShareMember(t, c, "sg", "m3", "orders")
	m1.join()
	m2.join()
	m3.join()
	m3.send(leaveEpoch, nil)
	m1.heartbeat()
	before := describeShare(t, c, "sg")

	// The next leader of the partition appends to the same log.
	c2 := newCoordinator(t, store, Config{ShareProtocol: true, Topics: tt.all})
	c2.Load(func(string) bool { return true }, store.replay(t))
	after := describeShare(t, c2, "sg")
	if !sameJSON(after, before) {
		t.Fatalf("after the load:\n%+v\nbefore:\n%+v", after, before)
	}
	for _, m := range []*shareMemberClient{m1, m2} {
		m.c = c2
		held := slices.Clone(m.assigned[topicID(1)])
		m.heartbeat()
		if m.epoch != after.GroupEpoch || !slices.Equal(m.assigned[topicID(1)], held) && m.id == "m1" {
			t.Fatalf("%s after the load: epoch %d, assigned %v (held %v)", m.id, m.epoch, m.assigned, held)
		}
	}
	if n := membersOf(m1, m2); len(n) != 4 {
		t.Fatalf("after the load the members hold %v, want all four partitions", n)
	}
	m3.c = c2
	wantCode(t, "the member that left", m3.send(m3.epoch, nil).ErrorCode, kerr.UnknownMemberID)

	// Partitions added while no one coordinated the group: the loading
	// coordinator computes a new target.
	tt.set("orders", 1, 6)
	c3 := newCoordinator(t, newMemStore(), Config{ShareProtocol: true, Topics: tt.all})
	c3.Load(func(string) bool { return true }, store.replay(t))
	for _, m := range []*shareMemberClient{m1, m2} {
		m.c = c3
		m.heartbeat()
	}
	if n := membersOf(m1, m2); len(n) != 6 {
		t.Fatalf("after the load with six partitions the members hold %v", n)
	}
}

// A member's answer is never ahead of the log: a failed write answers the
// store's error and the change goes out with the next write.
func TestShareGroupAnswersOnlyWhatIsWritten(t *testing.T) {
	t.Parallel()
	c, store, _ := newShareCoordinator(t, Config{})
	store.failAppends = kerr.NotCoordinator
	m := newShareMember(t, c, "sg", "m1", "orders")
	wantCode(t, "a join whose records are not written", m.send(joinEpoch, m.topics).ErrorCode, kerr.NotCoordinator)
	store.failAppends = nil
	m.join()
	if got := store.replay(t).Share["sg"]; got == nil || got.Members["m1"] == nil || got.Members["m1"].Epoch != m.epoch {
		t.Fatalf("the log holds %+v after the join at epoch %d", got, m.epoch)
	}
}

// A member whose join was not written, and who never comes back, expires
// (found in review: it stayed without a session and kept the group
// non-empty forever); a full heartbeat at the previous epoch (a member
// whose answer was lost) gets its assignment whole.
func TestShareGroupUnwrittenJoinExpiresAndFullHeartbeatsGetTheAssignment(t *testing.T) {
	t.Parallel()
	c, store, _ := newShareCoordinator(t, Config{ShareSessionTimeout: 100 * time.Millisecond, ShareHeartbeatInterval: 20 * time.Millisecond})
	store.failAppends = kerr.NotCoordinator
	ghost := newShareMember(t, c, "sg", "ghost", "orders")
	wantCode(t, "a join whose write fails", ghost.send(joinEpoch, ghost.topics).ErrorCode, kerr.NotCoordinator)
	store.failAppends = nil
	deadline := time.Now().Add(10 * time.Second)
	for len(describeShare(t, c, "sg").Members) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the member whose join was not written never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}

	c2, _, _ := newShareCoordinator(t, Config{})
	m1, m2 := newShareMember(t, c2, "sg", "m1", "orders"), newShareMember(t, c2, "sg", "m2", "orders")
	m1.join()
	m2.join()
	resp := m1.send(1, m1.topics) // the epoch-2 answer was lost
	if resp.ErrorCode != 0 || resp.MemberEpoch != 2 || resp.Assignment == nil || len(resp.Assignment.TopicPartitions[0].Partitions) != 2 {
		t.Fatalf("a full heartbeat at the previous epoch: %s, epoch %d, assignment %+v", errName(resp.ErrorCode),
			resp.MemberEpoch, resp.Assignment)
	}
}
