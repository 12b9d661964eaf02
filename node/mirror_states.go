package node

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// Mirror partition states written by the partition's leader (DESIGN.md
// "Mirroring": the fetcher and the failover of a mirror partition run on
// its leader, the states are records of the metadata log). The state
// store hands every write of replicated records to its Replicator; on
// the controller that is the metadata log itself, on any other node the
// log refuses (ErrNotController). storeReplicator then sends the writes
// that are mirror partition states only, and only of partitions this node
// leads, to the controller (WriteMirrorStates, fenced there by leader and
// epoch) and returns once this node applied them, so the control plane
// reads its own write as on the controller. Any other replicated write on
// a node that is not the controller stays refused: it is a request that
// should have been forwarded.

// storeReplicator is the node's state.Replicator.
type storeReplicator struct {
	log *meta.MetadataLog
	// leader is set once the node built its lifecycle and partitions
	// (Start), before the control plane, the only writer of mirror
	// states, exists; nil until then.
	leader atomic.Pointer[leaderWrites]
}

// leaderWrites is what a leader's forwarded write needs: the controller
// calls and the partitions' leaderships.
type leaderWrites struct {
	life  *Lifecycle
	parts *partition.Manager
}

// mirrorStateWriteTimeout bounds a forwarded state write, as the log's
// own writes are bounded.
const mirrorStateWriteTimeout = 30 * time.Second

func (r *storeReplicator) Replicate(ops []state.Op) error {
	err := r.log.Replicate(ops)
	lw := r.leader.Load()
	if !errors.Is(err, meta.ErrNotController) || lw == nil {
		return err
	}
	states, ok, derr := state.MirrorPartitionStatesOf(ops)
	if derr != nil || !ok {
		return errors.Join(err, derr)
	}
	writes := make([]meta.MirrorStateWrite, len(states))
	for i, ps := range states {
		epoch, leads := lw.leaderEpoch(ps.Topic, ps.Partition)
		if !leads {
			return fmt.Errorf("%w: mirror %s: partition %d of %s is not led here", partition.ErrNotLeader, ps.Mirror,
				ps.Partition, ps.Topic)
		}
		writes[i] = meta.MirrorStateWrite{State: ps, LeaderEpoch: epoch}
	}
	ctx, cancel := context.WithTimeout(context.Background(), mirrorStateWriteTimeout)
	defer cancel()
	index, err := lw.life.WriteMirrorStates(ctx, writes)
	if err != nil || index == 0 {
		return err
	}
	return r.log.WaitApplied(ctx, index)
}

// leaderEpoch is the leader epoch at which this node leads the
// partition; false when it does not lead it.
func (lw *leaderWrites) leaderEpoch(topic string, p int32) (int32, bool) {
	t := lw.parts.Topic(topic)
	if t == nil || t.Partition(p) == nil {
		return 0, false
	}
	return t.Partition(p).Leads()
}

// WriteMirrorStates asks the controller to write mirror partition states
// this node leads, retrying while there is no controller
// (retryController), and returns the metadata log index to wait for.
func (l *Lifecycle) WriteMirrorStates(ctx context.Context, writes []meta.MirrorStateWrite) (uint64, error) {
	var index uint64
	err := l.retryController(ctx, fmt.Sprintf("WriteMirrorStates of %d partitions", len(writes)), func(ctx context.Context, c controllerClient) error {
		var err error
		index, err = c.writeMirrorStates(ctx, l.cfg.NodeID, writes)
		return err
	})
	return index, err
}

func (lc localController) writeMirrorStates(ctx context.Context, writer int32, writes []meta.MirrorStateWrite) (uint64, error) {
	res, index, err := lc.c.WriteMirrorStates(ctx, writer, writes)
	if err != nil {
		return 0, err
	}
	for i, r := range res {
		if r.Err != nil {
			return 0, fmt.Errorf("partition %d of %s: %w: %s", writes[i].State.Partition, writes[i].State.Topic, r.Err, r.Message)
		}
	}
	return index, nil
}

func (rc remoteController) writeMirrorStates(ctx context.Context, writer int32, writes []meta.MirrorStateWrite) (uint64, error) {
	if len(writes) == 0 {
		return 0, nil
	}
	req := mirrorapi.NewPtrWriteMirrorStatesRequest()
	req.MirrorName, req.BrokerID = writes[0].State.Mirror, writer
	byTopic := map[string]int{}
	for _, w := range writes {
		if w.State.Mirror != req.MirrorName {
			return 0, fmt.Errorf("node: one WriteMirrorStates for mirrors %s and %s", req.MirrorName, w.State.Mirror)
		}
		record, err := state.MirrorPartitionStateRecord(w.State)
		if err != nil {
			return 0, err
		}
		i, ok := byTopic[w.State.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[w.State.Topic] = i
			req.Topics = append(req.Topics, mirrorapi.WriteMirrorStatesRequestTopic{Name: w.State.Topic})
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, mirrorapi.WriteMirrorStatesRequestPartition{
			PartitionIndex: w.State.Partition, LastMirrorEpoch: w.State.LastMirrorEpoch, State: int8(w.State.State),
			LeaderEpoch: w.LeaderEpoch, Record: record})
	}
	resp, err := rc.ch.Request(ctx, req)
	if err != nil {
		return 0, err
	}
	r, ok := resp.(*mirrorapi.WriteMirrorStatesResponse)
	if !ok {
		return 0, fmt.Errorf("node: WriteMirrorStates answered with a %T", resp)
	}
	answered := 0
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			answered++
			if err := controllerError(p.ErrorCode); err != nil {
				if p.ErrorMessage != nil {
					err = fmt.Errorf("%w: %s", err, *p.ErrorMessage)
				}
				return 0, fmt.Errorf("partition %d of %s: %w", p.PartitionIndex, t.Name, err)
			}
		}
	}
	if answered != len(writes) {
		return 0, fmt.Errorf("node: WriteMirrorStates of %d partitions answered %d", len(writes), answered)
	}
	return r.AppliedIndex, nil
}

func (noController) writeMirrorStates(context.Context, int32, []meta.MirrorStateWrite) (uint64, error) {
	return 0, meta.ErrNotController
}
