package acls

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/state"
)

func ruleStrings(rules []Rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.String()
	}
	return out
}

func TestParseRules(t *testing.T) {
	t.Parallel()
	all := "*;*;*;*;*"
	for _, tc := range []struct {
		include string
		want    []string
	}{
		{"", []string{all}},
		{"  ", []string{all}},
		{",", []string{all}},
		{"*", []string{all}},
		{"*;*;*;*;*", []string{all}},
		{"TOPIC", []string{"TOPIC;*;*;*;*"}},
		{"topic;orders\\..*;read;allow;User:alice", []string{"TOPIC;orders\\..*;READ;ALLOW;User:alice"}},
		{" group ; g.* , cluster;*;cluster_action ", []string{"GROUP;g.*;*;*;*", "CLUSTER;*;CLUSTER_ACTION;*;*"}},
		{"TOPIC,", []string{"TOPIC;*;*;*;*"}},
		{"Transactional_Id;*;Describe;DENY", []string{"TRANSACTIONAL_ID;*;DESCRIBE;DENY;*"}},
		{"*;*;ALL", []string{"*;*;ALL;*;*"}},
		{"USER;*;CREATE_TOKENS,DELEGATION_TOKEN;*;describe_tokens",
			[]string{"USER;*;CREATE_TOKENS;*;*", "DELEGATION_TOKEN;*;DESCRIBE_TOKENS;*;*"}},
		{"*;*;idempotent_write;*;(?i)user:ADMIN", []string{"*;*;IDEMPOTENT_WRITE;*;(?i)user:ADMIN"}},
	} {
		rules, err := ParseRules(tc.include)
		if err != nil {
			t.Errorf("ParseRules(%q): %v", tc.include, err)
			continue
		}
		if got := ruleStrings(rules); !slices.Equal(got, tc.want) {
			t.Errorf("ParseRules(%q) = %q, want %q", tc.include, got, tc.want)
		}
	}
}

func TestParseRulesErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		include string
		want    string // in the error: the rule and the field
	}{
		{"TOPICS", `rule 1 "TOPICS": resource type`},
		{"CLUSTER_MIRROR", "resource type"},
		{"ANY", "resource type"},
		{"TOPIC;(", "name regex"},
		{"TOPIC;)|(.*", "name regex"},
		{"TOPIC;*;READS", "operation"},
		{"TOPIC;*;ANY", "operation"},
		{"TOPIC;*;READ;PERMIT", "permission"},
		{"TOPIC;*;READ;ANY", "permission"},
		{"TOPIC;*;READ;ALLOW;[", "principal regex"},
		{"TOPIC;*;READ;ALLOW;*;extra", "6 fields"},
		{"TOPIC;;READ", "name regex: empty"},
		{"TOPIC;", "name regex: empty"},
		{";", "resource type: empty"},
		{"*, GROUP;*;x", `rule 2 "GROUP;*;x": operation`},
	} {
		rules, err := ParseRules(tc.include)
		switch {
		case err == nil:
			t.Errorf("ParseRules(%q) = %q, want an error", tc.include, ruleStrings(rules))
		case !errors.Is(err, ErrInvalidRule):
			t.Errorf("ParseRules(%q): %v is not ErrInvalidRule", tc.include, err)
		case !strings.Contains(err.Error(), tc.want):
			t.Errorf("ParseRules(%q): %q does not say %q", tc.include, err, tc.want)
		}
	}
}

// Enum values (Kafka's wire values) and principals for the fixtures.
const (
	topic, group, cluster  int8 = 2, 3, 4
	literal, prefixed      int8 = 3, 4
	opAll, opRead, opWrite int8 = 2, 3, 4
	opAlter                int8 = 7
	deny, allow            int8 = 2, 3
	clusterMirror               = state.ResourceClusterMirror
)

const (
	anyHost        = "*"
	alice, bob     = "User:alice", "User:bob"
	mirrorAdmin    = "User:ops"
	groupPrincipal = "Group:alice"
)

func acl(typ int8, name string, pat int8, principal string, op, perm int8) state.ACL {
	return state.ACL{ResourceType: typ, ResourceName: name, PatternType: pat, Principal: principal,
		Host: anyHost, Operation: op, Permission: perm}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	readOrders := acl(topic, "orders", literal, alice, opRead, allow)
	for _, tc := range []struct {
		rule string
		acl  state.ACL
		want bool
	}{
		{"*", readOrders, true},
		{"*", acl(clusterMirror, "m", literal, alice, opAlter, allow), true},
		{"TOPIC", readOrders, true},
		{"TOPIC", acl(group, "orders", literal, alice, opRead, allow), false},
		{"TOPIC;orders", readOrders, true},
		{"TOPIC;orders", acl(topic, "orders-x", literal, alice, opRead, allow), false}, // full match
		{"TOPIC;orders", acl(topic, "xorders", literal, alice, opRead, allow), false},
		{"TOPIC;orders.*", acl(topic, "orders-x", prefixed, alice, opRead, allow), true},
		{"TOPIC;a|b", acl(topic, "a", literal, alice, opRead, allow), true},
		{"TOPIC;a|b", acl(topic, "ab", literal, alice, opRead, allow), false},
		{"TOPIC;(?i)ORDERS", readOrders, true},
		{"*;*;READ", readOrders, true},
		{"*;*;WRITE", readOrders, false},
		{"*;*;ALL", acl(topic, "t", literal, alice, opAll, allow), true},
		{"*;*;ALL", readOrders, false}, // ALL is a value, not a wildcard
		{"*;*;*;ALLOW", readOrders, true},
		{"*;*;*;DENY", readOrders, false},
		{"*;*;*;*;User:a.*", readOrders, true},
		{"*;*;*;*;User:a.*", acl(topic, "orders", literal, groupPrincipal, opRead, allow), false},
		{"*;*;*;*;alice", readOrders, false}, // the whole principal
		{"CLUSTER;kafka-cluster;ALTER;ALLOW;User:admin", acl(cluster, "kafka-cluster", literal, "User:admin",
			opAlter, allow), true},
	} {
		rules, err := ParseRules(tc.rule)
		if err != nil {
			t.Fatal(err)
		}
		if got := rules[0].Match(tc.acl); got != tc.want {
			t.Errorf("%q.Match(%v) = %v, want %v", tc.rule, tc.acl, got, tc.want)
		}
	}
	if !(Rule{}).Match(readOrders) {
		t.Error("the zero Rule does not match everything")
	}
}

func TestFilter(t *testing.T) {
	t.Parallel()
	a := acl(topic, "orders", literal, alice, opRead, allow)
	b := acl(group, "g", literal, bob, opRead, allow)
	c := acl(cluster, "kafka-cluster", literal, bob, opAlter, deny)
	rules, err := ParseRules("TOPIC, *;*;*;DENY")
	if err != nil {
		t.Fatal(err)
	}
	if got := Filter(rules, []state.ACL{a, b, c}); !slices.Equal(got, []state.ACL{a, c}) {
		t.Fatalf("Filter = %v", got)
	}
	if got := Filter(nil, []state.ACL{a, b}); !slices.Equal(got, []state.ACL{a, b}) {
		t.Fatalf("Filter without rules = %v, want everything", got)
	}
}

func TestPlan(t *testing.T) {
	t.Parallel()
	orders := acl(topic, "orders", literal, alice, opRead, allow)
	ordersWrite := acl(topic, "orders", literal, alice, opWrite, allow)
	groupG := acl(group, "g", literal, bob, opRead, allow)
	sourceMirror := acl(clusterMirror, "east", literal, mirrorAdmin, opAlter, allow)
	tmp := acl(topic, "tmp", literal, bob, opWrite, allow) // filtered out by the rules
	destOnly := acl(topic, "local", prefixed, bob, opRead, deny)
	destMirror := acl(clusterMirror, "west", literal, mirrorAdmin, opAlter, allow)
	revoked := acl(group, "old", literal, bob, opRead, allow) // synced once, gone at the source
	goneHere := acl(group, "g2", literal, bob, opRead, allow) // synced once, deleted here by hand

	rules, err := ParseRules("TOPIC;orders,GROUP")
	if err != nil {
		t.Fatal(err)
	}
	source := []state.ACL{ordersWrite, groupG, sourceMirror, tmp, orders, orders}
	dest := []state.ACL{destMirror, tmp, groupG, destOnly, revoked}
	synced := []state.ACL{tmp, revoked, goneHere, revoked}
	ch := Plan(source, dest, synced, rules, nil)
	// Sorted: by type, name, pattern, principal, host, operation.
	if want := []state.ACL{orders, ordersWrite}; !slices.Equal(ch.Add, want) {
		t.Fatalf("add = %v\nwant %v", ch.Add, want)
	}
	// tmp was copied once and is now filtered out, so its copy goes, as
	// does the revoked binding; destOnly was never copied and stays, like
	// the destination's CLUSTER_MIRROR binding (the source's is not
	// copied).
	if want := []state.ACL{tmp, revoked}; !slices.Equal(ch.Remove, want) {
		t.Fatalf("remove = %v\nwant %v", ch.Remove, want)
	}
	if want := []state.ACL{goneHere}; !slices.Equal(ch.Forget, want) {
		t.Fatalf("forget = %v\nwant %v", ch.Forget, want)
	}

	// The same inputs in another order plan the same.
	slices.Reverse(source)
	slices.Reverse(dest)
	slices.Reverse(synced)
	if ch2 := Plan(source, dest, synced, rules, nil); !reflect.DeepEqual(ch, ch2) {
		t.Fatalf("order-dependent plan: %v vs %v", ch, ch2)
	}

	// In step: nothing to do.
	if ch := Plan([]state.ACL{orders}, []state.ACL{orders, destMirror}, []state.ACL{orders}, nil, nil); !reflect.DeepEqual(ch, Changes{}) {
		t.Fatalf("in step: %+v", ch)
	}

	// Frozen bindings are neither added nor removed; forgetting one
	// deleted here by hand still happens (it changes no binding).
	frozen := func(a state.ACL) bool { return CoversTopic(a, "orders") || CoversTopic(a, "tmp") }
	ch = Plan(source, dest, synced, rules, frozen)
	if ch.Add != nil || !slices.Equal(ch.Remove, []state.ACL{revoked}) || !slices.Equal(ch.Forget, []state.ACL{goneHere}) {
		t.Fatalf("frozen orders and tmp: %+v", ch)
	}
}

func TestCoversTopic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		acl  state.ACL
		want bool
	}{
		{acl(topic, "orders", literal, alice, opRead, allow), true},
		{acl(topic, "orders.eu", literal, alice, opRead, allow), false},
		{acl(topic, "*", literal, alice, opRead, allow), true},
		{acl(topic, "ord", prefixed, alice, opRead, allow), true},
		{acl(topic, "orders", prefixed, alice, opRead, allow), true},
		{acl(topic, "orders.", prefixed, alice, opRead, allow), false},
		{acl(topic, "*", prefixed, alice, opRead, allow), false}, // a prefix "*", not the wildcard
		{acl(group, "orders", literal, alice, opRead, allow), false},
		{acl(cluster, "kafka-cluster", literal, alice, opAlter, allow), false},
	} {
		if got := CoversTopic(tc.acl, "orders"); got != tc.want {
			t.Errorf("CoversTopic(%v, orders) = %v, want %v", tc.acl, got, tc.want)
		}
	}
}

// memDest is an in-memory Dest.
type memDest struct {
	mu           sync.Mutex
	acls, synced map[state.ACL]struct{}
	failCreate   error
}

func newMemDest(acls ...state.ACL) *memDest {
	d := &memDest{acls: map[state.ACL]struct{}{}, synced: map[state.ACL]struct{}{}}
	for _, a := range acls {
		d.acls[a] = struct{}{}
	}
	return d
}

func sortedSet(set map[state.ACL]struct{}) []state.ACL {
	out := make([]state.ACL, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	slices.SortFunc(out, state.CompareACLs)
	return out
}

func (d *memDest) ACLs() ([]state.ACL, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return sortedSet(d.acls), nil
}

func (d *memDest) Synced() ([]state.ACL, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return sortedSet(d.synced), nil
}

func (d *memDest) RecordSynced(acls []state.ACL) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range acls {
		d.synced[a] = struct{}{}
	}
	return nil
}

func (d *memDest) ForgetSynced(acls []state.ACL) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range acls {
		delete(d.synced, a)
	}
	return nil
}

func (d *memDest) CreateACLs(acls []state.ACL) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failCreate != nil {
		return d.failCreate
	}
	for _, a := range acls {
		d.acls[a] = struct{}{}
	}
	return nil
}

func (d *memDest) DeleteACLs(acls []state.ACL) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range acls {
		delete(d.acls, a)
	}
	return nil
}

func (d *memDest) want(t *testing.T, want ...state.ACL) {
	t.Helper()
	got, _ := d.ACLs()
	want = slices.Clone(want)
	slices.SortFunc(want, state.CompareACLs)
	if !slices.Equal(got, want) {
		t.Fatalf("dest holds %v\nwant %v", got, want)
	}
}

func syncCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newSource starts a one-broker kfake cluster and returns an admin client
// for it.
func newSource(t *testing.T) (*kfake.Cluster, *kadm.Client) {
	t.Helper()
	c := kfaketest.Source(t)
	cl := nodetest.Client(t, c.ListenAddrs())
	return c, kadm.NewClient(cl)
}

func mustCreate(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	rs, err := adm.CreateACLs(syncCtx(t), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Err != nil {
			t.Fatalf("creating %+v: %v", r, r.Err)
		}
	}
}

// sync1 is one cycle as control runs it: ReadSource, then Apply.
func sync1(ctx context.Context, adm *kadm.Client, dst Dest, rules []Rule) (Result, error) {
	source, ok, err := ReadSource(ctx, adm)
	if err != nil || !ok {
		return Result{}, err
	}
	return Apply(dst, source, rules, nil)
}

func mustSync(t *testing.T, adm *kadm.Client, dst Dest, rules []Rule, want Result) {
	t.Helper()
	got, err := sync1(syncCtx(t), adm, dst, rules)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("sync = %+v, want %+v", got, want)
	}
}

func TestSyncFromKfake(t *testing.T) {
	t.Parallel()
	_, src := newSource(t)
	mustCreate(t, src, kadm.NewACLs().Topics("orders").Allow(alice).Operations(kadm.OpRead))
	mustCreate(t, src, kadm.NewACLs().Topics("ord").Allow(bob).Operations(kadm.OpWrite).
		ResourcePatternType(kadm.ACLPatternPrefixed))
	mustCreate(t, src, kadm.NewACLs().Groups("g").Deny(alice).DenyHosts("10.0.0.1").Operations(kadm.OpRead))

	aliceOrders := acl(topic, "orders", literal, alice, opRead, allow)
	bobOrd := acl(topic, "ord", prefixed, bob, opWrite, allow)
	aliceGroup := state.ACL{ResourceType: group, ResourceName: "g", PatternType: literal, Principal: alice,
		Host: "10.0.0.1", Operation: opRead, Permission: deny}
	localOnly := acl(topic, "local", literal, bob, opRead, allow)
	mirror := acl(clusterMirror, "east", literal, mirrorAdmin, opAlter, allow)
	dst := newMemDest(localOnly, mirror)

	all, err := ParseRules("")
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, src, dst, all, Result{Added: 3})
	dst.want(t, aliceOrders, bobOrd, aliceGroup, localOnly, mirror)
	mustSync(t, src, dst, all, Result{}) // in step

	// A binding deleted at the source goes at the next sync; the one
	// created here by hand stays.
	if _, err := src.DeleteACLs(syncCtx(t), kadm.NewACLs().Topics("orders").Allow(alice).AllowHosts(anyHost).
		Operations(kadm.OpRead)); err != nil {
		t.Fatal(err)
	}
	mustSync(t, src, dst, all, Result{Removed: 1})
	dst.want(t, bobOrd, aliceGroup, localOnly, mirror)

	// Narrower rules drop what they no longer select.
	groups, err := ParseRules("GROUP")
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, src, dst, groups, Result{Removed: 1})
	dst.want(t, aliceGroup, localOnly, mirror)
	if synced, _ := dst.Synced(); !slices.Equal(synced, []state.ACL{aliceGroup}) {
		t.Fatalf("record after the syncs: %v, want only the copied binding still here", synced)
	}
}

func TestSyncSecurityDisabled(t *testing.T) {
	t.Parallel()
	c, src := newSource(t)
	c.ControlKey(29, func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.(*kmsg.DescribeACLsRequest).ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode = kerr.SecurityDisabled.Code
		resp.ErrorMessage = kmsg.StringPtr("No Authorizer is configured on the broker")
		return resp, nil, true
	})
	local := acl(topic, "local", literal, bob, opRead, allow)
	dst := newMemDest(local)
	dst.synced[local] = struct{}{}
	mustSync(t, src, dst, nil, Result{})
	dst.want(t, local) // skipped: nothing removed, even a synced binding
}

func TestSyncErrors(t *testing.T) {
	t.Parallel()
	t.Run("source refuses", func(t *testing.T) {
		t.Parallel()
		c, src := newSource(t)
		c.ControlKey(29, func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			resp := req.(*kmsg.DescribeACLsRequest).ResponseKind().(*kmsg.DescribeACLsResponse)
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp, nil, true
		})
		local := acl(topic, "local", literal, bob, opRead, allow)
		dst := newMemDest(local)
		dst.synced[local] = struct{}{}
		_, err := sync1(syncCtx(t), src, dst, nil)
		if !errors.Is(err, kerr.ClusterAuthorizationFailed) || !strings.Contains(err.Error(), "describing source ACLs") {
			t.Fatalf("Sync: %v", err)
		}
		dst.want(t, local)
	})
	t.Run("create fails, delete still runs", func(t *testing.T) {
		t.Parallel()
		_, src := newSource(t)
		mustCreate(t, src, kadm.NewACLs().Topics("orders").Allow(alice).Operations(kadm.OpRead))
		copied := acl(topic, "copied", literal, bob, opRead, allow) // revoked at the source since
		dst := newMemDest(copied)
		dst.synced[copied] = struct{}{}
		boom := errors.New("boom")
		dst.failCreate = boom
		res, err := sync1(syncCtx(t), src, dst, nil)
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "creating 1 ACLs") {
			t.Fatalf("sync: %v", err)
		}
		if res != (Result{Removed: 1}) {
			t.Fatalf("sync = %+v", res)
		}
		dst.want(t)
		if synced, _ := dst.Synced(); len(synced) != 0 {
			t.Fatalf("record %v: the binding not created was recorded", synced)
		}
	})
}
