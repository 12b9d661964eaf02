package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetDelete: v0-0
//
// Behavior:
// Deletes a group's committed offsets, except for topics its members are subscribed to (GROUP_SUBSCRIBED_TO_TOPIC).
//
// Authorization: DELETE on the group, else a top-level GROUP_AUTHORIZATION_FAILED; then READ on each topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED.
//
// Version notes:
// Only v0 exists.
func init() { regKey(47, 0, 0, (*Broker).handleOffsetDelete) }

func (b *Broker) handleOffsetDelete(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetDeleteRequest)
	az := b.authz(r)
	if code := b.groupCoordinatorError(&az, aclOperationDelete, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	if az.on() {
		return b.offsetDelete(&az, req), nil
	}
	return b.groups.OffsetDelete(req), nil
}
