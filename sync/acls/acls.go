// Package acls syncs ACLs from a mirror's source to this node (SPEC.md
// section 6), so that after a failover the principals that used the
// source have the same rights here.
//
// Each sync lists the source's bindings with one DescribeAcls whose filter
// is ANY in every field, keeps those that a rule of acls.include selects,
// and makes this node hold exactly that set: missing bindings are created,
// then bindings here that the selected source set lacks are deleted,
// including ones created here by hand (SPEC.md: the destination follows
// the source). Bindings on CLUSTER_MIRROR resources (type 8) are this
// node's own mirror administration and are left alone both ways: never
// deleted here, and never copied from a source, since a copy could never
// be removed again. A source with no authorizer answers SECURITY_DISABLED;
// the sync then does nothing and reports no error (SPEC.md: "security
// disabled -> skip").
//
// # acls.include
//
// A comma list of rules "resourceType;nameRegex;operation;permission;
// principalRegex". A binding is kept if any rule matches it. In a rule:
//
//   - "*" in any field matches anything, and trailing fields may be left
//     out: "TOPIC" is every topic binding, "*" every binding;
//   - resourceType, operation and permission are Kafka's names, in any
//     case: TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN,
//     USER; ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
//     CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE,
//     CREATE_TOKENS, DESCRIBE_TOKENS; ALLOW, DENY. An operation matches
//     bindings of that operation only: ALL matches the bindings that grant
//     or deny ALL, not every operation;
//   - nameRegex matches the resource name and principalRegex the whole
//     principal ("User:alice"), both as full matches (Go RE2 syntax
//     wrapped in ^(?:...)$). The pattern type and host of a binding are not
//     part of a rule.
//
// Spaces around rules and fields are dropped, and empty rules (a trailing
// comma) are ignored; an empty field is an error (write "*" for any). An
// empty or unset acls.include means "*". Since commas and semicolons
// separate rules and fields, a regex can hold neither: write a{1,3} as
// aa?a?, as with every comma-list config.
//
// The package talks to the source with kadm and to this node through the
// Dest interface, which *broker.Broker implements; it runs on the control
// plane's loop, never on an event loop.
package acls

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/pattern"
	"github.com/kmirror/kmirror/state"
)

// ErrInvalidRule marks an acls.include value that does not parse; the
// error names the rule and the field.
var ErrInvalidRule = errors.New("acls: invalid acls.include")

// Dest is this node, as the sync sees it.
type Dest interface {
	// ACLs returns every binding here.
	ACLs() ([]state.ACL, error)
	// CreateACLs stores bindings; existing ones stay as they are.
	CreateACLs([]state.ACL) error
	// DeleteACLs deletes bindings; absent ones are ignored.
	DeleteACLs([]state.ACL) error
}

// anyValue in an enum field of a Rule matches every value. It is Kafka's
// UNKNOWN, which no binding ever holds, so it cannot be confused with a
// real value, and the zero Rule is the rule "*".
const anyValue int8 = 0

// Rule is one acls.include rule. The zero Rule matches every binding.
type Rule struct {
	resourceType int8
	operation    int8
	permission   int8
	// name and principal are nil for "*"; their sources are kept as
	// written for String.
	name, principal       *regexp.Regexp
	nameSrc, principalSrc string
}

// The names rules accept, as Kafka spells them (kmsg's String).
var (
	resourceTypes = newEnum(2, 7, func(v int8) string { return kmsg.ACLResourceType(v).String() })
	operations    = newEnum(2, 14, func(v int8) string { return kmsg.ACLOperation(v).String() })
	permissions   = newEnum(2, 3, func(v int8) string { return kmsg.ACLPermissionType(v).String() })
)

// enum names the values of one Kafka ACL enum that a rule may hold.
type enum struct {
	names []string // by value; "" for a value rules do not accept
}

func newEnum(lo, hi int8, name func(int8) string) enum {
	e := enum{names: make([]string, hi+1)}
	for v := lo; v <= hi; v++ {
		e.names[v] = name(v)
	}
	return e
}

// parse looks s up, ignoring case.
func (e enum) parse(s string) (int8, error) {
	var valid []string
	for v, n := range e.names {
		if n == "" {
			continue
		}
		if strings.EqualFold(s, n) {
			return int8(v), nil
		}
		valid = append(valid, n)
	}
	return 0, fmt.Errorf("%q is none of %s", s, strings.Join(valid, ", "))
}

// name is the name of v, or "*" for anyValue.
func (e enum) name(v int8) string {
	if v == anyValue {
		return "*"
	}
	return e.names[v]
}

// Field names, in rule order, for errors.
var fieldNames = [...]string{"resource type", "name regex", "operation", "permission", "principal regex"}

// ParseRules parses an acls.include value. An empty value means "*". Errors
// wrap ErrInvalidRule and name the rule (1-based) and the field.
func ParseRules(include string) ([]Rule, error) {
	var rules []Rule
	for i, raw := range strings.Split(include, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		r, err := parseRule(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: rule %d %q: %v", ErrInvalidRule, i+1, raw, err)
		}
		rules = append(rules, r)
	}
	if len(rules) == 0 {
		rules = []Rule{{}}
	}
	return rules, nil
}

// parseRule parses one non-empty rule.
func parseRule(raw string) (Rule, error) {
	fields := strings.Split(raw, ";")
	if len(fields) > len(fieldNames) {
		return Rule{}, fmt.Errorf("%d fields, at most %d (resourceType;nameRegex;operation;permission;principalRegex)",
			len(fields), len(fieldNames))
	}
	var r Rule
	for i, f := range fields {
		f = strings.TrimSpace(f)
		if f == "" {
			return Rule{}, fmt.Errorf("%s: empty (write * for any)", fieldNames[i])
		}
		if f == "*" {
			continue
		}
		var err error
		switch i {
		case 0:
			r.resourceType, err = resourceTypes.parse(f)
		case 1:
			r.name, err = pattern.Compile(f)
			r.nameSrc = f
		case 2:
			r.operation, err = operations.parse(f)
		case 3:
			r.permission, err = permissions.parse(f)
		case 4:
			r.principal, err = pattern.Compile(f)
			r.principalSrc = f
		}
		if err != nil {
			return Rule{}, fmt.Errorf("%s: %v", fieldNames[i], err)
		}
	}
	return r, nil
}

// String is the rule with all five fields, "*" for any; ParseRules reads
// it back as the same rule.
func (r Rule) String() string {
	src := func(re *regexp.Regexp, s string) string {
		if re == nil {
			return "*"
		}
		return s
	}
	return strings.Join([]string{
		resourceTypes.name(r.resourceType), src(r.name, r.nameSrc),
		operations.name(r.operation), permissions.name(r.permission),
		src(r.principal, r.principalSrc),
	}, ";")
}

// Match reports whether r selects a.
func (r Rule) Match(a state.ACL) bool {
	return (r.resourceType == anyValue || r.resourceType == a.ResourceType) &&
		(r.name == nil || r.name.MatchString(a.ResourceName)) &&
		(r.operation == anyValue || r.operation == a.Operation) &&
		(r.permission == anyValue || r.permission == a.Permission) &&
		(r.principal == nil || r.principal.MatchString(a.Principal))
}

// Filter returns the ACLs of acls that some rule matches, in their order.
// No rules means the default "*": every ACL.
func Filter(rules []Rule, acls []state.ACL) []state.ACL {
	if len(rules) == 0 {
		return slices.Clone(acls)
	}
	var out []state.ACL
	for _, a := range acls {
		for _, r := range rules {
			if r.Match(a) {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// Plan compares the source's bindings with this node's: add holds the
// source bindings that rules select and dest lacks, remove the dest
// bindings that the selected source set lacks. CLUSTER_MIRROR bindings
// are in neither (see the package doc). Both are sorted with
// state.CompareACLs and free of duplicates.
func Plan(source, dest []state.ACL, rules []Rule) (add, remove []state.ACL) {
	want := make(map[state.ACL]struct{})
	for _, a := range Filter(rules, source) {
		if a.ResourceType != state.ResourceClusterMirror {
			want[a] = struct{}{}
		}
	}
	have := make(map[state.ACL]struct{}, len(dest))
	for _, a := range dest {
		have[a] = struct{}{}
	}
	for a := range want {
		if _, ok := have[a]; !ok {
			add = append(add, a)
		}
	}
	for a := range have {
		if _, ok := want[a]; !ok && a.ResourceType != state.ResourceClusterMirror {
			remove = append(remove, a)
		}
	}
	slices.SortFunc(add, state.CompareACLs)
	slices.SortFunc(remove, state.CompareACLs)
	return add, remove
}

// Result counts what a sync did.
type Result struct {
	Added, Removed int
}

// allACLs is the DescribeAcls filter that lists every binding: any
// resource of any name and pattern, any operation, and any principal and
// host for both permissions (kadm folds those into one filter of
// permission ANY).
func allACLs() *kadm.ACLBuilder {
	return kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations().
		Allow().AllowHosts().Deny().DenyHosts()
}

// Sync makes this node's ACLs follow the source's once. Creation runs
// before deletion, and a failed creation does not stop the deletion: a
// right revoked at the source must go here even while some binding cannot
// be created (it then fails every sync until fixed at either end).
func Sync(ctx context.Context, src *kadm.Client, dst Dest, rules []Rule) (Result, error) {
	var res Result
	described, err := src.DescribeACLs(ctx, allACLs())
	if err == nil {
		for _, d := range described {
			if d.Err != nil {
				err = fmt.Errorf("%w: %s", d.Err, d.ErrMessage)
				break
			}
		}
	}
	switch {
	case errors.Is(err, kerr.SecurityDisabled):
		return res, nil
	case err != nil:
		return res, fmt.Errorf("describing source ACLs: %w", err)
	}
	var source []state.ACL
	for _, d := range described {
		for _, a := range d.Described {
			source = append(source, state.ACL{
				ResourceType: int8(a.Type),
				ResourceName: a.Name,
				PatternType:  int8(a.Pattern),
				Principal:    a.Principal,
				Host:         a.Host,
				Operation:    int8(a.Operation),
				Permission:   int8(a.Permission),
			})
		}
	}
	local, err := dst.ACLs()
	if err != nil {
		return res, fmt.Errorf("reading local ACLs: %w", err)
	}
	add, remove := Plan(source, local, rules)
	var errs []error
	if len(add) > 0 {
		if err := dst.CreateACLs(add); err != nil {
			errs = append(errs, fmt.Errorf("creating %d ACLs: %w", len(add), err))
		} else {
			res.Added = len(add)
		}
	}
	if len(remove) > 0 {
		if err := dst.DeleteACLs(remove); err != nil {
			errs = append(errs, fmt.Errorf("deleting %d ACLs: %w", len(remove), err))
		} else {
			res.Removed = len(remove)
		}
	}
	return res, errors.Join(errs...)
}
