package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/state"
)

// BrokerRegistration: v0-4
//
// Behavior:
// A broker starting registers with the controller (meta.Controller's
// RegisterBroker): its id, the incarnation id of this start of its
// process, its advertised listeners and rack. A new incarnation gets a
// new broker epoch and starts fenced until a heartbeat shows it caught up
// with the metadata log; the same incarnation again keeps its epoch.
// Answers, as Kafka's controller: INCONSISTENT_CLUSTER_ID for another
// cluster id than this cluster's, INVALID_REGISTRATION for a negative
// broker id or no listener, NOT_CONTROLLER on a node that is not the
// controller. The features the broker supports are not checked: the
// cluster finalizes none yet (no metadata.version).
//
// Authorization: CLUSTER_ACTION on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// v1 IsMigratingZkBroker (ZooKeeper migration: not supported, ignored),
// v2 log directory ids and v3 the previous broker epoch (unused: an
// incarnation tells a restart), v4 as v3.
func init() { regKey(62, 0, 4, (*Broker).handleBrokerRegistration) }

func (b *Broker) handleBrokerRegistration(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.BrokerRegistrationRequest)
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	resp.BrokerEpoch = -1
	if az := b.authz(r); !az.cluster(aclOperationClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if req.ClusterID != b.store.ClusterID() {
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp, nil
	}
	if req.BrokerID < 0 || len(req.Listeners) == 0 {
		resp.ErrorCode = kerr.InvalidRegistration.Code
		return resp, nil
	}
	reg := state.BrokerRegistration{ID: req.BrokerID, Incarnation: req.IncarnationID, Rack: req.Rack}
	for _, l := range req.Listeners {
		reg.Listeners = append(reg.Listeners, state.BrokerEndpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port)})
	}
	resp.ErrorCode = b.controllerCall("BrokerRegistration", func(ctx context.Context, c *meta.Controller) error {
		epoch, err := c.RegisterBroker(ctx, reg)
		if err == nil {
			resp.BrokerEpoch = epoch
		}
		return err
	})
	return resp, nil
}
