package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testutil"
)

// A leader that raises a partition's leader epoch (as mirroring does, to
// stay above the source's epochs) raises the controller's: every replica's
// assignment and the leader's image show the new epoch, its followers go
// on fetching at it (a leader answering at a higher epoch than its
// followers' assignment would fence them for good: issue 21, review
// finding 4), acks=all writes go on, and the batches after it carry it on
// every replica.
func TestClusterRaisedLeaderEpochGoesThroughTheController(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	c.createReplicated("raised", 1, 3)
	acked := c.produceAll(0, "raised", "a", 10)
	a, _ := c.partitionOn(0, "raised", 0).Assignment()
	leader := int(a.Leader) - 1
	const raised = 40
	if err := c.nodes[leader].Broker.Partitions().RaiseLeaderEpochs("raised", map[int32]int32{0: raised}); err != nil {
		t.Fatal(err)
	}
	md, err := c.client(leader).Metadata(t.Context(), "raised")
	if err != nil {
		t.Fatal(err)
	}
	if e := md.Topics["raised"].Partitions[0].LeaderEpoch; e != raised {
		t.Fatalf("the leader's Metadata shows epoch %d once the raise returned, want %d", e, raised)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		for i := range c.nodes {
			if a, _ := c.partitionOn(i, "raised", 0).Assignment(); a.LeaderEpoch != raised || a.Leader != int32(leader+1) {
				return fmt.Errorf("node %d: raised-0 %+v, want leader %d at epoch %d", i+1, a, leader+1, raised)
			}
		}
		return nil
	})
	acked = append(acked, c.produceAll(leader, "raised", "b", 10)...)
	c.replicasIdentical("raised", 1)
	for i := range c.nodes {
		if e, _ := c.partitionOn(i, "raised", 0).LatestEpoch(); e != raised {
			t.Fatalf("node %d: the last batch's epoch is %d, want %d", i+1, e, raised)
		}
	}
	c.consumeAll(leader, "raised", acked)
}
