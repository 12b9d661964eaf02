package node

import (
	"context"
	"testing"
	"time"
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
