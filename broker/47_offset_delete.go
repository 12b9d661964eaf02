package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetDelete: v0-0
//
// Behavior:
// Deletes a group's committed offsets, except for topics its members are subscribed to (GROUP_SUBSCRIBED_TO_TOPIC).
//
// Version notes:
// Only v0 exists.
func init() { regKey(47, 0, 0, (*Broker).handleOffsetDelete) }

func (b *Broker) handleOffsetDelete(r *request) (kmsg.Response, error) {
	return b.groups.OffsetDelete(r.kreq.(*kmsg.OffsetDeleteRequest)), nil
}
