package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// DescribeGroups: v0-6
//
// Behavior:
// State, protocol and members (with their assignment once Stable); an unknown group is Dead, with GROUP_ID_NOT_FOUND from v6 (KIP-1043), as Kafka answers.
//
// Version notes:
// v3 authorized operations (all: no authorizer yet); v4 instance ids; v5 flexible; v6 error messages.
func init() { regKey(15, 0, 6, (*Broker).handleDescribeGroups) }

func (b *Broker) handleDescribeGroups(r *request) (kmsg.Response, error) {
	return b.groups.DescribeGroups(r.kreq.(*kmsg.DescribeGroupsRequest)), nil
}
