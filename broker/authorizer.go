package broker

import (
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// Authorization (issue 10, SPEC.md section 7). With authorizer.class.name
// set (Config.Security.Authorizer) every request but ApiVersions and the
// SASL exchange is checked against the stored ACLs as Apache Kafka's
// StandardAuthorizer checks it; with it unset nothing is checked and no
// handler behaves differently.
//
// The decision (aclIndex.decide, authzCtx.check), in Kafka's order:
//   - a super user (super.users, exact principal match) may do anything;
//   - the bindings that apply to a resource are those of its type whose
//     pattern is LITERAL with the resource's name or "*", or PREFIXED with
//     a prefix of the name (the whole name included);
//   - of those, a binding matches a request when its principal is the
//     request's or User:*, its host the client's address or "*", and its
//     operation the one asked, or ALL. An ALLOW binding also grants the
//     implied operations: DESCRIBE by READ, WRITE, DELETE or ALTER, and
//     DESCRIBE_CONFIGS by ALTER_CONFIGS (a DENY binding denies only its own
//     operation, or everything for ALL);
//   - a matching DENY wins over any ALLOW; a matching ALLOW allows;
//   - bindings that apply to the resource but none that matches deny;
//   - no binding applies to the resource at all: the request is allowed
//     only with allow.everyone.if.no.acl.found (Security.AllowEveryoneIfNoACL).
//
// The ACLs live in state/ (acls.go); the authorizer reads them once into an
// immutable index (aclIndex) and keeps it until they change: every write
// of ACLs (CreateAcls, DeleteAcls and the Go API of acls.go) calls
// aclsChanged, which moves a generation counter on, and the next check
// rebuilds the index from the store. A check is then a few map lookups
// (exact name, "*", and one per distinct PREFIXED name length of the
// resource type) with no allocation: a Fetch never reaches Badger.
//
// Denials are logged at Info once per (principal, operation, resource), in
// a bounded set that starts over when full, not once per request.
//
// Locking: authorizer.loadMu is held while the index is rebuilt from the
// store; handlers take their authzCtx (which may rebuild) before
// Broker.adminMu, never under it. authorizer.deniedMu is a leaf.
//
// The handlers take one authzCtx per request (b.authz(r)) and ask it; the
// helpers below implement Kafka's per-API rules (KafkaApis, ControllerApis
// and, for the mirror RPCs, the KIP-1279 prototype) so that each handler's
// change stays a few lines. Error codes are Kafka's: TOPIC_, GROUP_,
// CLUSTER_ and TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and
// CLUSTER_MIRROR_AUTHORIZATION_FAILED (144) for the mirror RPCs.

// ACL enum values the authorizer asks about, as the int8 of state.ACL.
const (
	aclResourceTopic           = int8(kmsg.ACLResourceTypeTopic)
	aclResourceGroup           = int8(kmsg.ACLResourceTypeGroup)
	aclResourceTransactionalID = int8(kmsg.ACLResourceTypeTransactionalId)
	aclResourceClusterMirror   = state.ResourceClusterMirror

	aclOperationAll             = int8(kmsg.ACLOperationAll)
	aclOperationRead            = int8(kmsg.ACLOperationRead)
	aclOperationWrite           = int8(kmsg.ACLOperationWrite)
	aclOperationCreate          = int8(kmsg.ACLOperationCreate)
	aclOperationDelete          = int8(kmsg.ACLOperationDelete)
	aclOperationAlter           = int8(kmsg.ACLOperationAlter)
	aclOperationDescribe        = int8(kmsg.ACLOperationDescribe)
	aclOperationClusterAction   = int8(kmsg.ACLOperationClusterAction)
	aclOperationDescribeConfigs = int8(kmsg.ACLOperationDescribeConfigs)
	aclOperationAlterConfigs    = int8(kmsg.ACLOperationAlterConfigs)
	aclOperationIdempotentWrite = int8(kmsg.ACLOperationIdempotentWrite)

	// aclWildcardPrincipal is the principal of a binding that applies to
	// every principal (Kafka's WILDCARD_KAFKA_PRINCIPAL); aclWildcardHost
	// the host of one that applies to every host.
	aclWildcardPrincipal = "User:*"
	aclWildcardHost      = "*"
)

// The operations a resource type supports (Kafka's
// AclEntry.supportedOperations), for the authorized-operations bit fields
// of Metadata, DescribeCluster, DescribeGroups and DescribeClusterMirrors.
// Groups keep the three operations kmirror reports without an authorizer
// (group.allGroupOperations): it has no group configs.
var (
	topicOperations = []int8{aclOperationRead, aclOperationWrite, aclOperationCreate, aclOperationDescribe,
		aclOperationDelete, aclOperationAlter, aclOperationDescribeConfigs, aclOperationAlterConfigs}
	groupOperations       = []int8{aclOperationRead, aclOperationDescribe, aclOperationDelete}
	clusterOperationsList = []int8{aclOperationCreate, aclOperationClusterAction, aclOperationDescribeConfigs,
		aclOperationAlterConfigs, aclOperationIdempotentWrite, aclOperationAlter, aclOperationDescribe}
	clusterMirrorOperations = []int8{aclOperationCreate, aclOperationAlter, aclOperationDescribe, aclOperationDelete,
		aclOperationAlterConfigs, aclOperationDescribeConfigs}
)

// aclImplies reports whether an ALLOW binding for granted allows wanted.
func aclImplies(granted, wanted int8) bool {
	switch {
	case granted == wanted || granted == aclOperationAll:
		return true
	case wanted == aclOperationDescribe:
		return granted == aclOperationRead || granted == aclOperationWrite ||
			granted == aclOperationDelete || granted == aclOperationAlter
	case wanted == aclOperationDescribeConfigs:
		return granted == aclOperationAlterConfigs
	}
	return false
}

// aclEntry is one binding of a resource pattern, as the decision reads it.
type aclEntry struct {
	principal string
	host      string
	op        int8
	allow     bool
}

// aclEntriesSplitAt is the number of bindings past which a pattern's
// bindings are also split by principal: a resource shared by thousands of
// principals then costs two map lookups, not a scan.
const aclEntriesSplitAt = 16

// aclEntries are the bindings of one resource pattern.
type aclEntries struct {
	all         []aclEntry
	byPrincipal map[string][]aclEntry // nil below aclEntriesSplitAt
}

// aclIndex is an immutable snapshot of every ACL, indexed for decide:
// per resource type, the LITERAL and the PREFIXED patterns by name (maps
// keyed by a plain string take Go's fast string path).
type aclIndex struct {
	// gen is the authorizer generation the snapshot was read at.
	gen      uint64
	literal  [aclResourceClusterMirror + 1]map[string]*aclEntries
	prefixed [aclResourceClusterMirror + 1]map[string]*aclEntries
	// prefixLens are, per resource type, the distinct lengths of the
	// PREFIXED names, ascending: the prefixes of a name worth looking up.
	prefixLens [aclResourceClusterMirror + 1][]int
	// byType are the bindings of each resource type, for the rare
	// "any resource of this type" question (InitProducerId).
	byType [aclResourceClusterMirror + 1][]state.ACL
}

// newACLIndex indexes acls. The store only holds bindings that pass
// state.CheckACL, so every resource type is in range.
func newACLIndex(acls []state.ACL, gen uint64) *aclIndex {
	x := &aclIndex{gen: gen}
	for _, a := range acls {
		typ := a.ResourceType
		if typ < 0 || int(typ) >= len(x.byType) {
			continue
		}
		m := &x.literal[typ]
		if a.PatternType == aclPatternPrefixed {
			m = &x.prefixed[typ]
		}
		if *m == nil {
			*m = map[string]*aclEntries{}
		}
		es := (*m)[a.ResourceName]
		if es == nil {
			es = &aclEntries{}
			(*m)[a.ResourceName] = es
		}
		es.all = append(es.all, aclEntry{principal: a.Principal, host: aclHost(a.Host), op: a.Operation,
			allow: a.Permission == aclPermissionAllow})
		x.byType[typ] = append(x.byType[typ], a)
	}
	for typ := range x.byType {
		for _, m := range []map[string]*aclEntries{x.literal[typ], x.prefixed[typ]} {
			for _, es := range m {
				if len(es.all) > aclEntriesSplitAt {
					es.byPrincipal = make(map[string][]aclEntry)
					for _, e := range es.all {
						es.byPrincipal[e.principal] = append(es.byPrincipal[e.principal], e)
					}
				}
			}
		}
		for name := range x.prefixed[typ] {
			if !slices.Contains(x.prefixLens[typ], len(name)) {
				x.prefixLens[typ] = append(x.prefixLens[typ], len(name))
			}
		}
		slices.Sort(x.prefixLens[typ])
	}
	return x
}

// aclHost is a binding's host as requests name theirs: an IP address in
// Go's canonical form (an IPv6 ACL written out in full, as Java prints
// addresses, "0:0:0:0:0:0:0:1", matches a client at ::1), anything else
// as it is.
func aclHost(h string) string {
	if !strings.Contains(h, ":") {
		return h // "*", a name, or IPv4, whose forms do not vary
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.String()
	}
	return h
}

// aclVerdict is what the bindings say about one request.
type aclVerdict uint8

const (
	// verdictNoACL: no binding applies to the resource; the default
	// (allow.everyone.if.no.acl.found) decides.
	verdictNoACL aclVerdict = iota
	// verdictNoMatch: bindings apply to the resource but none matches the
	// principal, host and operation: denied.
	verdictNoMatch
	verdictAllow
	verdictDeny
)

// aclScan accumulates one decision over the patterns that apply.
type aclScan struct {
	principal, host string
	op              int8
	found           bool // some binding applies to the resource
	allowed         bool
	denied          bool
}

func (s *aclScan) pattern(es *aclEntries) {
	if es == nil || s.denied {
		return
	}
	s.found = true
	if es.byPrincipal == nil {
		s.entries(es.all)
		return
	}
	s.entries(es.byPrincipal[s.principal])
	if s.principal != aclWildcardPrincipal {
		s.entries(es.byPrincipal[aclWildcardPrincipal])
	}
}

func (s *aclScan) entries(list []aclEntry) {
	for i := range list {
		e := &list[i]
		if e.principal != s.principal && e.principal != aclWildcardPrincipal {
			continue
		}
		if e.host != aclWildcardHost && e.host != s.host {
			continue
		}
		switch {
		case e.allow:
			if aclImplies(e.op, s.op) {
				s.allowed = true
			}
		case e.op == s.op || e.op == aclOperationAll:
			s.denied = true
			return
		}
	}
}

// decide applies the bindings to one request: principal, from host, asks
// for op on the resource typ/name.
func (x *aclIndex) decide(principal, host string, op, typ int8, name string) aclVerdict {
	if typ < 0 || int(typ) >= len(x.byType) {
		return verdictNoACL
	}
	s := aclScan{principal: principal, host: host, op: op}
	if literal := x.literal[typ]; literal != nil {
		s.pattern(literal[name])
		if name != aclWildcard {
			s.pattern(literal[aclWildcard])
		}
	}
	prefixed := x.prefixed[typ]
	for _, n := range x.prefixLens[typ] {
		if n > len(name) || s.denied {
			break
		}
		s.pattern(prefixed[name[:n]])
	}
	switch {
	case s.denied:
		return verdictDeny
	case s.allowed:
		return verdictAllow
	case s.found:
		return verdictNoMatch
	}
	return verdictNoACL
}

// anyAllowed answers Kafka's authorizeByResourceType (the default method of
// its Authorizer interface, which StandardAuthorizer keeps) past its
// super-user step: whether some resource of type typ could be allowed op,
// looking at the ALLOW bindings the DENY bindings do not cover. Only
// exact operations and ALL count here, no implied ones, as in Kafka.
func (x *aclIndex) anyAllowed(principal, host string, op, typ int8) bool {
	if typ < 0 || int(typ) >= len(x.byType) {
		return false
	}
	var denyLiteral, denyPrefix, allowLiteral, allowPrefix map[string]bool
	add := func(m *map[string]bool, name string) {
		if *m == nil {
			*m = map[string]bool{}
		}
		(*m)[name] = true
	}
	wildcardAllow := false
	for _, a := range x.byType[typ] {
		switch {
		case a.Host != aclWildcardHost && aclHost(a.Host) != host,
			a.Principal != principal && a.Principal != aclWildcardPrincipal,
			a.Operation != op && a.Operation != aclOperationAll:
			continue
		}
		literal := a.PatternType == aclPatternLiteral
		switch {
		case a.Permission == aclPermissionDeny && literal && a.ResourceName == aclWildcard:
			return false
		case a.Permission == aclPermissionDeny && literal:
			add(&denyLiteral, a.ResourceName)
		case a.Permission == aclPermissionDeny:
			add(&denyPrefix, a.ResourceName)
		case literal && a.ResourceName == aclWildcard:
			wildcardAllow = true
		case literal:
			add(&allowLiteral, a.ResourceName)
		default:
			add(&allowPrefix, a.ResourceName)
		}
	}
	if wildcardAllow {
		return true
	}
	coveredByDenyPrefix := func(name string) bool {
		for i := 1; i <= len(name); i++ {
			if denyPrefix[name[:i]] {
				return true
			}
		}
		return false
	}
	for name := range allowLiteral {
		if !denyLiteral[name] && !coveredByDenyPrefix(name) {
			return true
		}
	}
	for name := range allowPrefix {
		if !coveredByDenyPrefix(name) {
			return true
		}
	}
	return false
}

// authorizer is a broker's authorization state: its settings, the ACL
// index and the denials already logged.
type authorizer struct {
	superUsers   map[string]bool
	allowIfNoACL bool

	// gen moves on at every ACL change; an index of an older generation is
	// rebuilt before use. loadMu makes one request rebuild it while the
	// others wait for the result.
	gen    atomic.Uint64
	idx    atomic.Pointer[aclIndex]
	loadMu sync.Mutex
	// loadFailLogged is when a failed rebuild was last logged (unix ns).
	loadFailLogged atomic.Int64

	deniedMu sync.Mutex
	denied   map[aclDenial]struct{}

	// testPrincipal is a test seam, nil in production: when set, it names
	// the principal of every request from the client's remote address
	// (host:port) instead of the connection's authenticated principal, so
	// that tests can act as several principals before SASL exists. Only
	// the tests of this package set it (setTestPrincipal).
	testPrincipal atomic.Pointer[func(remoteAddr string) string]
}

// aclDenial is a denial as the log reports it once.
type aclDenial struct {
	principal string
	op, typ   int8
	name      string
}

// maxLoggedDenials bounds the set of denials already logged; when it is
// full the set starts over, so a denial is logged again at most once per
// that many distinct others.
const maxLoggedDenials = 4096

// aclLoadFailLogEvery rate-limits the log of a failing index rebuild (a
// store that cannot be read fails every request's rebuild).
const aclLoadFailLogEvery = 10 * time.Second

func newAuthorizer(sec Security) *authorizer {
	a := &authorizer{superUsers: make(map[string]bool, len(sec.SuperUsers)),
		allowIfNoACL: sec.AllowEveryoneIfNoACL, denied: map[aclDenial]struct{}{}}
	for _, u := range sec.SuperUsers {
		if u = strings.TrimSpace(u); u != "" {
			a.superUsers[u] = true
		}
	}
	return a
}

// authorizer returns b's authorizer, made in New. A Broker built without
// New (unit tests of single handlers) gets one at first use.
func (b *Broker) authorizer() *authorizer {
	if a := b.authzState.Load(); a != nil {
		return a
	}
	b.authzState.CompareAndSwap(nil, newAuthorizer(b.cfg.Security))
	return b.authzState.Load()
}

// aclsChanged drops the cached ACL index: every write of ACLs calls it once
// the write is done (or failed), so the next check reads the store again.
func (b *Broker) aclsChanged() {
	if a := b.authzState.Load(); a != nil {
		a.gen.Add(1)
	}
}

// index returns the current ACL index, rebuilding it from the store when
// the ACLs changed since it was built; nil when the store cannot be read
// (every check then denies).
//
// Why the generation is read before the store: a change bumps gen after
// its write commits. If this read of gen sees the old value, the index
// built may miss the change but carries the old generation, so the next
// check rebuilds it; if it sees the new value, the store read that follows
// sees the write.
func (a *authorizer) index(b *Broker) *aclIndex {
	gen := a.gen.Load()
	if x := a.idx.Load(); x != nil && x.gen == gen {
		return x
	}
	a.loadMu.Lock()
	defer a.loadMu.Unlock()
	gen = a.gen.Load()
	if x := a.idx.Load(); x != nil && x.gen == gen {
		return x
	}
	acls, err := b.store.ACLs()
	if err != nil {
		now := time.Now().UnixNano()
		if last := a.loadFailLogged.Load(); now-last >= int64(aclLoadFailLogEvery) && a.loadFailLogged.CompareAndSwap(last, now) {
			b.log.Error("reading ACLs for authorization failed: every request is denied", "err", err)
		}
		return nil
	}
	x := newACLIndex(acls, gen)
	a.idx.Store(x)
	return x
}

// principalOf is who sent r: the connection's principal, or the test
// seam's answer when a test set one. A forwarded request's principal is
// the one its Envelope names, never the seam's (which would name the
// forwarding node's connection).
func (a *authorizer) principalOf(r *request) string {
	if f := a.testPrincipal.Load(); f != nil && r.fwd == nil {
		return (*f)(r.conn.RemoteAddr())
	}
	return r.principal()
}

// logDenial logs a denial the first time it is seen.
func (a *authorizer) logDenial(b *Broker, r *request, principal, host string, op, typ int8, name string) {
	k := aclDenial{principal: principal, op: op, typ: typ, name: name}
	a.deniedMu.Lock()
	_, seen := a.denied[k]
	if !seen {
		if len(a.denied) >= maxLoggedDenials {
			clear(a.denied)
		}
		a.denied[k] = struct{}{}
	}
	a.deniedMu.Unlock()
	if seen {
		return
	}
	api := ""
	if r != nil {
		api = nameForKey(r.hdr.Key)
	}
	b.log.Info("authorization denied", "principal", principal, "host", host, "operation", kmsg.ACLOperation(op).String(),
		"resource_type", aclResourceTypeName(typ), "resource_name", name, "api", api)
}

// authzCtx is one request's authorization: who asks, from where, and the
// ACL index of the moment. The zero value (authorization off) allows
// everything. Build it with b.authz(r), once per request.
type authzCtx struct {
	b         *Broker
	r         *request
	a         *authorizer // nil when authorization is off
	idx       *aclIndex   // nil for a super user, or when the store cannot be read
	principal string
	host      string
	super     bool
}

// authz returns r's authorization context.
func (b *Broker) authz(r *request) authzCtx {
	if !b.cfg.Security.Authorizer {
		return authzCtx{}
	}
	a := b.authorizer()
	c := authzCtx{b: b, r: r, a: a, principal: a.principalOf(r), host: r.host()}
	if a.superUsers[c.principal] {
		c.super = true
		return c
	}
	c.idx = a.index(b)
	return c
}

// on reports whether requests are checked at all.
func (c *authzCtx) on() bool { return c.a != nil }

// check decides one action; a denial is logged when logDenied, as Kafka's
// logIfDenied (off for the checks that only filter what a listing shows).
func (c *authzCtx) check(op, typ int8, name string, logDenied bool) bool {
	if c.a == nil || c.super {
		return true
	}
	ok := false
	if c.idx != nil {
		switch c.idx.decide(c.principal, c.host, op, typ, name) {
		case verdictAllow:
			ok = true
		case verdictNoACL:
			ok = c.a.allowIfNoACL
		}
	}
	if !ok && logDenied {
		c.a.logDenial(c.b, c.r, c.principal, c.host, op, typ, name)
	}
	return ok
}

// Shorthands for the resource types the handlers ask about. The *Quietly
// forms do not log a denial.
func (c *authzCtx) topic(op int8, name string) bool { return c.check(op, aclResourceTopic, name, true) }
func (c *authzCtx) topicQuietly(op int8, name string) bool {
	return c.check(op, aclResourceTopic, name, false)
}
func (c *authzCtx) group(op int8, name string) bool { return c.check(op, aclResourceGroup, name, true) }
func (c *authzCtx) groupQuietly(op int8, name string) bool {
	return c.check(op, aclResourceGroup, name, false)
}
func (c *authzCtx) cluster(op int8) bool {
	return c.check(op, aclResourceCluster, clusterResourceName, true)
}
func (c *authzCtx) clusterQuietly(op int8) bool {
	return c.check(op, aclResourceCluster, clusterResourceName, false)
}
func (c *authzCtx) mirror(op int8, name string) bool {
	return c.check(op, aclResourceClusterMirror, name, true)
}

// anyResource is Kafka's authorizeByResourceType: whether op is allowed on
// some resource of type typ. As Kafka's default implementation, it first
// asks about a resource named "hardcode", which lets super users through
// and, with allow.everyone.if.no.acl.found, anyone when no binding applies
// to that name.
func (c *authzCtx) anyResource(op, typ int8) bool {
	if c.a == nil || c.super || c.check(op, typ, "hardcode", false) {
		return true
	}
	return c.idx != nil && c.idx.anyAllowed(c.principal, c.host, op, typ)
}

// operations is the authorized-operations bit field of a resource: one bit
// per operation of ops that is allowed. REQUIRES: c.on().
func (c *authzCtx) operations(typ int8, name string, ops []int8) int32 {
	var bits int32
	for _, op := range ops {
		if c.check(op, typ, name, false) {
			bits |= 1 << op
		}
	}
	return bits
}

// authorizedOperationsOmitted is Kafka's "not asked for" value of the
// authorized-operations fields.
const authorizedOperationsOmitted = math.MinInt32
