package group

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/state"
)

func TestJoinGroupRefusals(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		edit func(req *kmsg.JoinGroupRequest)
		want *kerr.Error
	}{
		{"empty group id", func(r *kmsg.JoinGroupRequest) { r.Group = "" }, kerr.InvalidGroupID},
		{"session below min", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 5 }, kerr.InvalidSessionTimeout},
		{"session above max", func(r *kmsg.JoinGroupRequest) { r.SessionTimeoutMillis = 2000 }, kerr.InvalidSessionTimeout},
		{"v0 session above max", func(r *kmsg.JoinGroupRequest) { r.Version, r.SessionTimeoutMillis = 0, 2000 }, kerr.InvalidSessionTimeout},
		{"no protocols", func(r *kmsg.JoinGroupRequest) { r.Protocols = nil }, kerr.InconsistentGroupProtocol},
		{"no protocol type", func(r *kmsg.JoinGroupRequest) { r.ProtocolType = "" }, kerr.InconsistentGroupProtocol},
		{"unknown member id v3", func(r *kmsg.JoinGroupRequest) { r.Version, r.MemberID = 3, "ghost" }, kerr.UnknownMemberID},
		{"unknown member id v9", func(r *kmsg.JoinGroupRequest) { r.Version, r.MemberID = 9, "ghost" }, kerr.UnknownMemberID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCoordinator(t, nil, Config{MaxSessionTimeout: time.Second})
			req := newClient(t, c, "g", "c1").joinRequest()
			req.SessionTimeoutMillis = 100
			tt.edit(req)
			resp := c.JoinGroup(req, "c1", "/10.0.0.1")
			wantCode(t, "join", resp.ErrorCode, tt.want)
			if resp.Generation != -1 {
				t.Errorf("generation %d, want -1", resp.Generation)
			}
			if st, _, n := stateOf(c, "g"); st != "none" && (st != "Empty" || n != 0) {
				t.Errorf("group is %s with %d members after a refused join", st, n)
			}
		})
	}
}

// A join that no protocol of the group's members matches is refused; the
// group does not rebalance.
func TestJoinGroupInconsistentProtocol(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name         string
		protocolType string
		protocols    []string
		want         *kerr.Error
	}{
		{"other protocol type", "connect", []string{"range"}, kerr.InconsistentGroupProtocol},
		{"no common protocol", "consumer", []string{"sticky"}, kerr.InconsistentGroupProtocol},
		{"one unsupported by a member", "consumer", []string{"cooperative-sticky"}, kerr.InconsistentGroupProtocol},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCoordinator(t, nil, Config{})
			a := newClient(t, c, "g", "a")
			a.protocols = protos("a", "range", "roundrobin")
			b := newClient(t, c, "g", "b")
			b.protocols = protos("b", "range", "cooperative-sticky")
			form(t, a, b)
			x := newClient(t, c, "g", "x")
			x.version = 3
			x.protocolType, x.protocols = tt.protocolType, protos("x", tt.protocols...)
			resp := recv(t, x.join())
			wantCode(t, "join", resp.ErrorCode, tt.want)
			wantCode(t, "heartbeat", a.heartbeat(), nil)
			if st, _, n := stateOf(c, "g"); st != "Stable" || n != 2 {
				t.Fatalf("group is %s with %d members", st, n)
			}
		})
	}
}

func TestJoinGroupMemberID(t *testing.T) {
	t.Parallel()
	for _, version := range []int16{0, 1, 3, 4, 5, 9} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			t.Parallel()
			c := newCoordinator(t, nil, Config{})
			m := newClient(t, c, "g", "client-a")
			m.version = version
			req := m.joinRequest()
			resp := c.JoinGroup(req, "client-a", "/10.0.0.1")
			if version >= 4 {
				// KIP-394: a dynamic member first gets an id.
				wantCode(t, "first join", resp.ErrorCode, kerr.MemberIDRequired)
				if !strings.HasPrefix(resp.MemberID, "client-a-") || resp.Generation != -1 {
					t.Fatalf("member id %q, generation %d", resp.MemberID, resp.Generation)
				}
				if st, _, n := stateOf(c, "g"); n != 0 {
					t.Fatalf("group is %s with %d members after MEMBER_ID_REQUIRED", st, n)
				}
				id := resp.MemberID
				req.MemberID = id
				resp = c.JoinGroup(req, "client-a", "/10.0.0.1")
				if resp.MemberID != id {
					t.Fatalf("joined as %q, want %q", resp.MemberID, id)
				}
			}
			wantCode(t, "join", resp.ErrorCode, nil)
			if !strings.HasPrefix(resp.MemberID, "client-a-") || resp.Generation != 1 || resp.LeaderID != resp.MemberID {
				t.Fatalf("member %q, generation %d, leader %q", resp.MemberID, resp.Generation, resp.LeaderID)
			}
			if resp.Protocol == nil || *resp.Protocol != "range" || len(resp.Members) != 1 {
				t.Fatalf("protocol %v, %d members", resp.Protocol, len(resp.Members))
			}
		})
	}
}

// An id handed out with MEMBER_ID_REQUIRED expires with the session
// timeout if the member does not come back with it.
func TestJoinGroupPendingMemberExpires(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, nil, Config{})
	m := newClient(t, c, "g", "a")
	m.session = 20 * time.Millisecond
	resp := c.JoinGroup(m.joinRequest(), "a", "/10.0.0.1")
	wantCode(t, "first join", resp.ErrorCode, kerr.MemberIDRequired)
	testutil.CheckFor(t, waitFor, func() error {
		var err error
		peek(c, "g", func(g *Group) {
			if len(g.pending) != 0 {
				err = kerr.MemberIDRequired
			}
		})
		return err
	})
	m.id = resp.MemberID
	resp = c.JoinGroup(m.joinRequest(), "a", "/10.0.0.1")
	wantCode(t, "join with the expired id", resp.ErrorCode, kerr.UnknownMemberID)
}

func TestJoinGroupTwoMembers(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, nil, Config{})
	a := newClient(t, c, "g", "a")
	b := newClient(t, c, "g", "b")
	form(t, a)
	if a.gen != 1 {
		t.Fatalf("first generation %d", a.gen)
	}

	bJoin := b.join()
	waitState(t, c, "g", "PreparingRebalance", 2)
	waitParked(t, c, "g", b.id, true)
	pending(t, bJoin, "b's join")
	wantCode(t, "a's heartbeat while preparing", a.heartbeat(), kerr.RebalanceInProgress)
	aResp := a.joined(recv(t, a.join()))
	bResp := b.joined(recv(t, bJoin))

	if a.gen != 2 || b.gen != 2 {
		t.Fatalf("generations %d and %d, want 2", a.gen, b.gen)
	}
	if aResp.LeaderID != a.id || bResp.LeaderID != a.id {
		t.Fatalf("leaders %q and %q, want a (%q)", aResp.LeaderID, bResp.LeaderID, a.id)
	}
	if len(bResp.Members) != 0 {
		t.Fatalf("follower got %d members", len(bResp.Members))
	}
	var got []string
	for _, m := range aResp.Members {
		got = append(got, m.MemberID+"="+string(m.ProtocolMetadata))
	}
	want := []string{a.id + "=a/range", b.id + "=b/range"}
	if !slices.Equal(got, want) {
		t.Fatalf("leader got members %q, want %q", got, want)
	}

	// The follower's sync waits for the leader's; meanwhile it may
	// heartbeat.
	bSync := b.sync(nil)
	waitParked(t, c, "g", b.id, false)
	wantCode(t, "b's heartbeat while completing", b.heartbeat(), nil)
	aSync := recv(t, a.sync(map[string][]byte{a.id: []byte("A"), b.id: []byte("B")}))
	wantCode(t, "leader sync", aSync.ErrorCode, nil)
	if string(aSync.MemberAssignment) != "A" {
		t.Fatalf("leader assignment %q", aSync.MemberAssignment)
	}
	bSyncResp := recv(t, bSync)
	wantCode(t, "follower sync", bSyncResp.ErrorCode, nil)
	if string(bSyncResp.MemberAssignment) != "B" || *bSyncResp.Protocol != "range" || *bSyncResp.ProtocolType != "consumer" {
		t.Fatalf("follower sync %+v", bSyncResp)
	}
	if d := describe(t, c, "g"); d.State != "Stable" {
		t.Fatalf("group is %s", d.State)
	}

	stranger := &client{t: t, c: c, group: "g", id: "stranger", gen: 2}
	otherGroup := &client{t: t, c: c, group: "nope", id: a.id, gen: 2}
	oldGen := &client{t: t, c: c, group: "g", id: a.id, gen: 1}
	for _, tt := range []struct {
		name string
		m    *client
		want *kerr.Error
	}{
		{"leader", a, nil},
		{"follower", b, nil},
		{"old generation", oldGen, kerr.IllegalGeneration},
		{"stranger", stranger, kerr.UnknownMemberID},
		{"unknown group", otherGroup, kerr.UnknownMemberID},
	} {
		wantCode(t, tt.name+" heartbeat", tt.m.heartbeat(), tt.want)
	}
}

// The group's protocol is the one most members prefer among those all
// support; on a tie, the first-joined member's order decides.
func TestJoinGroupProtocolVote(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		members [][]string
		want    string
	}{
		{"one member", [][]string{{"roundrobin", "range"}}, "roundrobin"},
		{"tie", [][]string{{"range", "roundrobin"}, {"roundrobin", "range"}}, "range"},
		{"tie, other first", [][]string{{"roundrobin", "range"}, {"range", "roundrobin"}}, "roundrobin"},
		{"majority", [][]string{{"range", "roundrobin"}, {"roundrobin", "range"}, {"roundrobin", "range"}}, "roundrobin"},
		{"third supports one", [][]string{{"range", "roundrobin"}, {"range", "roundrobin"}, {"roundrobin"}}, "roundrobin"},
		{"third supports the favourite", [][]string{{"range", "roundrobin"}, {"roundrobin", "range"}, {"range"}}, "range"},
		{"unlisted extras", [][]string{{"sticky", "range"}, {"range", "roundrobin"}}, "range"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCoordinator(t, nil, Config{})
			var members []*client
			for i, ps := range tt.members {
				m := newClient(t, c, "g", string(rune('a'+i)))
				m.protocols = protos(m.clientID, ps...)
				members = append(members, m)
			}
			form(t, members...)
			d := describe(t, c, "g")
			if d.Protocol != tt.want {
				t.Fatalf("protocol %q, want %q", d.Protocol, tt.want)
			}
			for _, dm := range d.Members {
				if !strings.HasSuffix(string(dm.ProtocolMetadata), "/"+tt.want) {
					t.Fatalf("member %s described with metadata %q", dm.ClientID, dm.ProtocolMetadata)
				}
			}
		})
	}
}

// A member joining a Stable group makes the others rejoin; a member that
// does not rejoin within the rebalance timeout is removed.
func TestJoinGroupRebalance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		bRejoins  bool
		wantCount int
	}{
		{"everyone rejoins", true, 3},
		{"one does not rejoin", false, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCoordinator(t, nil, Config{})
			a, b, n := newClient(t, c, "g", "a"), newClient(t, c, "g", "b"), newClient(t, c, "g", "n")
			for _, m := range []*client{a, b, n} {
				m.rebalance = 300 * time.Millisecond
			}
			form(t, a, b)
			gen := a.gen

			nJoin := n.join()
			waitState(t, c, "g", "PreparingRebalance", 3)
			wantCode(t, "a's heartbeat", a.heartbeat(), kerr.RebalanceInProgress)
			wantCode(t, "b's heartbeat", b.heartbeat(), kerr.RebalanceInProgress)
			joins := map[*client]<-chan *kmsg.JoinGroupResponse{n: nJoin, a: a.join()}
			if tt.bRejoins {
				joins[b] = b.join()
			}
			for m, ch := range joins {
				resp := m.joined(recv(t, ch))
				if resp.Generation != gen+1 {
					t.Fatalf("%s joined generation %d, want %d", m.clientID, resp.Generation, gen+1)
				}
				if m == a && len(resp.Members) != tt.wantCount {
					t.Fatalf("leader got %d members, want %d", len(resp.Members), tt.wantCount)
				}
			}
			if _, _, members := stateOf(c, "g"); members != tt.wantCount {
				t.Fatalf("%d members, want %d", members, tt.wantCount)
			}
			if !tt.bRejoins {
				b.gen = gen + 1
				wantCode(t, "removed member's heartbeat", b.heartbeat(), kerr.UnknownMemberID)
				resp := recv(t, b.join())
				wantCode(t, "removed member's rejoin", resp.ErrorCode, kerr.UnknownMemberID)
			}
		})
	}
}

// A member whose session expires is removed; the others rebalance.
func TestJoinGroupSessionExpiry(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, nil, Config{})
	a, b := newClient(t, c, "g", "a"), newClient(t, c, "g", "b")
	b.session = 100 * time.Millisecond
	form(t, a, b)
	gen := a.gen

	// b stops heartbeating; a keeps on until it learns of the rebalance.
	testutil.CheckFor(t, waitFor, func() error {
		if code := a.heartbeat(); code != kerr.RebalanceInProgress.Code {
			return fmt.Errorf("a's heartbeat: %s", errName(code))
		}
		return nil
	})
	if _, _, n := stateOf(c, "g"); n != 1 {
		t.Fatalf("%d members after the expiry", n)
	}
	resp := a.joined(recv(t, a.join()))
	if resp.Generation != gen+1 || resp.LeaderID != a.id || len(resp.Members) != 1 {
		t.Fatalf("rejoined generation %d, leader %q, %d members", resp.Generation, resp.LeaderID, len(resp.Members))
	}
	b.gen = gen + 1
	wantCode(t, "expired member's heartbeat", b.heartbeat(), kerr.UnknownMemberID)
}

// A member parked in a SyncGroup or a JoinGroup does not expire: the
// rebalance and sync deadlines own it, as in Kafka.
func TestJoinGroupWaitingMemberDoesNotExpire(t *testing.T) {
	t.Parallel()
	for _, join := range []bool{false, true} {
		name := map[bool]string{false: "sync", true: "join"}[join]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCoordinator(t, nil, Config{})
			a, b := newClient(t, c, "g", "a"), newClient(t, c, "g", "b")
			var waiter *client
			if join {
				// a's rejoin (as the leader) starts a rebalance and waits
				// for b.
				form(t, a, b)
				ch := a.join()
				waitParked(t, c, "g", a.id, true)
				defer func() { pending(t, ch, "a's join") }()
				waiter = a
			} else {
				// b's sync waits for the leader's.
				form(t, a)
				bJoin := b.join()
				waitState(t, c, "g", "PreparingRebalance", 2)
				a.joined(recv(t, a.join()))
				b.joined(recv(t, bJoin))
				b.sync(nil)
				waitParked(t, c, "g", b.id, false)
				waiter = b
			}
			// Fire the waiter's session timer now.
			var g *Group
			var m *member
			peek(c, "g", func(gr *Group) { g, m = gr, gr.members[waiter.id] })
			g.expire(waiter.id, m)
			if !parked(c, "g", waiter.id, join) {
				t.Fatalf("%s expired while waiting", waiter.clientID)
			}
		})
	}
}

func TestLeaveGroup(t *testing.T) {
	t.Parallel()
	type leaver struct{ member, instance string }
	for _, tt := range []struct {
		name    string
		version int16
		// leave picks who leaves among the static member a and the
		// dynamic member b.
		leave     func(a, b *client) []leaver
		want      []*kerr.Error // per leaver (v3+), or the top-level error
		wantGone  []string      // clientIDs removed
		wantStays []string
	}{
		{"v0 by member id", 0, func(a, b *client) []leaver { return []leaver{{b.id, ""}} }, []*kerr.Error{nil}, []string{"b"}, []string{"a"}},
		{"v0 unknown member", 0, func(a, b *client) []leaver { return []leaver{{"ghost", ""}} }, []*kerr.Error{kerr.UnknownMemberID}, nil, []string{"a", "b"}},
		{"v3 by member id", 3, func(a, b *client) []leaver { return []leaver{{b.id, ""}} }, []*kerr.Error{nil}, []string{"b"}, []string{"a"}},
		{"v3 by instance id", 3, func(a, b *client) []leaver { return []leaver{{"", "inst-a"}} }, []*kerr.Error{nil}, []string{"a"}, []string{"b"}},
		{"v3 by both ids", 4, func(a, b *client) []leaver { return []leaver{{a.id, "inst-a"}} }, []*kerr.Error{nil}, []string{"a"}, []string{"b"}},
		{"v3 wrong pairing", 3, func(a, b *client) []leaver { return []leaver{{b.id, "inst-a"}} }, []*kerr.Error{kerr.FencedInstanceID}, nil, []string{"a", "b"}},
		{"v3 unknown instance", 3, func(a, b *client) []leaver { return []leaver{{"", "inst-x"}} }, []*kerr.Error{kerr.UnknownMemberID}, nil, []string{"a", "b"}},
		{"v5 batch", 5, func(a, b *client) []leaver { return []leaver{{"ghost", ""}, {b.id, ""}} }, []*kerr.Error{kerr.UnknownMemberID, nil}, []string{"b"}, []string{"a"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCoordinator(t, nil, Config{})
			a, b := newClient(t, c, "g", "a"), newClient(t, c, "g", "b")
			a.instance = "inst-a"
			form(t, a, b)
			gen := a.gen
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Version, req.Group = tt.version, "g"
			ls := tt.leave(a, b)
			if tt.version < 3 {
				req.MemberID = ls[0].member
			} else {
				for _, l := range ls {
					rm := kmsg.NewLeaveGroupRequestMember()
					rm.MemberID = l.member
					if l.instance != "" {
						inst := l.instance
						rm.InstanceID = &inst
					}
					req.Members = append(req.Members, rm)
				}
			}
			resp := c.LeaveGroup(req)
			if tt.version < 3 {
				wantCode(t, "leave", resp.ErrorCode, tt.want[0])
			} else {
				wantCode(t, "leave", resp.ErrorCode, nil)
				if len(resp.Members) != len(ls) {
					t.Fatalf("%d member answers, want %d", len(resp.Members), len(ls))
				}
				for i, rm := range resp.Members {
					wantCode(t, "leaver "+rm.MemberID, rm.ErrorCode, tt.want[i])
				}
			}
			byName := map[string]*client{"a": a, "b": b}
			for _, name := range tt.wantGone {
				wantCode(t, name+"'s heartbeat", byName[name].heartbeat(), kerr.UnknownMemberID)
			}
			wantStable := len(tt.wantGone) == 0
			for _, name := range tt.wantStays {
				want := kerr.RebalanceInProgress
				if wantStable {
					want = nil
				}
				wantCode(t, name+"'s heartbeat", byName[name].heartbeat(), want)
			}
			if !wantStable {
				stays := byName[tt.wantStays[0]]
				resp := stays.joined(recv(t, stays.join()))
				if resp.Generation != gen+1 || resp.LeaderID != stays.id {
					t.Fatalf("rejoined generation %d with leader %q", resp.Generation, resp.LeaderID)
				}
			}
		})
	}
}

// LeaveGroup for a group the coordinator does not know answers every
// leaver UNKNOWN_MEMBER_ID, as Kafka does.
func TestLeaveGroupUnknownGroup(t *testing.T) {
	t.Parallel()
	for _, version := range []int16{0, 3, 5} {
		c := newCoordinator(t, nil, Config{})
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version, req.Group, req.MemberID = version, "nope", "m"
		rm := kmsg.NewLeaveGroupRequestMember()
		rm.MemberID = "m"
		req.Members = append(req.Members, rm)
		resp := c.LeaveGroup(req)
		if version < 3 {
			wantCode(t, "v0 leave", resp.ErrorCode, kerr.UnknownMemberID)
			continue
		}
		wantCode(t, "leave", resp.ErrorCode, nil)
		if len(resp.Members) != 1 || resp.Members[0].MemberID != "m" {
			t.Fatalf("v%d: members %+v", version, resp.Members)
		}
		wantCode(t, "leaver", resp.Members[0].ErrorCode, kerr.UnknownMemberID)
	}
}

// When the last member leaves the group is Empty, in a new generation.
func TestLeaveGroupLastMember(t *testing.T) {
	t.Parallel()
	store := newMemStore()
	c := newCoordinator(t, store, Config{})
	a := newClient(t, c, "g", "a")
	form(t, a)
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group, req.MemberID = 1, "g", a.id
	wantCode(t, "leave", c.LeaveGroup(req).ErrorCode, nil)
	if st, gen, n := stateOf(c, "g"); st != "Empty" || gen != a.gen+1 || n != 0 {
		t.Fatalf("group is %s, generation %d, %d members; want Empty, %d, 0", st, gen, n, a.gen+1)
	}
	if m, _ := store.meta("g"); m.Generation != a.gen+1 || m.ProtocolType != "consumer" {
		t.Fatalf("stored meta %+v", m)
	}
	// An empty group takes simple commits again.
	simple := &client{t: t, c: c, group: "g", gen: -1}
	wantCode(t, "simple commit", simple.commit("t", 0, 5), nil)
}

// KIP-345: a static member that comes back with a new process gets a new
// member id; with the same protocols the group does not rebalance and the
// old id is fenced; changed protocols rebalance.
func TestJoinGroupStaticMember(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		leader        bool // the leader restarts (otherwise a follower)
		version       int16
		change        bool // the restarted process has other protocols
		wantRebalance bool
	}{
		{"follower", false, 5, false, false},
		{"leader v5", true, 5, false, false},
		{"leader v9", true, 9, false, false},
		{"follower with new protocols", false, 5, true, true},
		{"leader with new protocols", true, 9, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newMemStore()
			c := newCoordinator(t, store, Config{})
			a, b := newClient(t, c, "g", "a"), newClient(t, c, "g", "b")
			a.instance, b.instance = "inst-a", "inst-b"
			a.version, b.version = tt.version, tt.version
			form(t, a, b) // a leads
			gen := a.gen
			restarted, other := b, a
			if tt.leader {
				restarted, other = a, b
			}
			oldID := restarted.id
			restarted.id = ""
			if tt.change {
				restarted.protocols = protos("new", "range")
			}
			ch := restarted.join()
			if tt.wantRebalance {
				waitState(t, c, "g", "PreparingRebalance", 2)
				wantCode(t, "other's heartbeat", other.heartbeat(), kerr.RebalanceInProgress)
				other.joined(recv(t, other.join()))
				resp := restarted.joined(recv(t, ch))
				if resp.Generation != gen+1 {
					t.Fatalf("generation %d, want %d", resp.Generation, gen+1)
				}
			} else {
				resp := restarted.joined(recv(t, ch))
				if resp.MemberID == oldID || !strings.HasPrefix(resp.MemberID, restarted.clientID+"-") {
					t.Fatalf("new member id %q (old %q)", resp.MemberID, oldID)
				}
				if resp.Generation != gen {
					t.Fatalf("generation %d, want %d", resp.Generation, gen)
				}
				wantCode(t, "other's heartbeat", other.heartbeat(), nil)
				if st, _, _ := stateOf(c, "g"); st != "Stable" {
					t.Fatalf("group is %s", st)
				}
				// The leader is told to skip the assignment from v9 on;
				// before, it is given the old leader id so it does not
				// assign.
				wantLeader, wantMembers, wantSkip := a.id, 0, false
				switch {
				case tt.leader && tt.version >= 9:
					wantLeader, wantMembers, wantSkip = resp.MemberID, 2, true
				case tt.leader:
					wantLeader = oldID
				}
				if resp.LeaderID != wantLeader || len(resp.Members) != wantMembers || resp.SkipAssignment != wantSkip {
					t.Fatalf("leader %q, %d members, skip %v; want %q, %d, %v",
						resp.LeaderID, len(resp.Members), resp.SkipAssignment, wantLeader, wantMembers, wantSkip)
				}
				// The new process keeps the old assignment.
				sync := recv(t, restarted.sync(nil))
				wantCode(t, "sync", sync.ErrorCode, nil)
				if string(sync.MemberAssignment) != string(assignmentOf(oldID)) {
					t.Fatalf("assignment %q", sync.MemberAssignment)
				}
				wantCode(t, "new process heartbeat", restarted.heartbeat(), nil)
				// The stored generation names the new id: a coordinator
				// that loads it serves the new process, not the old one.
				stored, _ := store.meta("g")
				if !slices.ContainsFunc(stored.Members, func(m state.GroupMember) bool {
					return m.ID == resp.MemberID && m.InstanceID == restarted.instance
				}) {
					t.Fatalf("stored members %+v lack %s as %s", stored.Members, restarted.instance, resp.MemberID)
				}
			}

			// The old process is fenced.
			zombie := *restarted
			zombie.id, zombie.gen = oldID, gen
			wantCode(t, "old id heartbeat", zombie.heartbeat(), kerr.FencedInstanceID)
			resp := recv(t, zombie.join())
			wantCode(t, "old id join", resp.ErrorCode, kerr.FencedInstanceID)
			if _, _, n := stateOf(c, "g"); n != 2 {
				t.Fatalf("%d members", n)
			}
		})
	}
}

// A leader that never sends its SyncGroup is removed after the rebalance
// timeout, and the group rebalances.
func TestSyncGroupTimeout(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, nil, Config{})
	a, b := newClient(t, c, "g", "a"), newClient(t, c, "g", "b")
	form(t, a)
	// The join phase runs on the long timeout a joined with; the sync
	// phase on the short one both rejoin with.
	a.rebalance, b.rebalance = 100*time.Millisecond, 100*time.Millisecond
	bJoin := b.join()
	waitState(t, c, "g", "PreparingRebalance", 2)
	a.joined(recv(t, a.join()))
	b.joined(recv(t, bJoin))
	bSync := b.sync(nil)
	resp := recv(t, bSync)
	wantCode(t, "follower sync", resp.ErrorCode, kerr.RebalanceInProgress)
	wantCode(t, "silent leader heartbeat", a.heartbeat(), kerr.UnknownMemberID)
	jr := b.joined(recv(t, b.join()))
	if jr.Generation != a.gen+1 || jr.LeaderID != b.id || len(jr.Members) != 1 {
		t.Fatalf("generation %d, leader %q, %d members", jr.Generation, jr.LeaderID, len(jr.Members))
	}
	syncAll(t, b, b)
}

// group.initial.rebalance.delay.ms: members arriving within the delay of
// the first join share the first generation.
func TestJoinGroupInitialRebalanceDelay(t *testing.T) {
	t.Parallel()
	const delay = 200 * time.Millisecond
	c := newCoordinator(t, nil, Config{InitialRebalanceDelay: delay})
	a, b := newClient(t, c, "g", "a"), newClient(t, c, "g", "b")
	start := time.Now()
	aJoin := a.join()
	waitParked(t, c, "g", a.id, true)
	<-time.After(50 * time.Millisecond) // b arrives 50 ms later
	pending(t, aJoin, "a's join")
	bJoin := b.join()
	aResp, bResp := a.joined(recv(t, aJoin)), b.joined(recv(t, bJoin))
	if elapsed := time.Since(start); elapsed < delay {
		t.Fatalf("first generation after %v, before the delay", elapsed)
	}
	if aResp.Generation != 1 || bResp.Generation != 1 {
		t.Fatalf("generations %d and %d, want 1", aResp.Generation, bResp.Generation)
	}
	if len(aResp.Members)+len(bResp.Members) != 2 {
		t.Fatalf("leader got %d+%d members", len(aResp.Members), len(bResp.Members))
	}
	// Later rebalances are not delayed.
	if aResp.LeaderID != a.id {
		a, b = b, a
	}
	syncAll(t, a, a, b)
	n := newClient(t, c, "g", "n")
	nJoin := n.join()
	waitState(t, c, "g", "PreparingRebalance", 3)
	start = time.Now()
	aJoin, bJoin = a.join(), b.join()
	a.joined(recv(t, aJoin))
	b.joined(recv(t, bJoin))
	n.joined(recv(t, nJoin))
	if elapsed := time.Since(start); elapsed >= delay {
		t.Fatalf("rebalance of a non-empty group took %v", elapsed)
	}
}

// Close answers parked requests COORDINATOR_NOT_AVAILABLE, so broker
// workers return; later requests get it too.
func TestCloseWakesWaiters(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, nil, Config{})
	a, b := newClient(t, c, "g", "a"), newClient(t, c, "g", "b")
	form(t, a)
	bJoin := b.join()
	waitParked(t, c, "g", b.id, true)
	// A follower waiting for the leader's sync in another group.
	x, y := newClient(t, c, "h", "x"), newClient(t, c, "h", "y")
	form(t, x)
	yJoin := y.join()
	waitState(t, c, "h", "PreparingRebalance", 2)
	x.joined(recv(t, x.join()))
	y.joined(recv(t, yJoin))
	ySync := y.sync(nil)
	waitParked(t, c, "h", y.id, false)

	c.Close()
	wantCode(t, "parked join", recv(t, bJoin).ErrorCode, kerr.CoordinatorNotAvailable)
	wantCode(t, "parked sync", recv(t, ySync).ErrorCode, kerr.CoordinatorNotAvailable)
	late := newClient(t, c, "g", "late")
	late.version = 3
	wantCode(t, "join after close", recv(t, late.join()).ErrorCode, kerr.CoordinatorNotAvailable)
}
