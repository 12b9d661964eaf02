package meta

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// alterFixture is a controller with brokers 1-3 unfenced, 4 fenced
// (registered, never caught up), 5 shutting down and 6 not registered,
// and topic "orders" whose partition 0 has replicas 1-6, leader 1 at
// leader epoch 3, ISR [1 2 4] at partition epoch 7, and partition 1
// replicas [1 2 3 4], ISR [1].
type alterFixture struct {
	c      *Controller
	epochs map[int32]int64
	topic  [16]byte
	p0, p1 state.PartitionAssignment
}

func newAlterFixture(t *testing.T) alterFixture {
	t.Helper()
	nodes := startQuorum(t, 3, nil)
	ctx := t.Context()
	c := controllerOf(t, nodes, &fakeClock{now: time.Unix(1e9, 0)})
	epochs := registerAll(t, ctx, c, 3)
	e4, err := c.RegisterBroker(ctx, registration(4, 1))
	if err != nil {
		t.Fatal(err)
	}
	epochs[4] = e4
	e5, err := c.RegisterBroker(ctx, registration(5, 1))
	if err != nil {
		t.Fatal(err)
	}
	epochs[5] = e5
	if _, err := c.Heartbeat(ctx, 5, e5, c.log.fsm.applied(), true); err != nil {
		t.Fatal(err)
	}
	f := alterFixture{c: c, epochs: epochs, topic: [16]byte{7}}
	ops, err := state.TopicOps(state.Topic{Name: "orders", ID: f.topic, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	f.p0 = state.PartitionAssignment{TopicID: f.topic, Partition: 0, Replicas: []int32{1, 2, 3, 4, 5, 6},
		ISR: []int32{1, 2, 4}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 7}
	f.p1 = NewPartition(f.topic, 1, []int32{1, 2, 3, 4})
	f.p1.ISR = []int32{1}
	more, err := partitionOps([]state.PartitionAssignment{f.p0, f.p1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.log.Apply(ctx, append(ops, more...)); err != nil {
		t.Fatal(err)
	}
	return f
}

// alter0 is a change of partition 0 from its current epochs.
func (f alterFixture) alter0(isr ...int32) ISRChange {
	return ISRChange{TopicID: f.topic, Partition: 0, LeaderEpoch: f.p0.LeaderEpoch, PartitionEpoch: f.p0.PartitionEpoch, NewISR: isr}
}

// Every refusal of a single change: the answer is the Kafka code, and
// nothing is written.
func TestAlterPartitionRefusals(t *testing.T) {
	t.Parallel()
	f := newAlterFixture(t)
	ctx := t.Context()
	with := func(r ISRChange, fn func(*ISRChange)) ISRChange { fn(&r); return r }
	for _, tc := range []struct {
		name   string
		sender int32
		req    ISRChange
		want   *kerr.Error
	}{
		{"unknown topic id", 1, with(f.alter0(1, 2), func(r *ISRChange) { r.TopicID = [16]byte{9} }), kerr.UnknownTopicID},
		{"unknown partition", 1, with(f.alter0(1, 2), func(r *ISRChange) { r.Partition = 5 }), kerr.UnknownTopicOrPartition},
		{"older leader epoch", 1, with(f.alter0(1, 2), func(r *ISRChange) { r.LeaderEpoch-- }), kerr.FencedLeaderEpoch},
		{"newer leader epoch", 1, with(f.alter0(1, 2), func(r *ISRChange) { r.LeaderEpoch++ }), kerr.NotLeaderForPartition},
		{"a follower", 2, f.alter0(1, 2), kerr.NotLeaderForPartition},
		{"older partition epoch", 1, with(f.alter0(1, 2), func(r *ISRChange) { r.PartitionEpoch-- }), kerr.InvalidUpdateVersion},
		{"newer partition epoch", 1, with(f.alter0(1, 2), func(r *ISRChange) { r.PartitionEpoch++ }), kerr.InvalidUpdateVersion},
		{"empty ISR", 1, f.alter0(), kerr.InvalidRequest},
		{"ISR without the leader", 1, f.alter0(2, 4), kerr.InvalidRequest},
		{"a member twice", 1, f.alter0(1, 2, 2), kerr.InvalidRequest},
		{"epochs not one per member", 1, with(f.alter0(1, 2), func(r *ISRChange) { r.BrokerEpochs = []int64{-1} }), kerr.InvalidRequest},
		{"not a replica", 1, f.alter0(1, 2, 8), kerr.IneligibleReplica},
		{"adds a fenced broker", 1, ISRChange{TopicID: f.topic, Partition: 1, NewISR: []int32{1, 4}}, kerr.IneligibleReplica},
		{"adds a shutting-down broker", 1, f.alter0(1, 2, 4, 5), kerr.IneligibleReplica},
		{"adds an unregistered broker", 1, f.alter0(1, 2, 4, 6), kerr.IneligibleReplica},
		{"adds an unfenced broker at another epoch", 1, with(f.alter0(1, 2, 3), func(r *ISRChange) {
			r.BrokerEpochs = []int64{f.epochs[1], f.epochs[2], f.epochs[3] + 1}
		}), kerr.IneligibleReplica},
		{"keeps a member at another epoch", 1, with(f.alter0(1, 2), func(r *ISRChange) {
			r.BrokerEpochs = []int64{f.epochs[1], f.epochs[2] - 1}
		}), kerr.IneligibleReplica},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.c.Applied()
			res, err := f.c.AlterPartition(ctx, tc.sender, f.epochs[tc.sender], []ISRChange{tc.req})
			if err != nil || len(res) != 1 || res[0].Err != tc.want {
				t.Fatalf("%+v, %v; want %v", res, err, tc.want)
			}
			if f.c.Applied() != before {
				t.Fatalf("a refused change wrote an entry: applied %d -> %d", before, f.c.Applied())
			}
		})
	}
	parts, _ := f.c.store.PartitionAssignments()
	if !slices.Equal(parts[0].ISR, f.p0.ISR) || parts[0].PartitionEpoch != f.p0.PartitionEpoch {
		t.Fatalf("after the refusals: %+v", parts[0])
	}
}

// The checks of the sender fail the whole request; a node that is not
// the controller decides nothing.
func TestAlterPartitionSender(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	ctx := t.Context()
	c := controllerOf(t, nodes, &fakeClock{now: time.Unix(1e9, 0)})
	epochs := registerAll(t, ctx, c, 1)
	if _, err := c.AlterPartition(ctx, 1, epochs[1]-1, nil); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("a stale broker epoch: %v", err)
	}
	if _, err := c.AlterPartition(ctx, 2, epochs[1], nil); !errors.Is(err, ErrUnknownBroker) {
		t.Fatalf("an unregistered sender: %v", err)
	}
	if res, err := c.AlterPartition(ctx, 1, epochs[1], nil); err != nil || len(res) != 0 {
		t.Fatalf("no change: %+v, %v", res, err)
	}
	for _, nd := range nodes {
		if nd.log.IsController() {
			continue
		}
		other := NewController(nd.log, nd.store, ControllerConfig{})
		if _, err := other.AlterPartition(ctx, 1, epochs[1], nil); !errors.Is(err, ErrNotController) {
			t.Fatalf("node %d, not the controller: %v", nd.cfg.NodeID, err)
		}
	}
}

// Accepted changes of one request are one entry, each with its
// partition epoch bumped and the leadership unchanged; an ISR that does
// not change is answered with the current assignment.
func TestAlterPartitionAccepted(t *testing.T) {
	t.Parallel()
	f := newAlterFixture(t)
	ctx := t.Context()
	before := f.c.Applied()
	res, err := f.c.AlterPartition(ctx, 1, f.epochs[1], []ISRChange{f.alter0(4, 2, 1)})
	if err != nil || res[0].Err != nil || !slices.Equal(res[0].Assignment.ISR, f.p0.ISR) || res[0].Assignment.PartitionEpoch != f.p0.PartitionEpoch {
		t.Fatalf("the same ISR in another order: %+v, %v", res, err)
	}
	if f.c.Applied() != before {
		t.Fatalf("an unchanged ISR wrote an entry: applied %d -> %d", before, f.c.Applied())
	}

	// Partition 0 shrinks (fenced broker 4 stays: it is in the ISR),
	// partition 1 expands with epochs, a refusal in the same request
	// changes nothing of the others, and partition 0 named again meets
	// the epoch its first change moved.
	shrink := f.alter0(1, 4)
	expand := ISRChange{TopicID: f.topic, Partition: 1, NewISR: []int32{1, 2, 3}, BrokerEpochs: []int64{f.epochs[1], f.epochs[2], -1}}
	refused := ISRChange{TopicID: f.topic, Partition: 1, LeaderEpoch: 1, NewISR: []int32{1}}
	res, err = f.c.AlterPartition(ctx, 1, f.epochs[1], []ISRChange{shrink, refused, expand, f.alter0(1)})
	if err != nil {
		t.Fatal(err)
	}
	if f.c.Applied() != before+1 {
		t.Fatalf("two accepted changes: applied %d -> %d, want one entry", before, f.c.Applied())
	}
	want0, want1 := f.p0, f.p1
	want0.ISR, want0.PartitionEpoch = []int32{1, 4}, f.p0.PartitionEpoch+1
	want1.ISR, want1.PartitionEpoch = []int32{1, 2, 3}, f.p1.PartitionEpoch+1
	for i, want := range []ISRChangeResult{{Assignment: want0}, {Err: kerr.NotLeaderForPartition}, {Assignment: want1}, {Err: kerr.InvalidUpdateVersion}} {
		got := res[i]
		if got.Err != want.Err || !equalAssignment(got.Assignment, want.Assignment) {
			t.Fatalf("result %d: %+v, want %+v", i, got, want)
		}
	}
	parts, _ := f.c.store.PartitionAssignments()
	if !equalAssignment(parts[0], want0) || !equalAssignment(parts[1], want1) {
		t.Fatalf("stored %+v; want %+v and %+v", parts, want0, want1)
	}
}

func equalAssignment(a, b state.PartitionAssignment) bool {
	return a.TopicID == b.TopicID && a.Partition == b.Partition && slices.Equal(a.Replicas, b.Replicas) &&
		slices.Equal(a.ISR, b.ISR) && a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch
}

// Two changes from the same view race: one is written, the other meets
// the partition epoch the first moved.
func TestAlterPartitionConcurrent(t *testing.T) {
	t.Parallel()
	f := newAlterFixture(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	results := make([][]ISRChangeResult, 2)
	errs := make([]error, 2)
	for i, isr := range [][]int32{{1, 2}, {1, 4}} {
		wg.Go(func() {
			results[i], errs[i] = f.c.AlterPartition(ctx, 1, f.epochs[1], []ISRChange{f.alter0(isr...)})
		})
	}
	wg.Wait()
	var won, lost int
	for i := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		switch results[i][0].Err {
		case nil:
			won++
		case kerr.InvalidUpdateVersion:
			lost++
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("results %+v: want one written, one INVALID_UPDATE_VERSION", results)
	}
	parts, _ := f.c.store.PartitionAssignments()
	if parts[0].PartitionEpoch != f.p0.PartitionEpoch+1 {
		t.Fatalf("partition 0 after the race: %+v", parts[0])
	}
}
