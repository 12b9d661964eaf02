package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// DeleteGroups: v0-2
//
// Behavior:
// Deletes empty groups and their offsets; a group with members is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND.
//
// Authorization: DELETE on each group, else GROUP_AUTHORIZATION_FAILED for it.
//
// Version notes:
// v2 flexible.
func init() { regKey(42, 0, 2, (*Broker).handleDeleteGroups) }

func (b *Broker) handleDeleteGroups(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteGroupsRequest)
	if az := b.authz(r); az.on() {
		return b.deleteGroups(&az, req), nil
	}
	return b.groups.DeleteGroups(req), nil
}
