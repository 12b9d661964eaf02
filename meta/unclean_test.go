package meta

import (
	"testing"
	"time"

	"github.com/kmirror/kmirror/state"
)

// unclean.leader.election.enable resolves per topic as in Kafka: the
// topic's own config, else the cluster-wide dynamic default, else the
// controller's static setting; fencing the last in-sync replica then
// elects an out-of-sync one in the topics that allow it only.
func TestUncleanElectionPerTopic(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	ctx := t.Context()
	c := controllerOf(t, nodes, &fakeClock{now: time.Unix(1e9, 0)})
	registerAll(t, ctx, c, 3)
	const key = "unclean.leader.election.enable"
	own, off, plain := [16]byte{1}, [16]byte{2}, [16]byte{3}
	var ops []state.Op
	for _, tp := range []state.Topic{
		{Name: "own", ID: own, Partitions: 1, Configs: map[string]string{key: "true"}},
		{Name: "off", ID: off, Partitions: 1, Configs: map[string]string{key: "false"}},
		{Name: "plain", ID: plain, Partitions: 1},
	} {
		more, err := state.TopicOps(tp)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, more...)
	}
	if _, err := c.log.Apply(ctx, ops); err != nil {
		t.Fatal(err)
	}
	resolve := func() Unclean {
		t.Helper()
		c.mu.Lock()
		defer c.mu.Unlock()
		u, err := c.uncleanElection()
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	u := resolve()
	if !u(own) || u(off) || u(plain) {
		t.Fatalf("static default false: own %v off %v plain %v, want true false false", u(own), u(off), u(plain))
	}
	parts := []state.PartitionAssignment{
		{TopicID: own, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1},
		{TopicID: plain, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1},
	}
	got := Fence(parts, 1, liveSet(2), u)
	if len(got) != 2 || got[0].Leader != 2 || got[1].Leader != -1 {
		t.Fatalf("fencing the last in-sync replica: %+v; want own led by 2, plain offline", got)
	}
	if err := c.store.SetBrokerConfigs(map[string]string{key: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	if u := resolve(); !u(own) || u(off) || !u(plain) {
		t.Fatalf("dynamic default true: own %v off %v plain %v, want true false true", u(own), u(off), u(plain))
	}
}
