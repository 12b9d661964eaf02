package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// LeaveGroup: v0-5
//
// Behavior:
// Removes one member (v0-2) or a batch by member or instance id (v3+) and rebalances the rest.
//
// Version notes:
// v3 batches and static members; v4 flexible; v5 reasons (logged nowhere yet).
func init() { regKey(13, 0, 5, (*Broker).handleLeaveGroup) }

func (b *Broker) handleLeaveGroup(r *request) (kmsg.Response, error) {
	return b.groups.LeaveGroup(r.kreq.(*kmsg.LeaveGroupRequest)), nil
}
