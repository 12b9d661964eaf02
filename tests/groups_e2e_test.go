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

// pollCond calls cond every 20 ms until it returns nil; the test fails
// with cond's last answer when ctx ends first.
func pollCond(t testing.TB, ctx context.Context, what string, cond func() error) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; last check: %v", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
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

func startGroupMember(t *testing.T, ctx context.Context, addr, group, name string, l *deliveryLog, gates ...*pauseGate) *groupMember {
	t.Helper()
	m := &groupMember{name: name, stop: make(chan struct{}), done: make(chan struct{})}
	m.cl = newGroupClient(t, addr,
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
	)
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
	n := startNode(t, noRebalanceDelay)
	ctx := testCtx(t, 50*time.Second)
	adm := newAdmin(t, n.addr())
	const (
		topic, group = "grp-rebalance", "grp-rebalance"
		parts        = 6
		records      = 20000
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
	a := startGroupMember(t, ctx, n.addr(), group, "member-a", l, joined, left)
	b := startGroupMember(t, ctx, n.addr(), group, "member-b", l, joined, left)
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
	c := startGroupMember(t, ctx, n.addr(), group, "member-c", l, joined, left)
	members = append(members, c)
	pollCond(t, ctx, "member-c to own partitions", func() error { return l.ownership("member-a", "member-b", "member-c") })
	close(joined.open)

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
	pollCond(t, ctx, "member-b and member-c to own every partition", func() error { return l.ownership("member-b", "member-c") })
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

// rawMember is a group member driven by hand with kmsg requests through a
// plain kgo client: it joins and syncs like a consumer, then can stop
// heartbeating, which is what a crashed process looks like to the
// coordinator.
type rawMember struct {
	cl              *kgo.Client
	group, memberID string
	generation      int32
	metadata        []byte
}

const rawSession = time.Second

func newRawMember(t *testing.T, addr, group, topic string) *rawMember {
	t.Helper()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 1
	meta.Topics = []string{topic}
	return &rawMember{cl: newClient(t, addr, kgo.ClientID("raw-member")), group: group, metadata: meta.AppendTo(nil)}
}

// join joins (twice on MEMBER_ID_REQUIRED) and returns the response.
func (r *rawMember) join(t *testing.T, ctx context.Context) *kmsg.JoinGroupResponse {
	t.Helper()
	resp, err := r.tryJoin(ctx)
	if err != nil {
		t.Fatalf("raw JoinGroup: %v", err)
	}
	return resp
}

// tryJoin is join for other goroutines than the test's.
func (r *rawMember) tryJoin(ctx context.Context) (*kmsg.JoinGroupResponse, error) {
	for range 2 {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID = r.group, r.memberID
		req.SessionTimeoutMillis = int32(rawSession / time.Millisecond)
		req.RebalanceTimeoutMillis = 5000
		req.ProtocolType = "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "cooperative-sticky", r.metadata
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(ctx, r.cl)
		if err != nil {
			return nil, err
		}
		r.memberID = resp.MemberID
		if resp.ErrorCode == kerr.MemberIDRequired.Code {
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, err
		}
		r.generation = resp.Generation
		return resp, nil
	}
	return nil, errors.New("MEMBER_ID_REQUIRED twice")
}

// sync sends the leader's assignment (member id to partitions).
func (r *rawMember) sync(t *testing.T, ctx context.Context, topic string, plan map[string][]int32) []int32 {
	t.Helper()
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = r.group, r.memberID, r.generation
	pt, proto := "consumer", "cooperative-sticky"
	req.ProtocolType, req.Protocol = &pt, &proto
	for id, ps := range plan {
		a := kmsg.NewConsumerMemberAssignment()
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = topic, ps
		a.Topics = append(a.Topics, at)
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, a.AppendTo(nil)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		t.Fatalf("raw SyncGroup: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("raw SyncGroup: %v", err)
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(resp.MemberAssignment); err != nil {
		t.Fatalf("raw SyncGroup: decoding the assignment: %v", err)
	}
	var ps []int32
	for _, at := range a.Topics {
		ps = append(ps, at.Partitions...)
	}
	return ps
}

// heartbeat sends one heartbeat and returns its error code.
func (r *rawMember) heartbeat(t *testing.T, ctx context.Context) error {
	t.Helper()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = r.group, r.memberID, r.generation
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		t.Fatalf("raw Heartbeat: %v", err)
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// awaitRebalance heartbeats every 100 ms until the coordinator answers
// REBALANCE_IN_PROGRESS.
func (r *rawMember) awaitRebalance(t *testing.T, ctx context.Context) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := r.heartbeat(t, ctx)
		if errors.Is(err, kerr.RebalanceInProgress) {
			return
		}
		if err != nil {
			t.Fatalf("raw heartbeat while waiting for a rebalance: %v", err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("waiting for a rebalance: %v", ctx.Err())
		}
	}
}

// TestGroupSessionExpiry has a hand-driven member take half the partitions
// and then go silent: after its session timeout the coordinator removes
// it and the kgo member gets everything.
func TestGroupSessionExpiry(t *testing.T) {
	t.Parallel()
	n := startNode(t, noRebalanceDelay, func(c *broker.Config) { c.GroupMinSessionTimeout = 500 * time.Millisecond })
	ctx := testCtx(t, 30*time.Second)
	adm := newAdmin(t, n.addr())
	const (
		topic, group = "grp-expiry", "grp-expiry"
		parts        = 4
		records      = 400
	)
	createTopic(t, ctx, adm, topic, parts, nil)
	produceSpread(t, ctx, n.addr(), topic, records, parts)

	// Generation 1: the raw member alone, with every partition.
	raw := newRawMember(t, n.addr(), group, topic)
	if resp := raw.join(t, ctx); resp.LeaderID != raw.memberID || len(resp.Members) != 1 {
		t.Fatalf("first join: leader %q with %d members, want %q alone", resp.LeaderID, len(resp.Members), raw.memberID)
	}
	raw.sync(t, ctx, topic, map[string][]int32{raw.memberID: {0, 1, 2, 3}})

	type assignment struct {
		at time.Time
		ps []int32
	}
	var (
		mu      sync.Mutex
		assigns []assignment
	)
	k := newGroupClient(t, n.addr(),
		kgo.ClientID("kgo-member"),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(rawSession),
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.RebalanceTimeout(5*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			ps := slices.Clone(a[topic])
			slices.Sort(ps)
			assigns = append(assigns, assignment{time.Now(), ps})
		}),
	)

	// The kgo member's join starts a rebalance; the raw member hears of it
	// from its heartbeat, rejoins, leads generation 2 and keeps two
	// partitions.
	raw.awaitRebalance(t, ctx)
	resp := raw.join(t, ctx)
	if resp.LeaderID != raw.memberID || len(resp.Members) != 2 {
		t.Fatalf("second join: leader %q with %d members, want %q with 2", resp.LeaderID, len(resp.Members), raw.memberID)
	}
	var kgoID string
	for _, m := range resp.Members {
		if m.MemberID != raw.memberID {
			kgoID = m.MemberID
		}
	}
	// The session timer restarts at this SyncGroup, the raw member's last
	// request: no expiry may happen before silent+rawSession.
	silent := time.Now()
	raw.sync(t, ctx, topic, map[string][]int32{raw.memberID: {0, 1}, kgoID: {2, 3}})

	got := pollN(t, ctx, k, records)
	seen := map[string]bool{}
	for _, r := range got {
		key := fmt.Sprintf("%d@%d", r.Partition, r.Offset)
		if seen[key] {
			t.Fatalf("record %s consumed twice", key)
		}
		seen[key] = true
	}
	mu.Lock()
	history := slices.Clone(assigns)
	mu.Unlock()
	var expiredAt time.Time
	for _, a := range history {
		if slices.Contains(a.ps, 0) && slices.Contains(a.ps, 1) {
			expiredAt = a.at
			break
		}
	}
	switch {
	case len(history) == 0 || !slices.Equal(history[0].ps, []int32{2, 3}):
		t.Errorf("kgo member assignments %v, want [2 3] first (the raw leader's plan)", history)
	case expiredAt.IsZero():
		t.Errorf("kgo member never got partitions 0 and 1: %v", history)
	case expiredAt.Sub(silent) < rawSession:
		t.Errorf("partitions 0 and 1 reassigned %v after the raw member's last request, before its %v session timeout",
			expiredAt.Sub(silent), rawSession)
	default:
		t.Logf("partitions 0 and 1 moved %v after the raw member went silent", expiredAt.Sub(silent))
	}

	if err := raw.heartbeat(t, ctx); !errors.Is(err, kerr.UnknownMemberID) {
		t.Errorf("heartbeat of the expired member: %v, want UNKNOWN_MEMBER_ID", err)
	}
	d := describeGroup(t, ctx, adm, group)
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != kgoID {
		t.Fatalf("group after the expiry: %s with %+v, want Stable with %s alone", d.State, d.Members, kgoID)
	}
	if ps := assignedTo(d.Members[0], topic); !slices.Equal(ps, []int32{0, 1, 2, 3}) {
		t.Errorf("kgo member assigned %v, want every partition", ps)
	}
}

// TestGroupStaticMembership restarts a static member (kgo.InstanceID)
// within its session: the new process takes the old one's place in the
// same generation, without a rebalance, and consumption goes on from the
// committed offsets.
func TestGroupStaticMembership(t *testing.T) {
	t.Parallel()
	n := startNode(t, noRebalanceDelay)
	ctx := testCtx(t, 30*time.Second)
	adm := newAdmin(t, n.addr())
	const (
		topic, group = "grp-static", "grp-static"
		parts        = 3
		records      = 900
	)
	createTopic(t, ctx, adm, topic, parts, nil)
	produceSpread(t, ctx, n.addr(), topic, records, parts)
	opts := func(client string) []kgo.Opt {
		return []kgo.Opt{kgo.ClientID(client), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.InstanceID("a"), kgo.SessionTimeout(10 * time.Second)}
	}

	first := newGroupClient(t, n.addr(), opts("static-1")...)
	before := pollExactly(t, ctx, first, records/3)
	if err := first.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	committed := committedOffsets(t, ctx, adm, group, topic)
	oldID, oldGen := first.GroupMetadata()
	d := describeGroup(t, ctx, adm, group)
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != oldID {
		t.Fatalf("group before the restart: %s with %+v, want Stable with %s", d.State, d.Members, oldID)
	}
	first.Close() // a static member does not leave

	d = describeGroup(t, ctx, adm, group)
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != oldID {
		t.Fatalf("group after the static member closed: %s with %+v, want Stable with %s still in it", d.State, d.Members, oldID)
	}

	second := newGroupClient(t, n.addr(), opts("static-2")...)
	after := pollN(t, ctx, second, records-len(before))
	for p, rs := range byPartition(after) {
		if rs[0].Offset != committed[p] {
			t.Errorf("partition %d: the restarted member began at %d, want the committed %d", p, rs[0].Offset, committed[p])
		}
	}
	newID, newGen := second.GroupMetadata()
	fenced := kmsg.NewPtrHeartbeatRequest()
	fenced.Group, fenced.MemberID, fenced.Generation = group, oldID, oldGen
	fenced.InstanceID = kmsg.StringPtr("a")
	if resp, err := fenced.RequestWith(ctx, newClient(t, n.addr())); err != nil {
		t.Errorf("heartbeat of the replaced process: %v", err)
	} else if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.FencedInstanceID) {
		t.Errorf("heartbeat of the replaced process (old member id, instance a): %v, want FENCED_INSTANCE_ID", err)
	}
	if newGen != oldGen {
		t.Errorf("generation %d after the static rejoin, want %d (no rebalance)", newGen, oldGen)
	}
	if newID == oldID {
		t.Errorf("the restarted static member kept member id %s; KIP-345 gives it a new one", newID)
	}
	d = describeGroup(t, ctx, adm, group)
	switch {
	case d.State != "Stable" || len(d.Members) != 1:
		t.Errorf("group after the static rejoin: %s with %d members, want Stable with 1", d.State, len(d.Members))
	case d.Members[0].MemberID != newID || d.Members[0].InstanceID == nil || *d.Members[0].InstanceID != "a" ||
		d.Members[0].ClientID != "static-2":
		t.Errorf("member after the static rejoin %+v, want %s, instance a, client static-2", d.Members[0], newID)
	case !slices.Equal(assignedTo(d.Members[0], topic), []int32{0, 1, 2}):
		t.Errorf("assignment after the static rejoin %v, want [0 1 2]", assignedTo(d.Members[0], topic))
	}
	if err := second.CommitUncommittedOffsets(ctx); err != nil {
		t.Errorf("commit in the kept generation: %v", err)
	}
}

// TestGroupAdmin exercises kadm's group administration against an active
// group and an offsets-only (empty) one.
func TestGroupAdmin(t *testing.T) {
	t.Parallel()
	n := startNode(t, noRebalanceDelay)
	ctx := testCtx(t, 30*time.Second)
	adm := newAdmin(t, n.addr())
	const (
		topic          = "grp-admin"
		active, simple = "grp-admin-active", "grp-admin-simple"
		missing        = "grp-admin-missing"
		parts          = 3
		records        = 300
	)
	createTopic(t, ctx, adm, topic, parts, nil)
	produceSpread(t, ctx, n.addr(), topic, records, parts)
	ends := endOffsets(t, ctx, adm, topic)

	cons := newGroupClient(t, n.addr(), kgo.ClientID("admin-consumer"), kgo.ConsumerGroup(active),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	polled := pollExactly(t, ctx, cons, records/2)
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	activeCommits := map[int32]int64{}
	for _, r := range polled {
		activeCommits[r.Partition] = max(activeCommits[r.Partition], r.Offset+1)
	}

	// The subtests run in order, not in parallel: each leaves the groups
	// as the next one expects them.
	t.Run("CommitOffsets", func(t *testing.T) {
		var offs kadm.Offsets
		for p := range int32(parts) {
			offs.AddOffset(topic, p, int64(10*(p+1)), -1)
		}
		resps, err := adm.CommitOffsets(ctx, simple, offs)
		if err != nil || resps.Error() != nil {
			t.Fatalf("admin commit to an empty group: %v / %v", err, resps.Error())
		}
		if got, want := committedOffsets(t, ctx, adm, simple, topic), (map[int32]int64{0: 10, 1: 20, 2: 30}); !maps.Equal(got, want) {
			t.Errorf("FetchOffsets %s: %v, want %v", simple, got, want)
		}
		// Kafka refuses a generation -1 commit into a group with members.
		resps, err = adm.CommitOffsets(ctx, active, offs)
		if err != nil {
			t.Fatalf("admin commit to an active group: %v", err)
		}
		resps.Each(func(o kadm.OffsetResponse) {
			if !errors.Is(o.Err, kerr.UnknownMemberID) {
				t.Errorf("admin commit of %s[%d] into the active group: %v, want UNKNOWN_MEMBER_ID", o.Topic, o.Partition, o.Err)
			}
		})
		if got := committedOffsets(t, ctx, adm, active, topic); !maps.Equal(got, activeCommits) {
			t.Errorf("FetchOffsets %s after the refused commit: %v, want %v", active, got, activeCommits)
		}
	})

	t.Run("ListGroups", func(t *testing.T) {
		cases := []struct {
			states []string
			want   map[string]string // group -> state
		}{
			{nil, map[string]string{active: "Stable", simple: "Empty"}},
			{[]string{"Stable"}, map[string]string{active: "Stable"}},
			{[]string{"empty"}, map[string]string{simple: "Empty"}}, // case-insensitive, as Kafka
			{[]string{"Dead", "PreparingRebalance"}, map[string]string{}},
		}
		for _, c := range cases {
			listed, err := adm.ListGroups(ctx, c.states...)
			if err != nil {
				t.Fatalf("ListGroups %v: %v", c.states, err)
			}
			got := map[string]string{}
			for name, g := range listed {
				got[name] = g.State
				if g.Coordinator != 1 || g.GroupType != "classic" {
					t.Errorf("ListGroups %v: %s: coordinator %d, type %q, want 1, classic", c.states, name, g.Coordinator, g.GroupType)
				}
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("ListGroups %v: %v, want %v", c.states, got, c.want)
			}
			if g, ok := listed[active]; ok && g.ProtocolType != "consumer" {
				t.Errorf("ListGroups: %s protocol type %q, want consumer", active, g.ProtocolType)
			}
		}
	})

	t.Run("DescribeGroups", func(t *testing.T) {
		ds, err := adm.DescribeGroups(ctx, active, simple, missing)
		if err != nil {
			t.Fatalf("DescribeGroups: %v", err)
		}
		a := ds[active]
		if a.Err != nil || a.State != "Stable" || a.ProtocolType != "consumer" || a.Protocol != "cooperative-sticky" || len(a.Members) != 1 {
			t.Fatalf("%s: %+v, want Stable consumer/cooperative-sticky with one member", active, a)
		}
		memberID, _ := cons.GroupMetadata()
		m := a.Members[0]
		if m.MemberID != memberID || m.ClientID != "admin-consumer" || m.ClientHost != "/127.0.0.1" || m.InstanceID != nil {
			t.Errorf("member %+v, want id %s, client admin-consumer from /127.0.0.1, no instance id", m, memberID)
		}
		if join, ok := m.Join.AsConsumer(); !ok || !slices.Equal(join.Topics, []string{topic}) {
			t.Errorf("member subscription %+v, want [%s]", join, topic)
		}
		if ps := assignedTo(m, topic); !slices.Equal(ps, []int32{0, 1, 2}) {
			t.Errorf("member assignment %v, want [0 1 2]", ps)
		}
		if s := ds[simple]; s.Err != nil || s.State != "Empty" || len(s.Members) != 0 {
			t.Errorf("%s: %+v, want Empty without members", simple, s)
		}
		// Dead, with GROUP_ID_NOT_FOUND from v6 (KIP-1043):
		// TestGroupProtocolEdges checks the versions.
		if s := ds[missing]; s.State != "Dead" || s.Err != nil && !errors.Is(s.Err, kerr.GroupIDNotFound) {
			t.Errorf("%s: %+v, want Dead", missing, s)
		}
	})

	t.Run("Lag", func(t *testing.T) {
		lags, err := adm.Lag(ctx, active, simple)
		if err != nil || lags.Error() != nil {
			t.Fatalf("Lag: %v / %v", err, lags.Error())
		}
		want := map[string]map[int32]int64{active: {}, simple: {}}
		for p, end := range ends {
			want[active][p] = end - activeCommits[p]
			want[simple][p] = end - int64(10*(p+1))
		}
		for _, group := range []string{active, simple} {
			got := map[int32]int64{}
			for _, ml := range lags[group].Lag.Sorted() {
				if ml.Err != nil {
					t.Errorf("%s lag of [%d]: %v", group, ml.Partition, ml.Err)
				}
				if ml.IsEmpty() != (group == simple) {
					t.Errorf("%s lag of [%d]: member %v", group, ml.Partition, ml.Member)
				}
				got[ml.Partition] = ml.Lag
			}
			if !maps.Equal(got, want[group]) {
				t.Errorf("%s lag %v, want %v", group, got, want[group])
			}
		}
		// CalculateGroupLag over the three pieces gives the same.
		fetched, err := adm.FetchOffsets(ctx, active)
		if err != nil {
			t.Fatalf("FetchOffsets: %v", err)
		}
		listed, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatalf("ListEndOffsets: %v", err)
		}
		calc := kadm.CalculateGroupLag(describeGroup(t, ctx, adm, active), fetched, listed)
		for p, w := range want[active] {
			if got, ok := calc.Lookup(topic, p); !ok || got.Lag != w {
				t.Errorf("CalculateGroupLag [%d]: %+v, want lag %d", p, got, w)
			}
		}
	})

	t.Run("delete while active", func(t *testing.T) {
		resps, err := adm.DeleteOffsets(ctx, active, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
		if err != nil {
			t.Fatalf("DeleteOffsets: %v", err)
		}
		for p := range int32(parts) {
			if err, ok := resps.Lookup(topic, p); !ok || !errors.Is(err, kerr.GroupSubscribedToTopic) {
				t.Errorf("DeleteOffsets [%d] of a subscribed topic: %v (present %v), want GROUP_SUBSCRIBED_TO_TOPIC", p, err, ok)
			}
		}
		dr, err := adm.DeleteGroups(ctx, active)
		if err != nil {
			t.Fatalf("DeleteGroups: %v", err)
		}
		if !errors.Is(dr[active].Err, kerr.NonEmptyGroup) {
			t.Errorf("DeleteGroups of the active group: %v, want NON_EMPTY_GROUP", dr[active].Err)
		}
		if got := committedOffsets(t, ctx, adm, active, topic); !maps.Equal(got, activeCommits) {
			t.Errorf("FetchOffsets after the refused deletes: %v, want %v", got, activeCommits)
		}
	})
	if t.Failed() {
		return
	}

	cons.Close() // leaves: the group is Empty
	t.Run("delete when empty", func(t *testing.T) {
		if d := describeGroup(t, ctx, adm, active); d.State != "Empty" {
			t.Fatalf("%s after its member left: %s, want Empty", active, d.State)
		}
		resps, err := adm.DeleteOffsets(ctx, active, kadm.TopicsSet{topic: {0: {}}})
		if err != nil || resps.Error() != nil {
			t.Fatalf("DeleteOffsets of an empty group: %v / %v", err, resps.Error())
		}
		want := maps.Clone(activeCommits)
		delete(want, 0)
		if got := committedOffsets(t, ctx, adm, active, topic); !maps.Equal(got, want) {
			t.Errorf("FetchOffsets after deleting [0]: %v, want %v", got, want)
		}

		dr, err := adm.DeleteGroups(ctx, active, simple, missing)
		if err != nil {
			t.Fatalf("DeleteGroups: %v", err)
		}
		for _, g := range []string{active, simple} {
			if dr[g].Err != nil {
				t.Errorf("DeleteGroups %s: %v", g, dr[g].Err)
			}
		}
		if !errors.Is(dr[missing].Err, kerr.GroupIDNotFound) {
			t.Errorf("DeleteGroups of an unknown group: %v, want GROUP_ID_NOT_FOUND", dr[missing].Err)
		}
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			t.Fatalf("ListGroups: %v", err)
		}
		if names := listed.Groups(); len(names) != 0 {
			t.Errorf("ListGroups after deleting every group: %v", names)
		}
		ds, err := adm.DescribeGroups(ctx, active, simple)
		if err != nil {
			t.Fatalf("DescribeGroups: %v", err)
		}
		for _, g := range []string{active, simple} {
			if d := ds[g]; d.State != "Dead" || d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) {
				t.Errorf("DescribeGroups %s after deletion: %s (%v), want Dead", g, d.State, d.Err)
			}
			if got := committedOffsets(t, ctx, adm, g, topic); len(got) != 0 {
				t.Errorf("FetchOffsets %s after deletion: %v, want none", g, got)
			}
		}
	})
}

// TestGroupProtocolEdges pins coordinator answers where Kafka's rules are
// easy to miss, with hand-driven members and pinned versions.
func TestGroupProtocolEdges(t *testing.T) {
	t.Parallel()
	n := startNode(t, noRebalanceDelay, func(c *broker.Config) { c.GroupMinSessionTimeout = 500 * time.Millisecond })
	ctx := testCtx(t, 30*time.Second)
	adm := newAdmin(t, n.addr())
	const topic = "grp-edges"
	createTopic(t, ctx, adm, topic, 2, nil)

	// Kafka answers a heartbeat in CompletingRebalance with NONE and
	// restarts the session timer ("consumers may start sending heartbeats
	// after the join-group response": GroupCoordinator.handleHeartbeat,
	// and GroupMetadataManager.classicGroupHeartbeat since 3.7). Only
	// PreparingRebalance answers REBALANCE_IN_PROGRESS. The Java
	// consumer's heartbeat thread runs between JoinGroup and SyncGroup.
	t.Run("heartbeat while CompletingRebalance", func(t *testing.T) {
		t.Parallel()
		const group = "grp-edges-completing"
		leader := newRawMember(t, n.addr(), group, topic)
		leader.join(t, ctx)
		leader.sync(t, ctx, topic, map[string][]int32{leader.memberID: {0, 1}})

		follower := newRawMember(t, n.addr(), group, topic)
		joined := make(chan error, 1)
		go func() {
			_, err := follower.tryJoin(ctx)
			joined <- err
		}()
		leader.awaitRebalance(t, ctx)
		if resp := leader.join(t, ctx); len(resp.Members) != 2 {
			t.Fatalf("leader's rejoin: %d members, want 2", len(resp.Members))
		}
		if err := <-joined; err != nil {
			t.Fatalf("follower's join: %v", err)
		}
		// Both have generation 2; the group waits for the leader's plan.
		if d := describeGroup(t, ctx, adm, group); d.State != "CompletingRebalance" {
			t.Fatalf("group state %s, want CompletingRebalance", d.State)
		}
		if err := follower.heartbeat(t, ctx); err != nil {
			t.Errorf("heartbeat of a joined member while CompletingRebalance: %v, want NONE as Kafka answers", err)
		}
		leader.sync(t, ctx, topic, map[string][]int32{leader.memberID: {0}, follower.memberID: {1}})
		if ps := follower.sync(t, ctx, topic, nil); !slices.Equal(ps, []int32{1}) {
			t.Errorf("follower assigned %v, want [1]", ps)
		}
		if err := follower.heartbeat(t, ctx); err != nil {
			t.Errorf("heartbeat when Stable: %v", err)
		}
	})

	// DescribeGroups v6 (KIP-1043) reports an unknown group as Dead with
	// GROUP_ID_NOT_FOUND; earlier versions as Dead with no error.
	t.Run("DescribeGroups of an unknown group", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			version int16
			want    error
		}{{5, nil}, {6, kerr.GroupIDNotFound}} {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.SetVersion(c.version)
			req.Groups = []string{"grp-edges-unknown"}
			resp := rawRequest(t, ctx, n.addr(), req).(*kmsg.DescribeGroupsResponse)
			if len(resp.Groups) != 1 {
				t.Fatalf("v%d: %d groups described, want 1", c.version, len(resp.Groups))
			}
			g := resp.Groups[0]
			if err := kerr.ErrorForCode(g.ErrorCode); g.State != "Dead" || !errors.Is(err, c.want) && err != c.want {
				t.Errorf("DescribeGroups v%d of an unknown group: state %s, error %v; want Dead, %v", c.version, g.State, err, c.want)
			}
		}
	})
}
