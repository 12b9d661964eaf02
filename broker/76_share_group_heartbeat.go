package broker

import (
	"net"

	"github.com/kmirror/kmirror/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareGroupHeartbeat: v1
//
// Behavior:
// Share group membership (KIP-932, group/share_group.go): a member joins
// (epoch 0) with its subscription, heartbeats, and leaves (epoch -1); the
// answer is its epoch and the partitions it may fetch from, computed by
// the simple assignor (several members may share a partition). Listed in
// ApiVersions only with "share" in group.coordinator.rebalance.protocols
// (not the default while share groups are new); otherwise
// UNSUPPORTED_VERSION.
//
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED and
// the group is not touched; DESCRIBE on every subscribed topic, else
// TOPIC_AUTHORIZATION_FAILED.
//
// Version notes:
// v1 (Kafka 4.1) is the first version Kafka serves (v0 was an early
// access of 4.0); members generate their ids.
func init() { regKey(shareGroupHeartbeatKey, 1, 1, (*Broker).handleShareGroupHeartbeat) }

const shareGroupHeartbeatKey = 76

func (b *Broker) handleShareGroupHeartbeat(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	if !b.cfg.ShareProtocol() {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp, nil
	}
	az := b.authz(r)
	if !az.group(aclOperationRead, req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	for _, name := range req.SubscribedTopicNames {
		if !az.topic(aclOperationDescribe, name) {
			// As Kafka: a member may not learn of topics it cannot see.
			msg := "not authorized to describe topic " + name
			resp.ErrorCode, resp.ErrorMessage = kerr.TopicAuthorizationFailed.Code, &msg
			return resp, nil
		}
	}
	if code := b.coordinatorError(meta.CoordinatorGroup, req.GroupID); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	host := r.conn.RemoteAddr()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return b.groups.ShareGroupHeartbeat(req, string(r.hdr.ClientID), "/"+host), nil
}
