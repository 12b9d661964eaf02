package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// BrokerHeartbeat: v0-2
//
// Behavior:
// A registered broker's heartbeat (meta.Controller's Heartbeat): it
// renews the broker's session; CurrentMetadataOffset is the metadata log
// index the broker has applied, and a fenced broker that has applied its
// registration is unfenced (IsFenced false); WantShutdown starts or goes
// on with a controlled shutdown, and ShouldShutdown says the broker leads
// nothing more and may exit, as in Kafka. IsCaughtUp is whether the
// broker has applied the log as far as the controller had when the
// heartbeat came. WantFence (a broker not ready to serve, or giving up)
// fences the broker, or keeps it fenced (meta.Controller's
// HeartbeatFence); with WantShutdown too it may exit at once, as in
// Kafka. An epoch that
// is not the registration's, or a broker not registered, is
// STALE_BROKER_EPOCH; a node that is not the controller answers
// NOT_CONTROLLER.
//
// Authorization: CLUSTER_ACTION on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// v1 offline log directories and v2 cordoned ones (kmirror has no
// directory ids yet: ignored).
func init() { regKey(63, 0, 2, (*Broker).handleBrokerHeartbeat) }

func (b *Broker) handleBrokerHeartbeat(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.BrokerHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	resp.IsFenced = true
	if az := b.authz(r); !az.cluster(aclOperationClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	applied := uint64(max(req.CurrentMetadataOffset, 0))
	resp.ErrorCode = b.controllerCall("BrokerHeartbeat", func(ctx context.Context, c *meta.Controller) error {
		// Caught up: as far as the log was when the heartbeat came, not
		// counting the entry the heartbeat itself writes.
		caughtUp := applied >= c.Applied()
		var res meta.HeartbeatResult
		var err error
		if req.WantFence {
			res, err = c.HeartbeatFence(ctx, req.BrokerID, req.BrokerEpoch)
			res.ShutdownReady = res.ShutdownReady && req.WantShutdown
		} else {
			res, err = c.Heartbeat(ctx, req.BrokerID, req.BrokerEpoch, applied, req.WantShutdown)
		}
		if err != nil {
			return err
		}
		resp.IsFenced, resp.ShouldShutdown, resp.IsCaughtUp = res.Fenced, res.ShutdownReady, caughtUp
		return nil
	})
	return resp, nil
}
