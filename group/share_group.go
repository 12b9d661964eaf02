package group

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
)

// Share groups (KIP-932): a member heartbeats (ShareGroupHeartbeat) with
// the topics it subscribes to and the coordinator answers with its epoch
// and the partitions it may fetch from. There is no revocation: a share
// partition's records are acquired record by record, so a member takes
// its new target at once, at the target's epoch, and several members may
// fetch one partition (share_assign.go). The group epoch moves when the
// membership, a subscription or a subscribed topic's partition count
// changes. A group name is a share group's until the group is deleted:
// classic and consumer members, and offset commits, are refused, as
// Kafka refuses them.
//
// The group's membership travels in __consumer_offsets in Kafka's records
// (share_records.go), so that a new coordinator serves the members as
// they were.

// shareGroup is the state of a share group.
type shareGroup struct {
	epoch, targetEpoch int32
	members            map[string]*shareMember
	target             map[string]Assignment
	// topics are the subscribed topics the target was computed on.
	topics map[TopicID]TopicMeta
	// unwritten are the records of changes not yet written to the store
	// (share_records.go); writeShare writes them.
	unwritten []batch.Record
}

// shareMember is one member of a share group.
type shareMember struct {
	id, rackID           string
	clientID, clientHost string
	topicNames           []string // sorted
	// epoch is what the member heartbeats with; previousEpoch is also
	// accepted, for a member whose last answer was lost.
	epoch, previousEpoch int32
	assigned             Assignment
	session              *time.Timer
}

func newShareGroup() *shareGroup {
	return &shareGroup{members: map[string]*shareMember{}, target: map[string]Assignment{}, topics: map[TopicID]TopicMeta{}}
}

// shareAssignor is the name of the one assignor (group.share.assignors).
const shareAssignor = "simple"

// ShareGroupHeartbeat handles a share group member's heartbeat: a join
// (epoch 0), a heartbeat, or a leave (epoch -1). clientID and clientHost
// name who sent it.
func (c *Coordinator) ShareGroupHeartbeat(req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(err *kerr.Error, msg string) *kmsg.ShareGroupHeartbeatResponse {
		resp.ErrorCode = err.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if !c.cfg.ShareProtocol {
		return fail(kerr.UnsupportedVersion, "share groups are not in group.coordinator.rebalance.protocols")
	}
	switch {
	case req.GroupID == "":
		return fail(kerr.InvalidRequest, "GroupId can't be empty.")
	case req.MemberID == "":
		return fail(kerr.InvalidRequest, "MemberId can't be empty.")
	case req.MemberEpoch < leaveEpoch:
		return fail(kerr.InvalidRequest, "MemberEpoch is invalid.")
	case req.MemberEpoch == joinEpoch && len(req.SubscribedTopicNames) == 0:
		return fail(kerr.InvalidRequest, "SubscribedTopicNames must be set in first request.")
	}
	g := c.group(req.GroupID, req.MemberEpoch == joinEpoch)
	if g == nil {
		// No such group here: after a coordinator move the group's
		// members are not known yet either; they rejoin.
		return fail(kerr.UnknownMemberID, "")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.state == stateDead:
		return fail(kerr.CoordinatorNotAvailable, "")
	case g.share == nil && g.inUse():
		return fail(kerr.GroupIDNotFound, "group "+g.name+" is not a share group")
	}
	if g.share == nil {
		if req.MemberEpoch != joinEpoch {
			return fail(kerr.UnknownMemberID, "")
		}
		g.share, g.protocolType = newShareGroup(), "share"
	}
	sg := g.share
	resp.MemberID = &req.MemberID
	m := sg.members[req.MemberID]
	if req.MemberEpoch == leaveEpoch {
		if m == nil {
			return fail(kerr.UnknownMemberID, "")
		}
		g.removeShareMember(m, "member "+m.id+" left the group")
		if err := g.writeShare(); err != nil {
			return fail(err, "")
		}
		resp.MemberEpoch = leaveEpoch
		return resp
	}
	added := false
	switch {
	case m == nil && req.MemberEpoch != joinEpoch:
		return fail(kerr.UnknownMemberID, "")
	case m == nil:
		if len(sg.members) >= c.cfg.ShareMaxSize {
			return fail(kerr.GroupMaxSizeReached, "")
		}
		m, added = &shareMember{id: req.MemberID}, true
		sg.members[m.id] = m
	case req.MemberEpoch != joinEpoch && req.MemberEpoch != m.epoch && req.MemberEpoch != m.previousEpoch:
		return fail(kerr.FencedMemberEpoch, "")
	}
	metaBefore, currentBefore := shareMemberRecord(g.name, m).Value, shareCurrentRecord(g.name, m).Value
	m.clientID, m.clientHost, m.rackID = clientID, clientHost, deref(req.RackID)
	subscribed := false
	if req.SubscribedTopicNames != nil {
		names := slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
		subscribed = !slices.Equal(names, m.topicNames)
		m.topicNames = names
	}
	if g.refreshShareTopics() || subscribed || added {
		g.bumpShareEpoch()
	}
	if sg.epoch > sg.targetEpoch {
		g.computeShareTarget()
	}
	before := m.assigned
	if m.epoch != sg.targetEpoch {
		m.previousEpoch, m.epoch = m.epoch, sg.targetEpoch
	}
	m.assigned = sg.target[m.id]
	if meta := shareMemberRecord(g.name, m); added || !bytes.Equal(meta.Value, metaBefore) {
		sg.unwritten = append(sg.unwritten, meta)
	}
	if current := shareCurrentRecord(g.name, m); added || !bytes.Equal(current.Value, currentBefore) {
		sg.unwritten = append(sg.unwritten, current)
	}
	// The session runs whatever the write does: a member whose join was
	// not written and who never comes back expires as any other.
	g.armShareSession(m)
	// What the answer tells the member is in the log first: a new
	// coordinator then knows it too.
	if err := g.writeShare(); err != nil {
		return fail(err, "")
	}
	resp.MemberEpoch = m.epoch
	_, interval := c.cfg.GroupShareConfig(g.name)
	resp.HeartbeatIntervalMillis = int32(interval / time.Millisecond)
	// A full request (the subscription named: a member recovering from
	// a lost answer) gets the assignment whole, as in Kafka.
	if req.MemberEpoch == joinEpoch || req.SubscribedTopicNames != nil || !sameAssignment(before, m.assigned) {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for _, id := range sortedTopicIDs(m.assigned) {
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = id, slices.Clone(m.assigned[id])
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
	}
	return resp
}

// inUse reports whether g is a classic or consumer group, with members or
// not (its offsets, an ended generation): a share group may not take its
// name. REQUIRES: g.mu held.
func (g *Group) inUse() bool {
	return len(g.members) > 0 || g.consumer != nil || len(g.offsets) > 0 || len(g.txnOffsets) > 0 ||
		g.generation > 0 || (g.protocolType != "" && g.protocolType != "share")
}

// refreshShareTopics resolves the subscriptions against the topics that
// exist; it reports whether they changed since the target was computed.
// REQUIRES: g.mu held.
func (g *Group) refreshShareTopics() bool {
	sg := g.share
	now := map[TopicID]TopicMeta{}
	for _, t := range g.c.cfg.Topics() {
		for _, m := range sg.members {
			if _, ok := slices.BinarySearch(m.topicNames, t.Name); ok {
				now[t.ID] = t
				break
			}
		}
	}
	if maps.Equal(now, sg.topics) {
		return false
	}
	sg.topics = now
	return true
}

// computeShareTarget computes the target assignment at the group epoch.
// REQUIRES: g.mu held.
func (g *Group) computeShareTarget() {
	sg := g.share
	target := assignShare(g.shareSpec())
	for _, id := range slices.Sorted(maps.Keys(target)) {
		if prev, ok := sg.target[id]; !ok || !sameAssignment(prev, target[id]) {
			sg.unwritten = append(sg.unwritten, shareTargetMemberRecord(g.name, id, target[id]))
		}
	}
	sg.target, sg.targetEpoch = target, sg.epoch
	sg.unwritten = append(sg.unwritten, shareTargetEpochRecord(g.name, sg.targetEpoch))
	g.c.log.Info("share group target assignment", "group", g.name, "epoch", sg.epoch, "members", len(sg.members))
}

// shareSpec is the assignor's input: the subscribed topics and the
// members with their targets. REQUIRES: g.mu held.
func (g *Group) shareSpec() AssignSpec {
	sg := g.share
	spec := AssignSpec{Partitions: map[TopicID]int32{}, Members: map[string]AssignMember{}}
	for id, t := range sg.topics {
		spec.Partitions[id] = t.Partitions
	}
	for id, m := range sg.members {
		am := AssignMember{Current: sg.target[id]}
		for tid, t := range sg.topics {
			if _, ok := slices.BinarySearch(m.topicNames, t.Name); ok {
				am.Topics = append(am.Topics, tid)
			}
		}
		spec.Members[id] = am
	}
	return spec
}

// shareTargetHolds reports whether the target is what the assignor gives
// for the members and topics as they are (it is sticky: a target that
// holds comes back unchanged). REQUIRES: g.mu held.
func (g *Group) shareTargetHolds() bool {
	want := assignShare(g.shareSpec())
	for id, a := range want {
		if !sameAssignment(a, g.share.target[id]) {
			return false
		}
	}
	return true
}

// armShareSession restarts m's session. REQUIRES: g.mu held.
func (g *Group) armShareSession(m *shareMember) {
	if m.session != nil {
		m.session.Stop()
	}
	session, _ := g.c.cfg.GroupShareConfig(g.name)
	m.session = time.AfterFunc(session, func() { g.expireShareMember(m) })
}

// expireShareMember removes m when its session ends, if it is still a
// member (a heartbeat may have restarted the session meanwhile).
func (g *Group) expireShareMember(m *shareMember) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == stateDead || g.share == nil || g.share.members[m.id] != m {
		return // unloaded meanwhile: the next coordinator times it out
	}
	g.removeShareMember(m, "member "+m.id+" session expired")
	if err := g.writeShare(); err != nil {
		g.c.log.Warn("writing a share group member's removal failed; a new coordinator of the group expires it",
			"group", g.name, "member", m.id, "err", err)
	}
}

// removeShareMember drops m and moves the group epoch, so that the others
// share what it had; the new target is computed at once (nothing is
// revoked in a share group). REQUIRES: g.mu held.
func (g *Group) removeShareMember(m *shareMember, reason string) {
	sg := g.share
	stopTimer(&m.session)
	delete(sg.members, m.id)
	delete(sg.target, m.id)
	sg.unwritten = append(sg.unwritten, shareMemberTombstones(g.name, m.id)...)
	g.refreshShareTopics()
	g.bumpShareEpoch()
	g.computeShareTarget()
	g.c.log.Info("share group member removed", "group", g.name, "reason", reason, "epoch", sg.epoch)
}

// bumpShareEpoch moves the group epoch. REQUIRES: g.mu held.
func (g *Group) bumpShareEpoch() {
	g.share.epoch++
	g.share.unwritten = append(g.share.unwritten, shareEpochRecord(g.name, g.share.epoch))
}

// writeShare writes the records of the group's changes, in the order they
// were made, as writeConsumer does. REQUIRES: g.mu held.
func (g *Group) writeShare() *kerr.Error {
	recs := g.share.unwritten
	if len(recs) == 0 {
		return nil
	}
	if err := g.c.store.AppendGroupRecords(g.name, recs); err != nil {
		g.c.log.Warn("writing share group records failed", "group", g.name, "records", len(recs), "err", err)
		return kerr.ErrorForCode(storeErrorCode(err)).(*kerr.Error)
	}
	g.share.unwritten = nil
	return nil
}

// stopShareTimers stops every member's session (the group is unloaded or
// the coordinator closes). REQUIRES: g.mu held.
func (g *Group) stopShareTimers() {
	if g.share == nil {
		return
	}
	for _, m := range g.share.members {
		stopTimer(&m.session)
	}
}

// state is Kafka's name of a share group's state.
func (sg *shareGroup) state() string {
	if len(sg.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

func (sg *shareGroup) sortedMembers() []*shareMember {
	ms := slices.Collect(maps.Values(sg.members))
	slices.SortFunc(ms, func(a, b *shareMember) int { return strings.Compare(a.id, b.id) })
	return ms
}

// ShareGroupDescribe describes share groups: a group that does not exist,
// or is not a share group, is GROUP_ID_NOT_FOUND, as Kafka answers.
func (c *Coordinator) ShareGroupDescribe(req *kmsg.ShareGroupDescribeRequest) *kmsg.ShareGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, name := range req.GroupIDs {
		dg := kmsg.NewShareGroupDescribeResponseGroup()
		dg.GroupID = name
		if req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = allGroupOperations
		}
		found := false
		if g := c.group(name, false); g != nil {
			g.mu.Lock()
			if found = g.share != nil && g.state != stateDead; found {
				g.describeShare(&dg)
			}
			g.mu.Unlock()
		}
		if !found {
			msg := "group " + name + " is not a share group"
			dg.ErrorCode, dg.ErrorMessage, dg.GroupState = kerr.GroupIDNotFound.Code, &msg, "Dead"
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// describeShare fills dg. REQUIRES: g.mu held.
func (g *Group) describeShare(dg *kmsg.ShareGroupDescribeResponseGroup) {
	sg := g.share
	dg.GroupState, dg.GroupEpoch, dg.AssignmentEpoch, dg.Assignor = sg.state(), sg.epoch, sg.targetEpoch, shareAssignor
	_, byID := g.c.topicsByName()
	for _, m := range sg.sortedMembers() {
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.id, m.epoch, m.clientID, m.clientHost
		if m.rackID != "" {
			dm.RackID = &m.rackID
		}
		dm.SubscribedTopicNames = slices.Clone(m.topicNames)
		if dm.SubscribedTopicNames == nil {
			dm.SubscribedTopicNames = []string{}
		}
		for _, id := range sortedTopicIDs(m.assigned) {
			tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			tp.TopicID, tp.Topic, tp.Partitions = id, byID[id].Name, slices.Clone(m.assigned[id])
			dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, tp)
		}
		dg.Members = append(dg.Members, dm)
	}
}
