package group

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/state"
)

const (
	// longSession is a session timeout no test outlives: members with it
	// never expire unless a test wants them to.
	longSession = 10 * time.Second
	// longRebalance is a rebalance timeout no test outlives.
	longRebalance = 10 * time.Second
	// waitFor bounds every wait for a response or a condition.
	waitFor = 5 * time.Second
)

// memStore is an in-memory Store.
type memStore struct {
	mu      sync.Mutex
	metas   map[string]state.GroupMeta
	offsets map[string]map[topicPartition]state.GroupOffset
	// failCommits makes CommitOffsets and CommitPendingOffsets fail.
	failCommits error
	// pendingWrites counts CommitPendingOffsets calls that succeeded.
	pendingWrites int
	// log holds the records AppendGroupRecords wrote, in order, as a
	// partition of __consumer_offsets would; failAppends makes it fail.
	log         []batch.Record
	failAppends error
}

var _ Store = (*memStore)(nil)

func newMemStore() *memStore {
	return &memStore{metas: map[string]state.GroupMeta{}, offsets: map[string]map[topicPartition]state.GroupOffset{}}
}

func (s *memStore) AppendGroupRecords(_ string, recs []batch.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAppends != nil {
		return s.failAppends
	}
	s.log = append(s.log, recs...)
	return nil
}

// replay is the GroupsState of every record AppendGroupRecords wrote.
func (s *memStore) replay(t *testing.T) *GroupsState {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := NewGroupsState()
	for _, r := range s.log {
		if err := st.Apply(r.Key, r.Value); err != nil {
			t.Fatalf("replaying the store's records: %v", err)
		}
	}
	return st
}

func (s *memStore) CommitOffsets(group string, offs []state.GroupOffset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failCommits != nil {
		return s.failCommits
	}
	if s.offsets[group] == nil {
		s.offsets[group] = map[topicPartition]state.GroupOffset{}
	}
	for _, o := range offs {
		s.offsets[group][topicPartition{o.Topic, o.Partition}] = o
	}
	return nil
}

// CommitPendingOffsets keeps nothing: a memStore has no log to hold
// pending offsets in (it counts the calls).
func (s *memStore) CommitPendingOffsets(group string, pid int64, epoch int16, offs []state.GroupOffset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failCommits != nil {
		return s.failCommits
	}
	s.pendingWrites++
	return nil
}

func (s *memStore) MaterializeOffsets(group string, offs []state.GroupOffset) error {
	return s.CommitOffsets(group, offs)
}

func (s *memStore) GroupOffsets(group string) ([]state.GroupOffset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.offsets[group])), nil
}

func (s *memStore) DeleteOffsets(group, topic string, partitions []int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range partitions {
		delete(s.offsets[group], topicPartition{topic, p})
	}
	return nil
}

func (s *memStore) PutGroupMeta(m state.GroupMeta) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metas[m.Group] = m
	return nil
}

func (s *memStore) DeleteGroup(group string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.metas, group)
	delete(s.offsets, group)
	return nil
}

func (s *memStore) Groups() ([]state.GroupMeta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.metas)), nil
}

func (s *memStore) meta(group string) (state.GroupMeta, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.metas[group]
	return m, ok
}

// newCoordinator returns a coordinator on store (a fresh memStore if nil)
// with short test timeouts, closed at the end of the test. Zero fields of
// cfg get MinSessionTimeout 10ms and no initial rebalance delay.
func newCoordinator(t *testing.T, store Store, cfg Config) *Coordinator {
	t.Helper()
	if store == nil {
		store = newMemStore()
	}
	if cfg.MinSessionTimeout == 0 {
		cfg.MinSessionTimeout = 10 * time.Millisecond
	}
	if cfg.InitialRebalanceDelay == 0 {
		cfg.InitialRebalanceDelay = NoInitialRebalanceDelay
	}
	c, err := New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// badgerStore is a state.Store as the coordinator's Store without a log:
// it has nowhere to keep offsets pending in a transaction.
type badgerStore struct{ *state.Store }

func (badgerStore) CommitPendingOffsets(string, int64, int16, []state.GroupOffset) error {
	return errors.New("a Badger store keeps no pending offsets")
}

func (badgerStore) AppendGroupRecords(string, []batch.Record) error { return nil }

func (s badgerStore) MaterializeOffsets(group string, offs []state.GroupOffset) error {
	return s.CommitOffsets(group, offs)
}

// openStateStore opens an in-memory state.Store closed at the end of the
// test.
func openStateStore(t *testing.T) badgerStore {
	t.Helper()
	s, err := state.Open("", state.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return badgerStore{s}
}

// recv waits for a response on ch.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("no response after %v", waitFor)
		panic("unreachable")
	}
}

// pending fails the test if ch already holds a response.
func pending[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s answered early: %+v", what, v)
	default:
	}
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

// wantCode fails the test unless got is want.
func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	wantCode := int16(0)
	if want != nil {
		wantCode = want.Code
	}
	if got != wantCode {
		t.Fatalf("%s: error %s, want %s", what, errName(got), errName(wantCode))
	}
}

// peek runs fn on group name under its mutex; fn gets nil for no group.
func peek(c *Coordinator, name string, fn func(g *Group)) {
	c.mu.Lock()
	g := c.groups[name]
	c.mu.Unlock()
	if g == nil {
		fn(nil)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g)
}

// stateOf returns the state and generation of group name.
func stateOf(c *Coordinator, name string) (st string, gen int32, members int) {
	st = "none"
	peek(c, name, func(g *Group) {
		if g != nil {
			st, gen, members = g.state.String(), g.generation, len(g.members)
		}
	})
	return st, gen, members
}

// waitState waits until group name is in state st with n members.
func waitState(t *testing.T, c *Coordinator, name, st string, n int) {
	t.Helper()
	testutil.CheckFor(t, waitFor, func() error {
		if got, gen, members := stateOf(c, name); got != st || members != n {
			return fmt.Errorf("group %s is %s (generation %d) with %d members, want %s with %d", name, got, gen, members, st, n)
		}
		return nil
	})
}

// parked reports whether member id of group name waits in a JoinGroup
// (join) or a SyncGroup (!join).
func parked(c *Coordinator, name, id string, join bool) bool {
	var ok bool
	peek(c, name, func(g *Group) {
		if g == nil {
			return
		}
		if m := g.members[id]; m != nil {
			ok = join && m.join != nil || !join && m.sync != nil
		}
	})
	return ok
}

// waitParked waits until member id of group name waits in a JoinGroup
// (join) or a SyncGroup.
func waitParked(t *testing.T, c *Coordinator, name, id string, join bool) {
	t.Helper()
	testutil.CheckFor(t, waitFor, func() error {
		if !parked(c, name, id, join) {
			return fmt.Errorf("member %s of %s is not waiting (join %v)", id, name, join)
		}
		return nil
	})
}

// protos builds join protocols; each one's metadata is tag/name, so tests
// can tell whose metadata a response carries.
func protos(tag string, names ...string) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, 0, len(names))
	for _, n := range names {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = n, []byte(tag+"/"+n)
		out = append(out, p)
	}
	return out
}

// consumerProtos builds consumer-protocol join protocols subscribing to
// topics.
func consumerProtos(topics []string, names ...string) []kmsg.JoinGroupRequestProtocol {
	meta := kmsg.ConsumerMemberMetadata{Topics: topics}
	out := make([]kmsg.JoinGroupRequestProtocol, 0, len(names))
	for _, n := range names {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = n, meta.AppendTo(nil)
		out = append(out, p)
	}
	return out
}

// client is a test group member: it builds requests from its fields and
// records its member id and generation from the answers.
type client struct {
	t        *testing.T
	c        *Coordinator
	group    string
	clientID string

	version      int16 // JoinGroup version
	instance     string
	protocolType string // "consumer" if ""
	protocols    []kmsg.JoinGroupRequestProtocol
	session      time.Duration // longSession if 0
	rebalance    time.Duration // longRebalance if 0

	id  string
	gen int32
}

// newClient returns a dynamic member of group named clientID, speaking
// JoinGroup v5 with protocol "range", metadata clientID/range.
func newClient(t *testing.T, c *Coordinator, group, clientID string) *client {
	return &client{t: t, c: c, group: group, clientID: clientID, version: 5, protocols: protos(clientID, "range")}
}

func (m *client) joinRequest() *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = m.version
	req.Group, req.MemberID = m.group, m.id
	req.SessionTimeoutMillis = int32(cmpOr(m.session, longSession) / time.Millisecond)
	req.RebalanceTimeoutMillis = int32(cmpOr(m.rebalance, longRebalance) / time.Millisecond)
	req.ProtocolType = cmpOr(m.protocolType, "consumer")
	req.Protocols = m.protocols
	if m.instance != "" {
		inst := m.instance
		req.InstanceID = &inst
	}
	return req
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// join sends a JoinGroup on its own goroutine. A v4+ dynamic member with
// no id first gets one with MEMBER_ID_REQUIRED, synchronously.
func (m *client) join() <-chan *kmsg.JoinGroupResponse {
	m.t.Helper()
	req := m.joinRequest()
	if m.id == "" && m.instance == "" && req.Version >= 4 {
		resp := m.c.JoinGroup(req, m.clientID, "/10.0.0.1")
		wantCode(m.t, m.clientID+" first join", resp.ErrorCode, kerr.MemberIDRequired)
		m.id = resp.MemberID
		req = m.joinRequest()
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- m.c.JoinGroup(req, m.clientID, "/10.0.0.1") }()
	return ch
}

// joined records a successful join response.
func (m *client) joined(resp *kmsg.JoinGroupResponse) *kmsg.JoinGroupResponse {
	m.t.Helper()
	wantCode(m.t, m.clientID+" join", resp.ErrorCode, nil)
	m.id, m.gen = resp.MemberID, resp.Generation
	return resp
}

func (m *client) heartbeat() int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.gen
	if m.instance != "" {
		inst := m.instance
		req.InstanceID = &inst
	}
	return m.c.Heartbeat(req).ErrorCode
}

// sync sends a SyncGroup on its own goroutine with the given assignment
// (the leader's).
func (m *client) sync(assignment map[string][]byte) <-chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.gen
	if m.instance != "" {
		inst := m.instance
		req.InstanceID = &inst
	}
	for _, id := range slices.Sorted(maps.Keys(assignment)) {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = id, assignment[id]
		req.GroupAssignment = append(req.GroupAssignment, a)
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- m.c.SyncGroup(req) }()
	return ch
}

func (m *client) commit(topic string, partition int32, offset int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.MemberID, req.Generation = m.group, m.id, m.gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return m.c.OffsetCommit(req).Topics[0].Partitions[0].ErrorCode
}

func assignmentOf(id string) []byte { return []byte("assignment of " + id) }

// form builds a Stable group of members, joining them one at a time as
// clients would: each newcomer's join parks, the members already in rejoin,
// and the leader syncs everyone's assignmentOf. It returns the leader.
func form(t *testing.T, members ...*client) *client {
	t.Helper()
	c, name := members[0].c, members[0].group
	var leader *client
	for i, nm := range members {
		chans := []<-chan *kmsg.JoinGroupResponse{nm.join()}
		if i > 0 {
			waitState(t, c, name, "PreparingRebalance", i+1)
			for _, old := range members[:i] {
				chans = append(chans, old.join())
			}
		}
		joiners := append([]*client{nm}, members[:i]...)
		var gen int32
		for j, ch := range chans {
			resp := joiners[j].joined(recv(t, ch))
			if j == 0 {
				gen = resp.Generation
			} else if resp.Generation != gen {
				t.Fatalf("%s joined generation %d, %s %d", joiners[j].clientID, resp.Generation, nm.clientID, gen)
			}
			if resp.LeaderID == resp.MemberID {
				leader = joiners[j]
			}
		}
		syncAll(t, leader, members[:i+1]...)
	}
	return leader
}

// syncAll makes the group Stable: the leader syncs assignmentOf each
// member, then the others sync; every one must get its own assignment.
func syncAll(t *testing.T, leader *client, members ...*client) {
	t.Helper()
	assignment := map[string][]byte{}
	for _, m := range members {
		assignment[m.id] = assignmentOf(m.id)
	}
	resp := recv(t, leader.sync(assignment))
	wantCode(t, leader.clientID+" sync", resp.ErrorCode, nil)
	for _, m := range members {
		if m == leader {
			continue
		}
		resp := recv(t, m.sync(nil))
		wantCode(t, m.clientID+" sync", resp.ErrorCode, nil)
		if string(resp.MemberAssignment) != string(assignmentOf(m.id)) {
			t.Fatalf("%s got assignment %q", m.clientID, resp.MemberAssignment)
		}
	}
}

func describe(t *testing.T, c *Coordinator, name string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{name}
	resp := c.DescribeGroups(req)
	if len(resp.Groups) != 1 {
		t.Fatalf("describe %s: %d groups", name, len(resp.Groups))
	}
	return resp.Groups[0]
}
