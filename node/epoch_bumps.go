package node

import (
	"context"
	"fmt"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/mirrorapi"
)

// Leader epochs raised through the controller (BumpLeaderEpochs, KIP-1279's
// EPOCH_FENCING): in a cluster the epoch a partition's followers and
// clients use is the controller's, so a leader about to append mirrored
// batches of higher epochs, or a failover raising every partition above
// them, asks the controller first and appends once this node applied the
// change (broker.EpochBumper).

// BumpLeaderEpochs asks the controller to raise the leader epochs of the
// partitions of each topic (by id) to at least epochs, retrying while
// there is no controller (retryController), and returns the index of the
// entry that did (0: none was needed).
func (l *Lifecycle) BumpLeaderEpochs(ctx context.Context, epochs map[[16]byte]map[int32]int32) (uint64, error) {
	var bumps []meta.EpochBump
	for id, es := range epochs {
		for p, e := range es {
			bumps = append(bumps, meta.EpochBump{PartitionRef: meta.PartitionRef{TopicID: id, Partition: p}, MinLeaderEpoch: e})
		}
	}
	var index uint64
	err := l.retryController(ctx, fmt.Sprintf("BumpLeaderEpochs of %d partitions of %d topics", len(bumps), len(epochs)), func(ctx context.Context, c controllerClient) error {
		var err error
		index, err = c.bumpLeaderEpochs(ctx, bumps)
		return err
	})
	return index, err
}

// epochBumper is broker.EpochBumper: the lifecycle's call, then a wait
// until this node applied the entry and its reconciler brought the
// partitions in line (their assignments, the image).
type epochBumper struct {
	life *Lifecycle
	q    quorum
}

func (e epochBumper) BumpLeaderEpochs(ctx context.Context, epochs map[[16]byte]map[int32]int32) error {
	index, err := e.life.BumpLeaderEpochs(ctx, epochs)
	if err != nil || index == 0 {
		return err
	}
	return e.q.WaitApplied(ctx, index)
}

func (lc localController) bumpLeaderEpochs(ctx context.Context, bumps []meta.EpochBump) (uint64, error) {
	res, index, err := lc.c.BumpLeaderEpochs(ctx, bumps)
	if err != nil {
		return 0, err
	}
	for _, r := range res {
		if r.Err != nil {
			return 0, fmt.Errorf("partition %d: %w", r.Partition, r.Err)
		}
	}
	return index, nil
}

func (rc remoteController) bumpLeaderEpochs(ctx context.Context, bumps []meta.EpochBump) (uint64, error) {
	req := mirrorapi.NewPtrBumpLeaderEpochsRequest()
	byTopic := map[[16]byte]int{}
	for _, b := range bumps {
		i, ok := byTopic[b.TopicID]
		if !ok {
			i = len(req.Topics)
			byTopic[b.TopicID] = i
			req.Topics = append(req.Topics, mirrorapi.BumpLeaderEpochsRequestTopic{TopicID: b.TopicID})
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions,
			mirrorapi.BumpLeaderEpochsRequestPartition{PartitionIndex: b.Partition, MinLeaderEpoch: b.MinLeaderEpoch})
	}
	resp, err := rc.ch.Request(ctx, req)
	if err != nil {
		return 0, err
	}
	r, ok := resp.(*mirrorapi.BumpLeaderEpochsResponse)
	if !ok {
		return 0, fmt.Errorf("node: BumpLeaderEpochs answered with a %T", resp)
	}
	answered := 0
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			answered++
			if err := controllerError(p.ErrorCode); err != nil {
				return 0, fmt.Errorf("partition %d of %s: %w", p.PartitionIndex, t.TopicName, err)
			}
		}
	}
	if answered != len(bumps) {
		return 0, fmt.Errorf("node: BumpLeaderEpochs of %d partitions answered %d", len(bumps), answered)
	}
	return r.AppliedIndex, nil
}

func (noController) bumpLeaderEpochs(context.Context, []meta.EpochBump) (uint64, error) {
	return 0, meta.ErrNotController
}
