package tests

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
)

// Group tests driven partly by hand (raw members), and group admin.

// rawMember is a group member driven by hand with kmsg requests through a
// plain kgo client: it joins and syncs like a consumer, then can stop
// heartbeating, which is what a crashed process looks like to the
// coordinator.
type rawMember struct {
	cl              *kgo.Client
	group, memberID string
	generation      int32
	metadata        []byte
}

const rawSession = time.Second

func newRawMember(t *testing.T, addr, group, topic string) *rawMember {
	t.Helper()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 1
	meta.Topics = []string{topic}
	return &rawMember{cl: newClient(t, addr, kgo.ClientID("raw-member")), group: group, metadata: meta.AppendTo(nil)}
}

// join joins (twice on MEMBER_ID_REQUIRED) and returns the response.
func (r *rawMember) join(t *testing.T, ctx context.Context) *kmsg.JoinGroupResponse {
	t.Helper()
	resp, err := r.tryJoin(ctx)
	if err != nil {
		t.Fatalf("raw JoinGroup: %v", err)
	}
	return resp
}

// tryJoin is join for other goroutines than the test's.
func (r *rawMember) tryJoin(ctx context.Context) (*kmsg.JoinGroupResponse, error) {
	for range 2 {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID = r.group, r.memberID
		req.SessionTimeoutMillis = int32(rawSession / time.Millisecond)
		req.RebalanceTimeoutMillis = 5000
		req.ProtocolType = "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "cooperative-sticky", r.metadata
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(ctx, r.cl)
		if err != nil {
			return nil, err
		}
		r.memberID = resp.MemberID
		if resp.ErrorCode == kerr.MemberIDRequired.Code {
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, err
		}
		r.generation = resp.Generation
		return resp, nil
	}
	return nil, errors.New("MEMBER_ID_REQUIRED twice")
}

// sync sends the leader's assignment (member id to partitions).
func (r *rawMember) sync(t *testing.T, ctx context.Context, topic string, plan map[string][]int32) []int32 {
	t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = r.group, r.memberID, r.generation
	pt, proto := "consumer", "cooperative-sticky"
	req.ProtocolType, req.Protocol = &pt, &proto
	for id, ps := range plan {
		a := kmsg.NewConsumerMemberAssignment()
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = topic, ps
		a.Topics = append(a.Topics, at)
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, a.AppendTo(nil)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		t.Fatalf("raw SyncGroup: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("raw SyncGroup: %v", err)
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(resp.MemberAssignment); err != nil {
		t.Fatalf("raw SyncGroup: decoding the assignment: %v", err)
	}
	var ps []int32
	for _, at := range a.Topics {
		ps = append(ps, at.Partitions...)
	}
	return ps
}

// heartbeat sends one heartbeat and returns its error code.
func (r *rawMember) heartbeat(t *testing.T, ctx context.Context) error {
	t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = r.group, r.memberID, r.generation
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		t.Fatalf("raw Heartbeat: %v", err)
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// awaitRebalance heartbeats until the coordinator answers
// REBALANCE_IN_PROGRESS.
func (r *rawMember) awaitRebalance(t *testing.T, ctx context.Context) {
	t.Helper()
	testutil.CheckFor(t, testutil.Left(ctx), func() error {
		err := r.heartbeat(t, ctx)
		if errors.Is(err, kerr.RebalanceInProgress) {
			return nil
		}
		if err != nil {
			t.Fatalf("raw heartbeat while waiting for a rebalance: %v", err)
		}
		return errors.New("waiting for a rebalance: the heartbeat succeeds")
	})
}

// TestGroupSessionExpiry has a hand-driven member take half the partitions
// and then go silent: after its session timeout the coordinator removes
// it and the kgo member gets everything.
func TestGroupSessionExpiry(t *testing.T) {
	t.Parallel()
	n := startNode(t, noRebalanceDelay, func(c *broker.Config) { c.GroupMinSessionTimeout = 500 * time.Millisecond })
	ctx := testCtx(t, 30*time.Second)
	adm := newAdmin(t, n.addr())
	const (
		topic, group = "grp-expiry", "grp-expiry"
		parts        = 4
		records      = 400
	)
	createTopic(t, ctx, adm, topic, parts, nil)
	produceSpread(t, ctx, n.addr(), topic, records, parts)

	// Generation 1: the raw member alone, with every partition.
	raw := newRawMember(t, n.addr(), group, topic)
	if resp := raw.join(t, ctx); resp.LeaderID != raw.memberID || len(resp.Members) != 1 {
		t.Fatalf("first join: leader %q with %d members, want %q alone", resp.LeaderID, len(resp.Members), raw.memberID)
	}
	raw.sync(t, ctx, topic, map[string][]int32{raw.memberID: {0, 1, 2, 3}})

	type assignment struct {
		at time.Time
		ps []int32
	}
	var (
		mu      sync.Mutex
		assigns []assignment
	)
	k := newGroupClient(t, n.addr(),
		kgo.ClientID("kgo-member"),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(rawSession),
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.RebalanceTimeout(5*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			ps := slices.Clone(a[topic])
			slices.Sort(ps)
			assigns = append(assigns, assignment{time.Now(), ps})
		}),
	)

	// The kgo member's join starts a rebalance; the raw member hears of it
	// from its heartbeat, rejoins, leads generation 2 and keeps two
	// partitions.
	raw.awaitRebalance(t, ctx)
	resp := raw.join(t, ctx)
	if resp.LeaderID != raw.memberID || len(resp.Members) != 2 {
		t.Fatalf("second join: leader %q with %d members, want %q with 2", resp.LeaderID, len(resp.Members), raw.memberID)
	}
	var kgoID string
	for _, m := range resp.Members {
		if m.MemberID != raw.memberID {
			kgoID = m.MemberID
		}
	}
	// The session timer restarts at this SyncGroup, the raw member's last
	// request: no expiry may happen before silent+rawSession.
	silent := time.Now()
	raw.sync(t, ctx, topic, map[string][]int32{raw.memberID: {0, 1}, kgoID: {2, 3}})

	got := pollN(t, ctx, k, records)
	seen := map[string]bool{}
	for _, r := range got {
		key := fmt.Sprintf("%d@%d", r.Partition, r.Offset)
		if seen[key] {
			t.Fatalf("record %s consumed twice", key)
		}
		seen[key] = true
	}
	mu.Lock()
	history := slices.Clone(assigns)
	mu.Unlock()
	var expiredAt time.Time
	for _, a := range history {
		if slices.Contains(a.ps, 0) && slices.Contains(a.ps, 1) {
			expiredAt = a.at
			break
		}
	}
	switch {
	case len(history) == 0 || !slices.Equal(history[0].ps, []int32{2, 3}):
		t.Errorf("kgo member assignments %v, want [2 3] first (the raw leader's plan)", history)
	case expiredAt.IsZero():
		t.Errorf("kgo member never got partitions 0 and 1: %v", history)
	case expiredAt.Sub(silent) < rawSession:
		t.Errorf("partitions 0 and 1 reassigned %v after the raw member's last request, before its %v session timeout",
			expiredAt.Sub(silent), rawSession)
	default:
		t.Logf("partitions 0 and 1 moved %v after the raw member went silent", expiredAt.Sub(silent))
	}

	if err := raw.heartbeat(t, ctx); !errors.Is(err, kerr.UnknownMemberID) {
		t.Errorf("heartbeat of the expired member: %v, want UNKNOWN_MEMBER_ID", err)
	}
	d := describeGroup(t, ctx, adm, group)
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != kgoID {
		t.Fatalf("group after the expiry: %s with %+v, want Stable with %s alone", d.State, d.Members, kgoID)
	}
	if ps := assignedTo(d.Members[0], topic); !slices.Equal(ps, []int32{0, 1, 2, 3}) {
		t.Errorf("kgo member assigned %v, want every partition", ps)
	}
}

// TestGroupStaticMembership restarts a static member (kgo.InstanceID)
// within its session: the new process takes the old one's place in the
// same generation, without a rebalance, and consumption goes on from the
// committed offsets.
func TestGroupStaticMembership(t *testing.T) {
	t.Parallel()
	n := startNode(t, noRebalanceDelay)
	ctx := testCtx(t, 30*time.Second)
	adm := newAdmin(t, n.addr())
	const (
		topic, group = "grp-static", "grp-static"
		parts        = 3
		records      = 900
	)
	createTopic(t, ctx, adm, topic, parts, nil)
	produceSpread(t, ctx, n.addr(), topic, records, parts)
	opts := func(client string) []kgo.Opt {
		return []kgo.Opt{kgo.ClientID(client), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.InstanceID("a"), kgo.SessionTimeout(10 * time.Second)}
	}

	first := newGroupClient(t, n.addr(), opts("static-1")...)
	before := pollExactly(t, ctx, first, records/3)
	if err := first.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	committed := committedOffsets(t, ctx, adm, group, topic)
	oldID, oldGen := first.GroupMetadata()
	d := describeGroup(t, ctx, adm, group)
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != oldID {
		t.Fatalf("group before the restart: %s with %+v, want Stable with %s", d.State, d.Members, oldID)
	}
	first.Close() // a static member does not leave

	d = describeGroup(t, ctx, adm, group)
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != oldID {
		t.Fatalf("group after the static member closed: %s with %+v, want Stable with %s still in it", d.State, d.Members, oldID)
	}

	second := newGroupClient(t, n.addr(), opts("static-2")...)
	after := pollN(t, ctx, second, records-len(before))
	for p, rs := range byPartition(after) {
		if rs[0].Offset != committed[p] {
			t.Errorf("partition %d: the restarted member began at %d, want the committed %d", p, rs[0].Offset, committed[p])
		}
	}
	newID, newGen := second.GroupMetadata()
	fenced := kmsg.NewPtrHeartbeatRequest()
	fenced.Group, fenced.MemberID, fenced.Generation = group, oldID, oldGen
	fenced.InstanceID = kmsg.StringPtr("a")
	if resp, err := fenced.RequestWith(ctx, newClient(t, n.addr())); err != nil {
		t.Errorf("heartbeat of the replaced process: %v", err)
	} else if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.FencedInstanceID) {
		t.Errorf("heartbeat of the replaced process (old member id, instance a): %v, want FENCED_INSTANCE_ID", err)
	}
	if newGen != oldGen {
		t.Errorf("generation %d after the static rejoin, want %d (no rebalance)", newGen, oldGen)
	}
	if newID == oldID {
		t.Errorf("the restarted static member kept member id %s; KIP-345 gives it a new one", newID)
	}
	d = describeGroup(t, ctx, adm, group)
	switch {
	case d.State != "Stable" || len(d.Members) != 1:
		t.Errorf("group after the static rejoin: %s with %d members, want Stable with 1", d.State, len(d.Members))
	case d.Members[0].MemberID != newID || d.Members[0].InstanceID == nil || *d.Members[0].InstanceID != "a" ||
		d.Members[0].ClientID != "static-2":
		t.Errorf("member after the static rejoin %+v, want %s, instance a, client static-2", d.Members[0], newID)
	case !slices.Equal(assignedTo(d.Members[0], topic), []int32{0, 1, 2}):
		t.Errorf("assignment after the static rejoin %v, want [0 1 2]", assignedTo(d.Members[0], topic))
	}
	if err := second.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("commit in the kept generation: %v", err)
	}
}

// TestGroupAdmin exercises kadm's group administration against an active
// group and an offsets-only (empty) one.
func TestGroupAdmin(t *testing.T) {
	t.Parallel()
	n := startNode(t, noRebalanceDelay)
	ctx := testCtx(t, 30*time.Second)
	adm := newAdmin(t, n.addr())
	const (
		topic          = "grp-admin"
		active, simple = "grp-admin-active", "grp-admin-simple"
		missing        = "grp-admin-missing"
		parts          = 3
		records        = 300
	)
	createTopic(t, ctx, adm, topic, parts, nil)
	produceSpread(t, ctx, n.addr(), topic, records, parts)
	ends := endOffsets(t, ctx, adm, topic)

	cons := newGroupClient(t, n.addr(), kgo.ClientID("admin-consumer"), kgo.ConsumerGroup(active),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	polled := pollExactly(t, ctx, cons, records/2)
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	activeCommits := map[int32]int64{}
	for _, r := range polled {
		activeCommits[r.Partition] = max(activeCommits[r.Partition], r.Offset+1)
	}

	// The subtests run in order, not in parallel: each leaves the groups
	// as the next one expects them.
	t.Run("CommitOffsets", func(t *testing.T) {
		var offs kadm.Offsets
		for p := range int32(parts) {
			offs.AddOffset(topic, p, int64(10*(p+1)), -1)
		}
		resps, err := adm.CommitOffsets(ctx, simple, offs)
		if err != nil || resps.Error() != nil {
			t.Fatalf("admin commit to an empty group: %v / %v", err, resps.Error())
		}
		if got, want := committedOffsets(t, ctx, adm, simple, topic), (map[int32]int64{0: 10, 1: 20, 2: 30}); !maps.Equal(got, want) {
			t.Errorf("FetchOffsets %s: %v, want %v", simple, got, want)
		}
		// Kafka refuses a generation -1 commit into a group with members.
		resps, err = adm.CommitOffsets(ctx, active, offs)
		if err != nil {
			t.Fatalf("admin commit to an active group: %v", err)
		}
		resps.Each(func(o kadm.OffsetResponse) {
			if !errors.Is(o.Err, kerr.UnknownMemberID) {
				t.Errorf("admin commit of %s[%d] into the active group: %v, want UNKNOWN_MEMBER_ID", o.Topic, o.Partition, o.Err)
			}
		})
		if got := committedOffsets(t, ctx, adm, active, topic); !maps.Equal(got, activeCommits) {
			t.Errorf("FetchOffsets %s after the refused commit: %v, want %v", active, got, activeCommits)
		}
	})

	t.Run("ListGroups", func(t *testing.T) {
		cases := []struct {
			states []string
			want   map[string]string // group -> state
		}{
			{nil, map[string]string{active: "Stable", simple: "Empty"}},
			{[]string{"Stable"}, map[string]string{active: "Stable"}},
			{[]string{"empty"}, map[string]string{simple: "Empty"}}, // case-insensitive, as Kafka
			{[]string{"Dead", "PreparingRebalance"}, map[string]string{}},
		}
		for _, c := range cases {
			listed, err := adm.ListGroups(ctx, c.states...)
			if err != nil {
				t.Fatalf("ListGroups %v: %v", c.states, err)
			}
			got := map[string]string{}
			for name, g := range listed {
				got[name] = g.State
				if g.Coordinator != 1 || g.GroupType != "classic" {
					t.Errorf("ListGroups %v: %s: coordinator %d, type %q, want 1, classic", c.states, name, g.Coordinator, g.GroupType)
				}
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("ListGroups %v: %v, want %v", c.states, got, c.want)
			}
			if g, ok := listed[active]; ok && g.ProtocolType != "consumer" {
				t.Errorf("ListGroups: %s protocol type %q, want consumer", active, g.ProtocolType)
			}
		}
	})

	t.Run("DescribeGroups", func(t *testing.T) {
		ds, err := adm.DescribeGroups(ctx, active, simple, missing)
		if err != nil {
			t.Fatalf("DescribeGroups: %v", err)
		}
		a := ds[active]
		if a.Err != nil || a.State != "Stable" || a.ProtocolType != "consumer" || a.Protocol != "cooperative-sticky" || len(a.Members) != 1 {
			t.Fatalf("%s: %+v, want Stable consumer/cooperative-sticky with one member", active, a)
		}
		memberID, _ := cons.GroupMetadata()
		m := a.Members[0]
		if m.MemberID != memberID || m.ClientID != "admin-consumer" || m.ClientHost != "/127.0.0.1" || m.InstanceID != nil {
			t.Errorf("member %+v, want id %s, client admin-consumer from /127.0.0.1, no instance id", m, memberID)
		}
		if join, ok := m.Join.AsConsumer(); !ok || !slices.Equal(join.Topics, []string{topic}) {
			t.Errorf("member subscription %+v, want [%s]", join, topic)
		}
		if ps := assignedTo(m, topic); !slices.Equal(ps, []int32{0, 1, 2}) {
			t.Errorf("member assignment %v, want [0 1 2]", ps)
		}
		if s := ds[simple]; s.Err != nil || s.State != "Empty" || len(s.Members) != 0 {
			t.Errorf("%s: %+v, want Empty without members", simple, s)
		}
		// Dead, with GROUP_ID_NOT_FOUND from v6 (KIP-1043):
		// TestGroupProtocolEdges checks the versions.
		if s := ds[missing]; s.State != "Dead" || s.Err != nil && !errors.Is(s.Err, kerr.GroupIDNotFound) {
			t.Errorf("%s: %+v, want Dead", missing, s)
		}
	})

	t.Run("Lag", func(t *testing.T) {
		lags, err := adm.Lag(ctx, active, simple)
		if err != nil || lags.Error() != nil {
			t.Fatalf("Lag: %v / %v", err, lags.Error())
		}
		want := map[string]map[int32]int64{active: {}, simple: {}}
		for p, end := range ends {
			want[active][p] = end - activeCommits[p]
			want[simple][p] = end - int64(10*(p+1))
		}
		for _, group := range []string{active, simple} {
			got := map[int32]int64{}
			for _, ml := range lags[group].Lag.Sorted() {
				if ml.Err != nil {
					t.Errorf("%s lag of [%d]: %v", group, ml.Partition, ml.Err)
				}
				if ml.IsEmpty() != (group == simple) {
					t.Errorf("%s lag of [%d]: member %v", group, ml.Partition, ml.Member)
				}
				got[ml.Partition] = ml.Lag
			}
			if !maps.Equal(got, want[group]) {
				t.Errorf("%s lag %v, want %v", group, got, want[group])
			}
		}
		// CalculateGroupLag over the three pieces gives the same.
		fetched, err := adm.FetchOffsets(ctx, active)
		if err != nil {
			t.Fatalf("FetchOffsets: %v", err)
		}
		listed, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatalf("ListEndOffsets: %v", err)
		}
		calc := kadm.CalculateGroupLag(describeGroup(t, ctx, adm, active), fetched, listed)
		for p, w := range want[active] {
			if got, ok := calc.Lookup(topic, p); !ok || got.Lag != w {
				t.Errorf("CalculateGroupLag [%d]: %+v, want lag %d", p, got, w)
			}
		}
	})

	t.Run("delete while active", func(t *testing.T) {
		resps, err := adm.DeleteOffsets(ctx, active, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
		if err != nil {
			t.Fatalf("DeleteOffsets: %v", err)
		}
		for p := range int32(parts) {
			if err, ok := resps.Lookup(topic, p); !ok || !errors.Is(err, kerr.GroupSubscribedToTopic) {
				t.Errorf("DeleteOffsets [%d] of a subscribed topic: %v (present %v), want GROUP_SUBSCRIBED_TO_TOPIC", p, err, ok)
			}
		}
		dr, err := adm.DeleteGroups(ctx, active)
		if err != nil {
			t.Fatalf("DeleteGroups: %v", err)
		}
		if !errors.Is(dr[active].Err, kerr.NonEmptyGroup) {
			t.Errorf("DeleteGroups of the active group: %v, want NON_EMPTY_GROUP", dr[active].Err)
		}
		if got := committedOffsets(t, ctx, adm, active, topic); !maps.Equal(got, activeCommits) {
			t.Errorf("FetchOffsets after the refused deletes: %v, want %v", got, activeCommits)
		}
	})
	if t.Failed() {
		return
	}

	cons.Close() // leaves: the group is Empty
	t.Run("delete when empty", func(t *testing.T) {
		if d := describeGroup(t, ctx, adm, active); d.State != "Empty" {
			t.Fatalf("%s after its member left: %s, want Empty", active, d.State)
		}
		resps, err := adm.DeleteOffsets(ctx, active, kadm.TopicsSet{topic: {0: {}}})
		if err != nil || resps.Error() != nil {
			t.Fatalf("DeleteOffsets of an empty group: %v / %v", err, resps.Error())
		}
		want := maps.Clone(activeCommits)
		delete(want, 0)
		if got := committedOffsets(t, ctx, adm, active, topic); !maps.Equal(got, want) {
			t.Errorf("FetchOffsets after deleting [0]: %v, want %v", got, want)
		}

		dr, err := adm.DeleteGroups(ctx, active, simple, missing)
		if err != nil {
			t.Fatalf("DeleteGroups: %v", err)
		}
		for _, g := range []string{active, simple} {
			if dr[g].Err != nil {
				t.Errorf("DeleteGroups %s: %v", g, dr[g].Err)
			}
		}
		if !errors.Is(dr[missing].Err, kerr.GroupIDNotFound) {
			t.Errorf("DeleteGroups of an unknown group: %v, want GROUP_ID_NOT_FOUND", dr[missing].Err)
		}
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			t.Fatalf("ListGroups: %v", err)
		}
		if names := listed.Groups(); len(names) != 0 {
			t.Errorf("ListGroups after deleting every group: %v", names)
		}
		ds, err := adm.DescribeGroups(ctx, active, simple)
		if err != nil {
			t.Fatalf("DescribeGroups: %v", err)
		}
		for _, g := range []string{active, simple} {
			if d := ds[g]; d.State != "Dead" || d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) {
				t.Errorf("DescribeGroups %s after deletion: %s (%v), want Dead", g, d.State, d.Err)
			}
			if got := committedOffsets(t, ctx, adm, g, topic); len(got) != 0 {
				t.Errorf("FetchOffsets %s after deletion: %v, want none", g, got)
			}
		}
	})
}

// TestGroupProtocolEdges pins coordinator answers where Kafka's rules are
// easy to miss, with hand-driven members and pinned versions.
func TestGroupProtocolEdges(t *testing.T) {
	t.Parallel()
	n := startNode(t, noRebalanceDelay, func(c *broker.Config) { c.GroupMinSessionTimeout = 500 * time.Millisecond })
	ctx := testCtx(t, 30*time.Second)
	adm := newAdmin(t, n.addr())
	const topic = "grp-edges"
	createTopic(t, ctx, adm, topic, 2, nil)

	// Kafka answers a heartbeat in CompletingRebalance with NONE and
	// restarts the session timer ("consumers may start sending heartbeats
	// after the join-group response": GroupCoordinator.handleHeartbeat,
	// and GroupMetadataManager.classicGroupHeartbeat since 3.7). Only
	// PreparingRebalance answers REBALANCE_IN_PROGRESS. The Java
	// consumer's heartbeat thread runs between JoinGroup and SyncGroup.
	t.Run("heartbeat while CompletingRebalance", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t, 30*time.Second) // its own: it may wait for a parallel slot
		const group = "grp-edges-completing"
		leader := newRawMember(t, n.addr(), group, topic)
		leader.join(t, ctx)
		leader.sync(t, ctx, topic, map[string][]int32{leader.memberID: {0, 1}})

		follower := newRawMember(t, n.addr(), group, topic)
		joined := make(chan error, 1)
		go func() {
			_, err := follower.tryJoin(ctx)
			joined <- err
		}()
		leader.awaitRebalance(t, ctx)
		if resp := leader.join(t, ctx); len(resp.Members) != 2 {
			t.Fatalf("leader's rejoin: %d members, want 2", len(resp.Members))
		}
		if err := <-joined; err != nil {
			t.Fatalf("follower's join: %v", err)
		}
		// Both have generation 2; the group waits for the leader's plan.
		if d := describeGroup(t, ctx, adm, group); d.State != "CompletingRebalance" {
			t.Fatalf("group state %s, want CompletingRebalance", d.State)
		}
		if err := follower.heartbeat(t, ctx); err != nil {
			t.Errorf("heartbeat of a joined member while CompletingRebalance: %v, want NONE as Kafka answers", err)
		}
		leader.sync(t, ctx, topic, map[string][]int32{leader.memberID: {0}, follower.memberID: {1}})
		if ps := follower.sync(t, ctx, topic, nil); !slices.Equal(ps, []int32{1}) {
			t.Errorf("follower assigned %v, want [1]", ps)
		}
		if err := follower.heartbeat(t, ctx); err != nil {
			t.Errorf("heartbeat when Stable: %v", err)
		}
	})

	// DescribeGroups v6 (KIP-1043) reports an unknown group as Dead with
	// GROUP_ID_NOT_FOUND; earlier versions as Dead with no error.
	t.Run("DescribeGroups of an unknown group", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t, 30*time.Second) // its own: it may wait for a parallel slot
		for _, c := range []struct {
			version int16
			want    error
		}{{5, nil}, {6, kerr.GroupIDNotFound}} {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.SetVersion(c.version)
			req.Groups = []string{"grp-edges-unknown"}
			resp := rawRequest(t, ctx, n.addr(), req).(*kmsg.DescribeGroupsResponse)
			// The other subtests' groups may be bringing
			// __consumer_offsets about: its partitions answer
			// COORDINATOR_LOAD_IN_PROGRESS until loaded, which clients
			// retry.
			for len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == kerr.CoordinatorLoadInProgress.Code && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
				resp = rawRequest(t, ctx, n.addr(), req).(*kmsg.DescribeGroupsResponse)
			}
			if len(resp.Groups) != 1 {
				t.Fatalf("v%d: %d groups described, want 1", c.version, len(resp.Groups))
			}
			g := resp.Groups[0]
			if err := kerr.ErrorForCode(g.ErrorCode); g.State != "Dead" || !errors.Is(err, c.want) && err != c.want {
				t.Errorf("DescribeGroups v%d of an unknown group: state %s, error %v; want Dead, %v", c.version, g.State, err, c.want)
			}
		}
	})
}
