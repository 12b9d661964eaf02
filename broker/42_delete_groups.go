package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// DeleteGroups: v0-2
//
// Behavior:
// Deletes empty groups and their offsets; a group with members is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND.
//
// Version notes:
// v2 flexible.
func init() { regKey(42, 0, 2, (*Broker).handleDeleteGroups) }

func (b *Broker) handleDeleteGroups(r *request) (kmsg.Response, error) {
	return b.groups.DeleteGroups(r.kreq.(*kmsg.DeleteGroupsRequest)), nil
}
