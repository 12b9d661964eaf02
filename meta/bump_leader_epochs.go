package meta

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// Leader epochs raised on a leader's request (the KIP-1279 prototype's
// BumpLeaderEpochs): a mirrored log carries the source's leader epochs, and
// the epoch this cluster answers with must stay at or above them (SPEC.md
// section 4, EPOCH_FENCING). On a cluster that epoch is the controller's,
// so a leader about to append higher source epochs asks the controller to
// raise the partition's, rather than raising a local epoch the followers
// and clients never see (the two would then disagree: a follower fetching
// at the controller's epoch would be fenced by its leader's).

// EpochBump asks that a partition's leader epoch reach MinLeaderEpoch.
type EpochBump struct {
	PartitionRef
	MinLeaderEpoch int32
}

// EpochBumpResult is one partition's answer: Err nil when its epoch is at
// least the minimum now.
type EpochBumpResult struct {
	PartitionRef
	Err *kerr.Error
}

// BumpLeaderEpochs raises the leader epoch of every partition of bumps
// below its minimum to that minimum, the leader and the ISR unchanged, as
// one metadata log entry, and returns its index (0 when nothing needed
// raising). The partition epoch moves with it, which fences an ISR change
// made from the older assignment. A partition without an assignment is
// UNKNOWN_TOPIC_ID or UNKNOWN_TOPIC_OR_PARTITION. The prototype's
// controller raises to target+1; the minimum here is the epoch the asking
// leader computed.
func (c *Controller) BumpLeaderEpochs(ctx context.Context, bumps []EpochBump) ([]EpochBumpResult, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx); err != nil {
		return nil, 0, err
	}
	parts, err := c.assignments()
	if err != nil {
		return nil, 0, err
	}
	results := make([]EpochBumpResult, len(bumps))
	raised := map[partitionKey]bool{}
	for i, b := range bumps {
		results[i].PartitionRef = b.PartitionRef
		k := partitionKey{b.TopicID, b.Partition}
		cur, ok := parts[k]
		if !ok {
			if results[i].Err, err = c.unknownPartition(b.TopicID); err != nil {
				return nil, 0, err
			}
			continue
		}
		if cur.LeaderEpoch >= b.MinLeaderEpoch {
			continue
		}
		if !raised[k] {
			cur.PartitionEpoch++
		}
		cur.LeaderEpoch = b.MinLeaderEpoch
		parts[k], raised[k] = cur, true
	}
	var changed []state.PartitionAssignment
	for _, b := range bumps {
		k := partitionKey{b.TopicID, b.Partition}
		if raised[k] {
			changed = append(changed, parts[k])
			delete(raised, k)
		}
	}
	ops, err := partitionOps(changed)
	if err != nil {
		return nil, 0, err
	}
	index, err := c.apply(ctx, ops)
	if err != nil {
		return nil, 0, err
	}
	return results, index, nil
}
