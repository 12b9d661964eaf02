package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// CreateAcls: v0-3
//
// Behavior:
// Each creation is answered on its own, in request order, with Kafka's
// checks (checkNewACL): a concrete resource type (not UNKNOWN or ANY),
// pattern type LITERAL or PREFIXED, a concrete operation (not UNKNOWN or
// ANY), permission ALLOW or DENY, a non-empty resource name, the name
// kafka-cluster for the CLUSTER resource, a principal with a colon
// between its type and name, and a non-empty host. A failed check is
// INVALID_REQUEST with a message saying which. The valid bindings are
// stored together in one fsynced write; creating a binding that exists
// succeeds and changes nothing. More than 10000 valid bindings in one
// request is POLICY_VIOLATION for all of them (Kafka's per-operation
// record bound), and a failed write a KAFKA_STORAGE_ERROR for all of
// them.
//
// Authorization: ALTER on the cluster, else every creation answers
// CLUSTER_AUTHORIZATION_FAILED and nothing is checked or stored. Without an
// authorizer nothing is checked (Kafka would answer SECURITY_DISABLED).
// The new bindings apply from the next request on.
//
// Version notes:
// v0 has no pattern type: kmsg decodes it as LITERAL, the only pattern
// Kafka's v0 creates. v1 adds pattern types; v2 flexible; v3 adds the
// USER resource type, which kmirror accepts at every version.
func init() { regKey(30, 0, 3, (*Broker).handleCreateACLs) }

func (b *Broker) handleCreateACLs(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)

	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	if az := b.authz(r); !az.cluster(aclOperationAlter) {
		for i := range resp.Results {
			resp.Results[i].Default()
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = clusterAuthorizationFailed()
		}
		return resp, nil
	}
	var valid []state.ACL
	var at []int // index in Results of each valid binding
	for i := range req.Creations {
		c := &req.Creations[i]
		res := &resp.Results[i]
		res.Default()
		a := state.ACL{
			ResourceType: int8(c.ResourceType),
			ResourceName: c.ResourceName,
			PatternType:  int8(c.ResourcePatternType),
			Principal:    c.Principal,
			Host:         c.Host,
			Operation:    int8(c.Operation),
			Permission:   int8(c.PermissionType),
		}
		if msg := checkNewACL(a); msg != "" {
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, &msg
			continue
		}
		valid = append(valid, a)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return resp, nil
	}

	fail := func(err *kerr.Error, msg string) {
		for _, i := range at {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = err.Code, &msg
		}
	}
	if len(valid) > adminOpMaxRecords {
		fail(kerr.PolicyViolation, errBatchTooLargeMsg)
		return resp, nil
	}
	b.adminMu.Lock()
	err := b.store.PutACLs(valid)
	b.aclsChanged()
	b.adminMu.Unlock()
	if err != nil {
		b.log.Warn("creating acls failed", "count", len(valid), "err", err)
		fail(aclStoreError(err))
		return resp, nil
	}
	b.log.Info("acls created", "count", len(valid))
	return resp, nil
}
