package broker

import (
	"net"

	"github.com/kmirror/kmirror/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat: v0-1
//
// Behavior:
// The consumer group protocol (KIP-848, group/consumer_group.go): a member
// joins (epoch 0), heartbeats with what it owns, and leaves (epoch -1, or
// -2 for a static member); the answer is its epoch and its assignment,
// computed by a server-side assignor (group.consumer.assignors). Listed
// in ApiVersions only with "consumer" in
// group.coordinator.rebalance.protocols (the default, as Kafka 4);
// otherwise UNSUPPORTED_VERSION.
//
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED and
// the group is not touched.
//
// Version notes:
// v1 (Kafka 4.0) regex subscriptions and client-generated member ids; v0
// members get their id from the coordinator.
func init() { regKey(consumerGroupHeartbeatKey, 0, 1, (*Broker).handleConsumerGroupHeartbeat) }

const consumerGroupHeartbeatKey = 68

func (b *Broker) handleConsumerGroupHeartbeat(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if az := b.authz(r); !az.group(aclOperationRead, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if code := b.coordinatorError(meta.CoordinatorGroup, req.Group); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	host := r.conn.RemoteAddr()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return b.groups.ConsumerGroupHeartbeat(req, string(r.hdr.ClientID), "/"+host), nil
}
