package tests

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
)

// The group tests drive the consumer group coordinator the way
// applications do: kgo group consumers across rebalances, a restart, a
// crashed member, a static member's restart, and kadm's group
// administration. Nodes run with group.initial.rebalance.delay.ms 0 so a
// group forms as soon as its first member joins.

// noRebalanceDelay turns the initial rebalance delay off.
func noRebalanceDelay(c *broker.Config) { c.GroupInitialRebalanceDelay = 0 }

// groupPoll bounds one PollRecords of a group consumer: a poll blocks while
// the member owns nothing left to read, and loops must come back to check
// their stop conditions.
const groupPoll = 250 * time.Millisecond

// groupFetchMaxWait is the consumers' fetch.max.wait.ms. kgo fetches
// partitions it was just given (by a rebalance, or once their start offset
// is resolved) only after its in-flight long poll returns, and that poll
// sits on partitions at their end for the whole max wait (kgo's default:
// 5 s). Kafka behaves the same; the tests keep the wait short.
const groupFetchMaxWait = 500 * time.Millisecond

// newGroupClient is a kgo client with groupFetchMaxWait, closed at test
// end with CloseAllowingRebalance, which also works for
// BlockRebalanceOnPoll clients that polled (Close alone would hang).
func newGroupClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.FetchMaxWait(groupFetchMaxWait)}, opts...)...)
	if err != nil {
		t.Fatalf("creating kgo client: %v", err)
	}
	t.Cleanup(cl.CloseAllowingRebalance)
	return cl
}

// endOffsets lists every partition's high watermark.
func endOffsets(t testing.TB, ctx context.Context, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s[%d]: %v", o.Topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out
}

// committedOffsets is kadm.FetchOffsets for one topic of a group, failing
// on any error.
func committedOffsets(t testing.TB, ctx context.Context, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	resps, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("FetchOffsets %s: %v", group, err)
	}
	out := map[int32]int64{}
	resps.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("FetchOffsets %s: %s[%d]: %v", group, o.Topic, o.Partition, o.Err)
		}
		if o.Topic == topic {
			out[o.Partition] = o.At
		}
	})
	return out
}

// describeGroup describes one group with kadm, failing on any error.
func describeGroup(t testing.TB, ctx context.Context, adm *kadm.Client, group string) kadm.DescribedGroup {
	t.Helper()
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatalf("DescribeGroups %s: %v", group, err)
	}
	d, ok := ds[group]
	if !ok || d.Err != nil {
		t.Fatalf("DescribeGroups %s: %+v (present %v)", group, d, ok)
	}
	return d
}

// assignedTo decodes a described member's consumer assignment of topic.
func assignedTo(m kadm.DescribedGroupMember, topic string) []int32 {
	var ps []int32
	if a, ok := m.Assigned.AsConsumer(); ok {
		for _, t := range a.Topics {
			if t.Topic == topic {
				ps = append(ps, t.Partitions...)
			}
		}
	}
	slices.Sort(ps)
	return ps
}

// pollExactly polls exactly n records with PollRecords (pollN's
// PollFetches takes whatever is buffered), failing on any fetch error or
// when ctx ends first.
func pollExactly(t testing.TB, ctx context.Context, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	out := make([]*kgo.Record, 0, n)
	for len(out) < n {
		fs := cl.PollRecords(ctx, n-len(out))
		if ctx.Err() != nil {
			t.Fatalf("after %d of %d records: %v", len(out), n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s[%d] after %d of %d records: %v", topic, p, len(out), n, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}

// produceSpread produces testRecords(topic, n, parts), record i to
// partition i%parts.
func produceSpread(t testing.TB, ctx context.Context, addr, topic string, n int, parts int32) []*kgo.Record {
	t.Helper()
	rs := testRecords(topic, n, parts, topic)
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatalf("creating producer: %v", err)
	}
	defer p.Close()
	produceAll(t, ctx, p, rs)
	return rs
}

// deliveryLog is the ledger of an at-least-once check: every record each
// member consumed and every offset commit the coordinator acknowledged. A
// record consumed while a commit covering it had already succeeded is a
// duplicate after commit: the coordinator handed out, or let someone
// rewind to, an offset the group had moved past.
type deliveryLog struct {
	topic string
	ends  map[int32]int64

	mu          sync.Mutex
	seen        map[int32][]int32 // times each offset was consumed
	distinct    int
	redelivered int // consumed again before a commit covered it
	committed   map[int32]int64
	consumedBy  map[string]int
	owned       map[string]map[int32]bool
	lost        []string
	failed      []string // commits that failed (allowed, counted)
	violations  []string
	watchers    []logWatcher
}

type logWatcher struct {
	n  int
	ch chan struct{}
}

func newDeliveryLog(topic string, ends map[int32]int64) *deliveryLog {
	l := &deliveryLog{topic: topic, ends: ends, seen: map[int32][]int32{}, committed: map[int32]int64{},
		consumedBy: map[string]int{}, owned: map[string]map[int32]bool{}}
	for p, end := range ends {
		l.seen[p] = make([]int32, end)
	}
	return l
}

func (l *deliveryLog) total() int {
	n := 0
	for _, end := range l.ends {
		n += int(end)
	}
	return n
}

// violate notes a broken guarantee (the first 20 are kept).
// REQUIRES: l.mu held.
func (l *deliveryLog) violate(format string, args ...any) {
	if len(l.violations) < 20 {
		l.violations = append(l.violations, fmt.Sprintf(format, args...))
	}
}

func (l *deliveryLog) consumed(member string, r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen, ok := l.seen[r.Partition]
	switch {
	case r.Topic != l.topic || !ok || r.Offset < 0 || r.Offset >= int64(len(seen)):
		l.violate("%s consumed %s[%d]@%d, outside what was produced", member, r.Topic, r.Partition, r.Offset)
		return
	case r.Offset < l.committed[r.Partition]:
		l.violate("%s consumed [%d]@%d after a commit of offset %d succeeded (duplicate after commit)",
			member, r.Partition, r.Offset, l.committed[r.Partition])
	}
	if seen[r.Offset] == 0 {
		l.distinct++
	} else {
		l.redelivered++
	}
	seen[r.Offset]++
	l.consumedBy[member]++
	kept := l.watchers[:0]
	for _, w := range l.watchers {
		if l.distinct >= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	l.watchers = kept
}

// reached is closed once n distinct records were consumed.
func (l *deliveryLog) reached(n int) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{})
	if l.distinct >= n {
		close(ch)
	} else {
		l.watchers = append(l.watchers, logWatcher{n, ch})
	}
	return ch
}

func (l *deliveryLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.distinct
}

// commit commits what member polled, synchronously, and notes what the
// coordinator acknowledged.
func (l *deliveryLog) commit(ctx context.Context, cl *kgo.Client, member string) {
	cl.CommitOffsetsSync(ctx, cl.UncommittedOffsets(), func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if err != nil {
			l.failed = append(l.failed, fmt.Sprintf("%s: %v", member, err))
			return
		}
		asked := map[int32]int64{}
		for _, rt := range req.Topics {
			if rt.Topic == l.topic {
				for _, rp := range rt.Partitions {
					asked[rp.Partition] = rp.Offset
				}
			}
		}
		for _, st := range resp.Topics {
			if st.Topic != l.topic {
				continue
			}
			for _, sp := range st.Partitions {
				if sp.ErrorCode != 0 {
					l.failed = append(l.failed, fmt.Sprintf("%s: [%d]: %v", member, sp.Partition, kerr.ErrorForCode(sp.ErrorCode)))
					continue
				}
				off, ok := asked[sp.Partition]
				switch {
				case !ok:
					l.violate("%s: commit response has partition %d, not in the request", member, sp.Partition)
				case off < l.committed[sp.Partition]:
					l.violate("%s: commit of [%d]@%d succeeded after one of offset %d (the commit went backwards)",
						member, sp.Partition, off, l.committed[sp.Partition])
				default:
					l.committed[sp.Partition] = off
				}
			}
		}
	})
}

func (l *deliveryLog) assigned(member string, ps []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.owned[member] == nil {
		l.owned[member] = map[int32]bool{}
	}
	for _, p := range ps {
		l.owned[member][p] = true
	}
}

func (l *deliveryLog) revoked(member string, ps []int32, lost bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range ps {
		delete(l.owned[member], p)
	}
	if lost && len(ps) > 0 {
		l.lost = append(l.lost, fmt.Sprintf("%s lost %v", member, ps))
	}
}

// ownership checks that members (and only they) own every partition, each
// once, and that every one of them owns at least one.
func (l *deliveryLog) ownership(members ...string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	owners := map[int32][]string{}
	for m, ps := range l.owned {
		for p := range ps {
			owners[p] = append(owners[p], m)
		}
	}
	for _, m := range members {
		if len(l.owned[m]) == 0 {
			return fmt.Errorf("%s owns nothing; owners %v", m, owners)
		}
	}
	for p := range l.ends {
		if len(owners[p]) != 1 || !slices.Contains(members, owners[p][0]) {
			return fmt.Errorf("partition %d owned by %v, want one of %v; owners %v", p, owners[p], members, owners)
		}
	}
	return nil
}

// unread counts the records not consumed yet on member's partitions.
func (l *deliveryLog) unread(member string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for p := range l.owned[member] {
		for _, times := range l.seen[p] {
			if times == 0 {
				n++
			}
		}
	}
	return n
}

func (l *deliveryLog) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d/%d distinct, %d redelivered before a commit, by member %v, committed %v, owned %v, failed commits %d %v",
		l.distinct, l.total(), l.redelivered, l.consumedBy, l.committed, l.owned, len(l.failed), l.failed)
}

// groupMember is one kgo group consumer of a rebalance test, polling on
// its own goroutine: BlockRebalanceOnPoll, so a revoke waits until the
// records of a poll are recorded (and every fourth poll committed), and a
// commit in OnPartitionsRevoked, so the new owner resumes where this one
// stopped.
type groupMember struct {
	name string
	cl   *kgo.Client
	stop chan struct{}
	done chan struct{}
	err  error
}

func startGroupMember(t *testing.T, ctx context.Context, addr, group, name string, protocol []kgo.Opt, l *deliveryLog,
	gates ...*pauseGate) *groupMember {
	t.Helper()
	m := &groupMember{name: name, stop: make(chan struct{}), done: make(chan struct{})}
	m.cl = newGroupClient(t, addr, append(slices.Clone(protocol),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(l.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			l.assigned(name, a[l.topic])
		}),
		kgo.OnPartitionsRevoked(func(cctx context.Context, cl *kgo.Client, r map[string][]int32) {
			l.commit(cctx, cl, name)
			l.revoked(name, r[l.topic], false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			l.revoked(name, r[l.topic], true)
		}),
	)...)
	go m.run(ctx, l, gates)
	return m
}

// run polls until every record was consumed, stop is closed or ctx ends,
// waiting at each gate.
func (m *groupMember) run(ctx context.Context, l *deliveryLog, gates []*pauseGate) {
	defer close(m.done)
	for polls := 1; ; polls++ {
		if l.count() == l.total() {
			return
		}
		select {
		case <-m.stop:
			return
		default:
		}
		for _, g := range gates {
			if !g.wait(ctx, l, m.stop) {
				return
			}
		}
		pctx, cancel := context.WithTimeout(ctx, groupPoll)
		fs := m.cl.PollRecords(pctx, 100)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && m.err == nil {
				m.err = fmt.Errorf("%s: poll: %s[%d]: %w", m.name, topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { l.consumed(m.name, r) })
		if polls%4 == 0 {
			l.commit(ctx, m.cl, m.name)
		}
		m.cl.AllowRebalance()
		if m.err != nil {
			return
		}
		if err := ctx.Err(); err != nil {
			m.err = fmt.Errorf("%s: %w", m.name, err)
			return
		}
	}
}

// pauseGate holds members once at records were consumed, until open is
// closed: the test changes the membership while records remain.
type pauseGate struct {
	at   int
	open chan struct{}
}

func (g *pauseGate) wait(ctx context.Context, l *deliveryLog, stop <-chan struct{}) bool {
	if l.count() < g.at {
		return true
	}
	select {
	case <-g.open:
		return true
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// TestGroupConsumersAcrossRebalances consumes 20,000 records with a group
// that gains a third member and then loses one mid-stream: every record
// is consumed, none after a commit covering it succeeded, and the group
// ends committed at the log end.
func TestGroupConsumersAcrossRebalances(t *testing.T) {
	t.Parallel()
	testGroupAcrossRebalances(t, "grp-rebalance", nil, "classic")
}

// TestConsumerProtocolGroupAcrossRebalances is the same run on the
// consumer group protocol (KIP-848): the coordinator assigns, and members
// hand partitions over one heartbeat at a time.
func TestConsumerProtocolGroupAcrossRebalances(t *testing.T) {
	t.Parallel()
	testGroupAcrossRebalances(t, "grp-848", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer(), kgo.StickyBalancer()),
		kgo.ServerSideBalancer()}, "consumer")
}

// testGroupAcrossRebalances runs the group of members with the protocol
// options; the group must be of type groupType.
func testGroupAcrossRebalances(t *testing.T, name string, protocol []kgo.Opt, groupType string) {
	// A hand-over takes a heartbeat or two on the consumer protocol:
	// they come every 500 ms rather than Kafka's 5 s.
	n := startNode(t, noRebalanceDelay, func(c *broker.Config) { c.GroupConsumerHeartbeatInterval = 500 * time.Millisecond })
	ctx := testCtx(t, 50*time.Second)
	adm := newAdmin(t, n.addr())
	topic, group := name, name
	const (
		parts   = 6
		records = 20000
	)
	createTopic(t, ctx, adm, topic, parts, nil)
	produceSpread(t, ctx, n.addr(), topic, records, parts)
	ends := endOffsets(t, ctx, adm, topic)
	l := newDeliveryLog(topic, ends)
	if l.total() != records {
		t.Fatalf("end offsets %v sum to %d, want %d", ends, l.total(), records)
	}

	// Members a and b consume 6,000 records and wait at the first gate
	// while c joins; everyone resumes once c owns partitions. At 13,000
	// everyone waits at the second gate while a closes (its revoke
	// commits, then it leaves), and resumes once b and c own a's
	// partitions, records of which are still unread.
	joined := &pauseGate{at: 6000, open: make(chan struct{})}
	left := &pauseGate{at: 13000, open: make(chan struct{})}
	a := startGroupMember(t, ctx, n.addr(), group, "member-a", protocol, l, joined, left)
	b := startGroupMember(t, ctx, n.addr(), group, "member-b", protocol, l, joined, left)
	members := []*groupMember{a, b}
	fail := func(format string, args ...any) {
		t.Helper()
		for _, m := range members {
			select {
			case <-m.done: // m.err is only read once run returned
				if m.err != nil {
					t.Errorf("%v", m.err)
				}
			default:
			}
		}
		t.Fatalf("%s; %s", fmt.Sprintf(format, args...), l.summary())
	}
	select {
	case <-l.reached(joined.at):
	case <-ctx.Done():
		fail("first %d records: %v", joined.at, ctx.Err())
	}
	c := startGroupMember(t, ctx, n.addr(), group, "member-c", protocol, l, joined, left)
	members = append(members, c)
	testutil.CheckFor(t, testutil.Left(ctx), testutil.Named("member-c to own partitions", func() error { return l.ownership("member-a", "member-b", "member-c") }))
	close(joined.open)
	if listed, err := adm.ListGroups(ctx); err != nil || listed[group].GroupType != groupType {
		t.Fatalf("ListGroups: %v, %+v; want the group of type %s", err, listed[group], groupType)
	}

	select {
	case <-l.reached(left.at):
	case <-ctx.Done():
		fail("first %d records: %v", left.at, ctx.Err())
	}
	close(a.stop)
	<-a.done
	unread := l.unread("member-a")
	a.cl.CloseAllowingRebalance()
	t.Logf("member-a closed after %d records, leaving %d unread on its partitions", l.count(), unread)
	testutil.CheckFor(t, testutil.Left(ctx), testutil.Named("member-b and member-c to own every partition", func() error { return l.ownership("member-b", "member-c") }))
	close(left.open)

	for _, m := range members[1:] {
		select {
		case <-m.done:
		case <-ctx.Done():
			fail("consuming everything: %v", ctx.Err())
		}
	}
	for _, m := range members {
		if m.err != nil {
			fail("member failed: %v", m.err)
		}
	}
	b.cl.CloseAllowingRebalance()
	c.cl.CloseAllowingRebalance()

	t.Logf("%s", l.summary())
	l.mu.Lock()
	for _, v := range l.violations {
		t.Errorf("%s", v)
	}
	for _, lost := range l.lost {
		t.Errorf("partitions lost (a fatal group error on a healthy node): %s", lost)
	}
	for p, seen := range l.seen {
		if i := slices.Index(seen, 0); i >= 0 {
			t.Errorf("partition %d: offset %d never consumed", p, i)
		}
	}
	if l.consumedBy["member-c"] == 0 {
		t.Errorf("member-c consumed nothing")
	}
	l.mu.Unlock()

	got := committedOffsets(t, ctx, adm, group, topic)
	if !maps.Equal(got, ends) {
		t.Errorf("committed offsets %v, want the end offsets %v", got, ends)
	}
	if d := describeGroup(t, ctx, adm, group); d.State != "Empty" || len(d.Members) != 0 {
		t.Errorf("group after every member left: state %s with %d members, want Empty with none", d.State, len(d.Members))
	}
}

// TestGroupOffsetsAfterRestart commits half a topic, restarts the node and
// resumes: the new member starts exactly at the committed offsets.
func TestGroupOffsetsAfterRestart(t *testing.T) {
	t.Parallel()
	n := startNode(t, noRebalanceDelay)
	ctx := testCtx(t, 45*time.Second)
	const (
		topic, group = "grp-restart", "grp-restart"
		parts        = 3
		records      = 3000
	)
	groupOpts := []kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit()}

	want := map[int32]int64{}
	consumed := 0
	var oldGen int32
	adminCommits := map[int32]int64{0: 7, 1: 8, 2: 9}
	func() {
		adm := kadm.NewClient(newGroupClient(t, n.addr()))
		defer adm.Close()
		createTopic(t, ctx, adm, topic, parts, nil)
		produceSpread(t, ctx, n.addr(), topic, records, parts)

		cl := newGroupClient(t, n.addr(), groupOpts...)
		defer cl.Close()
		for consumed < records/2 {
			pctx, cancel := context.WithTimeout(ctx, groupPoll)
			fs := cl.PollRecords(pctx, 200)
			cancel()
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("poll %s[%d]: %v", topic, p, err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != want[r.Partition] {
					t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, want[r.Partition])
				}
				want[r.Partition] = r.Offset + 1
				consumed++
			})
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d: %v", consumed, records/2, ctx.Err())
			}
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("commit: %v", err)
		}
		if got := committedOffsets(t, ctx, adm, group, topic); !maps.Equal(got, want) {
			t.Fatalf("committed offsets before the restart %v, want %v", got, want)
		}
		_, oldGen = cl.GroupMetadata()
		// A group that only ever had admin commits survives too.
		var offs kadm.Offsets
		for p, o := range adminCommits {
			offs.AddOffset(topic, p, o, -1)
		}
		if err := adm.CommitAllOffsets(ctx, group+"-admin", offs); err != nil {
			t.Fatalf("admin commit: %v", err)
		}
	}()
	n.restart(t)

	adm := newAdmin(t, n.addr())
	if got := committedOffsets(t, ctx, adm, group, topic); !maps.Equal(got, want) {
		t.Fatalf("committed offsets after the restart %v, want %v", got, want)
	}
	if got := committedOffsets(t, ctx, adm, group+"-admin", topic); !maps.Equal(got, adminCommits) {
		t.Errorf("admin-committed offsets after the restart %v, want %v", got, adminCommits)
	}
	cl := newGroupClient(t, n.addr(), groupOpts...)
	rest := pollN(t, ctx, cl, records-consumed)
	// Generations go on from the stored one: a member of a generation
	// from before the restart must not match a new one.
	if _, gen := cl.GroupMetadata(); gen <= oldGen {
		t.Errorf("generation %d after the restart, want more than %d from before it", gen, oldGen)
	}
	for p, rs := range byPartition(rest) {
		for i, r := range rs {
			if w := want[p] + int64(i); r.Offset != w {
				t.Fatalf("partition %d: record %d after the restart at offset %d, want %d (committed %d)", p, i, r.Offset, w, want[p])
			}
		}
	}
	ends := endOffsets(t, ctx, adm, topic)
	for p, end := range ends {
		if got := want[p] + int64(len(byPartition(rest)[p])); got != end {
			t.Errorf("partition %d: resumed at %d and read up to %d, want the end %d", p, want[p], got, end)
		}
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit after the restart: %v", err)
	}
	if got := committedOffsets(t, ctx, adm, group, topic); !maps.Equal(got, ends) {
		t.Errorf("committed offsets at the end %v, want %v", got, ends)
	}
}
