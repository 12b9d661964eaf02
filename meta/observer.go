package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// observer is a broker-only node's side of the metadata log (see
// metadata_fetch.go): a loop that fetches the committed entries from the
// controller and applies them to the store, as a voter's state machine
// does, and restores the controller's snapshot when the entries it
// misses are gone from the log. Its position is the store's applied
// index, so a restarted observer resumes where its store is.
type observer struct {
	cfg LogConfig
	fsm *storeFSM
	// ch is the observer's own channel to the controller: its target is
	// the controller the last answer named, else each voter in turn.
	ch *ControllerChannel

	mu sync.Mutex
	// leader and epoch are the controller the last answer named (-1:
	// none known); asked is the voter the last request went to, next the
	// one target tries after it while none is known; committed the
	// controller's last committed index.
	leader, epoch int32
	asked         int32
	next          int
	committed     int64
	// attempting is set while a request has had no answer (target).
	attempting bool

	// confirmed is set once the controller answered a fetch: the store
	// is this cluster's.
	confirmed atomic.Bool

	stop context.CancelFunc
	done chan struct{}
}

// observerBackoff bounds the wait after a failed fetch.
const (
	observerMinBackoff = 50 * time.Millisecond
	observerMaxBackoff = time.Second
)

// openObserver starts the observer of a broker-only node.
func openObserver(cfg LogConfig, fsm *storeFSM) (*MetadataLog, error) {
	if len(cfg.Voters) == 0 {
		return nil, errors.New("metadata log: a broker-only node needs controller.quorum.voters")
	}
	o := &observer{cfg: cfg, fsm: fsm, leader: -1, epoch: -1, asked: -1, committed: -1, done: make(chan struct{})}
	o.ch = NewControllerChannel(cfg.Voters, o.target)
	ctx, cancel := context.WithCancel(context.Background())
	o.stop = cancel
	go o.run(ctx)
	return &MetadataLog{cfg: cfg, fsm: fsm, obs: o}, nil
}

// target is the voter the next request goes to: the known controller,
// else the voter after the last one asked. A call while the last attempt
// got no answer (the channel retries after a connection error: the
// controller may be dead) forgets the controller, so the next voter is
// asked who leads now.
func (o *observer) target() (int32, bool) {
	o.mu.Lock()
	forgot := o.attempting && o.leader >= 0
	if forgot {
		o.leader, o.epoch = -1, -1
	}
	o.attempting = true
	defer func() {
		o.mu.Unlock()
		if forgot && o.cfg.OnChange != nil {
			o.cfg.OnChange(state.ChangedCluster, o.fsm.applied())
		}
	}()
	if o.leader < 0 {
		o.asked = o.cfg.Voters[o.next%len(o.cfg.Voters)].ID
		o.next++
	} else {
		o.asked = o.leader
	}
	return o.asked, true
}

// request sends req to the controller over the observer's channel.
func (o *observer) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	resp, err := o.ch.Request(ctx, req)
	if err == nil {
		o.mu.Lock()
		o.attempting = false
		o.mu.Unlock()
	}
	return resp, err
}

// controller is the controller the observer knows.
func (o *observer) controller() (id, epoch int32, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.leader, o.epoch, o.leader >= 0
}

// setLeader records the controller an answer named (id -1: none known),
// and tells OnChange when it changed: the image names the controller.
func (o *observer) setLeader(id, epoch int32) {
	o.mu.Lock()
	changed := o.leader != id
	o.leader, o.epoch = id, epoch
	o.mu.Unlock()
	if changed && o.cfg.OnChange != nil {
		o.cfg.OnChange(state.ChangedCluster, o.fsm.applied())
	}
}

func (o *observer) run(ctx context.Context) {
	defer close(o.done)
	var backoff time.Duration
	var lastWarn time.Time
	for ctx.Err() == nil && o.fsm.failure() == nil {
		err := o.fetch(ctx)
		if err == nil {
			backoff = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(lastWarn) > 10*time.Second {
			lastWarn = time.Now()
			o.cfg.Logger.Warn("fetching the metadata log from the controller (retried)", "err", err)
		}
		o.setLeader(-1, -1)
		backoff = min(max(2*backoff, observerMinBackoff), observerMaxBackoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
}

// fetch asks the controller for the entries after the store's and
// applies them, or restores the snapshot it names.
func (o *observer) fetch(ctx context.Context) error {
	from := o.fsm.applied() + 1
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.ReplicaState.ID, req.ReplicaState.Epoch = o.cfg.NodeID, o.cfg.NodeID, -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(observerFetchMaxWait/time.Millisecond), 1, 8<<20
	ownID, hasID, err := o.cfg.Store.LogClusterID()
	if err != nil {
		return fmt.Errorf("metadata log: %w", err)
	}
	if hasID {
		req.ClusterID = &ownID // the controller refuses another cluster's
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = MetadataTopic, MetadataTopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	_, epoch, _ := o.controller()
	rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = 0, int64(from), epoch, -1, -1
	rp.PartitionMaxBytes = req.MaxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	rctx, cancel := context.WithTimeout(ctx, observerFetchMaxWait+5*time.Second)
	defer cancel()
	kresp, err := o.request(rctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if resp.ErrorCode == kerr.InconsistentClusterID.Code {
		err := fmt.Errorf("%w: this node's data is cluster %s's, the controller's cluster is %s",
			state.ErrOtherCluster, ownID, o.controllersClusterID(ctx))
		o.fsm.fail(err)
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("metadata log: fetch: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("metadata log: fetch answered %d topics", len(resp.Topics))
	}
	sp := &resp.Topics[0].Partitions[0]
	switch sp.ErrorCode {
	case 0:
	case kerr.NotLeaderForPartition.Code:
		o.setLeader(sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch)
		if sp.CurrentLeader.LeaderID >= 0 {
			return nil // ask it at once
		}
		return fmt.Errorf("metadata log: fetch: %w", kerr.NotLeaderForPartition)
	case kerr.OffsetOutOfRange.Code:
		err := fmt.Errorf("metadata log: this node's store holds entries up to %d, past the end of the controller's log: "+
			"its data is not this cluster's (format it to join)", from-1)
		o.fsm.fail(err)
		return err
	default:
		return fmt.Errorf("metadata log: fetch: %w", kerr.ErrorForCode(sp.ErrorCode))
	}
	o.mu.Lock()
	asked := o.asked
	o.committed = sp.HighWatermark - 1
	o.mu.Unlock()
	o.setLeader(asked, sp.CurrentLeader.LeaderEpoch)
	o.confirmed.Store(true)
	if sp.SnapshotID.EndOffset > 0 {
		return o.restoreSnapshot(ctx, sp.SnapshotID.EndOffset, sp.SnapshotID.Epoch)
	}
	entries, err := readEntryBatches(sp.RecordBatches, from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err, _ := o.fsm.Apply(&raft.Log{Index: e.index, Term: e.term, Type: raft.LogCommand, Data: e.data}).(error); err != nil {
			return err // the store failed: the node applies nothing more
		}
	}
	return nil
}

// controllersClusterID is the cluster id the controller's
// DescribeCluster names, for the error of a store of another cluster.
func (o *observer) controllersClusterID(ctx context.Context) string {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kresp, err := o.request(rctx, kmsg.NewPtrDescribeClusterRequest())
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return kresp.(*kmsg.DescribeClusterResponse).ClusterID
}

// restoreSnapshot fetches the snapshot endOffset and epoch name, chunk by
// chunk, and restores it into the store, checked whole first.
func (o *observer) restoreSnapshot(ctx context.Context, endOffset int64, epoch int32) error {
	var buf bytes.Buffer
	size := int64(-1)
	for {
		req := kmsg.NewPtrFetchSnapshotRequest()
		req.ReplicaID, req.MaxBytes = o.cfg.NodeID, snapshotChunkMax
		rt := kmsg.NewFetchSnapshotRequestTopic()
		rt.Topic = MetadataTopic
		rp := kmsg.NewFetchSnapshotRequestTopicPartition()
		_, rp.CurrentLeaderEpoch, _ = o.controller()
		rp.Position = int64(buf.Len())
		rp.SnapshotID.EndOffset, rp.SnapshotID.Epoch = endOffset, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		kresp, err := o.request(rctx, req)
		cancel()
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.FetchSnapshotResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("metadata log: fetching snapshot %d: %w", endOffset, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("metadata log: fetching snapshot %d: %d topics answered", endOffset, len(resp.Topics))
		}
		sp := &resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
			return fmt.Errorf("metadata log: fetching snapshot %d: %w", endOffset, err)
		}
		if size < 0 {
			size = sp.Size
		}
		if sp.Position != int64(buf.Len()) || sp.Size != size || len(sp.Bytes) == 0 && int64(buf.Len()) < sp.Size {
			return fmt.Errorf("metadata log: fetching snapshot %d: chunk at %d of %d bytes, want %d of %d", endOffset, sp.Position, sp.Size, buf.Len(), size)
		}
		buf.Write(sp.Bytes)
		if int64(buf.Len()) >= sp.Size {
			break
		}
	}
	if _, _, err := state.ReadMetadataSnapshot(bytes.NewReader(buf.Bytes())); err != nil {
		return fmt.Errorf("metadata log: fetched snapshot %d: %w", endOffset, err) // damaged on the way: fetched again
	}
	o.cfg.Logger.Info("restoring the controller's snapshot of the metadata log", "snapshot", endOffset-1, "bytes", buf.Len())
	if err := o.fsm.Restore(io.NopCloser(&buf)); err != nil {
		o.fsm.fail(err) // another cluster's store, or a store failure
		return err
	}
	return nil
}

// quorum is the quorum as an observer knows it: the controller, its
// epoch and committed index, and the voters without their positions
// (DescribeQuorum on a broker-only node asks the controller).
func (o *observer) quorum() QuorumState {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := QuorumState{LeaderID: o.leader, LeaderEpoch: o.epoch, HighWatermark: o.committed}
	for _, v := range o.cfg.Voters {
		q.Voters = append(q.Voters, QuorumReplica{ID: v.ID, LogEndOffset: -1})
	}
	return q
}

func (o *observer) close() {
	o.stop()
	<-o.done
	o.ch.Close()
}
