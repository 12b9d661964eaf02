package group

import (
	"bytes"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
)

// The consumer group protocol (KIP-848): a member heartbeats
// (ConsumerGroupHeartbeat) with what it subscribes to and what it owns,
// and the coordinator answers with its epoch and what it may consume. The
// group epoch moves whenever the membership, a subscription or a
// subscribed topic's partition count changes; the coordinator then
// computes a new target assignment with a server-side assignor
// (consumer_assign.go), and each member moves toward its share of it one
// heartbeat at a time (consumer_reconcile.go). Members never rebalance
// together: a member keeps consuming what stays its own.
//
// A group is either classic or consumer: a heartbeat into a classic group
// that has members, or a JoinGroup into a consumer group that has
// members, is refused (Kafka's group.consumer.migration.policy=disabled);
// an empty group changes type with its first member. A member fenced for
// its epoch or its session rejoins with epoch 0 and the same id (the
// client generates it, v1).

// TopicMeta is a topic as the assignors see it.
type TopicMeta struct {
	Name       string
	ID         TopicID
	Partitions int32
	// Internal topics are never matched by a subscription's regex.
	Internal bool
}

// Member epochs with a meaning of their own (Kafka's).
const (
	joinEpoch        = 0
	leaveEpoch       = -1
	staticLeaveEpoch = -2
)

// consumerGroup is the state of a group on the consumer protocol.
type consumerGroup struct {
	// epoch is the group epoch; targetEpoch the epoch target was
	// computed at (behind epoch only inside a heartbeat).
	epoch, targetEpoch int32
	members            map[string]*consumerMember
	static             map[string]string // instance id -> member id
	target             map[string]Assignment
	// topics are the subscribed topics the target was computed on.
	topics map[TopicID]TopicMeta
	// assignor is the name of the assignor of the last target.
	assignor string
	// unwritten are the records of changes not yet written to the
	// store (consumer_records.go); writeConsumer writes them.
	unwritten []batch.Record
}

// consumerMember is one member of a consumer group.
type consumerMember struct {
	id, instanceID, rackID string
	clientID, clientHost   string
	topicNames             []string // sorted
	regex                  string
	matcher                *regexp.Regexp
	serverAssignor         string
	rebalanceTimeout       time.Duration

	rec reconciliation
	// assignedAt is the member epoch each partition it holds (assigned
	// or revoking) was given to it at (KIP-1251's assignment epochs): a
	// commit at an older member epoch is still its own for partitions it
	// has held since.
	assignedAt map[topicPartitionID]int32
	// owned is what the member last said it owns (a heartbeat that
	// leaves its partitions out says they did not change); nil before
	// it said.
	owned Assignment

	// session expires the member; revocation fences it when it has not
	// revoked in its rebalance timeout.
	session, revocation *time.Timer
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*consumerMember{}, static: map[string]string{},
		target: map[string]Assignment{}, topics: map[TopicID]TopicMeta{}}
}

// ConsumerGroupHeartbeat handles a member's heartbeat: a join (epoch 0),
// a heartbeat, or a leave (epoch -1, or -2 for a static member that comes
// back). clientID and clientHost name who sent it.
func (c *Coordinator) ConsumerGroupHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(err *kerr.Error, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp.ErrorCode = err.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if !c.cfg.ConsumerProtocol {
		return fail(kerr.UnsupportedVersion, "the consumer group protocol is not in group.coordinator.rebalance.protocols")
	}
	if msg := c.checkHeartbeat(req); msg != "" {
		return fail(kerr.InvalidRequest, msg)
	}
	var matcher *regexp.Regexp
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		m, err := regexp.Compile("^(?:" + *req.SubscribedTopicRegex + ")$")
		if err != nil {
			return fail(kerr.InvalidRegularExpression, err.Error())
		}
		matcher = m
	}
	if req.ServerAssignor != nil && !slices.Contains(c.cfg.ConsumerAssignors, *req.ServerAssignor) {
		return fail(kerr.UnsupportedAssignor, "assignor "+*req.ServerAssignor+" is not in group.consumer.assignors")
	}
	if req.MemberID == "" { // v0 only: the coordinator names a joining member
		req.MemberID = newUUID()
	}
	g := c.group(req.Group, req.MemberEpoch == joinEpoch)
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
	case len(g.members) > 0:
		return fail(kerr.GroupIDNotFound, "group "+g.name+" is a classic group with members")
	case g.share != nil:
		return fail(kerr.GroupIDNotFound, "group "+g.name+" is a share group")
	}
	if g.consumer == nil {
		if req.MemberEpoch != joinEpoch {
			return fail(kerr.UnknownMemberID, "")
		}
		g.consumer, g.protocolType = newConsumerGroup(), "consumer"
	}
	cg := g.consumer
	resp.MemberID = &req.MemberID
	switch req.MemberEpoch {
	case leaveEpoch:
		m := cg.members[req.MemberID]
		if m == nil {
			return fail(kerr.UnknownMemberID, "")
		}
		g.removeConsumerMember(m, "member "+m.id+" left the group")
		if err := g.writeConsumer(); err != nil {
			return fail(err, "")
		}
		resp.MemberEpoch = leaveEpoch
		return resp
	case staticLeaveEpoch:
		m := cg.members[req.MemberID]
		switch {
		case m == nil:
			return fail(kerr.UnknownMemberID, "")
		case m.instanceID != *req.InstanceID:
			return fail(kerr.FencedInstanceID, "")
		}
		// It keeps its partitions for its instance until its session
		// ends: the instance's next member takes them over, at the
		// epoch it left at.
		m.rec.previousEpoch, m.rec.epoch = m.rec.epoch, staticLeaveEpoch
		stopTimer(&m.revocation)
		cg.unwritten = append(cg.unwritten, consumerCurrentRecord(g.name, m))
		if err := g.writeConsumer(); err != nil {
			return fail(err, "")
		}
		resp.MemberEpoch = staticLeaveEpoch
		return resp
	}
	m, added, err := g.heartbeatMember(req)
	if err != nil {
		return fail(err, "")
	}
	var metaBefore, currentBefore []byte
	if !added {
		metaBefore, currentBefore = consumerMemberRecord(g.name, m).Value, consumerCurrentRecord(g.name, m).Value
	}
	m.clientID, m.clientHost = clientID, clientHost
	// One new epoch for whatever changed: a member, a subscription, the
	// subscribed topics.
	if changed := m.subscribe(req, matcher); g.refreshTopics() || changed || added {
		g.bumpConsumerEpoch()
	}
	if cg.epoch > cg.targetEpoch {
		g.computeTarget()
	}
	if req.Topics != nil {
		m.owned = Assignment{}
		for _, t := range req.Topics {
			m.owned[t.TopicID] = append(m.owned[t.TopicID], t.Partitions...)
		}
	}
	before := m.rec.assigned
	m.rec = m.rec.reconcile(cg.targetEpoch, cg.target[m.id], cg.heldByOthers(m.id), m.owned)
	m.noteAssignedAt()
	if meta := consumerMemberRecord(g.name, m); !bytes.Equal(meta.Value, metaBefore) {
		cg.unwritten = append(cg.unwritten, meta)
	}
	if current := consumerCurrentRecord(g.name, m); !bytes.Equal(current.Value, currentBefore) {
		cg.unwritten = append(cg.unwritten, current)
	}
	// The timers run whatever the write does: a member whose join was
	// not written and who never comes back expires as any other.
	g.armConsumerTimers(m)
	// What the answer tells the member is in the log first: a new
	// coordinator then knows it too.
	if err := g.writeConsumer(); err != nil {
		return fail(err, "")
	}
	resp.MemberEpoch = m.rec.epoch
	_, interval := c.cfg.GroupConsumerConfig(g.name)
	resp.HeartbeatIntervalMillis = int32(interval / time.Millisecond)
	if req.MemberEpoch == joinEpoch || req.Topics != nil || !sameAssignment(before, m.rec.assigned) {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for _, id := range sortedTopicIDs(m.rec.assigned) {
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = id, slices.Clone(m.rec.assigned[id])
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
	}
	return resp
}

// checkHeartbeat is Kafka's validation of a heartbeat's fields: the
// reason it is invalid, or "".
func (c *Coordinator) checkHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) string {
	switch {
	case req.Group == "":
		return "GroupId can't be empty."
	case req.InstanceID != nil && *req.InstanceID == "":
		return "InstanceId can't be empty."
	case req.RackID != nil && *req.RackID == "":
		return "RackId can't be empty."
	case req.MemberEpoch < staticLeaveEpoch:
		return "MemberEpoch is invalid."
	case req.MemberID == "" && (req.Version >= 1 || req.MemberEpoch != joinEpoch):
		return "MemberId can't be empty."
	case req.MemberEpoch == staticLeaveEpoch && req.InstanceID == nil:
		return "InstanceId can't be null."
	case req.MemberEpoch != joinEpoch:
		return ""
	case req.RebalanceTimeoutMillis <= 0:
		return "RebalanceTimeoutMs must be provided in first request."
	case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
		return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
	case len(req.Topics) > 0:
		return "Topics must be empty when (re-)joining."
	}
	return ""
}

// heartbeatMember is the member a heartbeat (epoch 0 or up) is from; a
// join may add it (added), or hand it the place of its instance's
// previous member. REQUIRES: g.mu held.
func (g *Group) heartbeatMember(req *kmsg.ConsumerGroupHeartbeatRequest) (m *consumerMember, added bool, err *kerr.Error) {
	cg := g.consumer
	m = cg.members[req.MemberID]
	if req.MemberEpoch != joinEpoch {
		switch {
		case m == nil:
			return nil, false, kerr.UnknownMemberID
		case req.InstanceID != nil && *req.InstanceID != m.instanceID:
			return nil, false, kerr.FencedInstanceID
		case req.MemberEpoch > m.rec.epoch:
			return nil, false, kerr.FencedMemberEpoch
		case req.MemberEpoch < m.rec.epoch && !lostResponse(m, req):
			return nil, false, kerr.FencedMemberEpoch
		}
		return m, false, nil
	}
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	if held := cg.static[instance]; instance != "" && held != "" && held != req.MemberID {
		prev := cg.members[held]
		if prev != nil && prev.rec.epoch != staticLeaveEpoch {
			return nil, false, kerr.UnreleasedInstanceID
		}
		// The instance is back under a new member id: it takes over
		// what its predecessor held, at its epoch, with no rebalance.
		next := &consumerMember{id: req.MemberID, instanceID: instance}
		if prev != nil {
			// Its subscription too: only a change of it moves the epoch.
			*next = consumerMember{id: req.MemberID, instanceID: instance, topicNames: prev.topicNames,
				regex: prev.regex, matcher: prev.matcher, serverAssignor: prev.serverAssignor, rackID: prev.rackID,
				rebalanceTimeout: prev.rebalanceTimeout, rec: prev.rec, assignedAt: prev.assignedAt}
			next.rec.epoch = prev.rec.previousEpoch
			if t, ok := cg.target[held]; ok {
				cg.target[next.id] = t
			}
			g.dropConsumerMember(prev)
		}
		cg.members[next.id], cg.static[instance] = next, next.id
		g.c.log.Info("consumer group static member replaced", "group", g.name, "instance", instance,
			"member", next.id, "was", held)
		return next, prev == nil, nil
	}
	if m != nil {
		// A member that rejoins (after it was fenced, or restarted) has
		// let go of everything it had; its target stays its own.
		m.rec, m.owned, m.assignedAt = reconciliation{}, nil, nil
		stopTimer(&m.revocation)
		return m, false, nil
	}
	m = &consumerMember{id: req.MemberID, instanceID: instance}
	cg.members[m.id] = m
	if instance != "" {
		cg.static[instance] = m.id
	}
	g.c.log.Info("consumer group member joined", "group", g.name, "member", m.id)
	return m, true, nil
}

// lostResponse reports whether a heartbeat at m's previous epoch is from
// a member that did not hear the answer that moved it on: it owns nothing
// outside what it is assigned now (Kafka then answers it again).
func lostResponse(m *consumerMember, req *kmsg.ConsumerGroupHeartbeatRequest) bool {
	if req.MemberEpoch != m.rec.previousEpoch || req.Topics == nil {
		return false
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if !slices.Contains(m.rec.assigned[t.TopicID], p) {
				return false
			}
		}
	}
	return true
}

// subscribe takes the member's subscription and client fields from req
// (a field left out keeps its value); it reports whether what decides the
// assignment changed.
func (m *consumerMember) subscribe(req *kmsg.ConsumerGroupHeartbeatRequest, matcher *regexp.Regexp) bool {
	changed := false
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		changed = changed || !slices.Equal(names, m.topicNames)
		m.topicNames = names
	}
	if req.SubscribedTopicRegex != nil {
		changed = changed || *req.SubscribedTopicRegex != m.regex
		m.regex, m.matcher = *req.SubscribedTopicRegex, matcher
	}
	if req.ServerAssignor != nil {
		changed = changed || *req.ServerAssignor != m.serverAssignor
		m.serverAssignor = *req.ServerAssignor
	}
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	if req.RebalanceTimeoutMillis > 0 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	return changed
}

// subscribes reports whether m subscribes to topic t.
func (m *consumerMember) subscribes(t TopicMeta) bool {
	if _, ok := slices.BinarySearch(m.topicNames, t.Name); ok {
		return true
	}
	return m.matcher != nil && !t.Internal && m.matcher.MatchString(t.Name)
}

// refreshTopics resolves the members' subscriptions against the topics
// that exist; it reports whether they changed since the target was
// computed (a topic created or deleted, partitions added). REQUIRES: g.mu
// held.
func (g *Group) refreshTopics() bool {
	cg := g.consumer
	now := map[TopicID]TopicMeta{}
	for _, t := range g.c.cfg.Topics() {
		for _, m := range cg.members {
			if m.subscribes(t) {
				now[t.ID] = t
				break
			}
		}
	}
	if maps.Equal(now, cg.topics) {
		return false
	}
	cg.topics = now
	return true
}

// computeTarget computes the target assignment at the group epoch.
// REQUIRES: g.mu held.
func (g *Group) computeTarget() {
	cg := g.consumer
	spec := AssignSpec{Partitions: map[TopicID]int32{}, Members: map[string]AssignMember{}}
	for id, t := range cg.topics {
		spec.Partitions[id] = t.Partitions
	}
	for id, m := range cg.members {
		am := AssignMember{Current: cg.target[id]}
		for tid, t := range cg.topics {
			if m.subscribes(t) {
				am.Topics = append(am.Topics, tid)
			}
		}
		slices.SortFunc(am.Topics, func(a, b TopicID) int { return bytes.Compare(a[:], b[:]) })
		spec.Members[id] = am
	}
	cg.assignor = g.pickAssignor()
	target := Assignors[cg.assignor].Assign(spec)
	for _, id := range slices.Sorted(maps.Keys(target)) {
		if prev, ok := cg.target[id]; !ok || !sameAssignment(prev, target[id]) {
			cg.unwritten = append(cg.unwritten, consumerTargetMemberRecord(g.name, id, target[id]))
		}
	}
	cg.target, cg.targetEpoch = target, cg.epoch
	cg.unwritten = append(cg.unwritten, consumerTargetEpochRecord(g.name, cg.targetEpoch))
	g.c.log.Info("consumer group target assignment", "group", g.name, "epoch", cg.epoch, "members", len(cg.members),
		"assignor", cg.assignor)
}

// pickAssignor is the assignor most members ask for (ties to the earlier
// in group.consumer.assignors), else the first of group.consumer.assignors.
func (g *Group) pickAssignor() string {
	votes := map[string]int{}
	for _, m := range g.consumer.members {
		if m.serverAssignor != "" {
			votes[m.serverAssignor]++
		}
	}
	best := g.c.cfg.ConsumerAssignors[0]
	for _, name := range g.c.cfg.ConsumerAssignors {
		if votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// heldByOthers reports whether a member other than id holds a partition
// (assigned, or still revoking it).
func (cg *consumerGroup) heldByOthers(id string) func(TopicID, int32) bool {
	held := map[topicPartitionID]bool{}
	for mid, m := range cg.members {
		if mid == id {
			continue
		}
		for _, a := range []Assignment{m.rec.assigned, m.rec.revoking} {
			for t, ps := range a {
				for _, p := range ps {
					held[topicPartitionID{t, p}] = true
				}
			}
		}
	}
	return func(t TopicID, p int32) bool { return held[topicPartitionID{t, p}] }
}

// armConsumerTimers restarts m's session, and gives a member that must
// revoke its rebalance timeout to do it. REQUIRES: g.mu held.
func (g *Group) armConsumerTimers(m *consumerMember) {
	if m.session != nil {
		m.session.Stop()
	}
	session, _ := g.c.cfg.GroupConsumerConfig(g.name)
	m.session = time.AfterFunc(session, func() {
		g.fenceConsumerMember(m, "session expired", func() bool { return true })
	})
	switch {
	case m.rec.state != memberUnrevoked:
		stopTimer(&m.revocation)
	case m.revocation == nil:
		epoch := m.rec.epoch
		m.revocation = time.AfterFunc(m.rebalanceTimeout, func() {
			g.fenceConsumerMember(m, "did not revoke its partitions within its rebalance timeout", func() bool {
				return m.rec.state == memberUnrevoked && m.rec.epoch == epoch
			})
		})
	}
}

// fenceConsumerMember removes m, if it is still a member and still is
// what fences it (a timer may fire as a heartbeat changes m).
func (g *Group) fenceConsumerMember(m *consumerMember, why string, still func() bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == stateDead || g.consumer == nil || g.consumer.members[m.id] != m || !still() {
		return // unloaded meanwhile: the next coordinator times it out
	}
	g.removeConsumerMember(m, "member "+m.id+" "+why)
	if err := g.writeConsumer(); err != nil {
		g.c.log.Warn("writing a consumer group member's removal failed; a new coordinator of the group fences it",
			"group", g.name, "member", m.id, "err", err)
	}
}

// removeConsumerMember drops m and moves the group epoch, so that the
// others share what it had. REQUIRES: g.mu held.
func (g *Group) removeConsumerMember(m *consumerMember, reason string) {
	g.dropConsumerMember(m)
	g.bumpConsumerEpoch()
	g.c.log.Info("consumer group member removed", "group", g.name, "reason", reason, "epoch", g.consumer.epoch)
}

// dropConsumerMember forgets m. REQUIRES: g.mu held.
func (g *Group) dropConsumerMember(m *consumerMember) {
	cg := g.consumer
	stopTimer(&m.session)
	stopTimer(&m.revocation)
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	cg.unwritten = append(cg.unwritten, consumerMemberTombstones(g.name, m.id)...)
	if m.instanceID != "" && cg.static[m.instanceID] == m.id {
		delete(cg.static, m.instanceID)
	}
}

// bumpConsumerEpoch moves the group epoch. REQUIRES: g.mu held.
func (g *Group) bumpConsumerEpoch() {
	g.consumer.epoch++
	g.consumer.unwritten = append(g.consumer.unwritten, consumerEpochRecord(g.name, g.consumer.epoch))
}

// writeConsumer writes the records of the group's changes, in the order
// they were made; the error is what the heartbeat answers (a write that
// lost the partition's leadership is NOT_COORDINATOR). Records that failed
// stay queued ahead of the next change's, so that the log catches up with
// the memory at the next write that succeeds; until then the member is
// not told what the log does not hold. REQUIRES: g.mu held.
func (g *Group) writeConsumer() *kerr.Error {
	recs := g.consumer.unwritten
	if len(recs) == 0 {
		return nil
	}
	if err := g.c.store.AppendGroupRecords(g.name, recs); err != nil {
		g.c.log.Warn("writing consumer group records failed", "group", g.name, "records", len(recs), "err", err)
		return kerr.ErrorForCode(storeErrorCode(err)).(*kerr.Error)
	}
	g.consumer.unwritten = nil
	return nil
}

// stopConsumerTimers stops every member's timers (the group is unloaded
// or the coordinator closes). REQUIRES: g.mu held.
func (g *Group) stopConsumerTimers() {
	if g.consumer == nil {
		return
	}
	for _, m := range g.consumer.members {
		stopTimer(&m.session)
		stopTimer(&m.revocation)
	}
}

// consumerState is Kafka's name of a consumer group's state.
func (cg *consumerGroup) state() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.epoch > cg.targetEpoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.rec.epoch != cg.targetEpoch || m.rec.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// active reports whether the group has members.
func (cg *consumerGroup) active() bool { return cg != nil && len(cg.members) > 0 }

func sameAssignment(a, b Assignment) bool {
	return maps.EqualFunc(a, b, func(x, y []int32) bool { return slices.Equal(x, y) })
}

func sortedTopicIDs(a Assignment) []TopicID {
	ids := slices.Collect(maps.Keys(a))
	slices.SortFunc(ids, func(x, y TopicID) int { return bytes.Compare(x[:], y[:]) })
	return ids
}

// noteAssignedAt records the epoch of the partitions m was just given
// and forgets those it no longer holds.
func (m *consumerMember) noteAssignedAt() {
	held := map[topicPartitionID]int32{}
	for _, a := range []Assignment{m.rec.assigned, m.rec.revoking} {
		for t, ps := range a {
			for _, p := range ps {
				tp := topicPartitionID{t, p}
				at, ok := m.assignedAt[tp]
				if !ok {
					at = m.rec.epoch
				}
				held[tp] = at
			}
		}
	}
	m.assignedAt = held
}

// consumerMemberCheck validates who commits into a consumer group that
// has members: a member, at its current epoch (the generation field
// carries it). A commit at an older epoch is checked by partition
// (KIP-1251, Kafka 4.3): the member's for partitions it has held since
// that epoch, which partition returns; a commit at a newer epoch, or
// from a client that does not know the protocol (OffsetCommit before v9:
// ILLEGAL_GENERATION), is refused whole. A memberless commit races the
// members' own and is refused. REQUIRES: g.mu held.
func (g *Group) consumerMemberCheck(memberID string, epoch int32, modern bool) (partition func(topic string, p int32) bool,
	err *kerr.Error) {
	m := g.consumer.members[memberID]
	switch {
	case m == nil:
		return nil, kerr.UnknownMemberID
	case epoch == m.rec.epoch:
		return nil, nil
	case !modern:
		return nil, kerr.IllegalGeneration
	case epoch > m.rec.epoch || epoch < 0:
		return nil, kerr.StaleMemberEpoch
	}
	ids := map[string]TopicID{}
	for id, t := range g.consumer.topics {
		ids[t.Name] = id
	}
	return func(topic string, p int32) bool {
		id, ok := ids[topic]
		at, held := m.assignedAt[topicPartitionID{id, p}]
		return ok && held && at <= epoch
	}, nil
}

func (cg *consumerGroup) sortedMembers() []*consumerMember {
	ms := slices.Collect(maps.Values(cg.members))
	slices.SortFunc(ms, func(a, b *consumerMember) int { return strings.Compare(a.id, b.id) })
	return ms
}

// ConsumerGroupDescribe describes consumer groups: a group that does not
// exist, or is classic, is GROUP_ID_NOT_FOUND, as Kafka answers.
func (c *Coordinator) ConsumerGroupDescribe(req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, name := range req.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = name
		if req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = allGroupOperations
		}
		found := false
		if g := c.group(name, false); g != nil {
			g.mu.Lock()
			if found = g.consumer != nil && g.state != stateDead; found {
				g.describeConsumer(&dg)
			}
			g.mu.Unlock()
		}
		if !found {
			msg := "group " + name + " is not a consumer group"
			dg.ErrorCode, dg.ErrorMessage, dg.State = kerr.GroupIDNotFound.Code, &msg, "Dead"
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// describeConsumer fills dg. REQUIRES: g.mu held.
func (g *Group) describeConsumer(dg *kmsg.ConsumerGroupDescribeResponseGroup) {
	cg := g.consumer
	dg.State, dg.Epoch, dg.AssignmentEpoch, dg.AssignorName = cg.state(), cg.epoch, cg.targetEpoch, cg.assignor
	if dg.AssignorName == "" {
		dg.AssignorName = g.c.cfg.ConsumerAssignors[0]
	}
	_, byID := g.c.topicsByName()
	described := func(a Assignment) kmsg.Assignment {
		var out kmsg.Assignment
		for _, id := range sortedTopicIDs(a) {
			tp := kmsg.NewAssignmentTopicPartition()
			tp.TopicID, tp.Topic, tp.Partitions = id, byID[id].Name, slices.Clone(a[id])
			out.TopicPartitions = append(out.TopicPartitions, tp)
		}
		return out
	}
	for _, m := range cg.sortedMembers() {
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.id, m.rec.epoch, m.clientID, m.clientHost
		if m.instanceID != "" {
			dm.InstanceID = &m.instanceID
		}
		if m.rackID != "" {
			dm.RackID = &m.rackID
		}
		dm.SubscribedTopics = slices.Clone(m.topicNames)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		if m.regex != "" {
			dm.SubscribedTopicRegex = &m.regex
		}
		dm.Assignment, dm.TargetAssignment = described(m.rec.assigned), described(cg.target[m.id])
		dm.MemberType = 1 // consumer (0 is classic)
		dg.Members = append(dg.Members, dm)
	}
}
