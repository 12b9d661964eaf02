// Package acls syncs ACLs from a mirror's source to this node (SPEC.md
// section 6), so that after a failover the principals that used the
// source have the same rights here.
//
// Each sync lists the source's bindings with one DescribeAcls whose filter
// is ANY in every field (ReadSource), keeps those that a rule of
// acls.include selects, and brings this node in step (Apply): selected
// source bindings missing here are created, and bindings the sync created
// itself are deleted once the selected source set lacks them (a right
// revoked at the source is revoked here). The sync records each binding it
// creates (Dest.RecordSynced, persisted per mirror), so it never deletes
// a binding it did not create: one created on this node by hand stays,
// even when the source holds (and later revokes) the same binding. A
// recorded binding deleted here by hand is dropped from the record; if
// the source still has it, it is created (and recorded) again.
//
// Bindings on CLUSTER_MIRROR resources (type 8) are this node's own
// mirror administration and are left alone both ways: never deleted here,
// and never copied from a source, since a copy could never be removed
// again. A source with no authorizer answers SECURITY_DISABLED; the sync
// then does nothing and reports no error (SPEC.md: "security disabled ->
// skip").
//
// # Stopped topics
//
// After a failover this node owns the stopped topics, so the source no
// longer decides who may use them: a binding that grants or denies
// something on a stopped topic is frozen, neither created nor deleted by
// the sync (Apply's frozen argument, from control). A TOPIC binding covers
// a topic (CoversTopic) when it is LITERAL with the topic's name or the
// wildcard "*", or PREFIXED with a prefix of the name. So a prefixed or
// wildcard binding that also covers topics still mirrored is frozen as
// soon as one topic it covers is stopped: changing it would change the
// rights on the stopped topic, and an operator who failed over a topic
// expects its rights to stay as they were at the stop. Such a binding
// changed at the source after the stop must then be changed here by hand
// if wanted. Bindings on other resources (groups, the cluster,
// transactional ids) keep following the source while the mirror still
// mirrors a topic; once every topic of the mirror is stopped, control runs
// no ACL sync for it any more.
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
// aa?a?, as with every comma-list config. Narrowing acls.include deletes
// the recorded bindings it no longer selects.
//
// The package talks to the source with kadm and to this node through the
// Dest interface (control adapts the broker and the mirror's record); it
// runs on the control plane's loop, never on an event loop.
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

// Dest is this node, as the sync of one mirror sees it.
type Dest interface {
	// ACLs returns every binding here.
	ACLs() ([]state.ACL, error)
	// CreateACLs stores bindings; existing ones stay as they are.
	CreateACLs([]state.ACL) error
	// DeleteACLs deletes bindings; absent ones are ignored.
	DeleteACLs([]state.ACL) error
	// Synced returns the record: the bindings this sync created here and
	// has not deleted since. RecordSynced adds bindings to it,
	// ForgetSynced removes them; neither touches the bindings.
	Synced() ([]state.ACL, error)
	RecordSynced([]state.ACL) error
	ForgetSynced([]state.ACL) error
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

// Changes is what Plan decided. Each list is sorted with
// state.CompareACLs and free of duplicates.
type Changes struct {
	// Add: selected source bindings missing here and not frozen; they are
	// recorded and created.
	Add []state.ACL
	// Remove: recorded bindings still here that the selected source set
	// lacks, not frozen; they are deleted and forgotten.
	Remove []state.ACL
	// Forget: recorded bindings no longer here (deleted by hand); they
	// leave the record.
	Forget []state.ACL
}

// Plan compares the source's bindings with this node's and the record of
// those the sync created (synced). frozen, if not nil, names the bindings
// to leave as they are (see the package doc); CLUSTER_MIRROR bindings are
// never added or removed.
func Plan(source, dest, synced []state.ACL, rules []Rule, frozen func(state.ACL) bool) Changes {
	keep := func(a state.ACL) bool {
		return a.ResourceType != state.ResourceClusterMirror && (frozen == nil || !frozen(a))
	}
	want := make(map[state.ACL]struct{})
	for _, a := range Filter(rules, source) {
		want[a] = struct{}{}
	}
	have := make(map[state.ACL]struct{}, len(dest))
	for _, a := range dest {
		have[a] = struct{}{}
	}
	var ch Changes
	for a := range want {
		if _, ok := have[a]; !ok && keep(a) {
			ch.Add = append(ch.Add, a)
		}
	}
	seen := make(map[state.ACL]struct{}, len(synced))
	for _, a := range synced {
		if _, dup := seen[a]; dup {
			continue
		}
		seen[a] = struct{}{}
		_, here := have[a]
		_, wanted := want[a]
		switch {
		case !here:
			ch.Forget = append(ch.Forget, a)
		case !wanted && keep(a):
			ch.Remove = append(ch.Remove, a)
		}
	}
	for _, l := range [][]state.ACL{ch.Add, ch.Remove, ch.Forget} {
		slices.SortFunc(l, state.CompareACLs)
	}
	return ch
}

// CoversTopic reports whether binding a grants or denies something on
// topic: a TOPIC binding, LITERAL with the topic's name or "*", or
// PREFIXED with a prefix of it.
func CoversTopic(a state.ACL, topic string) bool {
	if a.ResourceType != int8(kmsg.ACLResourceTypeTopic) {
		return false
	}
	switch kmsg.ACLResourcePatternType(a.PatternType) {
	case kmsg.ACLResourcePatternTypeLiteral:
		return a.ResourceName == topic || a.ResourceName == "*"
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(topic, a.ResourceName)
	}
	return false
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

// ReadSource lists every binding of the source. ok is false, with no
// error, when the source has no authorizer (SECURITY_DISABLED): there is
// then nothing to sync, and nothing here may be removed for it.
func ReadSource(ctx context.Context, src *kadm.Client) (source []state.ACL, ok bool, err error) {
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
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("describing source ACLs: %w", err)
	}
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
	return source, true, nil
}

// Apply brings this node in step with the source's bindings once (see
// Plan). Each binding is recorded before it is created and forgotten only
// after it is deleted: a crash in between leaves a record of a binding
// absent here, which the next sync forgets or creates, never a binding
// created by the sync that it would not know to delete when the source
// revokes it. Creation runs before deletion, and a failed creation does
// not stop the deletion: a right revoked at the source must go here even
// while some binding cannot be created (it then fails every sync until
// fixed at either end).
func Apply(dst Dest, source []state.ACL, rules []Rule, frozen func(state.ACL) bool) (Result, error) {
	var res Result
	local, err := dst.ACLs()
	if err != nil {
		return res, fmt.Errorf("reading local ACLs: %w", err)
	}
	synced, err := dst.Synced()
	if err != nil {
		return res, fmt.Errorf("reading the synced ACLs record: %w", err)
	}
	ch := Plan(source, local, synced, rules, frozen)
	var errs []error
	if len(ch.Forget) > 0 {
		if err := dst.ForgetSynced(ch.Forget); err != nil {
			errs = append(errs, fmt.Errorf("forgetting %d ACLs deleted here: %w", len(ch.Forget), err))
		}
	}
	if len(ch.Add) > 0 {
		err := dst.RecordSynced(ch.Add)
		if err == nil {
			if err = dst.CreateACLs(ch.Add); err != nil {
				// Not created: forgotten again, so that one created by
				// hand later is not taken for the sync's.
				err = errors.Join(err, dst.ForgetSynced(ch.Add))
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("creating %d ACLs: %w", len(ch.Add), err))
		} else {
			res.Added = len(ch.Add)
		}
	}
	if len(ch.Remove) > 0 {
		err := dst.DeleteACLs(ch.Remove)
		if err == nil {
			err = dst.ForgetSynced(ch.Remove)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting %d ACLs: %w", len(ch.Remove), err))
		} else {
			res.Removed = len(ch.Remove)
		}
	}
	return res, errors.Join(errs...)
}
