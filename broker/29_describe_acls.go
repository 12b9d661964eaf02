package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// DescribeAcls: v0-3
//
// Behavior:
// Lists the bindings that the one filter of the request selects, with
// Kafka's filter semantics (aclFilter.matches): ANY resource type, pattern
// type, operation and permission match anything, a null name, principal
// or host matches any, and pattern MATCH lists the bindings that apply to
// a resource of the given name (LITERAL of that name, LITERAL "*",
// PREFIXED whose name is a prefix of it). The answer groups bindings by
// resource pattern (type, name, pattern type) as Kafka does, sorted by
// resource and then by entry, where Kafka's order is a hash map's. A
// filter with an unknown resource type, pattern type, operation or
// permission (UNKNOWN or a code Kafka does not define) is INVALID_REQUEST
// on the response; Kafka refuses such a request while parsing it.
//
// Authorization: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED
// for the whole request, before the filter is looked at. Without an
// authorizer nothing is checked; Kafka then answers SECURITY_DISABLED,
// kmirror answers as Kafka with one does.
//
// Version notes:
// v0 has no pattern type: kmsg decodes the filter's as LITERAL (the
// field's default), so v0 lists LITERAL bindings only, as Kafka's v0
// does. v1 adds pattern types; v2 flexible; v3 adds the USER resource
// type, which kmirror accepts at every version.
func init() { regKey(29, 0, 3, (*Broker).handleDescribeACLs) }

func (b *Broker) handleDescribeACLs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)

	if az := b.authz(r); !az.cluster(aclOperationDescribe) {
		resp.ErrorCode, resp.ErrorMessage = clusterAuthorizationFailed()
		return resp, nil
	}
	f := aclFilter{
		resourceType: int8(req.ResourceType),
		name:         req.ResourceName,
		pattern:      int8(req.ResourcePatternType),
		principal:    req.Principal,
		host:         req.Host,
		operation:    int8(req.Operation),
		permission:   int8(req.PermissionType),
	}
	if msg := f.check(); msg != "" {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, &msg
		return resp, nil
	}
	acls, err := b.sortedACLs()
	if err != nil {
		msg := err.Error()
		resp.ErrorCode, resp.ErrorMessage = kerr.KafkaStorageError.Code, &msg
		return resp, nil
	}
	resp.Resources = describedResources(f.matching(acls))
	return resp, nil
}

// describedResources groups acls by resource pattern. REQUIRES: acls
// sorted by state.CompareACLs, which puts each pattern's bindings next to
// one another.
func describedResources(acls []state.ACL) []kmsg.DescribeACLsResponseResource {
	var out []kmsg.DescribeACLsResponseResource
	for i, a := range acls {
		if i == 0 || a.ResourceType != acls[i-1].ResourceType || a.ResourceName != acls[i-1].ResourceName ||
			a.PatternType != acls[i-1].PatternType {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType = kmsg.ACLResourceType(a.ResourceType)
			res.ResourceName = a.ResourceName
			res.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
			out = append(out, res)
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = a.Principal, a.Host
		e.Operation = kmsg.ACLOperation(a.Operation)
		e.PermissionType = kmsg.ACLPermissionType(a.Permission)
		res := &out[len(out)-1]
		res.ACLs = append(res.ACLs, e)
	}
	return out
}
