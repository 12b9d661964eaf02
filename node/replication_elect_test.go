package node

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
)

// leaderOf is partition p of topic's leader in node i's assignment.
func (c *testCluster) leaderOf(i int, topic string, p int32) int32 {
	a, _ := c.partitionOn(i, topic, p).Assignment()
	return a.Leader
}

// waitFullISR waits until every partition of topic has all rf replicas
// in sync, as node i sees it.
func (c *testCluster) waitFullISR(i int, topic string, partitions int32, rf int) {
	c.t.Helper()
	testutil.CheckFor(c.t, 30*time.Second, func() error {
		for p := range partitions {
			if a, _ := c.partitionOn(i, topic, p).Assignment(); len(a.ISR) != rf {
				return fmt.Errorf("%s-%d's ISR %v", topic, p, a.ISR)
			}
		}
		return nil
	})
}

// A node that stopped and came back leads nothing until a preferred
// election (ElectLeaders, as kafka-leader-election.sh sends it) gives it
// back the partitions it is the first replica of; a second election
// needs none. An unclean election of a partition with a live leader
// needs none either.
func TestClusterPreferredLeaderElection(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3) // auto.leader.rebalance.enable checks every 5 min: not within this test
	c.createReplicated("e", 3, 3)
	preferred := c.leaderOf(0, "e", 0)
	back := int(preferred) - 1
	c.stop(back)
	other := (back + 1) % 3
	testutil.CheckFor(t, 20*time.Second, func() error {
		if l := c.leaderOf(other, "e", 0); l < 0 || l == preferred {
			return fmt.Errorf("e-0 led by %d after node %d stopped", l, preferred)
		}
		return nil
	})
	c.restart(back)
	c.waitFullISR(other, "e", 3, 3)
	if l := c.leaderOf(other, "e", 0); l == preferred {
		t.Fatalf("e-0 went back to node %d without an election", preferred)
	}

	adm := c.client(other)
	res, err := adm.ElectLeaders(t.Context(), kadm.ElectPreferredReplica, kadm.TopicsSet{"e": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["e"][0]; r.Err != nil {
		t.Fatalf("preferred election of e-0: %v", r.Err)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		for i := range c.nodes {
			if l := c.leaderOf(i, "e", 0); l != preferred {
				return fmt.Errorf("node %d sees e-0 led by %d, want %d", i+1, l, preferred)
			}
		}
		return nil
	})
	res, err = adm.ElectLeaders(t.Context(), kadm.ElectPreferredReplica, kadm.TopicsSet{"e": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["e"][0]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
		t.Fatalf("a second preferred election of e-0: %v, want ELECTION_NOT_NEEDED", r.Err)
	}
	res, err = adm.ElectLeaders(t.Context(), kadm.ElectLiveReplica, kadm.TopicsSet{"e": {1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res["e"][1]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
		t.Fatalf("an unclean election of a partition with a live leader: %v, want ELECTION_NOT_NEEDED", r.Err)
	}
	c.replicasIdentical("e", 3)
}

// With auto.leader.rebalance.enable, a node that came back gets its
// preferred leaderships back by itself.
func TestClusterAutoLeaderRebalance(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, func(cfg *broker.Config) {
		cfg.LeaderRebalance = broker.LeaderRebalanceConfig{Enable: true, CheckInterval: 200 * time.Millisecond, Percent: 10}
	})
	c.createReplicated("b", 3, 3)
	preferred := c.leaderOf(0, "b", 1)
	back := int(preferred) - 1
	c.stop(back)
	other := (back + 1) % 3
	testutil.CheckFor(t, 20*time.Second, func() error {
		if l := c.leaderOf(other, "b", 1); l < 0 || l == preferred {
			return fmt.Errorf("b-1 led by %d after node %d stopped", l, preferred)
		}
		return nil
	})
	c.restart(back)
	testutil.CheckFor(t, 30*time.Second, func() error {
		if l := c.leaderOf(other, "b", 1); l != preferred {
			return fmt.Errorf("b-1 led by %d, want its preferred %d back", l, preferred)
		}
		return nil
	})
}
