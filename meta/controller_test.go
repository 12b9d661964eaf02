package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/state"
)

// fakeClock is a controller's clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// controllerOf is the controller role of the quorum's current leader.
func controllerOf(t *testing.T, nodes []*logNode, clock *fakeClock) *Controller {
	t.Helper()
	c := controller(t, nodes)
	return NewController(c.log, c.store, ControllerConfig{SessionTimeout: 9 * time.Second, Now: clock.Now})
}

func registration(id int32, incarnation byte) state.BrokerRegistration {
	return state.BrokerRegistration{ID: id, Incarnation: [16]byte{incarnation, byte(id)},
		Listeners: []state.BrokerEndpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9090 + id}}}
}

// registerAll registers and unfences brokers 1..n, returning their epochs.
func registerAll(t *testing.T, ctx context.Context, c *Controller, n int32) map[int32]int64 {
	t.Helper()
	epochs := map[int32]int64{}
	for id := int32(1); id <= n; id++ {
		epoch, err := c.RegisterBroker(ctx, registration(id, 1))
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Heartbeat(ctx, id, epoch, c.log.fsm.applied(), false)
		if err != nil || res.Fenced {
			t.Fatalf("broker %d: heartbeat %+v, %v", id, res, err)
		}
		epochs[id] = epoch
	}
	return epochs
}

func TestControllerRegistration(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	ctx := t.Context()
	c := controllerOf(t, nodes, &fakeClock{now: time.Unix(1e9, 0)})
	e1, err := c.RegisterBroker(ctx, registration(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Heartbeat(ctx, 1, e1, uint64(e1)-1, false); err != nil || !res.Fenced {
		t.Fatalf("a broker that has not applied its registration stays fenced: %+v, %v", res, err)
	}
	if again, err := c.RegisterBroker(ctx, registration(1, 1)); err != nil || again != e1 {
		t.Fatalf("the same incarnation registering again: epoch %d, %v; want %d", again, err, e1)
	}
	e1b, err := c.RegisterBroker(ctx, registration(1, 2))
	if err != nil || e1b <= e1 {
		t.Fatalf("a new incarnation: epoch %d, %v; want above %d", e1b, err, e1)
	}
	if _, err := c.Heartbeat(ctx, 1, e1, c.log.fsm.applied(), false); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("a heartbeat of the previous incarnation: %v", err)
	}
	if _, err := c.Heartbeat(ctx, 9, 1, c.log.fsm.applied(), false); !errors.Is(err, ErrUnknownBroker) {
		t.Fatalf("an unregistered broker: %v", err)
	}
	if res, err := c.Heartbeat(ctx, 1, e1b, c.log.fsm.applied(), false); err != nil || res.Fenced {
		t.Fatalf("caught up: %+v, %v", res, err)
	}
	// Every node's store holds the registration.
	for _, nd := range nodes {
		if err := nd.log.WaitApplied(ctx, controller(t, nodes).log.raft.LastIndex()); err != nil {
			t.Fatal(err)
		}
		bs, err := nd.store.Brokers()
		if err != nil || len(bs) != 1 || bs[0].Fenced || bs[0].Epoch != e1b {
			t.Fatalf("node %d's brokers: %+v, %v", nd.cfg.NodeID, bs, err)
		}
	}
	for _, nd := range nodes {
		if nd.log.IsController() {
			continue
		}
		other := NewController(nd.log, nd.store, ControllerConfig{})
		if _, err := other.RegisterBroker(ctx, registration(2, 1)); !errors.Is(err, ErrNotController) {
			t.Fatalf("node %d, not the controller, registered a broker: %v", nd.cfg.NodeID, err)
		}
	}
}

// A topic's leaders are spread; a broker whose session expires is fenced
// (its leaderships move, it leaves the ISRs, the image lists it no more)
// and its return brings back what only it held in sync.
func TestControllerFencing(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	ctx := t.Context()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	c := controllerOf(t, nodes, clock)
	epochs := registerAll(t, ctx, c, 3)
	orders := state.Topic{Name: "orders", ID: [16]byte{1}, Partitions: 6}
	if err := c.CreateTopic(ctx, orders, 3); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic(ctx, orders, 3); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("creating it again: %v", err)
	}
	if err := c.CreateTopic(ctx, state.Topic{Name: "big", ID: [16]byte{2}, Partitions: 1}, 4); !errors.Is(err, ErrReplicationFactor) {
		t.Fatalf("RF 4 on 3 brokers: %v", err)
	}
	for _, n := range []int32{0, -1} {
		if err := c.CreateTopic(ctx, state.Topic{Name: "none", ID: [16]byte{3}, Partitions: n}, 1); err == nil {
			t.Fatalf("a topic of %d partitions created", n)
		}
	}
	parts, _ := c.store.PartitionAssignments()
	if counts := LeaderCounts(parts); len(parts) != 6 || counts[1] != 2 || counts[2] != 2 || counts[3] != 2 {
		t.Fatalf("leaders of 6 partitions on 3 brokers: %v", counts)
	}
	// One partition held in sync by broker 2 alone, as after its peers
	// fell behind.
	solo := parts[1]
	solo.ISR, solo.Leader, solo.PartitionEpoch = []int32{2}, 2, solo.PartitionEpoch+1
	op, _ := state.PartitionOp(solo)
	if _, err := c.log.Apply(ctx, []state.Op{op}); err != nil {
		t.Fatal(err)
	}

	clock.advance(5 * time.Second)
	for _, id := range []int32{1, 3} {
		if _, err := c.Heartbeat(ctx, id, epochs[id], c.log.fsm.applied(), false); err != nil {
			t.Fatal(err)
		}
	}
	clock.advance(5 * time.Second) // broker 2: 10 s without a heartbeat
	var logged bytes.Buffer
	c.log.cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	if err := c.FenceExpired(ctx); err != nil {
		t.Fatal(err)
	}
	if out := logged.String(); !strings.Contains(out, "broker session expired: fenced") || !strings.Contains(out, "broker=2 ") ||
		strings.Contains(out, "broker=1 ") || strings.Contains(out, "broker=3 ") {
		t.Fatalf("the fencing of broker 2 alone is not logged: %q", out)
	}
	parts, _ = c.store.PartitionAssignments()
	for _, p := range parts {
		switch {
		case p.Partition == solo.Partition:
			if p.Leader != -1 || !slices.Equal(p.ISR, []int32{2}) {
				t.Fatalf("the partition only broker 2 held in sync: %+v", p)
			}
		case p.Leader == 2 || slices.Contains(p.ISR, 2):
			t.Fatalf("fenced broker 2 still leads or follows in sync: %+v", p)
		}
	}
	brokers, _ := c.store.Brokers()
	topics, _ := c.store.Topics()
	im := ImageFromRecords("c", 1, 1, brokers, topics, parts, nil)
	if len(im.Brokers()) != 2 || im.Broker(2) != nil {
		t.Fatalf("the image lists %+v", im.Brokers())
	}

	if res, err := c.Heartbeat(ctx, 2, epochs[2], c.log.fsm.applied(), false); err != nil || res.Fenced {
		t.Fatalf("broker 2 back: %+v, %v", res, err)
	}
	parts, _ = c.store.PartitionAssignments()
	if p := parts[solo.Partition]; p.Leader != 2 {
		t.Fatalf("the partition only broker 2 holds in sync stays offline: %+v", p)
	}
}

// A controlled shutdown moves the broker's leaderships to other ISR
// members and then lets it go; a partition with no other member in sync
// goes offline with the broker as its ISR, to come back with it, as in
// Kafka.
func TestControllerControlledShutdown(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	ctx := t.Context()
	c := controllerOf(t, nodes, &fakeClock{now: time.Unix(1e9, 0)})
	epochs := registerAll(t, ctx, c, 3)
	if err := c.CreateTopic(ctx, state.Topic{Name: "orders", ID: [16]byte{1}, Partitions: 6}, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic(ctx, state.Topic{Name: "single", ID: [16]byte{2}, Partitions: 3}, 1); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the next heartbeat of the shutdown changes nothing more
		res, err := c.Heartbeat(ctx, 1, epochs[1], c.log.fsm.applied(), true)
		if err != nil || !res.ShutdownReady {
			t.Fatalf("shutting down broker 1: %+v, %v", res, err)
		}
	}
	parts, _ := c.store.PartitionAssignments()
	for _, p := range parts {
		switch {
		case p.TopicID == [16]byte{2} && slices.Equal(p.Replicas, []int32{1}):
			if p.Leader != -1 || !slices.Equal(p.ISR, []int32{1}) {
				t.Fatalf("an RF 1 partition of broker 1 after its controlled shutdown: %+v", p)
			}
		case p.Leader == 1 || slices.Contains(p.ISR, 1):
			t.Fatalf("broker 1 still leads or follows in sync after its controlled shutdown: %+v", p)
		}
	}
}

// A new controller goes on from the records: producer-id blocks never
// overlap across the change, and no broker is fenced for the time the
// quorum had no controller.
func TestControllerFailover(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	ctx := t.Context()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	c := controllerOf(t, nodes, clock)
	registerAll(t, ctx, c, 3)
	first, err := c.AllocateProducerIDs(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.AllocateProducerIDs(ctx, 1000)
	if err != nil || second != first+1000 {
		t.Fatalf("second block at %d, %v; want %d", second, err, first+1000)
	}
	old := controller(t, nodes)
	old.close(t)
	clock.advance(time.Minute) // no heartbeats meanwhile
	c2 := controllerOf(t, nodes, clock)
	third, err := c2.AllocateProducerIDs(ctx, 1000)
	if err != nil || third != second+1000 {
		t.Fatalf("block after the change at %d, %v; want %d", third, err, second+1000)
	}
	if err := c2.FenceExpired(ctx); err != nil {
		t.Fatal(err)
	}
	brokers, _ := c2.store.Brokers()
	for _, b := range brokers {
		if b.Fenced {
			t.Fatalf("broker %d fenced by the new controller at once", b.ID)
		}
	}
}

// The first controller's identity entry makes the quorum one cluster:
// the other fresh nodes adopt its id; a second call writes nothing.
func TestEnsureClusterIdentity(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	c := controllerOf(t, nodes, &fakeClock{now: time.Unix(1, 0)})
	ctx := context.Background()
	id, err := c.EnsureClusterIdentity(ctx)
	if err != nil || id != c.store.ClusterID() {
		t.Fatalf("identity %q, %v; want the controller's %q", id, err, c.store.ClusterID())
	}
	before := c.log.Applied()
	if again, err := c.EnsureClusterIdentity(ctx); err != nil || again != id || c.log.Applied() != before {
		t.Fatalf("a second call: %q, %v, applied %d -> %d", again, err, before, c.log.Applied())
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		for _, nd := range nodes {
			if got := nd.store.ClusterID(); got != id {
				return fmt.Errorf("node %d: cluster id %s, want %s", nd.cfg.NodeID, got, id)
			}
		}
		return nil
	})
}

// A node formatted with another cluster's id stops applying the log at
// the identity entry, and says so with both ids.
func TestOtherClustersNodeStopsApplying(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	c := controllerOf(t, nodes, &fakeClock{now: time.Unix(1, 0)})
	stranger := nodes[0]
	if stranger.log == c.log {
		stranger = nodes[1]
	}
	if err := stranger.store.RestoreClusterID("AAAAAAAAAAAAAAAAAAAAAg"); err != nil {
		t.Fatal(err)
	}
	id, err := c.EnsureClusterIdentity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		err := stranger.log.Err()
		if !errors.Is(err, state.ErrOtherCluster) {
			return fmt.Errorf("the stranger's log: %v, want ErrOtherCluster", err)
		}
		if !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "AAAAAAAAAAAAAAAAAAAAAg") {
			return fmt.Errorf("the error does not name both ids: %v", err)
		}
		return nil
	})
}

// A controller busy for longer than a session (one long apply, holding
// its lock) does not fence a broker whose heartbeat arrived in time and
// waits behind it; one that sent none is fenced.
func TestControllerDoesNotFenceAHeartbeatWaitingForIt(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 1, nil)
	ctx := t.Context()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	c := controllerOf(t, nodes, clock)
	epochs := registerAll(t, ctx, c, 2)

	clock.advance(8 * time.Second)
	c.mu.Lock() // the controller is busy
	done := make(chan error, 1)
	go func() {
		_, err := c.Heartbeat(ctx, 1, epochs[1], c.log.fsm.applied(), false)
		done <- err
	}()
	testutil.CheckFor(t, 5*time.Second, func() error {
		c.arrivingMu.Lock()
		defer c.arrivingMu.Unlock()
		if _, ok := c.arriving[1]; !ok {
			return errors.New("broker 1's heartbeat has not arrived")
		}
		return nil
	})
	clock.advance(2 * time.Second) // 10 s since the last heartbeats were served
	err := c.fenceExpiredLocked(ctx)
	// Before the waiting heartbeat is served: it would unfence broker 1
	// again, but its leaderships would have moved and it left the ISRs.
	brokers, _ := c.store.Brokers()
	c.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, b := range brokers {
		if want := b.ID == 2; b.Fenced != want {
			t.Errorf("broker %d fenced %v, want %v (broker 1's heartbeat waited for the busy controller)", b.ID, b.Fenced, want)
		}
	}
}
