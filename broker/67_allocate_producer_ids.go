package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// AllocateProducerIds: v0
//
// Behavior:
// A broker asks the controller for a block of producer ids
// (meta.Controller's AllocateProducerIDs), which no other block overlaps,
// across controller changes too: ProducerIDStart and ProducerIDLen, 1000
// ids as Kafka's controller hands out. The sender must be registered at
// BrokerEpoch, else STALE_BROKER_EPOCH (Kafka's checkBrokerEpoch); a node
// that is not the controller answers NOT_CONTROLLER.
//
// Authorization: CLUSTER_ACTION on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// v0 only (flexible).
func init() { regKey(67, 0, 0, (*Broker).handleAllocateProducerIDs) }

func (b *Broker) handleAllocateProducerIDs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AllocateProducerIDsRequest)
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	resp.ProducerIDStart = -1
	if az := b.authz(r); !az.cluster(aclOperationClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	resp.ErrorCode = b.controllerCall("AllocateProducerIds", func(ctx context.Context, c *meta.Controller) error {
		if err := c.CheckBrokerEpoch(ctx, req.BrokerID, req.BrokerEpoch); err != nil {
			return err
		}
		first, err := c.AllocateProducerIDs(ctx, producerIDBlock)
		if err == nil {
			resp.ProducerIDStart, resp.ProducerIDLen = first, producerIDBlock
		}
		return err
	})
	return resp, nil
}
