package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// createAssigned creates topic with one partition on replicas (the first
// leading) through node i's CreateTopics, and waits until every running
// node hosts it with the full ISR.
func (c *testCluster) createAssigned(i int, topic string, replicas ...int32) {
	c.t.Helper()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	if st := c.createTopicsRaw(c.t.Context(), i, rt); st.ErrorCode != 0 {
		c.t.Fatalf("creating %s on %v: code %d %v", topic, replicas, st.ErrorCode, st.ErrorMessage)
	}
	c.inSync(topic, len(replicas))
}

// produceOne produces n records of prefix to topic through node i with
// acks=1 and no idempotence, and returns their values.
func (c *testCluster) produceOne(i int, topic, prefix string, n int) []string {
	c.t.Helper()
	cl := nodetest.Client(c.t, []string{c.nodes[i].Addr()}, kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	ctx, cancel := context.WithTimeout(c.t.Context(), 60*time.Second)
	defer cancel()
	var vals []string
	for j := range n {
		v := fmt.Sprintf("%s-%d", prefix, j)
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			c.t.Fatalf("producing %s with acks=1: %v", v, err)
		}
		vals = append(vals, v)
	}
	return vals
}

// assignmentIs waits until node i's image gives topic's partition 0
// the assignment ok accepts, and returns it.
func (c *testCluster) assignmentIs(i int, topic string, what string, ok func(leader int32, isr []int32) bool) (leader, epoch int32) {
	c.t.Helper()
	testutil.CheckFor(c.t, 30*time.Second, func() error {
		a, _ := c.partitionOn(i, topic, 0).Assignment()
		if !ok(a.Leader, a.ISR) {
			return fmt.Errorf("%s-0 on node %d: leader %d, ISR %v, epoch %d; want %s", topic, i+1, a.Leader, a.ISR, a.LeaderEpoch, what)
		}
		leader, epoch = a.Leader, a.LeaderEpoch
		return nil
	})
	return leader, epoch
}

// A leader left alone in its ISR takes acks=1 records its followers never
// see, then stops; with unclean.leader.election.enable a follower that
// lacks them leads (a new leader epoch) and takes other records at the
// same offsets. The old leader, restarted, must cut its divergent tail
// (the leader answers its fetch with a DivergingEpoch at the end of its
// last epoch) and then hold the new leader's records byte for byte; the
// acks=all records from before the failure are all still there, the
// acks=1 ones are gone.
//
// The replicas are the three broker-only nodes 4, 5 and 6, so that
// stopping all of them leaves the metadata quorum (voters 1 to 3) up.
// Each new tail is longer than the lost one: a follower that skipped the
// truncation would fetch from its own log end, get no OFFSET_OUT_OF_RANGE
// (that end is inside the new leader's log) and keep the lost records
// under the new ones' offsets.
func TestClusterFollowerTruncatesDivergentTail(t *testing.T) {
	t.Parallel()
	c := startMixedCluster(t, 3, 3, func(cfg *broker.Config) { cfg.UncleanLeaderElection = true })
	c.brokersSeen(t.Context(), 0, 1, 2, 3, 4, 5, 6)
	const oldLeader, next, third = 3, 4, 5 // node ids 4, 5, 6
	c.createAssigned(0, "d", oldLeader+1, next+1, third+1)
	acked := c.produceAll(oldLeader, "d", "a", 20)
	c.replicasIdentical("d", 1)
	common := c.partitionOn(oldLeader, "d", 0).LogEndOffset()

	c.stop(next)
	c.stop(third)
	_, epoch0 := c.assignmentIs(oldLeader, "d", "the old leader alone in the ISR", func(l int32, isr []int32) bool {
		return l == oldLeader+1 && slices.Equal(isr, []int32{oldLeader + 1})
	})
	lost := c.produceOne(oldLeader, "d", "lost", 5)
	old := c.partitionOn(oldLeader, "d", 0)
	oldEnd := old.LogEndOffset()
	if oldEnd != common+int64(len(lost)) || old.HighWatermark() != oldEnd {
		t.Fatalf("the old leader: log end %d, high watermark %d after %d acks=1 records from %d", oldEnd, old.HighWatermark(), len(lost), common)
	}

	// Stopped, the old leader is the offline partition's ISR; the
	// follower's return elects it anyway (unclean), as the whole ISR.
	c.stop(oldLeader)
	c.assignmentIs(0, "d", "offline with the old leader as ISR", func(l int32, isr []int32) bool {
		return l < 0 && slices.Equal(isr, []int32{oldLeader + 1})
	})
	c.restart(next)
	_, epoch := c.assignmentIs(next, "d", "led by the restarted follower alone", func(l int32, isr []int32) bool {
		return l == next+1 && slices.Equal(isr, []int32{next + 1})
	})
	if epoch <= epoch0 {
		t.Fatalf("leader epoch %d after the unclean election, %d before", epoch, epoch0)
	}
	if end := c.partitionOn(next, "d", 0).LogEndOffset(); end != common {
		t.Fatalf("the new leader's log end %d, want %d (the acks=all records only)", end, common)
	}
	fresh := c.produceAll(next, "d", "b", 2*len(lost))

	c.restart(oldLeader)
	c.restart(third)
	c.replicasIdentical("d", 1)
	old = c.partitionOn(oldLeader, "d", 0)
	if end, want := old.LogEndOffset(), common+int64(len(fresh)); end != want {
		t.Fatalf("the old leader's log end %d, want %d", end, want)
	}
	for off := range old.LogEndOffset() {
		want := epoch0
		if off >= common {
			want = epoch
		}
		if e, ok := old.EpochForOffset(off); !ok || e != want {
			t.Fatalf("the old leader's offset %d is of epoch %d %v, want %d: the divergent tail was kept", off, e, ok, want)
		}
	}
	testutil.CheckFor(t, 30*time.Second, func() error {
		if a, _ := c.partitionOn(next, "d", 0).Assignment(); len(a.ISR) != 3 {
			return fmt.Errorf("d-0's ISR %v: the restarted nodes have not rejoined", a.ISR)
		}
		return nil
	})
	c.consumeAll(oldLeader, "d", append(acked, fresh...))
}

// A follower whose last epoch its new leader never saw: the old leader
// led again at a later epoch (its ISR alone) and took acks=1 records at
// it, then a follower that has neither those nor that epoch became
// leader, uncleanly, and took nothing yet (a leader's epoch history
// learns its epoch at its first append). The old leader's fetch, with a
// last epoch the leader cannot place, is OFFSET_OUT_OF_RANGE; being
// ahead of the leader's high watermark it cuts its log there, and then
// holds the leader's records: the acks=all ones, none of its own tail.
func TestClusterFollowerAheadOfALeaderLackingItsEpoch(t *testing.T) {
	t.Parallel()
	c := startMixedCluster(t, 3, 3, func(cfg *broker.Config) { cfg.UncleanLeaderElection = true })
	c.brokersSeen(t.Context(), 0, 1, 2, 3, 4, 5, 6)
	const oldLeader, next, third = 3, 4, 5 // node ids 4, 5, 6
	c.createAssigned(0, "u", oldLeader+1, next+1, third+1)
	acked := c.produceAll(oldLeader, "u", "a", 20)
	c.replicasIdentical("u", 1)
	common := c.partitionOn(oldLeader, "u", 0).LogEndOffset()

	c.stop(next)
	c.stop(third)
	alone := func(id int32) func(int32, []int32) bool {
		return func(l int32, isr []int32) bool { return l == id && slices.Equal(isr, []int32{id}) }
	}
	offline := func(l int32, isr []int32) bool { return l < 0 && slices.Equal(isr, []int32{oldLeader + 1}) }
	_, epoch0 := c.assignmentIs(oldLeader, "u", "the old leader alone in the ISR", alone(oldLeader+1))
	c.produceOne(oldLeader, "u", "lost", 3)
	c.stop(oldLeader)
	c.assignmentIs(0, "u", "offline with the old leader as ISR", offline)
	c.restart(oldLeader)
	_, epoch2 := c.assignmentIs(oldLeader, "u", "led by the old leader again", alone(oldLeader+1))
	c.produceOne(oldLeader, "u", "later", 3)
	if e, ok := c.partitionOn(oldLeader, "u", 0).LatestEpoch(); !ok || e != epoch2 || epoch2 <= epoch0 {
		t.Fatalf("the old leader's last epoch %d %v, want its second leadership's %d (first %d)", e, ok, epoch2, epoch0)
	}
	ahead := c.partitionOn(oldLeader, "u", 0).LogEndOffset()
	c.stop(oldLeader)
	c.assignmentIs(0, "u", "offline with the old leader as ISR", offline)

	c.restart(next)
	c.assignmentIs(next, "u", "led by the restarted follower alone", alone(next+1))
	nl := c.partitionOn(next, "u", 0)
	if e, end := nl.EndOffsetForEpoch(epoch2); e >= 0 || end >= 0 {
		t.Fatalf("the new leader places epoch %d at %d, %d: the test wants a leader that cannot", epoch2, e, end)
	}
	if nl.LogEndOffset() != common || nl.HighWatermark() != common || ahead <= common {
		t.Fatalf("the new leader's log end %d, high watermark %d; the old leader's %d; want %d, %d and more",
			nl.LogEndOffset(), nl.HighWatermark(), ahead, common, common)
	}

	c.restart(oldLeader)
	c.restart(third)
	c.replicasIdentical("u", 1)
	old := c.partitionOn(oldLeader, "u", 0)
	if end := old.LogEndOffset(); end != common {
		t.Fatalf("the old leader's log end %d, want the new leader's %d", end, common)
	}
	if e, ok := old.LatestEpoch(); !ok || e != epoch0 {
		t.Fatalf("the old leader's last epoch %d %v, want %d", e, ok, epoch0)
	}
	fresh := c.produceAll(next, "u", "b", 5)
	c.replicasIdentical("u", 1)
	c.consumeAll(oldLeader, "u", append(acked, fresh...))
}

// Two unclean elections in turn: the old leader takes acks=1 records
// alone, a follower leads without them and takes its own, then the old
// leader leads again, with its records but not the follower's, and
// takes others. The follower,
// restarted, fetches with its last epoch, which the leader never had: the
// leader's answer is the end of the first epoch, past where the
// follower's copy of that epoch ends. It must cut at its own end of that
// epoch (what follows is its own epoch's), not stay at the leader's
// (above its log end: nothing cut, the same answer at every fetch).
func TestClusterFollowerTruncatesToItsOwnEpochEnd(t *testing.T) {
	t.Parallel()
	c := startMixedCluster(t, 3, 3, func(cfg *broker.Config) { cfg.UncleanLeaderElection = true })
	c.brokersSeen(t.Context(), 0, 1, 2, 3, 4, 5, 6)
	const a, b, third = 3, 4, 5 // node ids 4, 5, 6
	c.createAssigned(0, "w", a+1, b+1, third+1)
	acked := c.produceAll(a, "w", "a", 20)
	c.replicasIdentical("w", 1)
	common := c.partitionOn(a, "w", 0).LogEndOffset()
	alone := func(id int32) func(int32, []int32) bool {
		return func(l int32, isr []int32) bool { return l == id && slices.Equal(isr, []int32{id}) }
	}
	offline := func(id int32) func(int32, []int32) bool {
		return func(l int32, isr []int32) bool { return l < 0 && slices.Equal(isr, []int32{id}) }
	}

	c.stop(b)
	c.stop(third)
	c.assignmentIs(a, "w", "a alone in the ISR", alone(a+1))
	kept := c.produceOne(a, "w", "kept-a", 5) // a leads again with them
	c.stop(a)
	c.assignmentIs(0, "w", "offline with a as ISR", offline(a+1))

	c.restart(b)
	c.assignmentIs(b, "w", "led by b alone", alone(b+1))
	c.produceOne(b, "w", "lost-b", 3)
	bEnd := c.partitionOn(b, "w", 0).LogEndOffset()
	c.stop(b)
	c.assignmentIs(0, "w", "offline with b as ISR", offline(b+1))

	c.restart(a)
	c.assignmentIs(a, "w", "led by a alone", alone(a+1))
	fresh := c.produceAll(a, "w", "c", 2)
	if aEnd := c.partitionOn(a, "w", 0).LogEndOffset(); bEnd >= aEnd-int64(len(fresh)) || bEnd <= common {
		t.Fatalf("b's log end %d, a's %d before its last %d records, the common prefix %d: want b's between",
			bEnd, aEnd-int64(len(fresh)), len(fresh), common)
	}

	c.restart(b)
	c.restart(third)
	c.replicasIdentical("w", 1)
	c.consumeAll(b, "w", slices.Concat(acked, kept, fresh))
	testutil.CheckFor(t, 30*time.Second, func() error {
		if a, _ := c.partitionOn(a, "w", 0).Assignment(); len(a.ISR) != 3 {
			return fmt.Errorf("w-0's ISR %v: the restarted nodes have not rejoined", a.ISR)
		}
		return nil
	})
}

// A follower stopped while its leader deletes records past the
// follower's log end comes back below the leader's log start: its fetch
// is OFFSET_OUT_OF_RANGE, it restarts its log at the leader's log start
// and replicates from there, and rejoins the ISR.
func TestClusterFollowerRestartsAtLeaderLogStart(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	c.createReplicated("o", 1, 3)
	leader, _ := c.assignmentIs(0, "o", "a leader", func(l int32, _ []int32) bool { return l > 0 })
	li := int(leader) - 1
	fi := (li + 1) % 3
	acked := c.produceAll(li, "o", "a", 10)
	c.replicasIdentical("o", 1)
	behind := c.partitionOn(fi, "o", 0).LogEndOffset()

	c.stop(fi)
	c.assignmentIs(li, "o", "the stopped follower out of the ISR", func(l int32, isr []int32) bool {
		return l == leader && len(isr) == 2 && !slices.Contains(isr, int32(fi+1))
	})
	acked = append(acked, c.produceAll(li, "o", "b", 10)...)
	const start = 15
	deleteRecordsThrough(t, c.client(li), "o", start)
	acked = append(acked, c.produceAll(li, "o", "c", 5)...)
	if ls := c.partitionOn(li, "o", 0).LogStartOffset(); ls != start {
		t.Fatalf("the leader's log start %d after DeleteRecords to %d", ls, start)
	}

	if behind >= start {
		t.Fatalf("the stopped follower's log end %d, want below the leader's log start %d", behind, start)
	}
	c.restart(fi)
	c.replicasIdentical("o", 1)
	if ls := c.partitionOn(fi, "o", 0).LogStartOffset(); ls != start {
		t.Fatalf("the restarted follower's log start %d, want the leader's %d", ls, start)
	}
	testutil.CheckFor(t, 30*time.Second, func() error {
		if a, _ := c.partitionOn(li, "o", 0).Assignment(); len(a.ISR) != 3 {
			return fmt.Errorf("o-0's ISR %v: the restarted follower has not rejoined", a.ISR)
		}
		return nil
	})
	c.consumeAll(fi, "o", acked[start:])
}

// deleteRecordsThrough deletes topic's partition 0 below offset.
func deleteRecordsThrough(t *testing.T, adm *kadm.Client, topic string, offset int64) {
	t.Helper()
	var offs kadm.Offsets
	offs.AddOffset(topic, 0, offset, -1)
	resp, err := adm.DeleteRecords(t.Context(), offs)
	if err != nil {
		t.Fatalf("DeleteRecords %s-0 to %d: %v", topic, offset, err)
	}
	if r, ok := resp.Lookup(topic, 0); !ok || r.Err != nil || r.LowWatermark != offset {
		t.Fatalf("DeleteRecords %s-0 to %d: %+v, want low watermark %d", topic, offset, r, offset)
	}
}
