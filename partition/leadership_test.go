package partition

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// An assignment older than the partition's (a reconcile that read the
// store before an AlterPartition answer was applied) changes nothing: the
// role and the ISR never go back (issue 21, review finding 2).
func TestSetAssignmentIgnoresOlderAssignments(t *testing.T) {
	t.Parallel()
	p := newPartition(t, "older")
	p.SetAssignment(1, Assignment{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 5, Replicas: []int32{1, 2}, ISR: []int32{1}})
	for _, older := range []Assignment{
		{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
		{Leader: 2, LeaderEpoch: 1, PartitionEpoch: 9, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
	} {
		p.SetAssignment(1, older)
		if a, _ := p.Assignment(); a.LeaderEpoch != 2 || a.PartitionEpoch != 5 || len(a.ISR) != 1 {
			t.Fatalf("after the older %+v: %+v", older, a)
		}
	}
	p.SetAssignment(1, Assignment{Leader: 2, LeaderEpoch: 3, PartitionEpoch: 0, Replicas: []int32{1, 2}, ISR: []int32{2}})
	if a, _ := p.Assignment(); a.Leader != 2 || a.LeaderEpoch != 3 {
		t.Fatalf("a newer leader epoch was not taken: %+v", a)
	}
}

// While an AlterPartition that adds a follower to the ISR is under way,
// the high watermark waits for that follower too: the controller may
// already have made it electable, and a record acknowledged without it
// would be lost if it were elected (Kafka's maximal ISR; review finding
// 2). A refused proposal stops counting it.
func TestHighWatermarkCountsTheProposedISR(t *testing.T) {
	t.Parallel()
	p := newPartition(t, "pending")
	p.SetAssignment(1, Assignment{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}})
	for range 3 {
		appendOne(t, p)
	}
	now := time.Now()
	p.ReplicaFetched(2, -1, 3, now) // caught up: asks to rejoin
	ch, ok := p.ISRChanges(now, time.Minute, func(int32) bool { return true })
	if !ok || len(ch.ISR) != 2 {
		t.Fatalf("ISR change %+v %v, want the follower back in", ch, ok)
	}
	if !p.ProposeISR(ch) {
		t.Fatal("the caught-up follower's proposal was refused")
	}
	appendOne(t, p)
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d with the expansion under way, want 3 (the follower's log end)", hw)
	}
	p.ReplicaFetched(2, -1, 4, now)
	if hw := p.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d once the follower fetched, want 4", hw)
	}
	appendOne(t, p)
	p.WithdrawISR(ch)
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d after the refusal, want the log end 5 (ISR = the leader)", hw)
	}
	// The follower (at 4) no longer holds the high watermark (5): it
	// is not proposed again until it does.
	if p.ProposeISR(ch) {
		t.Fatal("proposed a follower below the high watermark")
	}
	p.ReplicaFetched(2, -1, 5, now)
	if !p.ProposeISR(ch) {
		t.Fatal("the follower caught up again, and was not proposed")
	}
	// Accepted: the answer's assignment ends the proposal.
	p.SetAssignment(1, Assignment{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	appendOne(t, p)
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d in the wider ISR, want 5", hw)
	}
}

// A replica fetcher's write runs only while the partition follows the
// leader and epoch it fetched from (review finding 3); a leader's append
// only while this node leads (finding 1).
func TestRoleChecks(t *testing.T) {
	t.Parallel()
	p := newPartition(t, "roles")
	ran := 0
	write := func() error { ran++; return nil }
	if err := p.AsFollower(2, 1, write); !errors.Is(err, ErrNotFollowing) {
		t.Fatalf("a partition without an assignment: %v", err)
	}
	p.SetAssignment(1, Assignment{Leader: 2, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	if err := p.AsFollower(2, 1, write); err != nil || ran != 1 {
		t.Fatalf("following 2 at epoch 1: %v, ran %d", err, ran)
	}
	if _, _, err := p.AppendProduce(pidReset(0, 1)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a produce to a follower: %v", err)
	}
	for _, tt := range []struct{ leader, epoch int32 }{{2, 0}, {3, 1}} {
		if err := p.AsFollower(tt.leader, tt.epoch, write); !errors.Is(err, ErrNotFollowing) {
			t.Fatalf("following %d at %d: %v", tt.leader, tt.epoch, err)
		}
	}
	p.SetAssignment(1, Assignment{Leader: 1, LeaderEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	if err := p.AsFollower(2, 1, write); !errors.Is(err, ErrNotFollowing) || ran != 1 {
		t.Fatalf("a leader took a follower's write: %v, ran %d", err, ran)
	}
	// Leading at epoch 2 with the local epoch still 0 (the floor not yet
	// raised): a batch would be stamped below the leadership's epoch.
	if _, err := p.AppendAsLeader(func(int32) error { ran++; return nil }); !errors.Is(err, ErrNotLeader) || ran != 1 {
		t.Fatalf("an append stamped below the assignment's epoch: %v, ran %d", err, ran)
	}
	if err := p.RaiseLeaderEpoch(2); err != nil {
		t.Fatal(err)
	}
	var stamped int32
	if _, err := p.AppendAsLeader(func(e int32) error { stamped = e; return nil }); err != nil || stamped != 2 {
		t.Fatalf("leading at epoch 2: %v, stamped %d", err, stamped)
	}
}

// A follower ISRChanges found caught up is not proposed once the other
// followers' fetches moved the high watermark past it before the
// proposal: taken into the ISR it would be electable without committed
// records (review of issue 21, second pass).
func TestProposeISRRechecksTheHighWatermark(t *testing.T) {
	t.Parallel()
	p := newPartition(t, "recheck")
	p.SetAssignment(1, Assignment{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}})
	for range 3 {
		appendOne(t, p)
	}
	now := time.Now()
	p.ReplicaFetched(2, -1, 3, now)
	p.ReplicaFetched(3, -1, 3, now)
	ch, ok := p.ISRChanges(now, time.Minute, func(int32) bool { return true })
	if !ok || len(ch.ISR) != 3 {
		t.Fatalf("ISR change %+v %v, want follower 3 back in", ch, ok)
	}
	appendOne(t, p)
	appendOne(t, p)
	p.ReplicaFetched(2, -1, 5, now)
	if hw := p.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d, want 5", hw)
	}
	if p.ProposeISR(ch) {
		t.Fatal("follower 3 (at 3) proposed into the ISR with the high watermark at 5")
	}
}

// A removed replica's log is emptied, but never while the assignment
// still names this node its leader or in its ISR, whatever its replicas
// say (such a record may predate the reassignment fixes: the log may be
// the only copy); a partition without an assignment keeps its log.
func TestDropIfNotReplica(t *testing.T) {
	t.Parallel()
	p := newPartition(t, "drop")
	appendOne(t, p)
	for _, a := range []Assignment{
		{Leader: 1, LeaderEpoch: 1, Replicas: []int32{2, 3}, ISR: []int32{2}},
		{Leader: 2, LeaderEpoch: 2, Replicas: []int32{2, 3}, ISR: []int32{1, 2}},
		{Leader: 2, LeaderEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{2}},
	} {
		p.SetAssignment(1, a)
		if dropped, err := p.DropIfNotReplica(); dropped || err != nil || p.LogEndOffset() != 1 {
			t.Fatalf("%+v: dropped %v, %v, log end %d; want the log kept", a, dropped, err, p.LogEndOffset())
		}
	}
	p.SetAssignment(1, Assignment{Leader: 2, LeaderEpoch: 4, Replicas: []int32{2, 3}, ISR: []int32{2, 3}})
	if dropped, err := p.DropIfNotReplica(); !dropped || err != nil || p.LogEndOffset() != 0 || p.Size() != 0 {
		t.Fatalf("moved off this node: dropped %v, %v, log end %d, %d bytes", dropped, err, p.LogEndOffset(), p.Size())
	}
}

// An ISR change names a joining follower's broker epoch as its last fetch
// gave it, and -1 (not checked) for the members already in (KIP-903).
func TestISRChangeNamesTheJoiningFollowersBrokerEpoch(t *testing.T) {
	t.Parallel()
	p := newPartition(t, "kip903")
	p.SetAssignment(1, Assignment{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}})
	now := time.Now()
	p.ReplicaFetched(2, 55, 0, now)
	p.ReplicaFetched(3, 77, 0, now)
	ch, ok := p.ISRChanges(now, time.Minute, func(int32) bool { return true })
	if !ok || !slices.Equal(ch.ISR, []int32{1, 2, 3}) || !slices.Equal(ch.BrokerEpochs, []int64{-1, -1, 77}) {
		t.Fatalf("ISR change %+v %v; want ISR [1 2 3] with broker epochs [-1 -1 77]", ch, ok)
	}
}

// A raise (mirroring, failover) asks the controller for the partitions
// with an assignment; adopting the epochs the controller already gave
// (every reconcile does) never asks it: a reconcile blocked on the
// controller for what it wrote held up every node's close by 30 s when
// the controller was gone.
func TestRaiseAsksTheControllerAdoptDoesNot(t *testing.T) {
	t.Parallel()
	n := newTestNode(t)
	tp, err := n.m.Create("raise", 2, nil, [16]byte{}, "", Placement{})
	if err != nil {
		t.Fatal(err)
	}
	tp.Partitions()[0].SetAssignment(1, Assignment{Leader: 1, LeaderEpoch: 4, Replicas: []int32{1}, ISR: []int32{1}})
	var asked []map[int32]int32
	n.m.cfg.RaiseAssignedEpochs = func(byTopic map[[16]byte]map[int32]int32) error {
		for _, epochs := range byTopic {
			asked = append(asked, epochs)
		}
		return nil
	}
	if err := n.m.AdoptLeaderEpochs("raise", map[int32]int32{0: 4}); err != nil || len(asked) != 0 {
		t.Fatalf("adopting the assignment's epoch: %v, asked the controller %v", err, asked)
	}
	if e := tp.Partitions()[0].LeaderEpoch(); e != 4 {
		t.Fatalf("adopted epoch %d, want 4", e)
	}
	if err := n.m.RaiseLeaderEpochs("raise", map[int32]int32{0: 9, 1: 9}); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || len(asked[0]) != 1 || asked[0][0] != 9 {
		t.Fatalf("a raise asked the controller %v, want partition 0 (the one with an assignment) at 9", asked)
	}
}

// A mirror partition is written by its leader only: a fetcher (or a
// failover) on a node that lost the leadership appends, truncates and
// moves nothing, or its log would diverge from the new leader's at the
// same offsets (issue 22).
func TestMirrorWritesNeedTheLeadership(t *testing.T) {
	t.Parallel()
	p := newPartition(t, "mirror-roles")
	if _, err := p.AppendMirror(pidReset(0, 1)); err != nil {
		t.Fatalf("a node alone: %v", err)
	}
	p.SetAssignment(1, Assignment{Leader: 2, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	end := p.LogEndOffset()
	for name, write := range map[string]func() error{
		"AppendMirror": func() error { _, err := p.AppendMirror(pidReset(end, 1)); return err },
		"AppendControl": func() error {
			_, _, err := p.AppendControl(func(base int64, e int32) []byte { return pidReset(base, e) })
			return err
		},
		"TruncateTo":      func() error { return p.TruncateTo(0) },
		"RestartAt":       func() error { return p.RestartAt(100) },
		"AdvanceLogStart": func() error { return p.AdvanceLogStart(end) },
	} {
		if err := write(); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("%s on a follower: %v", name, err)
		}
	}
	if p.LogEndOffset() != end || p.LogStartOffset() != 0 {
		t.Fatalf("the follower's log moved: [%d, %d), want [0, %d)", p.LogStartOffset(), p.LogEndOffset(), end)
	}
	p.SetAssignment(1, Assignment{Leader: 1, LeaderEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	if _, err := p.AppendMirror(pidReset(end, 1)); err != nil {
		t.Fatalf("the leader: %v", err)
	}
}
