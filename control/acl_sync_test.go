package control

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// The source's ACLs that acls.include selects are created here at each
// cycle; those the sync created are removed once the selected source set
// lacks them (a right revoked at the source is revoked here). ACLs
// created here by hand, this node's CLUSTER_MIRROR ones among them, stay.
func TestSyncACLs(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t)
	f.setMirrorConfigs(t, "acls.include", "TOPIC;orders.*,GROUP")
	create := func(b *kadm.ACLBuilder) {
		t.Helper()
		res, err := f.sadm.CreateACLs(f.ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("creating a source ACL: %v", r.Err)
			}
		}
	}
	create(kadm.NewACLs().Topics("orders.eu").Allow("User:alice").AllowHosts().Operations(kadm.OpRead).
		ResourcePatternType(kadm.ACLPatternLiteral))
	create(kadm.NewACLs().Groups("billing").Allow("User:alice").AllowHosts().Operations(kadm.OpRead).
		ResourcePatternType(kadm.ACLPatternLiteral))
	create(kadm.NewACLs().Topics("payments").Allow("User:bob").AllowHosts().Operations(kadm.OpWrite).
		ResourcePatternType(kadm.ACLPatternLiteral)) // not selected by acls.include

	mirrorAdmin := state.ACL{ResourceType: state.ResourceClusterMirror, ResourceName: "m", PatternType: 3,
		Principal: "User:ops", Host: "*", Operation: int8(kmsg.ACLOperationAlter), Permission: int8(kmsg.ACLPermissionTypeAllow)}
	handMade := state.ACL{ResourceType: int8(kmsg.ACLResourceTypeTopic), ResourceName: "local", PatternType: 3,
		Principal: "User:carol", Host: "*", Operation: int8(kmsg.ACLOperationRead), Permission: int8(kmsg.ACLPermissionTypeAllow)}
	if err := f.n.b.CreateACLs([]state.ACL{mirrorAdmin, handMade}); err != nil {
		t.Fatal(err)
	}

	f.n.ctl.SyncOnce()
	if e := f.syncErrors(t)[SyncACLs]; e != 0 {
		t.Fatalf("%d ACL sync errors", e)
	}
	got := f.aclNames(t)
	want := []string{"CLUSTER_MIRROR:m:User:ops", "GROUP:billing:User:alice", "TOPIC:local:User:carol", "TOPIC:orders.eu:User:alice"}
	if !slices.Equal(got, want) {
		t.Fatalf("ACLs after the first cycle: %q, want %q", got, want)
	}

	// Revoked at the source: removed here at the next cycle.
	if _, err := f.sadm.DeleteACLs(f.ctx, kadm.NewACLs().Topics("orders.eu").Allow("User:alice").AllowHosts().
		Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)); err != nil {
		t.Fatal(err)
	}
	f.n.ctl.SyncOnce()
	got = f.aclNames(t)
	want = []string{"CLUSTER_MIRROR:m:User:ops", "GROUP:billing:User:alice", "TOPIC:local:User:carol"}
	if !slices.Equal(got, want) {
		t.Fatalf("ACLs after the source revoked one: %q, want %q", got, want)
	}
}

// aclNames lists the node's ACLs as "TYPE:name:principal", sorted.
func (f *syncFixture) aclNames(t *testing.T) []string {
	t.Helper()
	acls, err := f.n.b.ACLs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range acls {
		typ := kmsg.ACLResourceType(a.ResourceType).String()
		if a.ResourceType == state.ResourceClusterMirror {
			typ = "CLUSTER_MIRROR"
		}
		out = append(out, typ+":"+a.ResourceName+":"+a.Principal)
	}
	slices.Sort(out)
	return out
}

// A filter config that cannot be parsed is refused when set, naming the
// config, instead of failing every later sync cycle.
func TestSyncFilterConfigsChecked(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t)
	for _, kv := range [][2]string{{"acls.include", "TOPIC;orders.*;NOPE"}, {"mirror.acl.include", "BANANA"},
		{"topics.include", "orders.(eu"}, {"groups.exclude", "[a-"}, {"topic.properties.exclude", "*"},
		// Unbalanced: it would break out of the full-match wrapping.
		{"topics.exclude", ")|(.*"}} {
		err := f.n.ctl.SetMirrorConfigs("m", map[string]string{"bootstrap.servers": f.src.ListenAddrs()[0], kv[0]: kv[1]})
		if err == nil || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("%s=%s: %v, want an error naming the config", kv[0], kv[1], err)
		}
	}
}
