package broker

import (
	"github.com/kmirror/kmirror/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat: v0-4
//
// Behavior:
// Keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.
//
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// v3 static members; v4 flexible.
func init() { regKey(12, 0, 4, (*Broker).handleHeartbeat) }

func (b *Broker) handleHeartbeat(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.HeartbeatRequest)
	if az := b.authz(r); !az.group(aclOperationRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if code := b.coordinatorError(meta.CoordinatorGroup, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	return b.groups.Heartbeat(req), nil
}
