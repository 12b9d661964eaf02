package meta

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/kmirror/kmirror/state"
)

func TestPlaceReplicas(t *testing.T) {
	t.Parallel()
	got, err := PlaceReplicas([]int32{3, 1, 2}, map[int32]int{}, 6, 3)
	want := [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 2, 3}, {2, 3, 1}, {3, 1, 2}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("6 partitions, RF 3 on 3 brokers: %v, %v", got, err)
	}
	// A broker that leads nothing (one just added) takes the leaders
	// until the counts are even.
	leaders := map[int32]int{1: 3, 2: 3}
	got, err = PlaceReplicas([]int32{1, 2, 3}, leaders, 4, 2)
	want = [][]int32{{3, 1}, {3, 1}, {3, 1}, {1, 2}}
	if err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(leaders, map[int32]int{1: 4, 2: 3, 3: 3}) {
		t.Fatalf("placement after adding broker 3: %v, %v, counts %v", got, err, leaders)
	}
	for _, rf := range []int{0, 4} {
		if _, err := PlaceReplicas([]int32{1, 2, 3}, map[int32]int{}, 1, rf); !errors.Is(err, ErrReplicationFactor) {
			t.Errorf("RF %d on 3 brokers: %v", rf, err)
		}
	}
}

func liveSet(ids ...int32) func(int32) bool {
	return func(id int32) bool { return slices.Contains(ids, id) }
}

func part(p int32, replicas, isr []int32, leader, epoch int32) state.PartitionAssignment {
	return state.PartitionAssignment{TopicID: [16]byte{1}, Partition: p, Replicas: replicas, ISR: isr,
		Leader: leader, LeaderEpoch: epoch, PartitionEpoch: epoch}
}

func TestElect(t *testing.T) {
	t.Parallel()
	p := part(0, []int32{1, 2, 3}, []int32{1, 2}, 1, 4)
	if q, ok := Elect(p, liveSet(1, 2, 3), false); ok || !reflect.DeepEqual(q, p) {
		t.Fatalf("a live leader in the ISR stays: %+v, %v", q, ok)
	}
	if q, ok := Elect(p, liveSet(2, 3), false); !ok || q.Leader != 2 || q.LeaderEpoch != 5 || q.PartitionEpoch != 5 {
		t.Fatalf("leader 1 lost: %+v, %v", q, ok)
	}
	if q, ok := Elect(p, liveSet(3), false); !ok || q.Leader != -1 || !slices.Equal(q.ISR, []int32{1, 2}) || q.LeaderEpoch != 5 {
		t.Fatalf("no ISR member live, clean: %+v, %v", q, ok)
	}
	if q, ok := Elect(p, liveSet(3), true); !ok || q.Leader != 3 || !slices.Equal(q.ISR, []int32{3}) {
		t.Fatalf("no ISR member live, unclean: %+v, %v", q, ok)
	}
	if p.ISR[0] != 1 || len(p.ISR) != 2 {
		t.Fatalf("Elect changed its input: %+v", p)
	}
}

func TestFenceUnfence(t *testing.T) {
	t.Parallel()
	parts := []state.PartitionAssignment{
		part(0, []int32{1, 2, 3}, []int32{1, 2, 3}, 1, 0), // led by 1
		part(1, []int32{2, 1}, []int32{2, 1}, 2, 3),       // 1 follows
		part(2, []int32{1, 3}, []int32{1}, 1, 7),          // 1 is the whole ISR
		part(3, []int32{2, 3}, []int32{2, 3}, 2, 0),       // 1 not a replica
	}
	live := liveSet(2, 3)
	got := Fence(parts, 1, live, UncleanFor(false))
	want := []state.PartitionAssignment{
		{TopicID: [16]byte{1}, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1},
		{TopicID: [16]byte{1}, Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 3, PartitionEpoch: 4},
		{TopicID: [16]byte{1}, Partition: 2, Replicas: []int32{1, 3}, ISR: []int32{1}, Leader: -1, LeaderEpoch: 8, PartitionEpoch: 8},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fencing broker 1:\n got %+v\nwant %+v", got, want)
	}
	// Broker 1 returns: the partition only it holds in sync comes back;
	// the others wait for it to catch up.
	after := []state.PartitionAssignment{want[0], want[1], want[2], parts[3]}
	back := Unfence(after, liveSet(1, 2, 3), UncleanFor(false))
	if len(back) != 1 || back[0].Partition != 2 || back[0].Leader != 1 || back[0].LeaderEpoch != 9 {
		t.Fatalf("unfencing broker 1: %+v", back)
	}
}

// Random fences and returns on random assignments keep every record valid
// (the leader in the ISR or none, the ISR never empty, within the
// replicas), never elect a fenced broker, never move an epoch back, and
// leave no partition offline while a member of its ISR is live.
func TestFenceUnfenceInvariants(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	brokers := []int32{1, 2, 3, 4, 5}
	var parts []state.PartitionAssignment
	placed, err := PlaceReplicas(brokers, map[int32]int{}, 40, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range placed {
		parts = append(parts, NewPartition([16]byte{7}, int32(i), r))
	}
	fenced := map[int32]bool{}
	live := func(id int32) bool { return !fenced[id] }
	for step := range 2000 {
		id := brokers[rng.IntN(len(brokers))]
		unclean := rng.IntN(10) == 0
		var changed []state.PartitionAssignment
		if fenced[id] {
			fenced[id] = false
			changed = Unfence(parts, live, UncleanFor(unclean))
		} else {
			fenced[id] = true
			changed = Fence(parts, id, live, UncleanFor(unclean))
		}
		for _, q := range changed {
			old := parts[q.Partition]
			if _, err := state.PartitionOp(q); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if q.Leader >= 0 && fenced[q.Leader] {
				t.Fatalf("step %d: fenced broker %d elected: %+v", step, q.Leader, q)
			}
			if q.LeaderEpoch < old.LeaderEpoch || q.PartitionEpoch <= old.PartitionEpoch {
				t.Fatalf("step %d: epochs went from %+v to %+v", step, old, q)
			}
			parts[q.Partition] = q
		}
		for _, p := range parts {
			if p.Leader < 0 && slices.ContainsFunc(p.ISR, live) {
				t.Fatalf("step %d: partition %d offline with a live ISR member: %+v", step, p.Partition, p)
			}
		}
	}
}
