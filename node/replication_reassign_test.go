package node

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/testutil"
)

// A partition moves to another node (AlterPartitionReassignments, as
// kafka-reassign-partitions.sh sends it): while the new replica is down
// the reassignment stays under way, listed with its adding and removing
// replicas, and the leaving replica stays; cancelled, the partition is
// on its replicas of before. Run again with the new node up, it completes once the new
// replica caught up: the replicas are the target, the data is there, byte
// for byte, and the producer and consumer carry on.
func TestClusterReassignsPartitions(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	c.createReplicated("m", 1, 2)
	a, _ := c.partitionOn(0, "m", 0).Assignment()
	var newcomer int32
	for id := int32(1); id <= 3; id++ {
		if !slices.Contains(a.Replicas, id) {
			newcomer = id
		}
	}
	leaving, staying := a.Replicas[0], a.Replicas[1]
	target := []int32{staying, newcomer}
	acked := c.produceAll(int(staying)-1, "m", "a", 40)
	ctx := t.Context()
	adm := c.client(int(staying) - 1)
	reassign := func(replicas []int32) {
		t.Helper()
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign("m", 0, replicas)
		res, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if r := res["m"][0]; r.Err != nil {
			t.Fatalf("reassigning m-0 to %v: %v %s", replicas, r.Err, r.ErrMessage)
		}
	}
	listed := func() (kadm.ListPartitionReassignmentsResponse, bool) {
		t.Helper()
		res, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"m": {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		r, ok := res["m"][0]
		return r, ok
	}

	c.stop(int(newcomer) - 1)
	reassign(target)
	testutil.CheckFor(t, 10*time.Second, func() error {
		r, ok := listed()
		if !ok || !slices.Equal(r.AddingReplicas, []int32{newcomer}) || !slices.Equal(r.RemovingReplicas, []int32{leaving}) {
			return fmt.Errorf("listed %+v %v; want adding [%d], removing [%d]", r, ok, newcomer, leaving)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // the newcomer is down: nothing completes
	if cur, _ := c.partitionOn(int(staying)-1, "m", 0).Assignment(); !slices.Contains(cur.Replicas, leaving) {
		t.Fatalf("m-0's replicas %v lost the leaving replica %d before the newcomer caught up", cur.Replicas, leaving)
	}
	reassign(nil) // cancel
	testutil.CheckFor(t, 10*time.Second, func() error {
		if _, ok := listed(); ok {
			return errors.New("still listed after the cancel")
		}
		// As Kafka's revert: the replicas without the ones being added,
		// in the reassignment's order (the target's first).
		if cur, _ := c.partitionOn(int(staying)-1, "m", 0).Assignment(); !slices.Equal(cur.Replicas, []int32{staying, leaving}) {
			return fmt.Errorf("replicas %v after the cancel, want %v", cur.Replicas, []int32{staying, leaving})
		}
		return nil
	})
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("m", 0, nil)
	if res, err := adm.AlterPartitionAssignments(ctx, req); err != nil || !errors.Is(res["m"][0].Err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancelling nothing: %+v %v, want NO_REASSIGNMENT_IN_PROGRESS", res, err)
	}

	c.restart(int(newcomer) - 1)
	reassign(target)
	testutil.CheckFor(t, 30*time.Second, func() error {
		if r, ok := listed(); ok {
			return fmt.Errorf("still under way: %+v", r)
		}
		for i := range c.nodes {
			cur, _ := c.partitionOn(i, "m", 0).Assignment()
			if !slices.Equal(cur.Replicas, target) || len(cur.ISR) != 2 || !slices.Contains(target, cur.Leader) {
				return fmt.Errorf("node %d: m-0 %+v, want replicas %v, both in sync", i+1, cur, target)
			}
		}
		return nil
	})
	acked = append(acked, c.produceAll(int(newcomer)-1, "m", "b", 20)...)
	c.replicasIdentical("m", 1)
	c.consumeAll(int(newcomer)-1, "m", acked)
	// The replica that left holds nothing of the partition any more, as
	// Kafka deletes a removed replica's log.
	testutil.CheckFor(t, 10*time.Second, func() error {
		if p := c.partitionOn(int(leaving)-1, "m", 0); p.Size() != 0 || p.LogEndOffset() != 0 {
			return fmt.Errorf("node %d, no longer a replica, still holds m-0: %d bytes up to offset %d", leaving, p.Size(), p.LogEndOffset())
		}
		return nil
	})
}
