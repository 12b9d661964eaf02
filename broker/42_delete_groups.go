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
	az := b.authz(r)
	var away []string
	var codes []int16
	req.Groups, away, codes = splitCoordinated(req.Groups, func(g string) string { return g },
		func(g string) int16 { return b.groupCoordinatorError(&az, aclOperationDelete, g) })
	var resp *kmsg.DeleteGroupsResponse
	if az.on() {
		resp = b.deleteGroups(&az, req)
	} else {
		resp = b.groups.DeleteGroups(req)
	}
	for i, g := range away {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, codes[i]
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
