package broker

import (
	"github.com/kmirror/kmirror/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup: v0-5
//
// Behavior:
// The leader's SyncGroup brings the assignment and makes the group Stable; other members wait for it, then get their part.
//
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// v3 static members; v4 flexible; v5 protocol type and name checked.
func init() { regKey(syncGroupKey, 0, 5, (*Broker).handleSyncGroup) }

const syncGroupKey = 14

func (b *Broker) handleSyncGroup(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.SyncGroupRequest)
	if az := b.authz(r); !az.group(aclOperationRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if code := b.coordinatorError(meta.CoordinatorGroup, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	return b.groups.SyncGroup(req), nil
}
