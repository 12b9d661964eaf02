package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// DescribeGroups: v0-6
//
// Behavior:
// State, protocol and members (with their assignment once Stable); an unknown group is Dead, with GROUP_ID_NOT_FOUND from v6 (KIP-1043), as Kafka answers.
//
// Authorization: DESCRIBE on each group, else an entry with only GROUP_AUTHORIZATION_FAILED; authorized operations (v3+) are the sender's.
//
// Version notes:
// v3 authorized operations (all without an authorizer); v4 instance ids; v5 flexible; v6 error messages.
func init() { regKey(15, 0, 6, (*Broker).handleDescribeGroups) }

func (b *Broker) handleDescribeGroups(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeGroupsRequest)
	az := b.authz(r)
	var away []string
	var codes []int16
	req.Groups, away, codes = splitCoordinated(req.Groups, func(g string) string { return g },
		func(g string) int16 { return b.groupCoordinatorError(&az, aclOperationDescribe, g) })
	var resp *kmsg.DescribeGroupsResponse
	if az.on() {
		resp = b.describeGroups(&az, req)
	} else {
		resp = b.groups.DescribeGroups(req)
	}
	for i, g := range away {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, codes[i]
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
