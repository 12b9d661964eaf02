package broker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// Short names for the enum values the tests use.
const (
	resTopic   = kmsg.ACLResourceTypeTopic
	resGroup   = kmsg.ACLResourceTypeGroup
	resCluster = kmsg.ACLResourceTypeCluster
	resUser    = kmsg.ACLResourceTypeUser
	resMirror  = kmsg.ACLResourceType(state.ResourceClusterMirror)
	resAny     = kmsg.ACLResourceTypeAny
	patLiteral = kmsg.ACLResourcePatternTypeLiteral
	patPrefix  = kmsg.ACLResourcePatternTypePrefixed
	patMatch   = kmsg.ACLResourcePatternTypeMatch
	patAny     = kmsg.ACLResourcePatternTypeAny
	opRead     = kmsg.ACLOperationRead
	opWrite    = kmsg.ACLOperationWrite
	opAlter    = kmsg.ACLOperationAlter
	opDescribe = kmsg.ACLOperationDescribe
	opAny      = kmsg.ACLOperationAny
	allow      = kmsg.ACLPermissionTypeAllow
	deny       = kmsg.ACLPermissionTypeDeny
	permAny    = kmsg.ACLPermissionTypeAny
)

func aclOf(typ kmsg.ACLResourceType, name string, pat kmsg.ACLResourcePatternType, principal, host string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) state.ACL {
	return state.ACL{ResourceType: int8(typ), ResourceName: name, PatternType: int8(pat),
		Principal: principal, Host: host, Operation: int8(op), Permission: int8(perm)}
}

// The fixture the filter tests run against.
var (
	aliceReadOrders  = aclOf(resTopic, "orders", patLiteral, "User:alice", "*", opRead, allow)
	aliceWriteOrders = aclOf(resTopic, "orders", patLiteral, "User:alice", "*", opWrite, allow)
	bobReadOrd       = aclOf(resTopic, "ord", patPrefix, "User:bob", "*", opRead, allow)
	carolAnyTopic    = aclOf(resTopic, "*", patLiteral, "User:carol", "*", opDescribe, allow)
	aliceDenyGroup   = aclOf(resGroup, "g", patLiteral, "User:alice", "10.0.0.1", opRead, deny)
	adminCluster     = aclOf(resCluster, "kafka-cluster", patLiteral, "User:admin", "*", opAlter, allow)
	opsMirror        = aclOf(resMirror, "east", patLiteral, "User:ops", "*", opAlter, allow)
	fixtureACLs      = []state.ACL{aliceReadOrders, aliceWriteOrders, bobReadOrd, carolAnyTopic,
		aliceDenyGroup, adminCluster, opsMirror}
)

func creationOf(a state.ACL) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType = kmsg.ACLResourceType(a.ResourceType)
	c.ResourceName = a.ResourceName
	c.ResourcePatternType = kmsg.ACLResourcePatternType(a.PatternType)
	c.Principal, c.Host = a.Principal, a.Host
	c.Operation = kmsg.ACLOperation(a.Operation)
	c.PermissionType = kmsg.ACLPermissionType(a.Permission)
	return c
}

// createACLs creates acls with one CreateAcls request and fails the test
// on any error.
func createACLs(t *testing.T, cl *kgo.Client, acls ...state.ACL) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		req.Creations = append(req.Creations, creationOf(a))
	}
	resp, err := req.RequestWith(adminCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("creating %v: error %d %v", acls[i], r.ErrorCode, r.ErrorMessage)
		}
	}
}

// aclFilterSpec is a filter as the tests write it: nil strings match any.
type aclFilterSpec struct {
	typ       kmsg.ACLResourceType
	name      *string
	pat       kmsg.ACLResourcePatternType
	principal *string
	host      *string
	op        kmsg.ACLOperation
	perm      kmsg.ACLPermissionType
}

// anyFilter matches everything; tests change one field.
func anyFilter() aclFilterSpec {
	return aclFilterSpec{typ: resAny, pat: patAny, op: opAny, perm: permAny}
}

func (f aclFilterSpec) describe(v int16) *kmsg.DescribeACLsRequest {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.Version = v
	req.ResourceType, req.ResourceName, req.ResourcePatternType = f.typ, f.name, f.pat
	req.Principal, req.Host, req.Operation, req.PermissionType = f.principal, f.host, f.op, f.perm
	return req
}

func (f aclFilterSpec) deletion() kmsg.DeleteACLsRequestFilter {
	d := kmsg.NewDeleteACLsRequestFilter()
	d.ResourceType, d.ResourceName, d.ResourcePatternType = f.typ, f.name, f.pat
	d.Principal, d.Host, d.Operation, d.PermissionType = f.principal, f.host, f.op, f.perm
	return d
}

// describedACLs flattens a DescribeAcls response in its order.
func describedACLs(resp *kmsg.DescribeACLsResponse) []state.ACL {
	var out []state.ACL
	for _, r := range resp.Resources {
		for _, e := range r.ACLs {
			out = append(out, aclOf(r.ResourceType, r.ResourceName, r.ResourcePatternType,
				e.Principal, e.Host, e.Operation, e.PermissionType))
		}
	}
	return out
}

func deletedACLs(r kmsg.DeleteACLsResponseResult) []state.ACL {
	var out []state.ACL
	for _, m := range r.MatchingACLs {
		out = append(out, aclOf(m.ResourceType, m.ResourceName, m.ResourcePatternType,
			m.Principal, m.Host, m.Operation, m.PermissionType))
	}
	return out
}

// describe runs f as a v3 DescribeAcls and returns the bindings listed.
func describe(t *testing.T, cl *kgo.Client, f aclFilterSpec) []state.ACL {
	t.Helper()
	resp, err := f.describe(3).RequestWith(adminCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("describing %+v: error %d", f, resp.ErrorCode)
	}
	return describedACLs(resp)
}

func sortedCopy(acls []state.ACL) []state.ACL {
	out := slices.Clone(acls)
	slices.SortFunc(out, state.CompareACLs)
	return out
}

func wantACLs(t *testing.T, what string, got, want []state.ACL) {
	t.Helper()
	if want = sortedCopy(want); !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func TestDescribeACLsFilters(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	cl, _ := adminClient(t, b)
	createACLs(t, cl, fixtureACLs...)

	str := kmsg.StringPtr
	with := func(f func(*aclFilterSpec)) aclFilterSpec { s := anyFilter(); f(&s); return s }
	topics := []state.ACL{aliceReadOrders, aliceWriteOrders, bobReadOrd, carolAnyTopic}
	for _, tc := range []struct {
		name   string
		filter aclFilterSpec
		want   []state.ACL
	}{
		{"any", anyFilter(), fixtureACLs},
		{"topics", with(func(f *aclFilterSpec) { f.typ = resTopic }), topics},
		{"cluster mirror", with(func(f *aclFilterSpec) { f.typ = resMirror }), []state.ACL{opsMirror}},
		{"user type", with(func(f *aclFilterSpec) { f.typ = resUser }), nil},
		{"match orders", with(func(f *aclFilterSpec) { f.typ, f.pat, f.name = resTopic, patMatch, str("orders") }), topics},
		{"match any type", with(func(f *aclFilterSpec) { f.pat, f.name = patMatch, str("orders") }), topics},
		{"match by prefix and wildcard", with(func(f *aclFilterSpec) { f.pat, f.name = patMatch, str("ord-1") }),
			[]state.ACL{bobReadOrd, carolAnyTopic}},
		{"match prefix itself", with(func(f *aclFilterSpec) { f.pat, f.name = patMatch, str("ord") }),
			[]state.ACL{bobReadOrd, carolAnyTopic}},
		{"match wildcard only", with(func(f *aclFilterSpec) { f.typ, f.pat, f.name = resTopic, patMatch, str("other") }),
			[]state.ACL{carolAnyTopic}},
		{"match without name", with(func(f *aclFilterSpec) { f.typ, f.pat = resTopic, patMatch }), topics},
		{"match group", with(func(f *aclFilterSpec) { f.typ, f.pat, f.name = resGroup, patMatch, str("g") }),
			[]state.ACL{aliceDenyGroup}},
		{"match any type takes every type's wildcard", with(func(f *aclFilterSpec) { f.pat, f.name = patMatch, str("g") }),
			[]state.ACL{aliceDenyGroup, carolAnyTopic}},
		{"literal orders", with(func(f *aclFilterSpec) { f.pat, f.name = patLiteral, str("orders") }),
			[]state.ACL{aliceReadOrders, aliceWriteOrders}},
		{"literal is exact", with(func(f *aclFilterSpec) { f.pat, f.name = patLiteral, str("ord") }), nil},
		{"literal wildcard name", with(func(f *aclFilterSpec) { f.pat, f.name = patLiteral, str("*") }),
			[]state.ACL{carolAnyTopic}},
		{"literal without name", with(func(f *aclFilterSpec) { f.pat = patLiteral }),
			[]state.ACL{aliceReadOrders, aliceWriteOrders, carolAnyTopic, aliceDenyGroup, adminCluster, opsMirror}},
		{"prefixed", with(func(f *aclFilterSpec) { f.pat, f.name = patPrefix, str("ord") }), []state.ACL{bobReadOrd}},
		{"prefixed is exact", with(func(f *aclFilterSpec) { f.pat, f.name = patPrefix, str("orders") }), nil},
		{"any pattern exact name", with(func(f *aclFilterSpec) { f.name = str("ord") }), []state.ACL{bobReadOrd}},
		{"principal", with(func(f *aclFilterSpec) { f.principal = str("User:alice") }),
			[]state.ACL{aliceReadOrders, aliceWriteOrders, aliceDenyGroup}},
		{"principal is exact", with(func(f *aclFilterSpec) { f.principal = str("User:ali") }), nil},
		{"host", with(func(f *aclFilterSpec) { f.host = str("10.0.0.1") }), []state.ACL{aliceDenyGroup}},
		{"operation", with(func(f *aclFilterSpec) { f.op = opWrite }), []state.ACL{aliceWriteOrders}},
		{"permission", with(func(f *aclFilterSpec) { f.perm = deny }), []state.ACL{aliceDenyGroup}},
		{"everything at once", aclFilterSpec{typ: resTopic, name: str("orders"), pat: patMatch,
			principal: str("User:bob"), host: str("*"), op: opRead, perm: allow}, []state.ACL{bobReadOrd}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantACLs(t, "described", describe(t, cl, tc.filter), tc.want)
		})
	}

	// Bindings are grouped by resource pattern, resources sorted.
	resp, err := anyFilter().describe(3).RequestWith(adminCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range resp.Resources {
		names = append(names, fmt.Sprintf("%s/%s/%s:%d", aclResourceTypeName(int8(r.ResourceType)),
			r.ResourceName, r.ResourcePatternType, len(r.ACLs)))
	}
	want := []string{"TOPIC/*/LITERAL:1", "TOPIC/ord/PREFIXED:1", "TOPIC/orders/LITERAL:2", "GROUP/g/LITERAL:1",
		"CLUSTER/kafka-cluster/LITERAL:1", "CLUSTER_MIRROR/east/LITERAL:1"}
	if !slices.Equal(names, want) {
		t.Fatalf("resources %q, want %q", names, want)
	}
}

func TestDeleteACLsFilters(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	cl, _ := adminClient(t, b)
	createACLs(t, cl, fixtureACLs...)

	str := kmsg.StringPtr
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, f := range []aclFilterSpec{
		// MATCH in a delete filter: what applies to topic orders, of bob.
		{typ: resTopic, name: str("orders"), pat: patMatch, principal: str("User:bob"), op: opAny, perm: permAny},
		// Alice's literal orders bindings, and again one of them.
		{typ: resTopic, name: str("orders"), pat: patLiteral, op: opAny, perm: permAny},
		{typ: resTopic, name: str("orders"), pat: patLiteral, op: opWrite, perm: allow},
		// Invalid: answered alone, the others still run.
		{typ: kmsg.ACLResourceTypeUnknown, pat: patAny, op: opAny, perm: permAny},
		// Matches nothing.
		{typ: resGroup, name: str("nope"), pat: patAny, op: opAny, perm: permAny},
	} {
		req.Filters = append(req.Filters, f.deletion())
	}
	resp, err := req.RequestWith(adminCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != 5 {
		t.Fatalf("%d results to 5 filters", len(resp.Results))
	}
	for i, want := range [][]state.ACL{
		{bobReadOrd},
		{aliceReadOrders, aliceWriteOrders},
		{aliceWriteOrders}, // listed twice: filters match the bindings as they were
		nil,
		nil,
	} {
		r := resp.Results[i]
		wantCode := int16(0)
		if i == 3 {
			wantCode = kerr.InvalidRequest.Code
		}
		if r.ErrorCode != wantCode {
			t.Fatalf("filter %d: error %d, want %d", i, r.ErrorCode, wantCode)
		}
		wantACLs(t, fmt.Sprintf("filter %d deleted", i), deletedACLs(r), want)
	}
	wantACLs(t, "left", describe(t, cl, anyFilter()),
		[]state.ACL{carolAnyTopic, aliceDenyGroup, adminCluster, opsMirror})

	// Deleting what is gone lists nothing.
	again := kmsg.NewPtrDeleteACLsRequest()
	again.Filters = []kmsg.DeleteACLsRequestFilter{req.Filters[1]}
	resp, err = again.RequestWith(adminCtx(t), cl)
	if err != nil || resp.Results[0].ErrorCode != 0 || len(resp.Results[0].MatchingACLs) != 0 {
		t.Fatalf("second delete: %+v, %v", resp, err)
	}
}

// TestACLsKadm drives the three APIs through kadm's builder, the way
// admin tools and the mirror sync call them.
func TestACLsKadm(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	ctx := adminCtx(t)
	_, adm := adminClient(t, b)

	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("t1", "t2").Allow("User:x").
		Operations(kadm.OpRead, kadm.OpWrite))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range created {
		if c.Err != nil {
			t.Fatalf("creating %+v: %v %s", c, c.Err, c.ErrMessage)
		}
	}
	if len(created) != 4 {
		t.Fatalf("%d results, want 4", len(created))
	}
	prefixed, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("t").Deny("User:y").
		Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternPrefixed))
	if err != nil || len(prefixed) != 1 || prefixed[0].Err != nil {
		t.Fatalf("creating a prefixed ACL: %+v, %v", prefixed, err)
	}

	t1 := kadm.NewACLs().Topics("t1").Allow().AllowHosts().Operations()
	described, err := adm.DescribeACLs(ctx, t1)
	if err != nil || len(described) != 1 || described[0].Err != nil || len(described[0].Described) != 2 {
		t.Fatalf("describing t1: %+v, %v", described, err)
	}
	matched, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics("t1").Allow().AllowHosts().Deny().DenyHosts().
		Operations().ResourcePatternType(kadm.ACLPatternMatch))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range matched {
		n += len(d.Described)
	}
	if n != 3 { // t1's two and the PREFIXED t deny
		t.Fatalf("MATCH t1 listed %d bindings, want 3: %+v", n, matched)
	}

	deleted, err := adm.DeleteACLs(ctx, t1)
	if err != nil || len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 2 {
		t.Fatalf("deleting t1: %+v, %v", deleted, err)
	}
	left, err := b.ACLs()
	if err != nil {
		t.Fatal(err)
	}
	wantACLs(t, "left", left, []state.ACL{
		aclOf(resTopic, "t2", patLiteral, "User:x", "*", opRead, allow),
		aclOf(resTopic, "t2", patLiteral, "User:x", "*", opWrite, allow),
		aclOf(resTopic, "t", patPrefix, "User:y", "*", kmsg.ACLOperationAll, deny),
	})
}

func TestCreateACLsValidation(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	cl, _ := adminClient(t, b)

	good := aliceReadOrders
	with := func(f func(*state.ACL)) state.ACL { a := good; f(&a); return a }
	tests := []struct {
		name string
		acl  state.ACL
		ok   bool
	}{
		{"valid", good, true},
		{"prefixed star", with(func(a *state.ACL) { a.ResourceName, a.PatternType = "*", int8(patPrefix) }), true},
		{"cluster mirror", opsMirror, true},
		{"user resource", with(func(a *state.ACL) { a.ResourceType, a.ResourceName = int8(resUser), "User:bob" }), true},
		{"cluster", adminCluster, true},
		{"empty principal name", with(func(a *state.ACL) { a.Principal = "User:" }), true},
		{"unknown resource type", with(func(a *state.ACL) { a.ResourceType = 0 }), false},
		{"any resource type", with(func(a *state.ACL) { a.ResourceType = int8(resAny) }), false},
		{"undefined resource type", with(func(a *state.ACL) { a.ResourceType = 9 }), false},
		{"unknown pattern", with(func(a *state.ACL) { a.PatternType = 0 }), false},
		{"any pattern", with(func(a *state.ACL) { a.PatternType = int8(patAny) }), false},
		{"match pattern", with(func(a *state.ACL) { a.PatternType = int8(patMatch) }), false},
		{"unknown operation", with(func(a *state.ACL) { a.Operation = 0 }), false},
		{"any operation", with(func(a *state.ACL) { a.Operation = int8(opAny) }), false},
		{"undefined operation", with(func(a *state.ACL) { a.Operation = 15 }), false},
		{"unknown permission", with(func(a *state.ACL) { a.Permission = 0 }), false},
		{"any permission", with(func(a *state.ACL) { a.Permission = int8(permAny) }), false},
		{"empty name", with(func(a *state.ACL) { a.ResourceName = "" }), false},
		{"cluster named otherwise", with(func(a *state.ACL) {
			a.ResourceType, a.ResourceName = int8(resCluster), "my-cluster"
		}), false},
		{"principal without type", with(func(a *state.ACL) { a.Principal = "alice" }), false},
		{"empty principal", with(func(a *state.ACL) { a.Principal = "" }), false},
		{"empty host", with(func(a *state.ACL) { a.Host = "" }), false},
		{"too large for a key", with(func(a *state.ACL) { a.ResourceName = strings.Repeat("n", 70000) }), false},
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, tc := range tests {
		req.Creations = append(req.Creations, creationOf(tc.acl))
	}
	resp, err := req.RequestWith(adminCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	var stored []state.ACL
	for i, tc := range tests {
		r := resp.Results[i]
		switch {
		case tc.ok && r.ErrorCode != 0:
			t.Errorf("%s: error %d %s", tc.name, r.ErrorCode, *r.ErrorMessage)
		case !tc.ok && r.ErrorCode != kerr.InvalidRequest.Code:
			t.Errorf("%s: error %d, want INVALID_REQUEST", tc.name, r.ErrorCode)
		case !tc.ok && (r.ErrorMessage == nil || *r.ErrorMessage == ""):
			t.Errorf("%s: no error message", tc.name)
		}
		if tc.ok {
			stored = append(stored, tc.acl)
		}
	}
	got, err := b.ACLs()
	if err != nil {
		t.Fatal(err)
	}
	wantACLs(t, "stored", got, stored)
}

func TestACLRequestLimits(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	cl, _ := adminClient(t, b)

	// One valid binding past Kafka's per-operation bound fails all of
	// them; the invalid one keeps its own answer.
	req := kmsg.NewPtrCreateACLsRequest()
	for i := range adminOpMaxRecords + 1 {
		req.Creations = append(req.Creations, creationOf(aclOf(resTopic, fmt.Sprintf("t%d", i), patLiteral,
			"User:a", "*", opRead, allow)))
	}
	req.Creations = append(req.Creations, creationOf(aclOf(resTopic, "", patLiteral, "User:a", "*", opRead, allow)))
	resp, err := req.RequestWith(adminCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range resp.Results {
		want := kerr.PolicyViolation.Code
		if i == adminOpMaxRecords+1 {
			want = kerr.InvalidRequest.Code
		}
		if r.ErrorCode != want {
			t.Fatalf("creation %d: error %d, want %d", i, r.ErrorCode, want)
		}
	}
	if got, err := b.ACLs(); err != nil || len(got) != 0 {
		t.Fatalf("stored %d ACLs, %v", len(got), err)
	}

	// An invalid describe filter fails the whole response.
	for _, f := range []aclFilterSpec{
		{typ: kmsg.ACLResourceTypeUnknown, pat: patAny, op: opAny, perm: permAny},
		{typ: 9, pat: patAny, op: opAny, perm: permAny},
		{typ: resAny, pat: kmsg.ACLResourcePatternTypeUnknown, op: opAny, perm: permAny},
		{typ: resAny, pat: 5, op: opAny, perm: permAny},
		{typ: resAny, pat: patAny, op: kmsg.ACLOperationUnknown, perm: permAny},
		{typ: resAny, pat: patAny, op: 15, perm: permAny},
		{typ: resAny, pat: patAny, op: opAny, perm: kmsg.ACLPermissionTypeUnknown},
		{typ: resAny, pat: patAny, op: opAny, perm: 4},
	} {
		resp, err := f.describe(3).RequestWith(adminCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != kerr.InvalidRequest.Code || resp.ErrorMessage == nil || len(resp.Resources) != 0 {
			t.Fatalf("filter %+v: error %d, %d resources", f, resp.ErrorCode, len(resp.Resources))
		}
	}
}

// TestACLsV0 sends v0 requests, which have no pattern type: creations are
// LITERAL whatever the client set, and v0 filters select LITERAL
// bindings only.
func TestACLsV0(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	cl, _ := adminClient(t, b)
	rc := dialRaw(t, b)
	prefixed := aclOf(resTopic, "p", patPrefix, "User:a", "*", opRead, allow)
	createACLs(t, cl, prefixed)

	create := kmsg.NewPtrCreateACLsRequest()
	create.Version = 0
	c := creationOf(aclOf(resTopic, "v0", patPrefix, "User:a", "*", opRead, allow)) // not on the wire
	create.Creations = append(create.Creations, c)
	cresp := rc.roundTrip(create).(*kmsg.CreateACLsResponse)
	if len(cresp.Results) != 1 || cresp.Results[0].ErrorCode != 0 {
		t.Fatalf("v0 create: %+v", cresp)
	}
	v0 := aclOf(resTopic, "v0", patLiteral, "User:a", "*", opRead, allow)
	wantACLs(t, "after the v0 create", describe(t, cl, anyFilter()), []state.ACL{prefixed, v0})

	desc := anyFilter().describe(0)
	dresp := rc.roundTrip(desc).(*kmsg.DescribeACLsResponse)
	if dresp.ErrorCode != 0 {
		t.Fatalf("v0 describe: error %d", dresp.ErrorCode)
	}
	// A v0 response has no pattern type; kmsg reads it as LITERAL.
	wantACLs(t, "v0 describe", describedACLs(dresp), []state.ACL{v0})

	del := kmsg.NewPtrDeleteACLsRequest()
	del.Version = 0
	del.Filters = []kmsg.DeleteACLsRequestFilter{anyFilter().deletion()}
	delResp := rc.roundTrip(del).(*kmsg.DeleteACLsResponse)
	if len(delResp.Results) != 1 || delResp.Results[0].ErrorCode != 0 {
		t.Fatalf("v0 delete: %+v", delResp)
	}
	wantACLs(t, "v0 deleted", deletedACLs(delResp.Results[0]), []state.ACL{v0})
	wantACLs(t, "left", describe(t, cl, anyFilter()), []state.ACL{prefixed})
}

func TestACLsSurviveRestart(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	cl, _ := adminClient(t, b)
	createACLs(t, cl, fixtureACLs...)
	del := kmsg.NewPtrDeleteACLsRequest()
	del.Filters = []kmsg.DeleteACLsRequestFilter{aclFilterSpec{typ: resCluster, pat: patAny, op: opAny,
		perm: permAny}.deletion()}
	if _, err := del.RequestWith(adminCtx(t), cl); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	b = reopenTestBroker(t, b)
	cl, _ = adminClient(t, b)
	want := slices.DeleteFunc(slices.Clone(fixtureACLs), func(a state.ACL) bool { return a == adminCluster })
	wantACLs(t, "after restart", describe(t, cl, anyFilter()), want)
}

func TestACLsGoAPI(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	cl, _ := adminClient(t, b)

	if err := b.CreateACLs(fixtureACLs); err != nil {
		t.Fatal(err)
	}
	if err := b.CreateACLs(fixtureACLs[:2]); err != nil { // idempotent
		t.Fatal(err)
	}
	got, err := b.ACLs()
	if err != nil {
		t.Fatal(err)
	}
	wantACLs(t, "ACLs()", got, fixtureACLs) // sorted, as wantACLs compares
	wantACLs(t, "described", describe(t, cl, anyFilter()), fixtureACLs)

	// The first invalid binding fails the call, naming it; nothing of the
	// call is stored.
	fresh := aclOf(resTopic, "fresh", patLiteral, "User:z", "*", opRead, allow)
	bad := aclOf(resTopic, "x", patLiteral, "nocolon", "*", opRead, allow)
	err = b.CreateACLs([]state.ACL{fresh, bad})
	if !errors.Is(err, ErrInvalidACL) || !strings.Contains(err.Error(), "nocolon") {
		t.Fatalf("CreateACLs with an invalid binding: %v", err)
	}
	if got, _ := b.ACLs(); slices.Contains(got, fresh) {
		t.Fatal("a binding of a refused call was stored")
	}

	absent := aclOf(resTopic, "absent", patLiteral, "User:z", "*", opRead, allow)
	if err := b.DeleteACLs([]state.ACL{aliceReadOrders, opsMirror, absent}); err != nil {
		t.Fatal(err)
	}
	got, _ = b.ACLs()
	wantACLs(t, "after DeleteACLs", got, []state.ACL{aliceWriteOrders, bobReadOrd, carolAnyTopic,
		aliceDenyGroup, adminCluster})
}

// TestACLFilterMatchesPrefixEdges: PREFIXED bindings under MATCH apply to
// names they prefix, never the other way round, and LITERAL "*" applies
// to every name but only under MATCH.
func TestACLFilterMatchesPrefixEdges(t *testing.T) {
	t.Parallel()
	name := func(s string) *string { return &s }
	for _, tc := range []struct {
		acl    state.ACL
		filter aclFilter
		want   bool
	}{
		{bobReadOrd, aclFilter{1, name("ord"), aclPatternMatch, nil, nil, 1, 1}, true},
		{bobReadOrd, aclFilter{1, name("or"), aclPatternMatch, nil, nil, 1, 1}, false},
		{bobReadOrd, aclFilter{1, name(""), aclPatternMatch, nil, nil, 1, 1}, false},
		{carolAnyTopic, aclFilter{1, name(""), aclPatternMatch, nil, nil, 1, 1}, true},
		{carolAnyTopic, aclFilter{1, name("x"), aclPatternAny, nil, nil, 1, 1}, false},
		{carolAnyTopic, aclFilter{1, name("x"), aclPatternLiteral, nil, nil, 1, 1}, false},
		{aclOf(resTopic, "*", patPrefix, "User:a", "*", opRead, allow),
			aclFilter{1, name("x"), aclPatternMatch, nil, nil, 1, 1}, false},
		{aclOf(resTopic, "*", patPrefix, "User:a", "*", opRead, allow),
			aclFilter{1, name("*x"), aclPatternMatch, nil, nil, 1, 1}, true},
	} {
		if got := tc.filter.matches(tc.acl); got != tc.want {
			t.Errorf("filter %+v on %v: %v, want %v", tc.filter, tc.acl, got, tc.want)
		}
	}
}
