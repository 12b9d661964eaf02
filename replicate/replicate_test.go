package replicate

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/partition"
)

// fakeReplica is a log that records what the fetcher does to it.
type fakeReplica struct {
	mu  sync.Mutex
	end int64
	// epoch is the last record's epoch (-1: no record) when epochs, the
	// log's epoch history, is empty.
	epoch  int32
	epochs []epochStart
	ops    []string
	// notFollowing makes AsFollower refuse: the partition's role moved.
	notFollowing bool
}

// epochStart is where an epoch begins in a fakeReplica.
type epochStart struct {
	epoch int32
	start int64
}

func (r *fakeReplica) LogEndOffset() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end
}

func (r *fakeReplica) LatestEpoch() (int32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.epochs) > 0 {
		return r.epochs[len(r.epochs)-1].epoch, true
	}
	return r.epoch, r.epoch >= 0
}

// EndOffsetForEpoch is storage.EpochCache.EndOffsetFor's answer on
// r.epochs: the largest epoch at most epoch, and where the next begins.
func (r *fakeReplica) EndOffsetForEpoch(epoch int32) (int32, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	es := r.epochs
	if len(es) > 0 && es[len(es)-1].epoch == epoch {
		return epoch, r.end
	}
	higher := slices.IndexFunc(es, func(e epochStart) bool { return e.epoch > epoch })
	switch higher {
	case -1:
		return -1, -1
	case 0:
		return epoch, es[0].start
	}
	return es[higher-1].epoch, es[higher].start
}

func (r *fakeReplica) AppendReplicaChunk(c *batch.Chunk, leaderHW, leaderLogStart int64) error {
	return r.AppendReplica(c.Bytes(), leaderHW, leaderLogStart)
}

func (r *fakeReplica) AppendReplica(batches []byte, leaderHW, leaderLogStart int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	it := batch.NewIterator(batches)
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		r.end = b.BaseOffset() + int64(b.LastOffsetDelta()) + 1
		n++
	}
	if it.Consumed() != len(batches) {
		r.ops = append(r.ops, "append with a partial batch")
		return fmt.Errorf("%d bytes past the last whole batch", len(batches)-it.Consumed())
	}
	r.ops = append(r.ops, fmt.Sprintf("append %d batches hw %d start %d", n, leaderHW, leaderLogStart))
	return it.Err()
}

func (r *fakeReplica) TruncateReplicaTo(offset int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.end = min(r.end, offset)
	r.epochs = slices.DeleteFunc(r.epochs, func(e epochStart) bool { return e.start >= offset })
	r.ops = append(r.ops, fmt.Sprintf("truncate %d", offset))
	return nil
}

func (r *fakeReplica) RestartReplicaAt(offset int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.end, r.epoch, r.epochs = offset, -1, nil
	r.ops = append(r.ops, fmt.Sprintf("restart %d", offset))
	return nil
}

func (r *fakeReplica) AsFollower(leader, leaderEpoch int32, fn func() error) error {
	r.mu.Lock()
	refused := r.notFollowing
	if refused {
		r.ops = append(r.ops, fmt.Sprintf("refused: not following %d at epoch %d", leader, leaderEpoch))
	}
	r.mu.Unlock()
	if refused {
		return partition.ErrNotFollowing
	}
	return fn()
}

func (r *fakeReplica) opsSoFar() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// fakeLeader is a kfake broker whose Fetch answers are answer's, once
// each in order, then NOT_LEADER_OR_FOLLOWER (the fetcher backs off for
// the test's long backoff and goes quiet); ListOffsets answers start for
// -2 and hw for -1. It keeps the fetches it saw.
type fakeLeader struct {
	c *kfake.Cluster

	mu      sync.Mutex
	answers []func(*kmsg.FetchResponseTopicPartition)
	fetches []kmsg.FetchRequest
}

func newFakeLeader(t *testing.T, start, hw int64, answers ...func(*kmsg.FetchResponseTopicPartition)) *fakeLeader {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	l := &fakeLeader{c: c, answers: answers}
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.Version = req.Version
		l.mu.Lock()
		l.fetches = append(l.fetches, *req)
		var answer func(*kmsg.FetchResponseTopicPartition)
		if len(l.answers) > 0 {
			answer, l.answers = l.answers[0], l.answers[1:]
		}
		l.mu.Unlock()
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition = rp.Partition
				if answer != nil {
					answer(&sp)
				} else {
					sp.ErrorCode = kerr.NotLeaderForPartition.Code
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.ListOffsets), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.ListOffsetsRequest)
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.Offset, sp.Timestamp = rp.Partition, hw, -1
				if rp.Timestamp == -2 {
					sp.Offset = start
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return l
}

func (l *fakeLeader) addr(int32) (string, bool) { return l.c.ListenAddrs()[0], true }

func (l *fakeLeader) firstFetch(t *testing.T) kmsg.FetchRequestTopicPartition {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.fetches) == 0 || len(l.fetches[0].Topics) != 1 || len(l.fetches[0].Topics[0].Partitions) != 1 {
		t.Fatalf("fetches %+v", l.fetches)
	}
	return l.fetches[0].Topics[0].Partitions[0]
}

// startFollowing has a manager of node 7 follow r at leader epoch 5
// from l.
func startFollowing(t *testing.T, l *fakeLeader, r *fakeReplica) *Manager {
	t.Helper()
	m := NewManager(Config{NodeID: 7, LeaderAddr: l.addr, MaxWait: 10 * time.Millisecond, Backoff: time.Hour})
	t.Cleanup(m.Close)
	m.Follow([]Target{{Topic: "t", TopicID: [16]byte{1}, Partition: 0, Replica: r, Leader: 1, LeaderEpoch: 5}})
	return m
}

// follow is startFollowing, then waits until r has seen want.
func follow(t *testing.T, l *fakeLeader, r *fakeReplica, want []string) *Manager {
	t.Helper()
	m := startFollowing(t, l, r)
	testutil.CheckFor(t, 10*time.Second, func() error {
		if got := r.opsSoFar(); len(got) < len(want) {
			return fmt.Errorf("replica ops %q, want %q", got, want)
		}
		return nil
	})
	if got := r.opsSoFar(); !slices.Equal(got, want) {
		t.Fatalf("replica ops %q, want %q", got, want)
	}
	return m
}

// The fetcher fetches as replica 7 at the target's leader epoch, from the
// replica's log end and the epoch of its last record, and cuts the log
// where the leader says its epoch ended, never above its own end nor
// above the end of that epoch in its own log (Kafka's
// getOffsetTruncationState): what follows is of later epochs than the
// leader's there. The replica's log is epoch 0 from 0, 2 from 4, 3 from
// 8, up to 10.
func TestFetcherTruncatesOnDivergingEpoch(t *testing.T) {
	t.Parallel()
	const end = 10
	for _, tt := range []struct {
		name     string
		divEpoch int32
		divEnd   int64
		wantCut  int64
	}{
		{"inside the replica's epoch", 2, 7, 7},
		{"past the end of the replica's epoch", 2, 9, 8},
		{"an epoch the replica lacks", 1, 6, 4},
		{"at offset zero", 0, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newFakeLeader(t, 0, 0, func(sp *kmsg.FetchResponseTopicPartition) {
				sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = tt.divEpoch, tt.divEnd
				sp.HighWatermark = 100
			})
			r := &fakeReplica{end: end, epochs: []epochStart{{0, 0}, {2, 4}, {3, 8}}}
			follow(t, l, r, []string{fmt.Sprintf("truncate %d", tt.wantCut)})
			fp := l.firstFetch(t)
			if fp.FetchOffset != end || fp.LastFetchedEpoch != 3 || fp.CurrentLeaderEpoch != 5 {
				t.Fatalf("fetch offset %d, last fetched epoch %d, current leader epoch %d; want %d, 3, 5",
					fp.FetchOffset, fp.LastFetchedEpoch, fp.CurrentLeaderEpoch, end)
			}
			l.mu.Lock()
			req := l.fetches[0]
			l.mu.Unlock()
			id := req.ReplicaID // v15 moved it into ReplicaState
			if req.Version >= 15 {
				id = req.ReplicaState.ID
			}
			if id != 7 {
				t.Fatalf("Fetch v%d from replica %d, want 7", req.Version, id)
			}
		})
	}
}

// A divergence that leaves this log nothing to cut (the replica holds
// epoch 3 up to its end, and the leader says epoch 3 goes further) is not
// fetched again at once, which would meet the same answer: the partition
// backs off.
func TestFetcherBacksOffANoOpDivergence(t *testing.T) {
	t.Parallel()
	l := newFakeLeader(t, 0, 0, func(sp *kmsg.FetchResponseTopicPartition) {
		sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = 3, 12
		sp.HighWatermark = 100
	})
	r := &fakeReplica{end: 10, epochs: []epochStart{{0, 0}, {2, 4}, {3, 8}}}
	startFollowing(t, l, r)
	testutil.CheckFor(t, 10*time.Second, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.fetches) == 0 {
			return fmt.Errorf("no fetch yet")
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // a spinning fetcher fetches hundreds of times meanwhile
	l.mu.Lock()
	fetches := len(l.fetches)
	l.mu.Unlock()
	if ops := r.opsSoFar(); len(ops) != 0 || fetches != 1 {
		t.Fatalf("replica ops %q after %d fetches; want none after one (backed off)", ops, fetches)
	}
}

// OFFSET_OUT_OF_RANGE: a log ending below the leader's log start restarts
// there; one ending past the leader's high watermark is cut to it; one in
// between (the leader knows none of its epochs) restarts at the log
// start.
func TestFetcherOutOfRange(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		end  int64
		want string
	}{
		{"below the leader's log start", 5, "restart 10"},
		{"past the leader's high watermark", 30, "truncate 20"},
		{"inside the leader's range", 15, "restart 10"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newFakeLeader(t, 10, 20, func(sp *kmsg.FetchResponseTopicPartition) {
				sp.ErrorCode = kerr.OffsetOutOfRange.Code
			})
			follow(t, l, &fakeReplica{end: tt.end, epoch: 3}, []string{tt.want})
		})
	}
}

// Records are appended whole, a partial last batch left for the next
// fetch, with the leader's high watermark and log start; a replica with
// no record fetches with no last epoch.
func TestFetcherAppends(t *testing.T) {
	t.Parallel()
	var records []byte
	for o := range int64(3) {
		records = batch.AppendMirrorPIDReset(records, batch.PIDReset{BaseOffset: o, PartitionLeaderEpoch: 5, SourceClusterID: "c"})
	}
	l := newFakeLeader(t, 0, 0, func(sp *kmsg.FetchResponseTopicPartition) {
		sp.HighWatermark, sp.LogStartOffset = 2, 1
		sp.RecordBatches = records[:len(records)-3]
	})
	r := &fakeReplica{epoch: -1}
	follow(t, l, r, []string{"append 2 batches hw 2 start 1"})
	if fp := l.firstFetch(t); fp.FetchOffset != 0 || fp.LastFetchedEpoch != -1 {
		t.Fatalf("fetch offset %d, last fetched epoch %d; want 0, -1", fp.FetchOffset, fp.LastFetchedEpoch)
	}
	if end := r.LogEndOffset(); end != 2 {
		t.Fatalf("log end %d after two batches", end)
	}
}

// An answer for a partition that no longer follows the leader and epoch
// it was fetched from (the node became its leader meanwhile) writes
// nothing: the fetcher's writes run in AsFollower.
func TestFetcherWritesNothingOnceNotFollowing(t *testing.T) {
	t.Parallel()
	records := batch.AppendMirrorPIDReset(nil, batch.PIDReset{BaseOffset: 0, PartitionLeaderEpoch: 5, SourceClusterID: "c"})
	l := newFakeLeader(t, 0, 0, func(sp *kmsg.FetchResponseTopicPartition) {
		sp.HighWatermark, sp.RecordBatches = 1, records
	})
	r := &fakeReplica{epoch: -1, notFollowing: true}
	follow(t, l, r, []string{"refused: not following 1 at epoch 5"})
	if end := r.LogEndOffset(); end != 0 {
		t.Fatalf("log end %d: the answer was appended", end)
	}
}

// An answer for a fetch from an offset that is no longer the log's end
// (the log was emptied while the fetch was out: a reassignment took the
// replica away and back) writes nothing, and the next fetch asks from the
// new end at once.
func TestFetcherDropsAnAnswerForAnOldLogEnd(t *testing.T) {
	t.Parallel()
	r := &fakeReplica{end: 5, epoch: -1}
	records := batch.AppendMirrorPIDReset(nil, batch.PIDReset{BaseOffset: 5, PartitionLeaderEpoch: 5, SourceClusterID: "c"})
	l := newFakeLeader(t, 0, 0, func(sp *kmsg.FetchResponseTopicPartition) {
		r.mu.Lock()
		r.end = 0 // emptied while the fetch was out
		r.mu.Unlock()
		sp.HighWatermark, sp.RecordBatches = 6, records
	})
	startFollowing(t, l, r)
	testutil.CheckFor(t, 10*time.Second, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.fetches) < 2 {
			return fmt.Errorf("%d fetches, want a second one", len(l.fetches))
		}
		if off := l.fetches[1].Topics[0].Partitions[0].FetchOffset; off != 0 {
			return fmt.Errorf("the second fetch asked from %d, want the new log end 0", off)
		}
		return nil
	})
	if ops := r.opsSoFar(); len(ops) != 0 {
		t.Fatalf("the stale answer was written: %q", ops)
	}
}

// deadAddr is an address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// retryAt is when m's fetcher of leader fetches partition p again.
func (m *Manager) retryAt(t *testing.T, leader int32, p int32) time.Time {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for sl, f := range m.fetchers {
		if sl.leader != leader {
			continue
		}
		f.mu.Lock()
		fp := f.parts[key{[16]byte{1}, p}]
		var at time.Time
		if fp != nil {
			at = fp.retryAt
		}
		f.mu.Unlock()
		if fp != nil {
			return at
		}
	}
	t.Fatalf("no fetcher of leader %d follows partition %d", leader, p)
	return time.Time{}
}

// slots is m's fetchers, by leader.
// following is the number of partitions m's fetchers hold.
func (m *Manager) following() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, f := range m.fetchers {
		f.mu.Lock()
		n += len(f.parts)
		f.mu.Unlock()
	}
	return n
}

func (m *Manager) slots() map[int32]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := map[int32]int{}
	for sl := range m.fetchers {
		n[sl.leader]++
	}
	return n
}

// Follow runs one fetcher per leader and fetcher slot in use, stops those
// left without partitions, and keeps a partition's backoff across Follow
// while its leader epoch and replica stay, not when its epoch moves.
func TestManagerFollow(t *testing.T) {
	t.Parallel()
	dead := deadAddr(t)
	m := NewManager(Config{NodeID: 7, Fetchers: 2, Backoff: time.Hour,
		LeaderAddr: func(int32) (string, bool) { return dead, true }})
	t.Cleanup(m.Close)
	target := func(p int32, leader, epoch int32) Target {
		return Target{Topic: "t", TopicID: [16]byte{1}, Partition: p, Replica: &fakeReplica{epoch: -1}, Leader: leader, LeaderEpoch: epoch}
	}
	var ts []Target
	for p := range int32(8) {
		ts = append(ts, target(p, 1+p/4, 0))
	}
	m.Follow(ts)
	if n := m.following(); n != 8 {
		t.Fatalf("following %d partitions, want 8", n)
	}
	if got := m.slots(); got[1] != 2 || got[2] != 2 || len(got) != 2 {
		t.Fatalf("fetchers by leader %v, want two for each of leaders 1 and 2", got)
	}

	// The fetch to nowhere fails: partition 0 backs off for an hour,
	// which a Follow with the same epoch and replica keeps.
	testutil.CheckFor(t, 20*time.Second, func() error {
		if m.retryAt(t, 1, 0).IsZero() {
			return fmt.Errorf("partition 0 not backed off yet")
		}
		return nil
	})
	at := m.retryAt(t, 1, 0)
	m.Follow(ts)
	if got := m.retryAt(t, 1, 0); !got.Equal(at) {
		t.Fatalf("backoff %v after the same Follow, was %v", got, at)
	}
	moved := slices.Clone(ts)
	moved[0].LeaderEpoch = 1
	m.Follow(moved)
	if got := m.retryAt(t, 1, 0); !got.IsZero() && !got.After(at) {
		t.Fatalf("backoff %v kept after the leader epoch moved, was %v", got, at)
	}

	// Leader 2's partitions move to leader 1: leader 2's fetchers stop.
	for i := range moved {
		moved[i].Leader = 1
	}
	m.Follow(moved)
	if got := m.slots(); got[1] != 2 || len(got) != 1 {
		t.Fatalf("fetchers by leader %v, want two of leader 1 only", got)
	}
	if n := m.following(); n != 8 {
		t.Fatalf("following %d partitions, want 8", n)
	}
	m.Follow(nil)
	if got := m.slots(); len(got) != 0 || m.following() != 0 {
		t.Fatalf("fetchers %v following %d after Follow(nil)", got, m.following())
	}
}

// A partition added to a fetcher whose Fetch the leader holds in its long
// poll (its other partitions have nothing new) is fetched at once, not
// after replica.fetch.wait.max.ms: the fetcher cuts the held Fetch short
// and asks again with the new partition. It used to wait the poll out
// (500 ms by default), and so did a new replica's catch-up and ISR join.
func TestFetcherFetchesAnAddedPartitionWithoutWaitingOutTheLongPoll(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	records := batch.AppendMirrorPIDReset(nil, batch.PIDReset{BaseOffset: 0, PartitionLeaderEpoch: 5, SourceClusterID: "c"})
	held := make(chan struct{}, 16)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.Version = req.Version
		hasNew := false
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.HighWatermark, sp.LogStartOffset = rp.Partition, 0, 0
				if rp.Partition == 1 && rp.FetchOffset == 0 {
					sp.HighWatermark, sp.RecordBatches = 1, records
					hasNew = true
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if !hasNew { // the long poll: nothing new, held until the test ends
			held <- struct{}{}
			c.SleepControl(func() { <-release })
		}
		return resp, nil, true
	})
	m := NewManager(Config{NodeID: 7, LeaderAddr: func(int32) (string, bool) { return c.ListenAddrs()[0], true },
		MaxWait: time.Minute, Backoff: time.Hour})
	t.Cleanup(m.Close)
	idle, added := &fakeReplica{epoch: -1}, &fakeReplica{epoch: -1}
	target := func(p int32, r *fakeReplica) Target {
		return Target{Topic: "t", TopicID: [16]byte{1}, Partition: p, Replica: r, Leader: 1, LeaderEpoch: 5}
	}
	m.Follow([]Target{target(0, idle)})
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the first Fetch never reached the leader")
	}
	m.Follow([]Target{target(0, idle), target(1, added)})
	testutil.CheckFor(t, 10*time.Second, func() error {
		if got := added.opsSoFar(); len(got) == 0 {
			return fmt.Errorf("the added partition has not been fetched: the fetcher waits for the held Fetch (a minute)")
		}
		return nil
	})
	if got := added.opsSoFar(); got[0] != "append 1 batches hw 1 start 0" {
		t.Fatalf("the added partition: %q", got)
	}
}
