package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ListGroups: v0-5
//
// Behavior:
// Every group of the node, filtered by state (v4+) and type (v5+; every group is classic).
//
// Authorization: DESCRIBE on the cluster lists every group; otherwise only the groups with DESCRIBE are listed (the others are left out silently).
//
// Version notes:
// v3 flexible; v4 states filter; v5 types filter.
func init() { regKey(16, 0, 5, (*Broker).handleListGroups) }

func (b *Broker) handleListGroups(r *request) (kmsg.Response, error) {
	resp := b.groups.ListGroups(r.kreq.(*kmsg.ListGroupsRequest))
	az := b.authz(r)
	az.listGroupsFilter(resp)
	return resp, nil
}
