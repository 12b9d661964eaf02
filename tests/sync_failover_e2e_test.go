package tests

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/mirrorapi"
)

// The metadata sync after failover (issue 16 item 4): once a topic is
// stopped the sync changes nothing of it any more (the ACLs on it, its
// groups' offsets, its configs); the ACL sync deletes only bindings it
// created itself, never one created on the node; and a mirror whose
// topics are all STOPPED or FAILED can be deleted. The sync cycles run by
// hand (Controller.SyncOnce) with the periodic sync off, so every change
// seen is one cycle's.

// aclSpec is one binding as the tests write it: resource type, pattern,
// name, principal, operation, allow.
type aclSpec struct {
	typ       string // "topic" or "group"
	prefixed  bool
	name      string
	principal string
	op        kadm.ACLOperation
}

func (a aclSpec) builder() *kadm.ACLBuilder {
	b := kadm.NewACLs().Allow(a.principal).AllowHosts().Operations(a.op)
	if a.typ == "group" {
		b = b.Groups(a.name)
	} else {
		b = b.Topics(a.name)
	}
	if a.prefixed {
		return b.ResourcePatternType(kadm.ACLPatternPrefixed)
	}
	return b.ResourcePatternType(kadm.ACLPatternLiteral)
}

// String is how aclsOf names a binding.
func (a aclSpec) String() string {
	pat := "LITERAL"
	if a.prefixed {
		pat = "PREFIXED"
	}
	return fmt.Sprintf("%s:%s:%s:%s:%s", strings.ToUpper(a.typ), pat, a.name, a.principal, a.op)
}

func createACL(t *testing.T, ctx context.Context, adm *kadm.Client, a aclSpec) {
	t.Helper()
	res, err := adm.CreateACLs(ctx, a.builder())
	if err == nil && len(res) > 0 {
		err = res[0].Err
	}
	if err != nil {
		t.Fatalf("creating ACL %v: %v", a, err)
	}
}

func deleteACL(t *testing.T, ctx context.Context, adm *kadm.Client, a aclSpec) {
	t.Helper()
	res, err := adm.DeleteACLs(ctx, a.builder())
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		t.Fatalf("deleting ACL %v: %v", a, err)
	}
}

// aclsOf lists every binding of a cluster as aclSpec strings, sorted.
func aclsOf(t *testing.T, ctx context.Context, adm *kadm.Client) []string {
	t.Helper()
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).
		Operations().Allow().AllowHosts().Deny().DenyHosts())
	if err == nil {
		for _, d := range described {
			if d.Err != nil {
				err = d.Err
			}
		}
	}
	if err != nil {
		t.Fatalf("DescribeACLs: %v", err)
	}
	var out []string
	for _, d := range described {
		for _, a := range d.Described {
			out = append(out, aclSpec{typ: strings.ToLower(a.Type.String()), prefixed: a.Pattern == kadm.ACLPatternPrefixed,
				name: a.Name, principal: a.Principal, op: a.Operation}.String())
		}
	}
	slices.Sort(out)
	return out
}

func wantACLs(t *testing.T, ctx context.Context, adm *kadm.Client, what string, want ...aclSpec) {
	t.Helper()
	var ws []string
	for _, a := range want {
		ws = append(ws, a.String())
	}
	slices.Sort(ws)
	if got := aclsOf(t, ctx, adm); !slices.Equal(got, ws) {
		t.Fatalf("%s: ACLs on the node\n %q\nwant\n %q", what, got, ws)
	}
}

// mirrorOf starts a kfake source holding topics (one partition each) and
// a node mirroring them as mirror, its periodic sync off: the tests run
// the cycles. It returns the source, an admin client of it and the node.
func mirrorOf(t *testing.T, ctx context.Context, mirror string, topics ...string) (*kfake.Cluster, *kadm.Client, *ctlNode) {
	t.Helper()
	src, srcCl := startSource(t)
	srcAdm := kadm.NewClient(srcCl)
	for _, topic := range topics {
		createTopic(t, ctx, srcAdm, topic, 1, nil)
	}
	n := startCtlNode(t, mirror, control.Config{RefreshInterval: -1})
	n.ok(ctx, createReq(mirror, src.ListenAddrs()[0]))
	n.ok(ctx, startReq(mirror, topics...))
	return src, srcAdm, n
}

// TestSyncACLsNeverDeletesLocal: while a topic mirrors, bindings created
// on the node by hand survive every cycle, also one the source happens to
// hold too and then revokes; a binding the sync copied goes when the
// source revokes it, also after a restart.
func TestSyncACLsNeverDeletesLocal(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	_, srcAdm, n := mirrorOf(t, ctx, "acl", "orders")

	alice := aclSpec{"topic", false, "orders", "User:alice", kadm.OpRead}
	bob := aclSpec{"topic", false, "orders", "User:bob", kadm.OpWrite}    // here only
	carol := aclSpec{"topic", false, "orders", "User:carol", kadm.OpRead} // here first, then at the source too
	createACL(t, ctx, srcAdm, alice)
	createACL(t, ctx, n.adm, bob)
	createACL(t, ctx, n.adm, carol)
	createACL(t, ctx, srcAdm, carol)
	syncNow(t, n, "acl", control.SyncACLs)
	wantACLs(t, ctx, n.adm, "after the first cycle", alice, bob, carol)
	syncNow(t, n, "acl", control.SyncACLs)
	wantACLs(t, ctx, n.adm, "after a second cycle", alice, bob, carol)

	// The record of what the sync created survives a restart.
	n.restart()
	deleteACL(t, ctx, srcAdm, alice)
	deleteACL(t, ctx, srcAdm, carol)
	syncNow(t, n, "acl", control.SyncACLs)
	wantACLs(t, ctx, n.adm, "after a restart and the source revoking alice's and carol's (the sync created only alice's)", bob, carol)
}

// TestSyncACLsFrozenAfterStop is the reproduction and more: once
// a topic is stopped, the bindings on it (literal, or a prefix of its
// name) are neither added nor removed by the sync, while those of topics
// still mirrored follow the source; once every topic is stopped, nothing
// of the source's ACLs is applied any more, and an ACL created on the
// node survives the next cycle.
func TestSyncACLsFrozenAfterStop(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	_, srcAdm, n := mirrorOf(t, ctx, "frz", "ledger", "orders")

	alice := aclSpec{"topic", false, "ledger", "User:alice", kadm.OpRead}
	dave := aclSpec{"topic", true, "led", "User:dave", kadm.OpRead} // covers ledger
	erin := aclSpec{"topic", false, "orders", "User:erin", kadm.OpRead}
	for _, a := range []aclSpec{alice, dave, erin} {
		createACL(t, ctx, srcAdm, a)
	}
	syncNow(t, n, "frz", control.SyncACLs)
	wantACLs(t, ctx, n.adm, "mirroring", alice, dave, erin)

	// ledger fails over; orders mirrors on.
	n.ok(ctx, stopReq("frz", "ledger"))
	app := aclSpec{"topic", false, "ledger", "User:app", kadm.OpWrite}
	createACL(t, ctx, n.adm, app)
	gina := aclSpec{"topic", false, "ledger", "User:gina", kadm.OpRead}
	hank := aclSpec{"topic", false, "orders", "User:hank", kadm.OpRead}
	for _, a := range []aclSpec{alice, dave, erin} {
		deleteACL(t, ctx, srcAdm, a)
	}
	createACL(t, ctx, srcAdm, gina)
	createACL(t, ctx, srcAdm, hank)
	syncNow(t, n, "frz", control.SyncACLs)
	wantACLs(t, ctx, n.adm, "ledger stopped: its bindings frozen, orders' follow the source", alice, dave, app, hank)

	// Every topic stopped: the mirror has failed over.
	n.ok(ctx, stopReq("frz", "orders"))
	n.checkStates(ctx, "frz", "ledger", 1, "STOPPED")
	n.checkStates(ctx, "frz", "orders", 1, "STOPPED")
	local := aclSpec{"topic", false, "orders", "User:app", kadm.OpWrite}
	createACL(t, ctx, n.adm, local)
	ivan := aclSpec{"group", false, "g", "User:ivan", kadm.OpRead}
	deleteACL(t, ctx, srcAdm, hank)
	createACL(t, ctx, srcAdm, ivan)
	syncNow(t, n, "frz", control.SyncACLs)
	wantACLs(t, ctx, n.adm, "every topic stopped", alice, dave, app, hank, local)
}

// TestSyncStoppedTopicUntouched: after a stop, neither the group offsets
// of the topic nor its configs follow the source any more, and a commit
// made on the node after the failover stays.
func TestSyncStoppedTopicUntouched(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	const (
		topic = "frozen"
		group = "frozen-app"
	)
	src, srcAdm, n := mirrorOf(t, ctx, "frozen", topic)
	setTopicConfig(t, ctx, srcAdm, topic, "retention.ms", "86400000")
	produceTo(t, ctx, manualProducer(t, src.ListenAddrs()), topic, 1, 10, "a")
	commitAt(t, ctx, srcAdm, group, topic, 0, 3)
	n.waitMirrored(ctx, "frozen", topic, map[int32]int64{0: 10})
	syncNow(t, n, "frozen", control.SyncGroupOffsets, control.SyncTopicConfigs)
	wantCommitted(t, ctx, n.adm, group, topic, 0, 3)
	wantTopicConfig(t, ctx, n.adm, topic, "retention.ms", "86400000")

	n.ok(ctx, stopReq("frozen", topic))
	commitAt(t, ctx, srcAdm, group, topic, 0, 7)
	setTopicConfig(t, ctx, srcAdm, topic, "retention.ms", "3600000")
	syncNow(t, n, "frozen", control.SyncGroupOffsets, control.SyncTopicConfigs)
	wantCommitted(t, ctx, n.adm, group, topic, 0, 3)
	wantTopicConfig(t, ctx, n.adm, topic, "retention.ms", "86400000")

	commitAt(t, ctx, n.adm, group, topic, 0, 5) // the application, after the failover
	syncNow(t, n, "frozen", control.SyncGroupOffsets)
	wantCommitted(t, ctx, n.adm, group, topic, 0, 5)
}

func setTopicConfig(t *testing.T, ctx context.Context, adm *kadm.Client, topic, key, value string) {
	t.Helper()
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: key, Value: kadm.StringPtr(value)}}, topic)
	if err == nil {
		_, err = resp.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("setting %s=%s on %s: %v", key, value, topic, err)
	}
}

// commitAt commits group's offset of topic/p as an admin (a simple
// commit, no member).
func commitAt(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string, p int32, at int64) {
	t.Helper()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("committing %s %s-%d at %d: %v", group, topic, p, at, err)
	}
}

func wantCommitted(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string, p int32, want int64) {
	t.Helper()
	got, ok := committed(t, ctx, adm, group, topic)[p]
	if !ok || got.At != want {
		t.Fatalf("group %s offset of %s-%d: %+v (committed %v), want %d", group, topic, p, got, ok, want)
	}
}

func wantTopicConfig(t *testing.T, ctx context.Context, adm *kadm.Client, topic, key, want string) {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		t.Fatalf("describing %s configs: %v", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			if c.Value == nil || *c.Value != want {
				t.Fatalf("%s: %s = %v, want %s", topic, key, c.MaybeValue(), want)
			}
			return
		}
	}
	t.Fatalf("%s: no config %s", topic, key)
}

// TestDeleteMirrorFailedTopics: a topic deleted at the source leaves its
// partitions FAILED (not retried) while its desired state still says
// MIRRORING. Delete refuses a mirror with a partition still MIRRORING,
// naming it; once the other topic is stopped it deletes the mirror, and
// the FAILED topic is failed over on the way (the stop's steps: writable,
// its records kept), not left read-only with no mirror to release it. The
// mirror's sync record goes with it.
func TestDeleteMirrorFailedTopics(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	src, srcAdm, n := mirrorOf(t, ctx, "del", "ledger", "live")
	want := produceTo(t, ctx, manualProducer(t, src.ListenAddrs()), "ledger", 1, 5, "a")
	n.waitMirrored(ctx, "del", "ledger", map[int32]int64{0: 5})

	copied := aclSpec{"topic", false, "ledger", "User:alice", kadm.OpRead}
	createACL(t, ctx, srcAdm, copied)
	if _, err := srcAdm.DeleteTopics(ctx, "ledger"); err != nil {
		t.Fatal(err)
	}
	n.ctl.SyncOnce()
	n.checkStates(ctx, "del", "ledger", 1, "FAILED")
	wantACLs(t, ctx, n.adm, "synced", copied)
	checkReadOnly(t, ctx, n.addr(), "ledger")

	msg := n.expect(ctx, deleteReq("del"), "", mirrorapi.ErrClusterMirrorNotEmpty)
	if !strings.Contains(msg, "live") || !strings.Contains(msg, "MIRRORING") || strings.Contains(msg, "ledger") {
		t.Fatalf("delete with live MIRRORING: message %q, want it to name live's partition, not ledger", msg)
	}
	n.ok(ctx, stopReq("del", "live"))
	n.ok(ctx, deleteReq("del"))
	if _, ok := n.list(ctx)["del"]; ok {
		t.Fatal("the deleted mirror is still listed")
	}
	after := produceTo(t, ctx, manualProducer(t, []string{n.addr()}), "ledger", 1, 2, "after")
	checkSameRecords(t, "ledger after the delete: the mirrored records, then the new ones",
		consumeAll(t, ctx, []string{n.addr()}, "ledger", true, len(want)+len(after)), sortedUnion(want, after))

	// The delete took the mirror's record of the ACLs its sync created:
	// a new mirror of the same name takes them for local ones.
	deleteACL(t, ctx, srcAdm, copied)
	n.ok(ctx, createReq("del", src.ListenAddrs()[0]))
	syncNow(t, n, "del", control.SyncACLs)
	wantACLs(t, ctx, n.adm, "a new mirror of the deleted one's name", copied)
}
