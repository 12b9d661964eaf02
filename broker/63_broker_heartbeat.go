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
// broker has applied the log as far as the controller has (Kafka's
// "caught up", computed there from the broker's offset too). WantFence
// (a broker that asks to stay fenced) keeps the broker's state as it is
// and answers IsFenced true, without starting a shutdown. An epoch that
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
		var err error
		if req.WantFence && !req.WantShutdown {
			// Renews nothing and unfences nothing: the epoch check only.
			err = c.CheckBrokerEpoch(ctx, req.BrokerID, req.BrokerEpoch)
			resp.IsFenced = true
		} else {
			var res meta.HeartbeatResult
			res, err = c.Heartbeat(ctx, req.BrokerID, req.BrokerEpoch, applied, req.WantShutdown)
			resp.IsFenced, resp.ShouldShutdown = res.Fenced, res.ShutdownReady
		}
		if err == nil {
			resp.IsCaughtUp = caughtUp
		}
		return err
	})
	return resp, nil
}
