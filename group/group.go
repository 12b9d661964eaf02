package group

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// groupState is a group's state; String gives Kafka's name.
type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s groupState) String() string { return stateNames[s] }

type topicPartition struct {
	topic     string
	partition int32
}

// member is a member of a group.
type member struct {
	id, instanceID       string // instanceID "" for dynamic members
	clientID, clientHost string
	session, rebalance   time.Duration
	protocols            []kmsg.JoinGroupRequestProtocol
	assignment           []byte
	joinedAt             int64 // join order, for picking a leader

	// join and sync are set while a JoinGroup or SyncGroup of this member
	// waits; answering one clears it. Buffered (1): answering never blocks.
	join        chan *kmsg.JoinGroupResponse
	joinVersion int16
	sync        chan *kmsg.SyncGroupResponse
	syncVersion int16

	expiry *time.Timer
}

// Group is one consumer group.
type Group struct {
	c    *Coordinator
	name string

	mu           sync.Mutex
	state        groupState
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	static       map[string]string      // instance id -> member id
	pending      map[string]*time.Timer // ids handed out with MEMBER_ID_REQUIRED
	offsets      map[topicPartition]state.GroupOffset
	// txnOffsets are the offsets pending in open transactions, by
	// producer id (txn_offsets.go).
	txnOffsets map[int64]map[topicPartition]state.GroupOffset
	joinSeq    int64
	// consumer is the group's state on the consumer protocol (KIP-848,
	// consumer_group.go), nil for a classic group. A group has members
	// of one protocol at a time.
	consumer *consumerGroup
	// share is the group's state as a share group (KIP-932,
	// share_group.go), nil for the others.
	share *shareGroup
	// shareOffsets are a share group's start offsets (share_offsets.go).
	shareOffsets map[topicPartitionID]ShareOffset

	// rebalanceTimer ends PreparingRebalance (the initial delay, then the
	// rebalance timeout); syncTimer ends CompletingRebalance.
	rebalanceTimer *time.Timer
	delaying       bool
	syncTimer      *time.Timer
}

// joinCaller describes who sent a JoinGroup.
type joinCaller struct {
	clientID, clientHost string
}

// JoinGroup handles a JoinGroup request; it may wait for the rebalance.
func (c *Coordinator) JoinGroup(req *kmsg.JoinGroupRequest, clientID, clientHost string) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	fail := func(err *kerr.Error) *kmsg.JoinGroupResponse {
		resp.ErrorCode = err.Code
		return resp
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		rebalance = session
	}
	switch {
	case req.Group == "":
		return fail(kerr.InvalidGroupID)
	case session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout:
		return fail(kerr.InvalidSessionTimeout)
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		return fail(kerr.InconsistentGroupProtocol)
	}
	g := c.group(req.Group, true)
	if g == nil {
		return fail(kerr.CoordinatorNotAvailable)
	}
	g.mu.Lock()
	if g.consumer.active() || g.share != nil {
		g.mu.Unlock()
		return fail(kerr.InconsistentGroupProtocol)
	}
	if g.consumer != nil {
		// An empty consumer group turns classic with its first member;
		// its records go, so that a new coordinator loads it classic.
		g.consumer.unwritten = append(g.consumer.unwritten, consumerGroupTombstones(g.name)...)
		if err := g.writeConsumer(); err != nil {
			g.mu.Unlock()
			return fail(err)
		}
		g.consumer = nil
	}
	if !g.accepts(req) {
		g.mu.Unlock()
		return fail(kerr.InconsistentGroupProtocol)
	}
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	resp.MemberID = req.MemberID
	wait, done := g.joinLocked(req, resp, joinCaller{clientID, clientHost}, session, rebalance)
	g.mu.Unlock()
	if done != nil {
		return done
	}
	return <-wait
}

// accepts checks the protocol type and that some protocol is supported by
// the joining member and every other member.
func (g *Group) accepts(req *kmsg.JoinGroupRequest) bool {
	if len(g.members) == 0 {
		return true
	}
	if g.protocolType != req.ProtocolType {
		return false
	}
	for _, p := range req.Protocols {
		if g.supportedByOthers(p.Name, req.MemberID) {
			return true
		}
	}
	return false
}

func (g *Group) supportedByOthers(protocol, except string) bool {
	for id, m := range g.members {
		if id == except {
			continue
		}
		if !slices.ContainsFunc(m.protocols, func(p kmsg.JoinGroupRequestProtocol) bool { return p.Name == protocol }) {
			return false
		}
	}
	return true
}

// joinLocked runs the join rules. It returns either a final response or a
// channel the caller waits on after unlocking.
func (g *Group) joinLocked(req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse, from joinCaller,
	session, rebalance time.Duration) (<-chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	fail := func(err *kerr.Error) (<-chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
		resp.ErrorCode = err.Code
		return nil, resp
	}
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	if req.MemberID == "" {
		switch {
		case instance != "" && g.static[instance] != "":
			return g.rejoinStatic(req, from, instance, session, rebalance)
		case instance == "" && req.Version >= 4:
			// KIP-394: hand out an id first, so a client that retries a
			// join after a timeout does not leave a ghost member behind.
			id := newMemberID(from.clientID)
			g.pending[id] = time.AfterFunc(session, func() { g.expirePending(id) })
			resp.MemberID = id
			return fail(kerr.MemberIDRequired)
		}
		m := g.addMember(newMemberID(from.clientID), instance, from, session, rebalance, req.Protocols)
		return g.rebalanceAndWait(m, req.Version, "new member "+m.id+" joined"), nil
	}
	if known := g.static[instance]; instance != "" && known != "" && known != req.MemberID {
		// A process of a static member that another process replaced
		// (KIP-345): fence it, so it shuts down rather than rejoining
		// without a member id and in turn replacing its successor.
		return fail(kerr.FencedInstanceID)
	}
	m := g.members[req.MemberID]
	if m == nil {
		t, ok := g.pending[req.MemberID]
		if !ok {
			return fail(kerr.UnknownMemberID)
		}
		t.Stop()
		delete(g.pending, req.MemberID)
		m = g.addMember(req.MemberID, instance, from, session, rebalance, req.Protocols)
		return g.rebalanceAndWait(m, req.Version, "new member "+m.id+" joined"), nil
	}
	if instance != "" && g.static[instance] != m.id || instance == "" && m.instanceID != "" {
		return fail(kerr.FencedInstanceID)
	}
	changed := !sameProtocols(m.protocols, req.Protocols)
	m.protocols, m.session, m.rebalance = ownProtocols(req.Protocols), session, rebalance
	m.clientID, m.clientHost = from.clientID, from.clientHost
	switch g.state {
	case statePreparingRebalance:
		return g.waitJoin(m, req.Version), nil
	case stateCompletingRebalance, stateStable:
		if changed || (g.state == stateStable && m.id == g.leader) {
			return g.rebalanceAndWait(m, req.Version, "member "+m.id+" rejoined"), nil
		}
		// Nothing changed: answer with the current generation.
		g.resetExpiry(m)
		return nil, g.joinResponse(m, req.Version, false)
	}
	return fail(kerr.UnknownMemberID)
}

// rejoinStatic handles a static member coming back with a new process
// (KIP-345): it takes a new member id, the old one is fenced, and if
// nothing changed the group does not rebalance.
func (g *Group) rejoinStatic(req *kmsg.JoinGroupRequest, from joinCaller,
	instance string, session, rebalance time.Duration) (<-chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	old := g.members[g.static[instance]]
	oldID, newID := old.id, newMemberID(from.clientID)
	if old.join != nil {
		g.answerJoinError(old, kerr.FencedInstanceID)
	}
	if old.sync != nil {
		g.answerSyncError(old, kerr.FencedInstanceID)
	}
	delete(g.members, old.id)
	wasLeader := old.id == g.leader
	old.id = newID
	g.members[newID] = old
	g.static[instance] = newID
	if wasLeader {
		g.leader = newID
	}
	changed := !sameProtocols(old.protocols, req.Protocols)
	old.protocols, old.session, old.rebalance = ownProtocols(req.Protocols), session, rebalance
	old.clientID, old.clientHost = from.clientID, from.clientHost
	if g.state == stateStable && !changed {
		g.c.log.Info("static member rejoined without a rebalance", "group", g.name, "instance", instance)
		g.resetExpiry(old)
		// Its new id is stored, as Kafka stores the group on a static
		// member's replacement: a coordinator that loads the group later
		// would otherwise map the instance to the old id and fence the
		// live process (FENCED_INSTANCE_ID).
		g.persistMeta()
		resp := g.joinResponse(old, req.Version, true)
		if wasLeader && req.Version < 9 {
			// Before v9 the leader cannot be told to skip the
			// assignment: answer with the old leader id, as Kafka does,
			// so the new process does not think it leads and assign.
			resp.LeaderID = oldID
		}
		return nil, resp
	}
	return g.rebalanceAndWait(old, req.Version, "static member "+instance+" rejoined"), nil
}

// ownProtocols deep-copies a join's protocols: kmsg decodes byte fields as
// slices of the request buffer, which the network layer reuses as soon as
// the request is answered, while a member keeps its protocols for the life
// of the group.
func ownProtocols(ps []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, len(ps))
	for i, p := range ps {
		out[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
	}
	return out
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(a, b, func(x, y kmsg.JoinGroupRequestProtocol) bool {
		return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata)
	})
}

func (g *Group) addMember(id, instance string, from joinCaller, session, rebalance time.Duration,
	protocols []kmsg.JoinGroupRequestProtocol) *member {
	g.joinSeq++
	m := &member{id: id, instanceID: instance, clientID: from.clientID, clientHost: from.clientHost,
		session: session, rebalance: rebalance, protocols: ownProtocols(protocols), joinedAt: g.joinSeq}
	g.members[id] = m
	if instance != "" {
		g.static[instance] = id
	}
	return m
}

// rebalanceAndWait starts a rebalance (unless one is under way) and
// parks m's join.
func (g *Group) rebalanceAndWait(m *member, version int16, reason string) <-chan *kmsg.JoinGroupResponse {
	ch := g.waitJoin(m, version)
	if g.state != statePreparingRebalance {
		g.prepareRebalance(reason)
	}
	g.maybeCompleteJoin()
	return ch
}

func (g *Group) waitJoin(m *member, version int16) <-chan *kmsg.JoinGroupResponse {
	if m.join != nil {
		// A member re-sending its join replaces the older request.
		g.answerJoinError(m, kerr.RebalanceInProgress)
	}
	m.join = make(chan *kmsg.JoinGroupResponse, 1)
	m.joinVersion = version
	g.resetExpiry(m)
	ch := m.join
	g.maybeCompleteJoin()
	return ch
}

// prepareRebalance moves the group to PreparingRebalance: members learn
// of it from their heartbeats and rejoin.
func (g *Group) prepareRebalance(reason string) {
	if g.state == stateCompletingRebalance {
		for _, m := range g.members {
			if m.sync != nil {
				g.answerSyncError(m, kerr.RebalanceInProgress)
			}
		}
	}
	stopTimer(&g.syncTimer)
	stopTimer(&g.rebalanceTimer)
	delay := g.maxRebalanceTimeout()
	g.delaying = false
	if g.state == stateEmpty && g.c.cfg.InitialRebalanceDelay > 0 {
		delay, g.delaying = min(g.c.cfg.InitialRebalanceDelay, delay), true
	}
	g.state = statePreparingRebalance
	gen := g.generation
	g.rebalanceTimer = time.AfterFunc(delay, func() { g.rebalanceTimeout(gen) })
	g.c.log.Info("preparing rebalance", "group", g.name, "generation", gen, "reason", reason)
}

func (g *Group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalance)
	}
	return max(d, time.Millisecond)
}

// rebalanceTimeout ends the initial delay or the join phase: members that
// did not rejoin are removed.
func (g *Group) rebalanceTimeout(gen int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != statePreparingRebalance || g.generation != gen {
		return
	}
	if g.delaying {
		g.delaying = false
		if !g.allJoined() {
			// More members arrived late: give them the rest of the
			// rebalance timeout, as Kafka's delayed join does.
			g.rebalanceTimer = time.AfterFunc(g.maxRebalanceTimeout(), func() { g.rebalanceTimeout(gen) })
			return
		}
	}
	for _, m := range g.members {
		if m.join == nil {
			g.c.log.Info("member did not rejoin in time; removing it", "group", g.name, "member", m.id)
			g.removeMember(m)
		}
	}
	g.completeJoin()
}

func (g *Group) allJoined() bool {
	for _, m := range g.members {
		if m.join == nil {
			return false
		}
	}
	return true
}

// maybeCompleteJoin completes the join phase once every member rejoined.
func (g *Group) maybeCompleteJoin() {
	if g.state == statePreparingRebalance && !g.delaying && g.allJoined() {
		g.completeJoin()
	}
}

// completeJoin starts a new generation: it picks the protocol and the
// leader and answers every waiting join; the leader gets the members.
func (g *Group) completeJoin() {
	stopTimer(&g.rebalanceTimer)
	g.generation++
	if len(g.members) == 0 {
		g.state, g.protocol, g.leader = stateEmpty, "", ""
		g.persistMeta()
		g.c.log.Info("group is empty", "group", g.name, "generation", g.generation)
		return
	}
	g.protocol = g.selectProtocol()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = g.firstJoined()
	}
	g.state = stateCompletingRebalance
	for _, m := range g.members {
		m.assignment = nil
		if m.join != nil {
			resp := g.joinResponse(m, m.joinVersion, false)
			m.join <- resp
			m.join = nil
		}
		g.resetExpiry(m)
	}
	gen := g.generation
	g.syncTimer = time.AfterFunc(g.maxRebalanceTimeout(), func() { g.syncTimeout(gen) })
	g.persistMeta()
	g.c.log.Info("rebalance joined", "group", g.name, "generation", gen, "members", len(g.members),
		"protocol", g.protocol, "leader", g.leader)
}

// joinResponse is the answer for m in the current generation; the leader
// gets the members and their metadata for the selected protocol.
// skipAssignment (v9+) tells a static leader that rejoined without a
// rebalance not to compute a new assignment.
func (g *Group) joinResponse(m *member, version int16, skipAssignment bool) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = version
	resp.Generation = g.generation
	pt, p := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &pt, &p
	resp.LeaderID, resp.MemberID = g.leader, m.id
	if m.id == g.leader && (!skipAssignment || version >= 9) {
		resp.SkipAssignment = skipAssignment
		for _, o := range g.sortedMembers() {
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID = o.id
			if o.instanceID != "" {
				inst := o.instanceID
				jm.InstanceID = &inst
			}
			for _, pr := range o.protocols {
				if pr.Name == g.protocol {
					jm.ProtocolMetadata = pr.Metadata
				}
			}
			resp.Members = append(resp.Members, jm)
		}
	}
	return resp
}

func (g *Group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return int(a.joinedAt - b.joinedAt) })
	return ms
}

func (g *Group) firstJoined() string {
	ms := g.sortedMembers()
	return ms[0].id
}

// selectProtocol picks, among the protocols every member supports, the one
// most members list first (ties: the earliest in the leader's order), as
// Kafka's vote does.
func (g *Group) selectProtocol() string {
	ms := g.sortedMembers()
	var candidates []string
	for _, p := range ms[0].protocols {
		if g.supportedByOthers(p.Name, "") {
			candidates = append(candidates, p.Name)
		}
	}
	votes := map[string]int{}
	for _, m := range ms {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

// syncTimeout ends a CompletingRebalance whose leader never sent its
// assignment: members that did not sync are removed and the group
// rebalances.
func (g *Group) syncTimeout(gen int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != stateCompletingRebalance || g.generation != gen {
		return
	}
	for _, m := range g.members {
		if m.sync == nil {
			g.removeMember(m)
		}
	}
	g.prepareRebalance("members did not sync in time")
	g.maybeCompleteJoin()
}

// removeMember drops m, answering its waiting requests.
func (g *Group) removeMember(m *member) {
	if m.join != nil {
		g.answerJoinError(m, kerr.UnknownMemberID)
	}
	if m.sync != nil {
		g.answerSyncError(m, kerr.UnknownMemberID)
	}
	if m.expiry != nil {
		m.expiry.Stop()
	}
	delete(g.members, m.id)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
	}
}

// memberLeft reacts to a member leaving or expiring.
func (g *Group) memberLeft(reason string) {
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.prepareRebalance(reason)
		g.maybeCompleteJoin()
	case statePreparingRebalance:
		g.maybeCompleteJoin()
	}
}

func (g *Group) answerJoinError(m *member, err *kerr.Error) {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = m.joinVersion
	resp.ErrorCode, resp.Generation, resp.MemberID = err.Code, -1, m.id
	m.join <- resp
	m.join = nil
}

func (g *Group) answerSyncError(m *member, err *kerr.Error) {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.Version = m.syncVersion
	resp.ErrorCode = err.Code
	m.sync <- resp
	m.sync = nil
}

// resetExpiry restarts m's session timer.
func (g *Group) resetExpiry(m *member) {
	if m.expiry != nil {
		m.expiry.Stop()
	}
	id := m.id
	m.expiry = time.AfterFunc(m.session, func() { g.expire(id, m) })
}

// expire removes a member whose session timed out.
func (g *Group) expire(id string, m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.members[id] != m || m.join != nil || m.sync != nil {
		// Gone, renamed, or parked in a join or a sync: the rebalance
		// and sync deadlines own it (Kafka's awaiting members satisfy
		// their heartbeats).
		return
	}
	g.c.log.Info("member session expired", "group", g.name, "member", id)
	g.removeMember(m)
	g.memberLeft("member " + id + " session expired")
}

func (g *Group) expirePending(id string) {
	g.mu.Lock()
	delete(g.pending, id)
	g.mu.Unlock()
}

// persistMeta stores the generation and protocol type, and for a Stable
// group its membership (state.GroupMeta). A failed write is logged: a new
// coordinator then loads an older generation, and the members' next
// heartbeat makes them rejoin. REQUIRES: g.mu held.
func (g *Group) persistMeta() {
	m := state.GroupMeta{Group: g.name, ProtocolType: g.protocolType, Generation: g.generation}
	if g.state == stateStable {
		m.Protocol, m.Leader = g.protocol, g.leader
		for _, mb := range g.members {
			gm := state.GroupMember{ID: mb.id, InstanceID: mb.instanceID, ClientID: mb.clientID, ClientHost: mb.clientHost,
				SessionTimeout: mb.session, RebalanceTimeout: mb.rebalance, Assignment: mb.assignment}
			for _, p := range mb.protocols {
				if p.Name == g.protocol {
					gm.Subscription = p.Metadata
				}
			}
			m.Members = append(m.Members, gm)
		}
		slices.SortFunc(m.Members, func(a, b state.GroupMember) int { return strings.Compare(a.ID, b.ID) })
	}
	if err := g.c.store.PutGroupMeta(m); err != nil {
		g.c.log.Warn("storing group metadata failed", "group", g.name, "err", err)
	}
}

// restoreMembers makes g the Stable generation m holds, as a new
// coordinator of the group loads it: its members keep their ids and
// assignments and are served without a rebalance, each on a fresh session
// (Kafka's loaded members are timed out from the load, too). A member
// that does not come back is expired as any other. REQUIRES: g.mu held,
// or g not shared yet.
func (g *Group) restoreMembers(m state.GroupMeta) {
	if len(m.Members) == 0 {
		return
	}
	g.state, g.protocol, g.leader = stateStable, m.Protocol, m.Leader
	for _, gm := range m.Members {
		g.joinSeq++
		mb := &member{id: gm.ID, instanceID: gm.InstanceID, clientID: gm.ClientID, clientHost: gm.ClientHost,
			session: gm.SessionTimeout, rebalance: gm.RebalanceTimeout, assignment: gm.Assignment, joinedAt: g.joinSeq,
			protocols: []kmsg.JoinGroupRequestProtocol{{Name: m.Protocol, Metadata: gm.Subscription}}}
		g.members[gm.ID] = mb
		if gm.InstanceID != "" {
			g.static[gm.InstanceID] = gm.ID
		}
		g.resetExpiry(mb)
	}
}

// shutdownLocked stops the group's timers and answers waiting requests
// COORDINATOR_NOT_AVAILABLE.
func (g *Group) shutdownLocked() { g.shutdownWith(kerr.CoordinatorNotAvailable) }

// shutdownWith stops the group's timers and answers waiting requests with
// code. REQUIRES: g.mu held.
func (g *Group) shutdownWith(code *kerr.Error) {
	stopTimer(&g.rebalanceTimer)
	stopTimer(&g.syncTimer)
	for _, t := range g.pending {
		t.Stop()
	}
	g.stopConsumerTimers()
	g.stopShareTimers()
	for _, m := range g.members {
		if m.expiry != nil {
			m.expiry.Stop()
		}
		if m.join != nil {
			g.answerJoinError(m, code)
		}
		if m.sync != nil {
			g.answerSyncError(m, code)
		}
	}
}

func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}
