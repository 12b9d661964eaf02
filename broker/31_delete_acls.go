package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// DeleteAcls: v0-3
//
// Behavior:
// Each filter gets one result listing the bindings it matched, which are
// deleted; the filters have DescribeAcls's semantics, MATCH included. As
// in Kafka's controller, every filter matches against the bindings as
// they were before the request, so a binding two filters match is listed
// in both results, and the deletions of all filters are one fsynced
// write. A filter with an unknown element is INVALID_REQUEST in its own
// result; the others still run. More than 10000 bindings to delete is
// POLICY_VIOLATION for every filter, a failed write KAFKA_STORAGE_ERROR
// for every filter, and then nothing is deleted and no result lists a
// binding.
//
// Authorization: ALTER on the cluster, else every filter answers
// CLUSTER_AUTHORIZATION_FAILED and nothing is deleted. Without an
// authorizer nothing is checked (Kafka would answer SECURITY_DISABLED).
// The deletions apply from the next request on.
//
// Version notes:
// v0 has no pattern type: kmsg decodes the filters' as LITERAL, as Kafka
// reads a v0 filter. v1 adds pattern types; v2 flexible; v3 adds the USER
// resource type, which kmirror accepts at every version.
func init() { regKey(31, 0, 3, (*Broker).handleDeleteACLs) }

func (b *Broker) handleDeleteACLs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i].Default()
	}
	if az := b.authz(r); !az.cluster(aclOperationAlter) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = clusterAuthorizationFailed()
		}
		return resp, nil
	}

	// adminMu keeps the read, the match and the delete one step: a
	// concurrent create of a matching binding either comes before the read
	// (and is deleted and listed) or after the delete (and stays).
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	failAll := func(err *kerr.Error, msg string) {
		for i := range resp.Results {
			res := &resp.Results[i]
			if res.ErrorCode == 0 {
				res.ErrorCode, res.ErrorMessage, res.MatchingACLs = err.Code, &msg, nil
			}
		}
	}
	acls, err := b.sortedACLs()
	if err != nil {
		failAll(kerr.KafkaStorageError, err.Error())
		return resp, nil
	}

	doomed := make(map[state.ACL]struct{})
	var order []state.ACL // doomed in first-match order, for a deterministic write
	for i := range req.Filters {
		rf := &req.Filters[i]
		res := &resp.Results[i]
		f := aclFilter{
			resourceType: int8(rf.ResourceType),
			name:         rf.ResourceName,
			pattern:      int8(rf.ResourcePatternType),
			principal:    rf.Principal,
			host:         rf.Host,
			operation:    int8(rf.Operation),
			permission:   int8(rf.PermissionType),
		}
		if msg := f.check(); msg != "" {
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, &msg
			continue
		}
		for _, a := range f.matching(acls) {
			res.MatchingACLs = append(res.MatchingACLs, deletedACL(a))
			if _, ok := doomed[a]; !ok {
				doomed[a] = struct{}{}
				order = append(order, a)
			}
		}
	}
	switch {
	case len(order) == 0:
		return resp, nil
	case len(order) > adminOpMaxRecords:
		failAll(kerr.PolicyViolation, errBatchTooLargeMsg)
		return resp, nil
	}
	err = b.store.DeleteACLs(order)
	b.aclsChanged()
	if err != nil {
		b.log.Warn("deleting acls failed", "count", len(order), "err", err)
		failAll(aclStoreError(err))
		return resp, nil
	}
	b.log.Info("acls deleted", "count", len(order))
	return resp, nil
}

// deletedACL is a MatchingACLs entry for a.
func deletedACL(a state.ACL) kmsg.DeleteACLsResponseResultMatchingACL {
	m := kmsg.NewDeleteACLsResponseResultMatchingACL()
	m.ResourceType = kmsg.ACLResourceType(a.ResourceType)
	m.ResourceName = a.ResourceName
	m.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
	m.Principal, m.Host = a.Principal, a.Host
	m.Operation = kmsg.ACLOperation(a.Operation)
	m.PermissionType = kmsg.ACLPermissionType(a.Permission)
	return m
}
