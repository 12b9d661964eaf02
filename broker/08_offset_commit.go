package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetCommit: v2-9
//
// Behavior:
// The group coordinator (group/) stores the offsets in state/. Members commit within their generation; generation -1 without a member id is a simple commit, refused while the group has members.
//
// Version notes:
// v2 is the floor (Kafka 4.0); v6 leader epochs; v7 static members; v8 flexible. v10 (topic IDs) is not served yet.
func init() { regKey(8, 2, 9, (*Broker).handleOffsetCommit) }

func (b *Broker) handleOffsetCommit(r *request) (kmsg.Response, error) {
	return b.groups.OffsetCommit(r.kreq.(*kmsg.OffsetCommitRequest)), nil
}
