package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// WriteMirrorStates: v0 (KIP-1279 prototype key 101)
//
// Behavior:
// A mirror partition's leader persists the partition's mirror states
// through the controller (meta.Controller's WriteMirrorStates: written
// only from the node that leads each partition, at the leader epoch it
// names). Each partition carries its state record (kmirror's tagged
// Record); one without it, or whose record does not decode, is
// INVALID_REQUEST. Every partition carries the call's own failure
// (NOT_CONTROLLER, REQUEST_TIMED_OUT) when the controller could not
// decide. kmirror's tagged AppliedIndex is the metadata log index the
// writer waits for. Served on the CONTROLLER listener only.
//
// Authorization: CLUSTER_ACTION on the cluster, else every partition
// answers CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// Only v0 exists; it is flexible.
func init() { regKey(mirrorapi.KeyWriteMirrorStates, 0, 0, (*Broker).handleWriteMirrorStates) }

func (b *Broker) handleWriteMirrorStates(r *request) (kmsg.Response, error) {
	req := r.kreq.(*mirrorapi.WriteMirrorStatesRequest)
	resp := req.ResponseKind().(*mirrorapi.WriteMirrorStatesResponse)
	az := b.authz(r)
	denied := !az.cluster(aclOperationClusterAction)
	var writes []meta.MirrorStateWrite
	type slot struct{ topic, partition int }
	var slots []slot
	resp.Topics = make([]mirrorapi.WriteMirrorStatesResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		st.Name = rt.Name
		for _, rp := range rt.Partitions {
			sp := mirrorapi.WriteMirrorStatesResponsePartition{PartitionIndex: rp.PartitionIndex}
			ps, err := state.DecodeMirrorPartitionStateRecord(req.MirrorName, rt.Name, rp.PartitionIndex, rp.Record)
			switch {
			case denied:
				sp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			case err != nil:
				sp.ErrorCode = kerr.InvalidRequest.Code
				msg := err.Error()
				sp.ErrorMessage = &msg
			default:
				writes = append(writes, meta.MirrorStateWrite{State: ps, LeaderEpoch: rp.LeaderEpoch})
				slots = append(slots, slot{ti, len(st.Partitions)})
			}
			st.Partitions = append(st.Partitions, sp)
		}
	}
	if len(writes) == 0 {
		return resp, nil
	}
	code := b.controllerCall("WriteMirrorStates", func(ctx context.Context, c *meta.Controller) error {
		results, index, err := c.WriteMirrorStates(ctx, req.BrokerID, writes)
		if err != nil {
			return err
		}
		for i, res := range results {
			if res.Err != nil {
				sp := &resp.Topics[slots[i].topic].Partitions[slots[i].partition]
				sp.ErrorCode = res.Err.Code
				if res.Message != "" {
					sp.ErrorMessage = &res.Message
				}
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
