package tests

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil"
)

// Consumer group failover through the mirror's group offset sync (SPEC.md
// section 6, sync/groups): real kgo group consumers commit at a kfake
// source, a kmirror node copies the offsets (control.Plane.SyncOnce,
// called by hand instead of waiting for the refresh interval), the topic
// fails over (StopMirrorTopics) and consumers of the same group resume on
// the node. What the consumers read on both sides together must be every
// record exactly once, except where the clamp into a paused mirror's log
// says otherwise. The harness (ctlNode) is in control_e2e_test.go.

// syncFetchMaxWait is the group consumers' fetch.max.wait.ms: short, so a
// consumer at the end of a partition comes back fast to fetch the others.
const syncFetchMaxWait = 200 * time.Millisecond

// groupConsumer is a kgo group member that commits only when told to
// (autocommit off) and starts at the log start when its group has no
// offset. leave closes it (LeaveGroup, no commit); it runs at test end
// too, once.
type groupConsumer struct {
	*kgo.Client
	once sync.Once
}

func joinGroup(t *testing.T, addr, group, topic string, opts ...kgo.Opt) *groupConsumer {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(syncFetchMaxWait)},
		opts...)...)
	if err != nil {
		t.Fatalf("creating a consumer of group %s: %v", group, err)
	}
	c := &groupConsumer{Client: cl}
	t.Cleanup(c.leave)
	return c
}

func (c *groupConsumer) leave() { c.once.Do(c.Client.Close) }

// pollUpTo polls exactly n records with PollRecords, failing on any fetch
// error or when ctx ends first. Every record polled counts as consumed:
// CommitUncommittedOffsets commits through it.
func pollUpTo(t *testing.T, ctx context.Context, c *groupConsumer, n int) []*kgo.Record {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, mirrorCatchUp)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := c.PollRecords(pctx, n-len(out))
		if pctx.Err() != nil {
			t.Fatalf("polling %d records: got %d before %v", n, len(out), pctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s-%d after %d of %d records: %v", topic, p, len(out), n, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}

// consumeThrough polls c until it has read the record at offset last[p]
// of every partition p of last, and returns every record polled. A
// consumer reads each partition in offset order, so once the last record
// arrived nothing before it can still come: the result is all this
// consumer will ever read up to there. It fails on a fetch error, on a
// record read twice, and when ctx (or mirrorCatchUp) ends first.
func consumeThrough(t *testing.T, ctx context.Context, c *groupConsumer, last map[int32]int64) []*kgo.Record {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, mirrorCatchUp)
	defer cancel()
	next := map[int32]int64{} // the offset after the last record read, by partition
	done := func() bool {
		for p, off := range last {
			if next[p] <= off {
				return false
			}
		}
		return true
	}
	var out []*kgo.Record
	for !done() {
		fs := c.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatalf("consuming through offsets %v: read up to %v (exclusive) before %v", last, next, pctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s-%d consuming through %v: %v", topic, p, last, err)
		})
		for _, r := range fs.Records() {
			if n, ok := next[r.Partition]; ok && r.Offset < n {
				t.Fatalf("partition %d: offset %d read again after offset %d", r.Partition, r.Offset, n-1)
			}
			next[r.Partition] = r.Offset + 1
			out = append(out, r)
		}
	}
	return out
}

// produceUnique produces batches batches of per records to topic-p, one
// ProduceSync (one batch) each, with values unique across the test (tag
// names the round), and returns them with their offsets.
func produceUnique(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, p int32, batches, per int, tag string) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for b := range batches {
		rs := make([]*kgo.Record, per)
		for i := range rs {
			key := fmt.Sprintf("%s-p%d-b%d-%d", tag, p, b, i)
			rs[i] = &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte("value-of-" + key)}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("producing %s to %s-%d: %v", tag, topic, p, err)
		}
		out = append(out, rs...)
	}
	return out
}

// lastOffsets is the highest offset of rs by partition.
func lastOffsets(rs []*kgo.Record) map[int32]int64 {
	out := map[int32]int64{}
	for _, r := range rs {
		if o, ok := out[r.Partition]; !ok || r.Offset > o {
			out[r.Partition] = r.Offset
		}
	}
	return out
}

// checkExactlyOnce checks that seen (mirrorRecord strings, in any order)
// holds every record of want once: none missing, none twice, none else.
func checkExactlyOnce(t *testing.T, what string, seen, want []string) {
	t.Helper()
	count := map[string]int{}
	for _, r := range seen {
		count[r]++
	}
	var skipped, twice, unexpected []string
	for _, r := range want {
		switch count[r] {
		case 0:
			skipped = append(skipped, r)
		case 1:
		default:
			twice = append(twice, fmt.Sprintf("%s (x%d)", r, count[r]))
		}
		delete(count, r)
	}
	for r := range count {
		unexpected = append(unexpected, r)
	}
	if len(skipped)+len(twice)+len(unexpected) > 0 {
		slices.Sort(unexpected)
		t.Fatalf("%s: want each of %d records read exactly once; %d read in all; skipped %d %v; read more than once %d %v; "+
			"not expected %d %v", what, len(want), len(seen), len(skipped), firstFew(skipped), len(twice), firstFew(twice),
			len(unexpected), firstFew(unexpected))
	}
}

// firstFew keeps a failure message short: the first 8 of rs.
func firstFew(rs []string) []string {
	if len(rs) > 8 {
		return append(rs[:8:8], "...")
	}
	return rs
}

// committed is kadm.FetchOffsets of group for topic: the partitions that
// have an offset (At >= 0). Any error fails the test; an unknown group has
// no offsets.
func committed(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string) map[int32]kadm.Offset {
	t.Helper()
	resps, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("FetchOffsets %s: %v", group, err)
	}
	out := map[int32]kadm.Offset{}
	resps.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("FetchOffsets %s: %s-%d: %v", group, o.Topic, o.Partition, o.Err)
		}
		if o.Topic == topic && o.At >= 0 {
			out[o.Partition] = o.Offset
		}
	})
	return out
}

// showOffsets prints committed offsets as p=offset(epoch, "metadata").
func showOffsets(offs map[int32]kadm.Offset) string {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(offs)) {
		o := offs[p]
		parts = append(parts, fmt.Sprintf("%d=%d(e%d,%q)", p, o.At, o.LeaderEpoch, o.Metadata))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// sameOffsets compares offsets, leader epochs and metadata.
func sameOffsets(a, b map[int32]kadm.Offset) bool {
	return maps.EqualFunc(a, b, func(x, y kadm.Offset) bool {
		return x.At == y.At && x.LeaderEpoch == y.LeaderEpoch && x.Metadata == y.Metadata
	})
}

// syncNow runs one metadata sync cycle on n and fails the test if its
// group offset part (or each of kinds, when given) failed for mirror
// (the sync logs and counts errors, it never returns them).
func syncNow(t *testing.T, n *ctlNode, mirror string, kinds ...string) {
	t.Helper()
	stat := func() control.SyncStat {
		for _, s := range n.ctl.SyncStats() {
			if s.Mirror == mirror {
				return s
			}
		}
		return control.SyncStat{}
	}
	before := stat()
	n.ctl.SyncOnce()
	after := stat()
	if after.Cycles <= before.Cycles {
		t.Fatalf("SyncOnce ran no cycle for mirror %s: %d cycles before, %d after", mirror, before.Cycles, after.Cycles)
	}
	if len(kinds) == 0 {
		kinds = []string{control.SyncGroupOffsets}
	}
	for _, k := range kinds {
		if b, a := before.Errors[k], after.Errors[k]; a != b {
			t.Fatalf("SyncOnce: the %s sync of mirror %s failed (errors %d -> %d; the node's log says why)", k, mirror, b, a)
		}
	}
}

// TestSyncGroupFailoverNoSkipNoRereads is the failover a group consumer
// expects: it reads part of a topic at the source and commits, the node
// copies the group's offsets (leader epoch and metadata included, as no
// clamp was needed), the topic fails over, and the group resumes on the
// node where it stopped: what it read on both sides is every record once,
// none skipped, none read twice. With 29 of 60 records consumed at the
// source, in partitions of 24, 21 and 15, at least one partition is read
// partly (checked); kgo usually reads one fully, one partly (mid-batch)
// and leaves the third without a commit, so its group starts it at the
// log start on the node.
func TestSyncGroupFailoverNoSkipNoRereads(t *testing.T) {
	t.Parallel()
	forEachGroupProtocol(t, testSyncGroupFailoverNoSkipNoRereads)
}

// forEachGroupProtocol runs fn in a parallel subtest per group protocol
// of the node's consumers: classic, and consumer (KIP-848), the Kafka 4
// applications that fail over.
func forEachGroupProtocol(t *testing.T, fn func(t *testing.T, protocol []kgo.Opt)) {
	for _, c := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"classic", nil},
		{"consumer", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer(), kgo.StickyBalancer()), kgo.ServerSideBalancer()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fn(t, c.opts)
		})
	}
}

func testSyncGroupFailoverNoSkipNoRereads(t *testing.T, protocol []kgo.Opt) {
	ctx := testCtx(t, 30*time.Second)
	src, srcCl := startSource(t)
	srcAdm := kadm.NewClient(srcCl)
	const (
		topic = "sg-orders"
		group = "sg-orders-app"
	)
	createTopic(t, ctx, srcAdm, topic, 3, nil)
	pr := manualProducer(t, src.ListenAddrs())
	// Uneven partitions (24, 21, 15 records in batches of 6, 7, 5): no
	// sum of whole partitions is 29, so one is always read partly.
	var all []*kgo.Record
	for p, shape := range [][2]int{{4, 6}, {3, 7}, {3, 5}} {
		all = append(all, produceUnique(t, ctx, pr, topic, int32(p), shape[0], shape[1], "src")...)
	}
	const consumeAtSource = 29
	ends := listOffsets(t, ctx, srcAdm, topic, false)

	// The group consumes part of the topic at the source, commits exactly
	// that, and leaves.
	sc := joinGroup(t, src.ListenAddrs()[0], group, topic)
	atSource := pollUpTo(t, ctx, sc, consumeAtSource)
	if err := sc.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("committing at the source: %v", err)
	}
	sc.leave()
	srcOffs := committed(t, ctx, srcAdm, group, topic)
	consumed := lastOffsets(atSource)
	partial := false
	for p, last := range consumed {
		o, ok := srcOffs[p]
		if !ok || o.At != last+1 {
			t.Fatalf("source commit of %s-%d: %s, want offset %d (after the last record read)", topic, p, showOffsets(srcOffs), last+1)
		}
		partial = partial || o.At < ends[p]
	}
	if len(srcOffs) != len(consumed) || !partial {
		t.Fatalf("source commits %s for records read up to %v of log ends %v: want a commit exactly for each partition read, one of them partly",
			showOffsets(srcOffs), consumed, ends)
	}

	n := startCtlNode(t, "sg", control.Config{})
	n.ok(ctx, createReq("sg", src.ListenAddrs()[0]))
	n.ok(ctx, startReq("sg", topic))
	n.waitMirrored(ctx, "sg", topic, ends)
	syncNow(t, n, "sg")
	if got := committed(t, ctx, n.adm, group, topic); !sameOffsets(got, srcOffs) {
		t.Fatalf("offsets of %s on the node after the sync: %s, want the source's %s (offset, leader epoch and metadata: no clamp applies)",
			group, showOffsets(got), showOffsets(srcOffs))
	}

	// Failover: the topic is writable on the node, which takes new writes.
	n.ok(ctx, stopReq("sg", topic))
	n.checkStates(ctx, "sg", topic, 3, "STOPPED")
	dpr := manualProducer(t, []string{n.addr()})
	var after []*kgo.Record
	for p := range int32(3) {
		after = append(after, produceUnique(t, ctx, dpr, topic, p, 1, 2, "after")...)
	}

	// The group resumes on the node and reads through the new records.
	dc := joinGroup(t, n.addr(), group, topic, protocol...)
	onNode := consumeThrough(t, ctx, dc, lastOffsets(after))
	checkExactlyOnce(t, fmt.Sprintf("group %s: %d records read at the source then %d on the node after the failover", group, len(atSource), len(onNode)),
		append(asMirrorRecords(atSource), asMirrorRecords(onNode)...), sortedUnion(asMirrorRecords(all), asMirrorRecords(after)))
}

// TestSyncGroupFailoverClamped pauses the mirror at K records per
// partition while the source goes on to E > K and its group commits at E.
// The sync clamps the node's copy to the local log end K, with leader
// epoch -1 and no metadata (the source's epoch does not describe offset
// K). After the failover (a stop from PAUSED) the group resumes at K: it
// reads none of the mirrored records again and then exactly the records
// written on the node after the failover.
func TestSyncGroupFailoverClamped(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	src, srcCl := startSource(t)
	srcAdm := kadm.NewClient(srcCl)
	const (
		topic = "sg-clamped"
		group = "sg-clamped-app"
		parts = 3
	)
	createTopic(t, ctx, srcAdm, topic, parts, nil)
	pr := manualProducer(t, src.ListenAddrs())
	var before []*kgo.Record
	for p := range int32(parts) {
		before = append(before, produceUnique(t, ctx, pr, topic, p, 2, 4, "before")...)
	}
	k := listOffsets(t, ctx, srcAdm, topic, false)

	n := startCtlNode(t, "sgc", control.Config{})
	n.ok(ctx, createReq("sgc", src.ListenAddrs()[0]))
	n.ok(ctx, startReq("sgc", topic))
	n.waitMirrored(ctx, "sgc", topic, k)
	n.ok(ctx, pauseReq("sgc", topic))
	n.checkStates(ctx, "sgc", topic, parts, "PAUSED")
	n.checkNoFetcher("sgc", topic, parts)

	// The source goes on; its group reads everything and commits at E.
	var unmirrored []*kgo.Record
	for p := range int32(parts) {
		unmirrored = append(unmirrored, produceUnique(t, ctx, pr, topic, p, 1, 5, "unmirrored")...)
	}
	e := listOffsets(t, ctx, srcAdm, topic, false)
	sc := joinGroup(t, src.ListenAddrs()[0], group, topic)
	atSource := consumeThrough(t, ctx, sc, lastOffsets(unmirrored))
	checkExactlyOnce(t, "the group at the source", asMirrorRecords(atSource), sortedUnion(asMirrorRecords(before), asMirrorRecords(unmirrored)))
	if err := sc.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("committing at the source: %v", err)
	}
	sc.leave()
	srcOffs := committed(t, ctx, srcAdm, group, topic)
	for p := range int32(parts) {
		if o, ok := srcOffs[p]; !ok || o.At != e[p] || e[p] <= k[p] {
			t.Fatalf("source commits %s, want the source ends %v, each past the mirrored ends %v", showOffsets(srcOffs), e, k)
		}
	}
	if got := listOffsets(t, ctx, n.adm, topic, false); !maps.Equal(got, k) {
		t.Fatalf("paused mirror: log ends %v, want %v", got, k)
	}

	syncNow(t, n, "sgc")
	want := map[int32]kadm.Offset{}
	for p := range int32(parts) {
		want[p] = kadm.Offset{Topic: topic, Partition: p, At: k[p], LeaderEpoch: -1}
	}
	if got := committed(t, ctx, n.adm, group, topic); !sameOffsets(got, want) {
		t.Fatalf("offsets of %s on the node after the sync: %s, want %s: the source's %s clamped to the local log ends, epoch -1, no metadata",
			group, showOffsets(got), showOffsets(want), showOffsets(srcOffs))
	}

	// Failover from PAUSED, new writes on the node, the group resumes.
	n.ok(ctx, stopReq("sgc", topic))
	n.checkStates(ctx, "sgc", topic, parts, "STOPPED")
	dpr := manualProducer(t, []string{n.addr()})
	var after []*kgo.Record
	for p := range int32(parts) {
		after = append(after, produceUnique(t, ctx, dpr, topic, p, 1, 3, "after")...)
	}
	dc := joinGroup(t, n.addr(), group, topic)
	onNode := consumeThrough(t, ctx, dc, lastOffsets(after))
	for _, r := range onNode {
		if r.Offset < k[r.Partition] {
			t.Fatalf("the group read mirrored record %s-%d at %d again: it should resume at the clamped offset %d",
				r.Topic, r.Partition, r.Offset, k[r.Partition])
		}
	}
	checkExactlyOnce(t, "the group on the node after the failover", asMirrorRecords(onNode), asMirrorRecords(after))
}

// TestSyncGroupSkipsActiveGroups checks which groups the sync leaves
// alone. A group with a member on the node (a consumer reading the mirror
// topic there and committing its own offsets) keeps its offsets although
// the source committed others, and that skip is no error; once the member
// has left and the group is empty, the next cycle copies the source's
// offsets. A group matched by groups.exclude is never copied, while an
// idle group beside it is, on the first cycle.
func TestSyncGroupSkipsActiveGroups(t *testing.T) {
	t.Parallel()
	forEachGroupProtocol(t, testSyncGroupSkipsActiveGroups)
}

func testSyncGroupSkipsActiveGroups(t *testing.T, protocol []kgo.Opt) {
	ctx := testCtx(t, 30*time.Second)
	src, srcCl := startSource(t)
	srcAdm := kadm.NewClient(srcCl)
	const (
		topic   = "sg-active"
		parts   = 2
		busy    = "sg-busy"
		idle    = "sg-idle"
		private = "private.audit"
	)
	createTopic(t, ctx, srcAdm, topic, parts, nil)
	pr := manualProducer(t, src.ListenAddrs())
	var all []*kgo.Record
	for p := range int32(parts) {
		all = append(all, produceUnique(t, ctx, pr, topic, p, 2, 5, "src")...)
	}
	ends := listOffsets(t, ctx, srcAdm, topic, false)
	// Source commits, as an admin tool or a past consumer left them.
	srcCommit := func(group string, at int64, meta string) map[int32]kadm.Offset {
		offs := kadm.Offsets{}
		for p := range int32(parts) {
			offs.Add(kadm.Offset{Topic: topic, Partition: p, At: at + int64(p), LeaderEpoch: 0, Metadata: meta})
		}
		resp, err := srcAdm.CommitOffsets(ctx, group, offs)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("committing %s at the source: %v", group, err)
		}
		return committed(t, ctx, srcAdm, group, topic)
	}
	busySrc := srcCommit(busy, 3, "busy-at-source")
	idleSrc := srcCommit(idle, 6, "idle-at-source")
	srcCommit(private, 2, "private-at-source")

	n := startCtlNode(t, "sga", control.Config{})
	n.ok(ctx, createReq("sga", src.ListenAddrs()[0], "groups.exclude", `private\..*`))
	n.ok(ctx, startReq("sga", topic))
	n.waitMirrored(ctx, "sga", topic, ends)

	// A member of busy on the node reads the mirror topic and commits
	// there; it stays in the group.
	member := joinGroup(t, n.addr(), busy, topic, protocol...)
	read := consumeThrough(t, ctx, member, lastOffsets(all))
	checkExactlyOnce(t, "the node's member of "+busy, asMirrorRecords(read), asMirrorRecords(all))
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("committing %s on the node: %v", busy, err)
	}
	busyHere := committed(t, ctx, n.adm, busy, topic)
	for p := range int32(parts) {
		if busyHere[p].At != ends[p] {
			t.Fatalf("%s on the node: offsets %s, want the log ends %v", busy, showOffsets(busyHere), ends)
		}
	}
	if d := describeGroup(t, ctx, n.adm, busy); d.State != "Stable" || len(d.Members) != 1 {
		t.Fatalf("%s on the node: state %s with %d members, want Stable with 1", busy, d.State, len(d.Members))
	}

	syncNow(t, n, "sga")
	if got := committed(t, ctx, n.adm, busy, topic); !sameOffsets(got, busyHere) {
		t.Fatalf("%s, active on the node: offsets %s after the sync, want its own %s kept (the source has %s)",
			busy, showOffsets(got), showOffsets(busyHere), showOffsets(busySrc))
	}
	if got := committed(t, ctx, n.adm, idle, topic); !sameOffsets(got, idleSrc) {
		t.Fatalf("%s, unknown on the node: offsets %s after the sync, want the source's %s", idle, showOffsets(got), showOffsets(idleSrc))
	}
	if got := committed(t, ctx, n.adm, private, topic); len(got) != 0 {
		t.Fatalf("%s, excluded by groups.exclude: offsets %s on the node after the sync, want none", private, showOffsets(got))
	}

	// The member leaves: the group is empty, and the next cycle copies
	// the source's offsets over the node's.
	member.leave()
	testutil.CheckFor(t, testutil.Left(ctx), testutil.Named(busy+" empty on the node", func() error {
		if d := describeGroup(t, ctx, n.adm, busy); d.State != "Empty" {
			return fmt.Errorf("state %s with %d members", d.State, len(d.Members))
		}
		return nil
	}))
	syncNow(t, n, "sga")
	if got := committed(t, ctx, n.adm, busy, topic); !sameOffsets(got, busySrc) {
		t.Fatalf("%s, empty on the node: offsets %s after the sync, want the source's %s (the node had %s)",
			busy, showOffsets(got), showOffsets(busySrc), showOffsets(busyHere))
	}
	if got := committed(t, ctx, n.adm, private, topic); len(got) != 0 {
		t.Fatalf("%s, excluded by groups.exclude: offsets %s on the node after a second sync, want none", private, showOffsets(got))
	}
}
