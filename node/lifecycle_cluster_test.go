package node

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/state"
)

// Three nodes of one quorum each register with the controller, the
// two that are not it over their channels, and are unfenced; each
// closes after its controlled shutdown (the one after the controller's
// waits for the next election), the last at once: its peers are gone.
func TestClusterNodesRegister(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		if err := n.Lifecycle().WaitUnfenced(ctx); err != nil {
			t.Fatalf("node %d: %v", n.life.cfg.NodeID, err)
		}
	}
	// Every store (the log replicates the registrations) lists the three,
	// unfenced, at the epochs their lifecycles hold.
	for _, n := range c.nodes {
		checkFor(t, "three registrations everywhere", func() bool {
			brokers, err := n.store.Brokers()
			if err != nil || len(brokers) != len(c.nodes) {
				return false
			}
			for _, b := range brokers {
				if b.Fenced || b.Epoch != c.nodes[b.ID-1].Lifecycle().Epoch() {
					return false
				}
			}
			return true
		})
	}
	// The nodes close one by one, each after its controlled shutdown.
	for i := range c.nodes {
		start := time.Now()
		c.stop(i)
		t.Logf("node %d closed in %v", i+1, time.Since(start))
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("node %d took %v to close", i+1, d)
		}
	}
}

// A partition's leader changes its ISR through the controller with
// AlterISR: over the channel from a node that is not the controller,
// directly on the controller. Two partitions start in sync with their
// leaders alone: each leader takes its caught-up followers back by
// itself (broker/isr.go), one of them the controller, the other over the
// channel, and every node's store ends with the full ISRs. A stale view
// or a sender that does not lead is refused with the Kafka error.
func TestClusterAlterISR(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		if err := n.Lifecycle().WaitUnfenced(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ctl := c.controllerIndex()
	f := (ctl + 1) % len(c.nodes)
	ctlID, fID := int32(ctl+1), int32(f+1)
	// Two partitions on three replicas, each in sync with its leader
	// alone: partition 0 led by node f, partition 1 by the controller.
	topic := state.Topic{Name: "isr", ID: [16]byte{0x15}, Partitions: 2}
	ops, err := state.TopicOps(topic)
	if err != nil {
		t.Fatal(err)
	}
	for p, leader := range []int32{fID, ctlID} {
		a := meta.NewPartition(topic.ID, int32(p), []int32{1, 2, 3})
		a.Leader, a.ISR = leader, []int32{leader}
		op, err := state.PartitionOp(a)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	if _, err := c.nodes[ctl].log.Apply(ctx, ops); err != nil {
		t.Fatal(err)
	}
	// The changes are the log's: every node's store has them.
	var epochs [2]int32
	for _, n := range c.nodes {
		checkFor(t, "the full ISRs everywhere", func() bool {
			parts, err := n.store.PartitionAssignments()
			if err != nil {
				return false
			}
			i := slices.IndexFunc(parts, func(a state.PartitionAssignment) bool { return a.TopicID == topic.ID })
			if i < 0 || i+1 >= len(parts) || len(parts[i].ISR) != 3 || len(parts[i+1].ISR) != 3 {
				return false
			}
			epochs = [2]int32{parts[i].PartitionEpoch, parts[i+1].PartitionEpoch}
			return epochs[0] > 0 && epochs[1] > 0
		})
	}
	follower, controller := c.nodes[f].Lifecycle(), c.nodes[ctl].Lifecycle()
	full := []int32{1, 2, 3}
	if p, err := follower.AlterISR(ctx, topic.ID, 0, 0, epochs[0], full, nil); err != nil || p.PartitionEpoch != epochs[0] {
		t.Fatalf("the leader's own ISR unchanged: %+v, %v; want partition epoch %d", p, err, epochs[0])
	}
	if _, err := follower.AlterISR(ctx, topic.ID, 0, 0, 0, []int32{fID}, nil); !errors.Is(err, kerr.InvalidUpdateVersion) {
		t.Fatalf("from the stale partition epoch: %v", err)
	}
	if _, err := controller.AlterISR(ctx, topic.ID, 0, 0, epochs[0], []int32{fID}, nil); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("from a follower: %v", err)
	}
	if _, err := follower.AlterISR(ctx, [16]byte{0x16}, 0, 0, 0, []int32{fID}, nil); !errors.Is(err, kerr.UnknownTopicID) {
		t.Fatalf("an unknown topic: %v", err)
	}
	if _, err := controller.AlterISR(ctx, topic.ID, 1, 0, epochs[1], []int32{ctlID, 99}, nil); !errors.Is(err, kerr.IneligibleReplica) {
		t.Fatalf("a member that is not a replica: %v", err)
	}
	// KIP-903, over the channel (the follower is not the controller): a
	// joining member named at a broker epoch that is not its registration
	// (an older incarnation's fetch) is refused. The leader's own ISR loop
	// takes the member back meanwhile, so a stale partition epoch is
	// tried again from the current one.
	current := func() state.PartitionAssignment {
		parts, err := c.nodes[f].store.PartitionAssignments()
		if err != nil {
			t.Fatal(err)
		}
		return parts[slices.IndexFunc(parts, func(a state.PartitionAssignment) bool { return a.TopicID == topic.ID && a.Partition == 0 })]
	}
	for attempt := 0; ; attempt++ {
		cur := current()
		shrunk, err := follower.AlterISR(ctx, topic.ID, 0, cur.LeaderEpoch, cur.PartitionEpoch, []int32{fID}, nil)
		if err == nil {
			_, err = follower.AlterISR(ctx, topic.ID, 0, shrunk.LeaderEpoch, shrunk.PartitionEpoch, []int32{fID, ctlID}, []int64{-1, 1 << 40})
		}
		if errors.Is(err, kerr.InvalidUpdateVersion) && attempt < 20 {
			continue
		}
		if !errors.Is(err, kerr.IneligibleReplica) {
			t.Fatalf("a joining member at another incarnation's broker epoch: %v, want INELIGIBLE_REPLICA", err)
		}
		break
	}
	// The leader's loop takes it back with the epoch its fetches name.
	checkFor(t, "the controller back in partition 0's ISR", func() bool { return slices.Contains(current().ISR, ctlID) })
}
