package partition

import (
	"slices"
	"testing"
	"time"

	"github.com/kmirror/kmirror/batch"
)

// newPartition is partition 0 of a new one-partition topic on a test
// node.
func newPartition(t *testing.T, topic string) *Partition {
	t.Helper()
	tp, err := newTestNode(t).m.Create(topic, 1, nil, [16]byte{}, "", Placement{})
	if err != nil {
		t.Fatal(err)
	}
	return tp.Partitions()[0]
}

// appendOne appends one control record at p's log end, as a leader's
// append (Appended follows).
func appendOne(t *testing.T, p *Partition) {
	t.Helper()
	if _, _, err := p.AppendControl(func(base int64, epoch int32) []byte { return pidReset(base, epoch) }); err != nil {
		t.Fatal(err)
	}
}

// A leader's high watermark is the smallest log end of its ISR: it does
// not move until every follower in the ISR has fetched in this
// leadership, moves as they fetch, and a follower that left the ISR no
// longer holds it back. A partition without followers in its ISR is
// committed at each append.
func TestReplicaSetHighWatermark(t *testing.T) {
	t.Parallel()
	p := newPartition(t, "r")
	p.SetAssignment(1, Assignment{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}})
	for range 3 {
		appendOne(t, p)
	}
	hw := func(want int64) {
		t.Helper()
		if got := p.HighWatermark(); got != want {
			t.Fatalf("high watermark %d, want %d (log end %d)", got, want, p.LogEndOffset())
		}
	}
	hw(0)
	now := time.Now()
	p.ReplicaFetched(2, -1, 3, now)
	hw(0) // follower 3 not heard from yet
	p.ReplicaFetched(3, -1, 1, now)
	hw(1)
	p.ReplicaFetched(3, -1, 3, now)
	hw(3)
	p.ReplicaFetched(9, -1, 0, now) // not a replica: ignored
	hw(3)

	appendOne(t, p)
	hw(3)
	p.SetAssignment(1, Assignment{Leader: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}})
	p.ReplicaFetched(2, -1, 4, now)
	hw(4) // 3 left the ISR

	p.SetAssignment(1, Assignment{Leader: 1, PartitionEpoch: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1}})
	appendOne(t, p)
	hw(5) // the leader alone: committed at once
	if p.ISRSize() != 1 {
		t.Fatalf("ISR size %d", p.ISRSize())
	}
}

// The ISR the leader asks for drops a follower that has not caught up
// within the lag bound and takes back one that caught up with the high
// watermark, while it fetches and is eligible; a follower of another
// epoch's leadership counts as caught up from its start.
func TestReplicaSetISRChanges(t *testing.T) {
	t.Parallel()
	p := newPartition(t, "isr")
	p.SetAssignment(1, Assignment{Leader: 1, LeaderEpoch: 0, PartitionEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}})
	start := time.Now()
	const lag = 10 * time.Second
	if _, ok := p.ISRChanges(start.Add(lag/2), lag, all); ok {
		t.Fatal("an ISR change before any follower lagged")
	}
	appendOne(t, p)
	appendOne(t, p)
	p.ReplicaFetched(2, -1, 2, start.Add(time.Second))     // caught up
	p.ReplicaFetched(3, -1, 1, start.Add(time.Second))     // behind
	p.ReplicaFetched(2, -1, 2, start.Add(lag+time.Second)) // still caught up
	ch, ok := p.ISRChanges(start.Add(lag+2*time.Second), lag, all)
	if !ok || len(ch.ISR) != 2 || ch.ISR[0] != 1 || ch.ISR[1] != 2 || ch.PartitionEpoch != 4 || ch.LeaderEpoch != 0 {
		t.Fatalf("shrink: %+v %v; want ISR [1 2] at partition epoch 4", ch, ok)
	}
	p.SetAssignment(1, Assignment{Leader: 1, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}})
	if p.ReplicaFetched(3, -1, 1, start.Add(lag+3*time.Second)) {
		t.Fatal("follower 3, below the high watermark, may rejoin")
	}
	if !p.ReplicaFetched(3, -1, 2, start.Add(lag+4*time.Second)) {
		t.Fatal("follower 3, caught up, may not rejoin")
	}
	if _, ok := p.ISRChanges(start.Add(lag+4*time.Second), lag, func(id int32) bool { return id != 3 }); ok {
		t.Fatal("follower 3, fenced, rejoins")
	}
	if ch, ok := p.ISRChanges(start.Add(3*lag), lag, all); ok && slices.Contains(ch.ISR, 3) {
		t.Fatalf("follower 3, silent since it caught up, rejoins: %v", ch.ISR)
	}
	ch, ok = p.ISRChanges(start.Add(lag+4*time.Second), lag, all)
	if !ok || len(ch.ISR) != 3 || ch.PartitionEpoch != 5 {
		t.Fatalf("expand: %+v %v; want ISR [1 2 3] at partition epoch 5", ch, ok)
	}

	// On a follower nothing is asked, and fetches are not the leader's.
	p.SetAssignment(1, Assignment{Leader: 2, LeaderEpoch: 1, PartitionEpoch: 6, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}})
	if _, ok := p.ISRChanges(start.Add(time.Hour), lag, all); ok {
		t.Fatal("a follower asks for an ISR change")
	}
	if p.ReplicaFetched(3, -1, 2, start) {
		t.Fatal("a follower takes fetches")
	}
}

// all is every broker eligible for the ISR.
func all(int32) bool { return true }

// A follower appends its leader's batches at their offsets and takes the
// leader's high watermark as far as its own log reaches.
func TestReplicaSetFollowerAppend(t *testing.T) {
	t.Parallel()
	p := newPartition(t, "f")
	p.SetAssignment(1, Assignment{Leader: 2, LeaderEpoch: 3, Replicas: []int32{2, 1}, ISR: []int32{2, 1}})
	var batches []byte
	for off := int64(0); off < 3; off++ {
		batches = batch.AppendMirrorPIDReset(batches, batch.PIDReset{BaseOffset: off, PartitionLeaderEpoch: 3})
	}
	if err := p.AppendReplica(batches[:len(batches)*2/3], 10, 0); err != nil {
		t.Fatal(err)
	}
	if p.LogEndOffset() != 2 || p.HighWatermark() != 2 {
		t.Fatalf("log end %d, high watermark %d; want 2 and 2 (the leader's 10, as far as the log reaches)", p.LogEndOffset(), p.HighWatermark())
	}
	if err := p.AppendReplica(batches[len(batches)*2/3:], 2, 0); err != nil {
		t.Fatal(err)
	}
	if p.LogEndOffset() != 3 || p.HighWatermark() != 2 {
		t.Fatalf("log end %d, high watermark %d; want 3 and the leader's 2", p.LogEndOffset(), p.HighWatermark())
	}
	if e, ok := p.LatestEpoch(); !ok || e != 3 {
		t.Fatalf("latest epoch %d %v, want the leader's 3", e, ok)
	}
	if _, err := p.log.AppendControl(pidReset(3, 3), 3); err != nil { // written below the role checks
		t.Fatal(err)
	}
	p.Appended() // a local append does not commit a follower's log
	if p.HighWatermark() != 2 {
		t.Fatalf("high watermark %d after a local append on a follower", p.HighWatermark())
	}
}

// A leader that deleted records up to its high watermark sends its new
// log start with that high watermark: a follower whose own high
// watermark lagged behind (it comes one fetch late) takes both, the high
// watermark first, as the log start never passes it (Kafka's order in
// processPartitionData). Taken the other way round the log start is
// refused at every fetch, and neither ever moves again.
func TestReplicaSetFollowerTakesLogStartPastItsHighWatermark(t *testing.T) {
	t.Parallel()
	p := newPartition(t, "f")
	p.SetAssignment(1, Assignment{Leader: 2, LeaderEpoch: 3, Replicas: []int32{2, 1}, ISR: []int32{2, 1}})
	var batches []byte
	for off := int64(0); off < 3; off++ {
		batches = batch.AppendMirrorPIDReset(batches, batch.PIDReset{BaseOffset: off, PartitionLeaderEpoch: 3})
	}
	if err := p.AppendReplica(batches, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendReplica(nil, 3, 3); err != nil {
		t.Fatalf("the leader's log start 3 with its high watermark 3, ours 1: %v", err)
	}
	if p.LogStartOffset() != 3 || p.HighWatermark() != 3 || p.LogEndOffset() != 3 {
		t.Fatalf("log start %d, high watermark %d, log end %d; want 3, 3, 3", p.LogStartOffset(), p.HighWatermark(), p.LogEndOffset())
	}
}
