package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareGroupDescribe: v1
//
// Behavior:
// A share group's state (Empty or Stable), epochs, assignor ("simple")
// and members with their subscriptions and assignments; any other group,
// or none, is GROUP_ID_NOT_FOUND, as Kafka answers. Listed with
// ShareGroupHeartbeat.
//
// Authorization: DESCRIBE on each group, else an entry with only
// GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// v1 (Kafka 4.1) is the first version Kafka serves.
func init() { regKey(shareGroupDescribeKey, 1, 1, (*Broker).handleShareGroupDescribe) }

const shareGroupDescribeKey = 77

func (b *Broker) handleShareGroupDescribe(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	az := b.authz(r)
	for _, name := range req.GroupIDs {
		code := kerr.GroupAuthorizationFailed.Code
		switch {
		case !b.cfg.ShareProtocol():
			code = kerr.UnsupportedVersion.Code
		case az.group(aclOperationDescribe, name):
			code = b.groupCoordinatorError(&az, aclOperationDescribe, name)
		}
		if code != 0 {
			dg := kmsg.NewShareGroupDescribeResponseGroup()
			dg.GroupID, dg.ErrorCode = name, code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		one := *req
		one.GroupIDs = []string{name}
		dg := b.groups.ShareGroupDescribe(&one).Groups[0]
		if req.IncludeAuthorizedOperations && az.on() {
			dg.AuthorizedOperations = az.operations(aclResourceGroup, name, groupOperations)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}
