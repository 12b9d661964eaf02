package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// BumpLeaderEpochs: v0 (KIP-1279 prototype key 105)
//
// Behavior:
// A partition's leader asks the controller to raise partitions' leader
// epochs to at least a minimum, leaders and ISRs unchanged
// (meta.Controller's BumpLeaderEpochs, one metadata log entry): a mirrored
// log carries the source's epochs, and in a cluster the epoch clients and
// followers use is the controller's. Per partition: UNKNOWN_TOPIC_ID or
// UNKNOWN_TOPIC_OR_PARTITION without an assignment; every partition
// carries the call's own failure (NOT_CONTROLLER, REQUEST_TIMED_OUT) when
// the controller could not decide, since the answer has no top-level
// error. kmirror's tagged AppliedIndex (tag 0) is the entry's index.
// Served on the CONTROLLER listener only.
//
// Authorization: CLUSTER_ACTION on the cluster, else every partition
// answers CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(mirrorapi.KeyBumpLeaderEpochs, 0, 0, (*Broker).handleBumpLeaderEpochs) }

// EpochBumper raises partitions' leader epochs through the controller
// (node's: BumpLeaderEpochs over the controller channel, or the
// controller's own call) and returns once this node applied the change.
// Set in a cluster of several nodes only: a node alone keeps a mirrored
// partition's epoch in its own log (the image shows the larger).
type EpochBumper interface {
	// BumpLeaderEpochs raises the epochs of the partitions of each topic
	// (by id) to at least epochs, in one request.
	BumpLeaderEpochs(ctx context.Context, epochs map[[16]byte]map[int32]int32) error
}

func (b *Broker) handleBumpLeaderEpochs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*mirrorapi.BumpLeaderEpochsRequest)
	resp := req.ResponseKind().(*mirrorapi.BumpLeaderEpochsResponse)
	az := b.authz(r)
	denied := !az.cluster(aclOperationClusterAction)
	var bumps []meta.EpochBump
	type slot struct{ topic, partition int }
	var slots []slot
	resp.Topics = make([]mirrorapi.BumpLeaderEpochsResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		if t, err := b.store.TopicByID(rt.TopicID); err == nil {
			st.TopicName = t.Name
		} else if !errors.Is(err, state.ErrNotFound) {
			return nil, err
		}
		for _, rp := range rt.Partitions {
			sp := mirrorapi.BumpLeaderEpochsResponsePartition{PartitionIndex: rp.PartitionIndex}
			if denied {
				sp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			} else {
				bumps = append(bumps, meta.EpochBump{PartitionRef: meta.PartitionRef{TopicID: rt.TopicID, Partition: rp.PartitionIndex},
					MinLeaderEpoch: rp.MinLeaderEpoch})
				slots = append(slots, slot{ti, len(st.Partitions)})
			}
			st.Partitions = append(st.Partitions, sp)
		}
	}
	if len(bumps) == 0 {
		return resp, nil
	}
	code := b.controllerCall("BumpLeaderEpochs", func(ctx context.Context, c *meta.Controller) error {
		results, index, err := c.BumpLeaderEpochs(ctx, bumps)
		if err != nil {
			return err
		}
		for i, res := range results {
			if res.Err != nil {
				resp.Topics[slots[i].topic].Partitions[slots[i].partition].ErrorCode = res.Err.Code
			}
		}
		resp.AppliedIndex = index
		return nil
	})
	if code != 0 {
		for _, s := range slots {
			resp.Topics[s.topic].Partitions[s.partition].ErrorCode = code
		}
	}
	return resp, nil
}

// raiseAssignedEpochs is the partition registry's RaiseAssignedEpochs:
// cfg.Epochs within the controller calls' timeout, nil without one.
func (b *Broker) raiseAssignedEpochs() func(epochs map[[16]byte]map[int32]int32) error {
	if b.cfg.Epochs == nil {
		return nil
	}
	return func(epochs map[[16]byte]map[int32]int32) error {
		ctx, cancel := context.WithTimeout(context.Background(), controllerRPCTimeout)
		defer cancel()
		return b.cfg.Epochs.BumpLeaderEpochs(ctx, epochs)
	}
}
