package broker

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// ACLs: what DescribeAcls, CreateAcls and DeleteAcls share, and the Go API
// the mirror sync (sync/acls) uses.
//
// The bindings live in state/: the ACL requests, rare admin calls, read
// them from the store. The authorizer (authorizer.go) keeps its own index
// of them, so every write here ends with aclsChanged, which makes the next
// check rebuild that index.
//
// ACLs are enforced only with Security.Authorizer (authorizer.class.name);
// without it every request is allowed whatever the ACLs say. The three
// APIs answer as a Kafka broker with an authorizer does either way (Kafka
// without one answers SECURITY_DISABLED), so ACLs can be managed and
// mirrored from a source before enforcement is turned on.

// ErrInvalidACL marks an ACL that CreateACLs refuses; the error names it.
var ErrInvalidACL = errors.New("broker: invalid ACL")

// clusterResourceName is the only name of the CLUSTER resource (Kafka's
// Resource.CLUSTER_NAME).
const clusterResourceName = "kafka-cluster"

// Enum values the ACL code tests for, as the int8 of state.ACL.
const (
	aclResourceAny     = int8(kmsg.ACLResourceTypeAny)
	aclResourceCluster = int8(kmsg.ACLResourceTypeCluster)
	aclPatternAny      = int8(kmsg.ACLResourcePatternTypeAny)
	aclPatternMatch    = int8(kmsg.ACLResourcePatternTypeMatch)
	aclPatternLiteral  = int8(kmsg.ACLResourcePatternTypeLiteral)
	aclPatternPrefixed = int8(kmsg.ACLResourcePatternTypePrefixed)
	aclOperationAny    = int8(kmsg.ACLOperationAny)
	aclOperationLast   = int8(kmsg.ACLOperationDescribeTokens)
	aclPermissionAny   = int8(kmsg.ACLPermissionTypeAny)
	aclPermissionDeny  = int8(kmsg.ACLPermissionTypeDeny)
	aclPermissionAllow = int8(kmsg.ACLPermissionTypeAllow)
	// aclWildcard is the LITERAL resource name that stands for every
	// resource of its type (Kafka's ResourcePattern.WILDCARD_RESOURCE).
	aclWildcard = "*"
)

// aclResourceTypeName names a resource type as Kafka does; kmsg does not
// know CLUSTER_MIRROR yet.
func aclResourceTypeName(v int8) string {
	if v == state.ResourceClusterMirror {
		return "CLUSTER_MIRROR"
	}
	return kmsg.ACLResourceType(v).String()
}

// checkNewACL applies Kafka's rules for a new binding (AclControlManager
// and the broker's AclApis) and returns why a is refused, or "" if it is
// not. Every refusal is INVALID_REQUEST. The last check is the store's
// own (a key within Badger's limit), so what passes can be stored.
func checkNewACL(a state.ACL) string {
	switch {
	case a.ResourceType <= aclResourceAny || a.ResourceType > state.ResourceClusterMirror:
		return fmt.Sprintf("Invalid resource type %s: an ACL needs a concrete resource type.",
			aclResourceTypeName(a.ResourceType))
	case a.PatternType != aclPatternLiteral && a.PatternType != aclPatternPrefixed:
		return fmt.Sprintf("Invalid pattern type %s: an ACL is LITERAL or PREFIXED.",
			kmsg.ACLResourcePatternType(a.PatternType))
	case a.Operation <= aclOperationAny || a.Operation > aclOperationLast:
		return fmt.Sprintf("Invalid operation %s: an ACL needs a concrete operation.", kmsg.ACLOperation(a.Operation))
	case a.Permission != aclPermissionDeny && a.Permission != aclPermissionAllow:
		return fmt.Sprintf("Invalid permission type %s: an ACL is ALLOW or DENY.", kmsg.ACLPermissionType(a.Permission))
	case a.ResourceName == "":
		return "The resource name of an ACL must not be empty."
	case a.ResourceType == aclResourceCluster && a.ResourceName != clusterResourceName:
		return "The CLUSTER resource is named " + clusterResourceName + " and nothing else."
	case !strings.Contains(a.Principal, ":"):
		return fmt.Sprintf("Principal %q is not of the form Type:Name: no colon separates the type from the name.",
			a.Principal)
	case a.Host == "":
		return "The host of an ACL must not be empty; * stands for every host."
	}
	if err := state.CheckACL(a); err != nil {
		return err.Error()
	}
	return ""
}

// aclFilter is one DescribeAcls or DeleteAcls filter. Nil strings match
// anything, as do the ANY values of the enums.
type aclFilter struct {
	resourceType int8
	name         *string
	pattern      int8
	principal    *string
	host         *string
	operation    int8
	permission   int8
}

// check returns why f is refused (INVALID_REQUEST), or "": Kafka refuses a
// filter with an UNKNOWN element, which includes every value it does not
// know.
func (f *aclFilter) check() string {
	switch {
	case f.resourceType < aclResourceAny || f.resourceType > state.ResourceClusterMirror:
		return fmt.Sprintf("The filter's resource type %d is unknown.", f.resourceType)
	case f.pattern < aclPatternAny || f.pattern > aclPatternPrefixed:
		return fmt.Sprintf("The filter's pattern type %d is unknown.", f.pattern)
	case f.operation < aclOperationAny || f.operation > aclOperationLast:
		return fmt.Sprintf("The filter's operation %d is unknown.", f.operation)
	case f.permission < aclPermissionAny || f.permission > aclPermissionAllow:
		return fmt.Sprintf("The filter's permission type %d is unknown.", f.permission)
	}
	return ""
}

// matches reports whether f selects a, with Kafka's semantics
// (ResourcePatternFilter and AccessControlEntryFilter):
//   - pattern ANY with a name: bindings of exactly that name, any pattern;
//   - LITERAL or PREFIXED: bindings of that pattern and exactly that name;
//   - MATCH: the bindings that apply to a resource of that name: LITERAL
//     of the same name, LITERAL "*", and PREFIXED whose name is a prefix
//     of it (itself included). Without a name it matches everything.
//
// REQUIRES: f.check() == "".
func (f *aclFilter) matches(a state.ACL) bool {
	if f.resourceType != aclResourceAny && f.resourceType != a.ResourceType {
		return false
	}
	if f.pattern != aclPatternAny && f.pattern != aclPatternMatch && f.pattern != a.PatternType {
		return false
	}
	if f.name != nil {
		name := *f.name
		switch {
		case f.pattern != aclPatternMatch:
			if name != a.ResourceName {
				return false
			}
		case a.PatternType == aclPatternLiteral:
			if name != a.ResourceName && a.ResourceName != aclWildcard {
				return false
			}
		case !strings.HasPrefix(name, a.ResourceName): // PREFIXED
			return false
		}
	}
	switch {
	case f.principal != nil && *f.principal != a.Principal,
		f.host != nil && *f.host != a.Host,
		f.operation != aclOperationAny && f.operation != a.Operation,
		f.permission != aclPermissionAny && f.permission != a.Permission:
		return false
	}
	return true
}

// matching returns the ACLs of acls that f selects, in the order of acls.
func (f *aclFilter) matching(acls []state.ACL) []state.ACL {
	var out []state.ACL
	for _, a := range acls {
		if f.matches(a) {
			out = append(out, a)
		}
	}
	return out
}

// sortedACLs reads every stored ACL, sorted with state.CompareACLs (by
// resource, then entry), the order in which responses list them.
func (b *Broker) sortedACLs() ([]state.ACL, error) {
	acls, err := b.store.ACLs()
	if err != nil {
		return nil, err
	}
	slices.SortFunc(acls, state.CompareACLs)
	return acls, nil
}

// aclStoreError turns a failed store write into a Kafka error: a change
// too large for one transaction is Kafka's answer to an oversized batch,
// anything else a storage error.
func aclStoreError(err error) (*kerr.Error, string) {
	if errors.Is(err, state.ErrTooLarge) {
		return kerr.PolicyViolation, errBatchTooLargeMsg
	}
	return kerr.KafkaStorageError, err.Error()
}

// ACLs returns every ACL binding of the node, sorted by resource, then
// entry (state.CompareACLs).
func (b *Broker) ACLs() ([]state.ACL, error) {
	acls, err := b.sortedACLs()
	if err != nil {
		return nil, fmt.Errorf("reading ACLs: %w", err)
	}
	return acls, nil
}

// CreateACLs stores acls, with the checks of CreateAcls. Unlike the
// request, which answers each binding, the first invalid binding fails
// the whole call with an error wrapping ErrInvalidACL that names it, and
// nothing is stored. Existing bindings are kept as they are.
func (b *Broker) CreateACLs(acls []state.ACL) error {
	for _, a := range acls {
		if msg := checkNewACL(a); msg != "" {
			return fmt.Errorf("%w: %v: %s", ErrInvalidACL, a, msg)
		}
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	defer b.aclsChanged()
	if err := b.store.PutACLs(acls); err != nil {
		return fmt.Errorf("storing ACLs: %w", err)
	}
	if len(acls) > 0 {
		b.log.Info("acls created", "count", len(acls))
	}
	return nil
}

// DeleteACLs deletes acls; bindings that do not exist are ignored.
func (b *Broker) DeleteACLs(acls []state.ACL) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	defer b.aclsChanged()
	if err := b.store.DeleteACLs(acls); err != nil {
		return fmt.Errorf("deleting ACLs: %w", err)
	}
	if len(acls) > 0 {
		b.log.Info("acls deleted", "requested", len(acls))
	}
	return nil
}
