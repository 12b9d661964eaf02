package meta

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// A reassignment keeps the leaving replicas until the whole target is in
// sync, then completes: the leaving ones leave, a leaving leader hands
// over to the first target replica in sync (a new leader epoch). A
// cancel reverts to the replicas without the ones being added; a target
// already in sync completes at once; bad targets are refused.
func TestReassign(t *testing.T) {
	t.Parallel()
	registered := map[int32]bool{1: true, 2: true, 3: true, 4: true}
	live := func(int32) bool { return true }
	a := state.PartitionAssignment{TopicID: [16]byte{1}, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 5}

	q, err, _ := reassign(a, []int32{3, 2}, registered, live)
	if err != nil || !slices.Equal(q.Replicas, []int32{3, 2, 1}) || !slices.Equal(q.Adding, []int32{3}) ||
		!slices.Equal(q.Removing, []int32{1}) || q.Leader != 1 || q.PartitionEpoch != 6 || q.LeaderEpoch != 3 {
		t.Fatalf("under way: %+v %v", q, err)
	}
	if same := completeReassignment(q, live); !sameAssignment(same, q) {
		t.Fatalf("completed with 3 out of sync: %+v", same)
	}
	caught := q
	caught.ISR = []int32{1, 2, 3}
	done := completeReassignment(caught, live)
	if done.Reassigning() || !slices.Equal(done.Replicas, []int32{3, 2}) || !slices.Equal(done.ISR, []int32{2, 3}) ||
		done.Leader != 3 || done.LeaderEpoch != 4 {
		t.Fatalf("completed: %+v; want replicas [3 2], ISR [2 3], leader 3 at epoch 4", done)
	}

	back, err, _ := reassign(q, nil, registered, live)
	if err != nil || back.Reassigning() || !slices.Equal(back.Replicas, []int32{2, 1}) || back.Leader != 1 || back.PartitionEpoch != 7 {
		t.Fatalf("cancelled: %+v %v", back, err)
	}
	if _, err, _ := reassign(a, nil, registered, live); err != kerr.NoReassignmentInProgress {
		t.Fatalf("cancelling nothing: %v", err)
	}
	if now, err, _ := reassign(a, []int32{2}, registered, live); err != nil || now.Reassigning() || !slices.Equal(now.Replicas, []int32{2}) ||
		now.Leader != 2 || now.LeaderEpoch != 4 {
		t.Fatalf("shrinking to an in-sync replica completes at once: %+v %v", now, err)
	}
	for _, target := range [][]int32{{}, {2, 2}, {2, 9}} {
		if _, err, _ := reassign(a, target, registered, live); err != kerr.InvalidReplicaAssignment {
			t.Errorf("target %v: %v, want INVALID_REPLICA_ASSIGNMENT", target, err)
		}
	}
	if same, err, _ := reassign(a, []int32{1, 2}, registered, live); err != nil || !sameAssignment(same, a) {
		t.Fatalf("the current replicas as the target: %+v %v, want no change", same, err)
	}
}

// A reassignment never leaves its partition led from outside its
// replicas, nor takes it offline to complete (issue 21, review finding
// 5): a cancel or a new target that drops the leader (an added replica
// that was elected meanwhile) elects from what is left of the ISR, and a
// completion whose new leader would have to be a dead node waits.
func TestReassignKeepsALeader(t *testing.T) {
	t.Parallel()
	registered := map[int32]bool{1: true, 2: true, 3: true, 4: true}
	live := func(int32) bool { return true }
	// From [1 2] to [3 2]; node 1 died and the added 3 was elected.
	led3 := state.PartitionAssignment{TopicID: [16]byte{1}, Replicas: []int32{3, 2, 1}, Adding: []int32{3}, Removing: []int32{1},
		ISR: []int32{2, 3}, Leader: 3, LeaderEpoch: 4, PartitionEpoch: 8}
	for _, tt := range []struct {
		name         string
		target       []int32
		wantReplicas []int32
	}{
		{"cancelled", nil, []int32{2, 1}},
		{"a new target", []int32{4, 2}, []int32{4, 2, 1}},
	} {
		q, err, _ := reassign(led3, tt.target, registered, live)
		if err != nil || !slices.Equal(q.Replicas, tt.wantReplicas) || q.Leader != 2 || q.LeaderEpoch != 5 || !slices.Equal(q.ISR, []int32{2}) {
			t.Fatalf("%s: %+v %v; want replicas %v led by 2 at epoch 5, ISR [2]", tt.name, q, err, tt.wantReplicas)
		}
	}
	// From [1 2] to [3 2], all in sync, the leaving leader 1 the only
	// live node: not completed (3 and 2 are dead), 1 goes on leading.
	caught := state.PartitionAssignment{TopicID: [16]byte{1}, Replicas: []int32{3, 2, 1}, Adding: []int32{3}, Removing: []int32{1},
		ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 6}
	only1 := func(id int32) bool { return id == 1 }
	if q := completeReassignment(caught, only1); !sameAssignment(q, caught) {
		t.Fatalf("completed with no live target replica to lead: %+v", q)
	}
}
