package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeUserScramCredentials: v0
//
// Behavior:
// Lists the SCRAM mechanisms and iteration counts of the users named, or
// of every user with a credential when Users is null. Never a salt or a
// key. A user named twice is DUPLICATE_RESOURCE, a named user without
// credentials RESOURCE_NOT_FOUND, as Kafka answers.
//
// Authorization: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED
// for the whole request, as Kafka answers.
//
// Version notes:
// v0 is the only version (flexible).
func init() { regKey(50, 0, 0, (*Broker).handleDescribeUserSCRAMCredentials) }

func (b *Broker) handleDescribeUserSCRAMCredentials(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if az := b.authz(r); !az.cluster(aclOperationDescribe) {
		resp.ErrorCode, resp.ErrorMessage = clusterAuthorizationFailed()
		return resp, nil
	}
	creds, err := b.store.SCRAMCredentials()
	if err != nil {
		msg := err.Error()
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, &msg
		return resp, nil
	}
	byUser := map[string][]kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
	var order []string
	for _, c := range creds {
		if _, seen := byUser[c.User]; !seen {
			order = append(order, c.User)
		}
		info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		info.Mechanism, info.Iterations = c.Mechanism, c.Iterations
		byUser[c.User] = append(byUser[c.User], info)
	}
	names := order
	if req.Users != nil {
		names = nil
		for _, u := range req.Users {
			names = append(names, u.Name)
		}
	}
	count := map[string]int{}
	for _, n := range names {
		count[n]++
	}
	for _, n := range names {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = n
		switch {
		case count[n] > 1:
			res.ErrorCode = kerr.DuplicateResource.Code
			msg := "Cannot describe SCRAM credentials for the same user twice in a single request: " + n
			res.ErrorMessage = &msg
		case len(byUser[n]) == 0:
			res.ErrorCode = kerr.ResourceNotFound.Code
			msg := "Attempt to describe a user credential that does not exist: " + n
			res.ErrorMessage = &msg
		default:
			res.CredentialInfos = byUser[n]
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
