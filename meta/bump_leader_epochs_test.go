package meta

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// A bump raises a partition's leader epoch to the minimum asked (with its
// partition epoch), leaves one already there alone, writes nothing when
// nothing needs raising, and answers an unknown partition with Kafka's
// codes.
func TestBumpLeaderEpochs(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	ctx := t.Context()
	c := controllerOf(t, nodes, &fakeClock{now: time.Unix(1e9, 0)})
	registerAll(t, ctx, c, 3)
	id := [16]byte{9}
	ops, err := state.TopicOps(state.Topic{Name: "bumped", ID: id, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	p0 := state.PartitionAssignment{TopicID: id, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 5}
	p1 := state.PartitionAssignment{TopicID: id, Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 20, PartitionEpoch: 1}
	more, err := partitionOps([]state.PartitionAssignment{p0, p1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.log.Apply(ctx, append(ops, more...)); err != nil {
		t.Fatal(err)
	}
	res, index, err := c.BumpLeaderEpochs(ctx, []EpochBump{
		{PartitionRef{id, 0}, 13}, {PartitionRef{id, 1}, 13}, {PartitionRef{id, 7}, 1}, {PartitionRef{[16]byte{1}, 0}, 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if index == 0 || res[0].Err != nil || res[1].Err != nil || res[2].Err != kerr.UnknownTopicOrPartition || res[3].Err != kerr.UnknownTopicID {
		t.Fatalf("index %d, results %+v", index, res)
	}
	got, err := c.store.PartitionAssignments()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range got {
		switch a.Partition {
		case 0:
			if a.LeaderEpoch != 13 || a.PartitionEpoch != 6 || a.Leader != 1 || len(a.ISR) != 2 {
				t.Fatalf("raised partition 0: %+v, want epoch 13, partition epoch 6, leader and ISR unchanged", a)
			}
		case 1:
			if a.LeaderEpoch != 20 || a.PartitionEpoch != 1 {
				t.Fatalf("partition 1 already above the minimum changed: %+v", a)
			}
		}
	}
	if _, index, err := c.BumpLeaderEpochs(ctx, []EpochBump{{PartitionRef{id, 0}, 13}}); err != nil || index != 0 {
		t.Fatalf("a bump to the epoch already held: index %d, %v; want no entry", index, err)
	}
}
