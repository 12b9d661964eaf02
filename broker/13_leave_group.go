package broker

import (
	"github.com/kmirror/kmirror/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup: v0-5
//
// Behavior:
// Removes one member (v0-2) or a batch by member or instance id (v3+) and rebalances the rest.
//
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED (top-level, no members listed).
//
// Version notes:
// v3 batches and static members; v4 flexible; v5 reasons (logged nowhere yet).
func init() { regKey(13, 0, 5, (*Broker).handleLeaveGroup) }

func (b *Broker) handleLeaveGroup(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.LeaveGroupRequest)
	if az := b.authz(r); !az.group(aclOperationRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if code := b.coordinatorError(meta.CoordinatorGroup, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	return b.groups.LeaveGroup(req), nil
}
