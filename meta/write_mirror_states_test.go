package meta

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// The controller writes a mirror partition's state only from the node
// that leads the partition at the epoch it names: a leader that lost the
// partition, or names an older epoch, writes nothing; the store's
// transition rules still hold (issue 22).
func TestWriteMirrorStates(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	ctx := t.Context()
	c := controllerOf(t, nodes, &fakeClock{now: time.Unix(1e9, 0)})
	registerAll(t, ctx, c, 3)
	id := [16]byte{7}
	ops, err := state.TopicOps(state.Topic{Name: "mirrored", ID: id, Partitions: 2, Mirror: "m"})
	if err != nil {
		t.Fatal(err)
	}
	more, err := partitionOps([]state.PartitionAssignment{
		{TopicID: id, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 5},
		{TopicID: id, Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 20, PartitionEpoch: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.log.Apply(ctx, append(ops, more...)); err != nil {
		t.Fatal(err)
	}
	if err := c.store.PutMirror(state.Mirror{Name: "m", Configs: map[string]string{"bootstrap.servers": "src:9092"}}); err != nil {
		t.Fatal(err)
	}
	aligning := func(p int32) state.MirrorPartitionState {
		return state.MirrorPartitionState{Mirror: "m", Topic: "mirrored", Partition: p, State: state.StateLogAlignment,
			Previous: state.StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1}
	}
	unknown := aligning(0)
	unknown.Topic = "nope"
	res, index, err := c.WriteMirrorStates(ctx, 1, []MirrorStateWrite{
		{State: aligning(0), LeaderEpoch: 3},
		{State: aligning(1), LeaderEpoch: 20}, // led by node 2
		{State: aligning(0), LeaderEpoch: 2},  // an older leadership of node 1
		{State: aligning(0), LeaderEpoch: 4},  // newer than the controller knows
		{State: unknown, LeaderEpoch: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []*kerr.Error{nil, kerr.NotLeaderForPartition, kerr.FencedLeaderEpoch, kerr.NotLeaderForPartition, kerr.UnknownTopicOrPartition}
	for i, w := range want {
		if res[i].Err != w {
			t.Fatalf("write %d: %v (%s), want %v", i, res[i].Err, res[i].Message, w)
		}
	}
	if index == 0 || index > c.log.Applied() {
		t.Fatalf("applied index %d (log %d)", index, c.log.Applied())
	}
	if got, err := c.store.MirrorPartitionState("m", "mirrored", 0); err != nil || got.State != state.StateLogAlignment {
		t.Fatalf("partition 0: %+v %v", got, err)
	}
	if _, err := c.store.MirrorPartitionState("m", "mirrored", 1); err == nil {
		t.Fatal("partition 1 was written by a node that does not lead it")
	}
	// PAUSED straight from LOG_ALIGNMENT is no transition the rules allow.
	paused := aligning(0)
	paused.State = state.StatePaused
	res, _, err = c.WriteMirrorStates(ctx, 1, []MirrorStateWrite{{State: paused, LeaderEpoch: 3}})
	if err != nil || res[0].Err != kerr.InvalidRequest {
		t.Fatalf("a refused transition: %+v %v", res, err)
	}
}
