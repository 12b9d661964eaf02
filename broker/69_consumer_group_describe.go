package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe: v0-1
//
// Behavior:
// A consumer group's state, epochs, assignor and members with their
// subscriptions, assignments and target assignments; a classic or unknown
// group is GROUP_ID_NOT_FOUND, as Kafka answers. Listed with
// ConsumerGroupHeartbeat.
//
// Authorization: DESCRIBE on each group, else an entry with only
// GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// v1 member types (every member here is a consumer-protocol one).
func init() { regKey(consumerGroupDescribeKey, 0, 1, (*Broker).handleConsumerGroupDescribe) }

const consumerGroupDescribeKey = 69

func (b *Broker) handleConsumerGroupDescribe(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	az := b.authz(r)
	for _, name := range req.Groups {
		code := kerr.GroupAuthorizationFailed.Code
		if az.group(aclOperationDescribe, name) {
			code = b.groupCoordinatorError(&az, aclOperationDescribe, name)
		}
		if code != 0 {
			dg := kmsg.NewConsumerGroupDescribeResponseGroup()
			dg.Group, dg.ErrorCode = name, code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		one := *req
		one.Groups = []string{name}
		dg := b.groups.ConsumerGroupDescribe(&one).Groups[0]
		if req.IncludeAuthorizedOperations && az.on() {
			dg.AuthorizedOperations = az.operations(aclResourceGroup, name, groupOperations)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}
