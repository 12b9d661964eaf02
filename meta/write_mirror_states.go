package meta

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// Mirror partition states written on a leader's request (the KIP-1279
// prototype's WriteMirrorStates, there to the mirror-state coordinator).
// A mirror partition's fetcher and failover run on the partition's leader
// (DESIGN.md "Mirroring"), which moves the partition through its states;
// the states are records of the metadata log, which only the controller
// appends to. The controller writes a state only from the node that leads
// the partition at the leader epoch it names, as it takes an ISR change
// only from the current leader: a node that lost the partition (fenced,
// or its fetcher answered late) must not overwrite what the new leader
// wrote.

// MirrorStateWrite is one partition state a leader asks to persist, at
// the leader epoch it leads in.
type MirrorStateWrite struct {
	State       state.MirrorPartitionState
	LeaderEpoch int32
}

// MirrorStateWriteResult is one write's answer: Err nil when written.
type MirrorStateWriteResult struct {
	Err     *kerr.Error
	Message string
}

// WriteMirrorStates writes the states of writes that writer leads at
// their epochs, through the store (whose transition rules check each
// against the state the controller holds), and returns the index of the
// metadata log entry this node had applied after it, which the writer
// waits for before it reads its own write. Per write: UNKNOWN_TOPIC_OR_
// PARTITION without the topic or an assignment; NOT_LEADER_OR_FOLLOWER
// when another node leads, or the writer names a newer epoch than the
// controller knows; FENCED_LEADER_EPOCH for an older one;
// INVALID_REQUEST for a state the store refuses (a transition its rules
// do not allow, a mirror that is gone).
func (c *Controller) WriteMirrorStates(ctx context.Context, writer int32, writes []MirrorStateWrite) ([]MirrorStateWriteResult, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx); err != nil {
		return nil, 0, err
	}
	parts, err := c.assignments()
	if err != nil {
		return nil, 0, err
	}
	results := make([]MirrorStateWriteResult, len(writes))
	var put []state.MirrorPartitionState
	var slots []int
	for i, w := range writes {
		t, err := c.store.Topic(w.State.Topic)
		if errors.Is(err, state.ErrNotFound) {
			results[i].Err = kerr.UnknownTopicOrPartition
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		cur, ok := parts[partitionKey{t.ID, w.State.Partition}]
		switch {
		case !ok:
			results[i].Err = kerr.UnknownTopicOrPartition
		case cur.Leader != writer || w.LeaderEpoch > cur.LeaderEpoch:
			results[i].Err = kerr.NotLeaderForPartition
			results[i].Message = fmt.Sprintf("partition %d of %s is led by node %d at epoch %d", w.State.Partition,
				w.State.Topic, cur.Leader, cur.LeaderEpoch)
		case w.LeaderEpoch < cur.LeaderEpoch:
			results[i].Err = kerr.FencedLeaderEpoch
			results[i].Message = fmt.Sprintf("leader epoch %d of partition %d of %s is older than %d", w.LeaderEpoch,
				w.State.Partition, w.State.Topic, cur.LeaderEpoch)
		default:
			put = append(put, w.State)
			slots = append(slots, i)
		}
	}
	if len(put) == 0 {
		return results, 0, nil
	}
	// One write for all: the states of one stop or one checkpoint are
	// one entry (or a few, for thousands of partitions), all or none.
	if err := c.store.PutMirrorPartitionStates(put); err != nil {
		if !errors.Is(err, state.ErrInvalidTransition) && !errors.Is(err, state.ErrNotFound) {
			return nil, 0, err
		}
		for _, i := range slots {
			results[i] = MirrorStateWriteResult{Err: kerr.InvalidRequest, Message: err.Error()}
		}
		return results, 0, nil
	}
	return results, c.log.Applied(), nil
}
