package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/partition"
)

// ledWithFollower is a one-partition topic whose partition this node
// leads at epoch 0, with node 2 its follower in the ISR.
func ledWithFollower(t *testing.T, b *Broker, name string) (*partition.Topic, *partition.Partition) {
	t.Helper()
	tp := mustTopic(t, b, name, 1)
	p := tp.Partitions()[0]
	self := b.cfg.NodeID
	p.SetAssignment(self, partition.Assignment{Leader: self, Replicas: []int32{self, 2}, ISR: []int32{self, 2}})
	return tp, p
}

// An acks=all produce waiting for its ISR on a leader that is fenced
// meanwhile is never acknowledged, even when the high watermark passes
// its batch afterwards: as a follower the node cut the batch away at the
// divergence and took the new leader's records up to the same offsets
// (issue 21, review finding 1). It is answered NOT_LEADER_OR_FOLLOWER, so
// the producer retries on the new leader, and a produce to a partition
// whose assignment names another node is refused before the append.
func TestProduceAcksAllEndsWhenLeadershipIsLost(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	self := b.cfg.NodeID
	tp, p := ledWithFollower(t, b, "fenced")
	rc := dialRaw(t, b)

	answer := make(chan kmsg.ProduceResponseTopicPartition, 1)
	go func() {
		answer <- onlyPartition(t, rc.roundTrip(produceReq(9, -1, tp, 0, plainBatch(2, 10))).(*kmsg.ProduceResponse))
	}()
	testutil.CheckFor(t, testutil.Timeout, testutil.True("the acks=all produce parked", func() bool { return waiters(p) == 1 }))

	// Node 2 leads now; this node follows it: its log diverged at 0, so
	// it is cut there, and node 2's records take offsets 0-2, committed.
	p.SetAssignment(self, partition.Assignment{Leader: 2, LeaderEpoch: 1, Replicas: []int32{self, 2}, ISR: []int32{2}})
	if err := p.TruncateReplicaTo(0); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendReplica(plainBatch(3, 10), 3, 0); err != nil {
		t.Fatal(err)
	}
	if hw := p.HighWatermark(); hw < 2 {
		t.Fatalf("high watermark %d: the new leader's records do not cover the produced offsets", hw)
	}
	sp := <-answer
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("the produce was answered error %d at offset %d, want NOT_LEADER_OR_FOLLOWER: its batch is gone", sp.ErrorCode, sp.BaseOffset)
	}

	// The image still names this node (a bare broker leads all it
	// hosts), the assignment does not: refused, nothing appended.
	resp := rc.roundTrip(produceReq(9, 1, tp, 0, plainBatch(1, 10))).(*kmsg.ProduceResponse)
	if sp := onlyPartition(t, resp); sp.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("a produce to a follower: error %d, want NOT_LEADER_OR_FOLLOWER", sp.ErrorCode)
	}
	if end := p.LogEndOffset(); end != 3 {
		t.Fatalf("log end %d, want the new leader's 3", end)
	}
}

// A follower's fetch moves the leader's high watermark only once its
// offset is found in the log: one past the log end (a follower whose own
// log ran further, in an epoch the leader does not know it by) is
// OFFSET_OUT_OF_RANGE and commits nothing (review finding 6).
func TestReplicaFetchOutOfRangeCommitsNothing(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp, p := ledWithFollower(t, b, "replica-range")
	for range 3 {
		if _, _, err := p.AppendProduce(plainBatch(1, 10)); err != nil {
			t.Fatal(err)
		}
		p.Appended()
	}
	rc := dialRaw(t, b)
	replicaFetch := func(offset int64) kmsg.FetchResponseTopicPartition {
		req := newFetchReq(17)
		req.ReplicaState.ID, req.ReplicaState.Epoch = 2, -1
		addPart(req, tp, 0, offset)
		return mustPart(t, rc.roundTrip(req).(*kmsg.FetchResponse), tp, 0)
	}
	if got := replicaFetch(100); got.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("a replica fetch past the log end: error %d", got.ErrorCode)
	}
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d after an out-of-range replica fetch, want 0: the follower holds nothing", hw)
	}
	if got := replicaFetch(3); got.ErrorCode != 0 {
		t.Fatalf("a replica fetch at the log end: error %d", got.ErrorCode)
	}
	if hw := p.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d once the follower holds 3 records, want 3", hw)
	}
}
