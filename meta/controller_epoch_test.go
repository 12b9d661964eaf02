package meta

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kmirror/kmirror/state"
)

func TestControllerCheckBrokerEpoch(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 1, nil)
	ctx := t.Context()
	c := controllerOf(t, nodes, &fakeClock{now: time.Unix(1e9, 0)})
	epochs := registerAll(t, ctx, c, 1)
	if err := c.CheckBrokerEpoch(ctx, 1, epochs[1]); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckBrokerEpoch(ctx, 1, epochs[1]-1); !errors.Is(err, ErrStaleBrokerEpoch) || errors.Is(err, ErrUnknownBroker) {
		t.Fatalf("an older epoch: %v", err)
	}
	if err := c.CheckBrokerEpoch(ctx, 7, 1); !errors.Is(err, ErrStaleBrokerEpoch) || !errors.Is(err, ErrUnknownBroker) {
		t.Fatalf("a broker not registered: %v", err)
	}
}

// A heartbeat asking to be fenced fences the broker as an expired session
// would: its leaderships move; a heartbeat without it unfences it again.
func TestControllerHeartbeatFence(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 1, nil)
	ctx := t.Context()
	c := controllerOf(t, nodes, &fakeClock{now: time.Unix(1e9, 0)})
	epochs := registerAll(t, ctx, c, 2)
	if err := c.CreateTopic(ctx, state.Topic{Name: "orders", ID: [16]byte{1}, Partitions: 4}, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeartbeatFence(ctx, 2, epochs[2]-1); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("at an older epoch: %v", err)
	}
	res, err := c.HeartbeatFence(ctx, 2, epochs[2])
	if err != nil || !res.Fenced || !res.ShutdownReady {
		t.Fatalf("HeartbeatFence: %+v, %v", res, err)
	}
	parts, _ := c.store.PartitionAssignments()
	for _, p := range parts {
		if p.Leader != 1 || slices.Contains(p.ISR, 2) {
			t.Fatalf("partition %d after broker 2 was fenced: %+v", p.Partition, p)
		}
	}
	if brokers, _ := c.store.Brokers(); len(brokers) != 2 || !brokers[1].Fenced || brokers[0].Fenced {
		t.Fatalf("brokers after: %+v", brokers)
	}
	if res, err := c.Heartbeat(ctx, 2, epochs[2], c.log.fsm.applied(), false); err != nil || res.Fenced {
		t.Fatalf("a heartbeat after: %+v, %v", res, err)
	}
}
