package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchTopic is the topic the groups consume and commit offsets of.
const benchTopic = "gbench"

// offsetsTopic is the coordinators' log.
const offsetsTopic = "__consumer_offsets"

// requestTimeout bounds one request, as the client default
// request.timeout.ms (30 s) does.
const requestTimeout = 30 * time.Second

// target is one running cluster as the measurements see it.
type target struct {
	name  string
	seeds []string     // every node's client listener
	pids  func() []int // the nodes' processes (none in-process)
	// topicID is benchTopic's, which OffsetCommit v10 (Kafka 4.x)
	// names instead of the topic; prepare sets it.
	topicID [16]byte
}

func newClient(t *target, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(t.seeds...), kgo.ClientID("groups-bench")}, opts...)...)
}

// topicInfo is a topic as Metadata showed it once replicated; for
// __consumer_offsets the check that both systems run it at the factor
// asked for.
type topicInfo struct {
	id                  kadm.TopicID
	partitions          int
	minReplicas, minISR int
}

// prepare creates benchTopic (partitions, replication factor 3) and waits
// for its leaders and full ISRs, then commits once (the first
// FindCoordinator creates __consumer_offsets) and waits the same for the
// offsets topic.
func prepare(ctx context.Context, t *target, partitions int) (topicInfo, error) {
	cl, err := newClient(t)
	if err != nil {
		return topicInfo{}, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	resp, err := adm.CreateTopic(rctx, int32(partitions), 3, nil, benchTopic)
	cancel()
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return topicInfo{}, fmt.Errorf("%s: creating %s: %w (%s)", t.name, benchTopic, err, resp.ErrMessage)
	}
	ti, err := waitReplicated(ctx, adm, benchTopic, 2*time.Minute)
	if err != nil {
		return topicInfo{}, fmt.Errorf("%s: %w", t.name, err)
	}
	t.topicID = [16]byte(ti.id)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: benchTopic, Partition: 0, At: 0, LeaderEpoch: -1})
		r, err := adm.CommitOffsets(rctx, "gbench-probe", os)
		cancel()
		if err == nil {
			err = r.Error()
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return topicInfo{}, fmt.Errorf("%s: the first commit: %w", t.name, err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return topicInfo{}, err
		}
	}
	info, err := waitReplicated(ctx, adm, offsetsTopic, 2*time.Minute)
	if err != nil {
		return topicInfo{}, fmt.Errorf("%s: %w", t.name, err)
	}
	return info, nil
}

// waitReplicated waits, up to d, until every partition of topic has a
// leader and all its replicas in the ISR.
func waitReplicated(ctx context.Context, adm *kadm.Client, topic string, d time.Duration) (topicInfo, error) {
	deadline := time.Now().Add(d)
	for {
		info, err := replicated(ctx, adm, topic)
		if err == nil {
			return info, nil
		}
		if time.Now().After(deadline) {
			return info, fmt.Errorf("%s not replicated within %v: %w", topic, d, err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return info, err
		}
	}
}

func replicated(ctx context.Context, adm *kadm.Client, topic string) (topicInfo, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(rctx, topic)
	if err != nil {
		return topicInfo{}, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		return topicInfo{}, fmt.Errorf("no partitions listed (%v)", td.Err)
	}
	info := topicInfo{id: td.ID, partitions: len(td.Partitions), minReplicas: 1 << 30, minISR: 1 << 30}
	for _, p := range td.Partitions {
		info.minReplicas, info.minISR = min(info.minReplicas, len(p.Replicas)), min(info.minISR, len(p.ISR))
		if p.Err != nil || p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
			return info, fmt.Errorf("partition %d: leader %d, replicas %v, isr %v (%v)", p.Partition, p.Leader, p.Replicas, p.ISR, p.Err)
		}
	}
	return info, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// committer is one commit client: its own kgo client (connection to its
// group's coordinator, which kgo finds and follows) and its own group,
// committing one partition with ever larger offsets.
type committer struct {
	cl    *kgo.Client
	group string
	req   *kmsg.OffsetCommitRequest
	off   int64
}

// newCommitters makes n committers on t, of groups gbench-<tag>-<i>, and
// commits once with each (the connection and the coordinator lookup stay
// out of every block).
func newCommitters(ctx context.Context, t *target, n int, tag string, partitions int) ([]*committer, error) {
	var cs []*committer
	for i := range n {
		cl, err := newClient(t)
		if err != nil {
			closeCommitters(cs)
			return nil, err
		}
		c := &committer{cl: cl, group: fmt.Sprintf("gbench-%s-%d", tag, i)}
		// A simple commit: generation -1 and no member id to a group
		// with no members (kadm's CommitOffsets sends the same).
		c.req = kmsg.NewPtrOffsetCommitRequest()
		c.req.Group, c.req.Generation = c.group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		// Both: kgo sends the version the node and kmsg share, and v10
		// (Kafka 4.x) names the topic by id alone.
		rt.Topic, rt.TopicID = benchTopic, t.topicID
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch = int32(i%partitions), -1
		rt.Partitions = append(rt.Partitions, rp)
		c.req.Topics = append(c.req.Topics, rt)
		cs = append(cs, c)
		if err := c.commit(ctx); err != nil {
			closeCommitters(cs)
			return nil, fmt.Errorf("the first commit of %s: %w", c.group, err)
		}
	}
	return cs, nil
}

func closeCommitters(cs []*committer) {
	for _, c := range cs {
		c.cl.Close()
	}
}

// commit sends the next offset and checks the answer.
func (c *committer) commit(ctx context.Context) error {
	c.off++
	c.req.Topics[0].Partitions[0].Offset = c.off
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.req.RequestWith(rctx, c.cl)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("OffsetCommit: %d topics answered", len(resp.Topics))
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// commitSample is one block of commits.
type commitSample struct {
	ok, failed int
	elapsed    time.Duration   // from the first send to the last answer
	lat        []time.Duration // each successful commit's round trip
	errs       map[string]int  // failed commits by error
}

// commitBlock sends n commits split over cs, each client one at a time,
// all clients at once. It fails only when ctx ends or every commit
// failed: a benchmark counts single failures.
func commitBlock(ctx context.Context, cs []*committer, n int) (commitSample, error) {
	parts := make([]commitSample, len(cs))
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range cs {
		share := n / len(cs)
		if i < n%len(cs) {
			share++
		}
		wg.Go(func() {
			s := &parts[i]
			s.lat = make([]time.Duration, 0, share)
			for range share {
				began := time.Now()
				if err := c.commit(ctx); err != nil {
					s.failed++
					if s.errs == nil {
						s.errs = map[string]int{}
					}
					s.errs[errorKind(err)]++
					continue
				}
				s.ok++
				s.lat = append(s.lat, time.Since(began))
			}
		})
	}
	wg.Wait()
	out := commitSample{elapsed: time.Since(start), errs: map[string]int{}}
	for _, p := range parts {
		out.ok, out.failed = out.ok+p.ok, out.failed+p.failed
		out.lat = append(out.lat, p.lat...)
		for k, v := range p.errs {
			out.errs[k] += v
		}
	}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	if n > 0 && out.ok == 0 {
		return out, fmt.Errorf("all %d commits failed: %v", n, out.errs)
	}
	return out, nil
}

// errorKind is a short, bounded name of a failed request's error.
func errorKind(err error) string {
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke.Message
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	default:
		s := err.Error()
		return s[max(0, len(s)-60):]
	}
}

// coordinatorSpread names how many of cs's groups each node coordinates,
// "1:3 2:3 3:2".
func coordinatorSpread(ctx context.Context, cs []*committer) (string, error) {
	var groups []string
	for _, c := range cs {
		groups = append(groups, c.group)
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	per := map[int32]int{}
	for g, r := range kadm.NewClient(cs[0].cl).FindGroupCoordinators(rctx, groups...) {
		if r.Err != nil {
			return "", fmt.Errorf("FindCoordinator %s: %w", g, r.Err)
		}
		per[r.NodeID]++
	}
	var out []string
	for _, id := range slices.Sorted(maps.Keys(per)) {
		out = append(out, fmt.Sprintf("%d:%d", id, per[id]))
	}
	return strings.Join(out, " "), nil
}

// roundResult is one rebalance round's three phases.
type roundResult struct {
	form, leave, join time.Duration
	generation        int32 // the group's generation when the join settled
	members           int   // the live members then
}

// rebalanceRound runs one round on t with a fresh group of k members:
// start k (form), Close one (leave), start one more (join), each timed
// until the group is settled; then every member is closed.
func rebalanceRound(ctx context.Context, t *target, tag string, k, partitions int, hb, settle time.Duration) (roundResult, error) {
	w := &groupWatch{t: t, group: "gbench-rb-" + tag, parts: partitions, hb: hb, change: make(chan struct{})}
	defer w.closeAll()
	var r roundResult
	start := time.Now()
	for range k {
		if err := w.add(); err != nil {
			return r, err
		}
	}
	if _, err := w.wait(ctx, settle, "form"); err != nil {
		return r, err
	}
	r.form = time.Since(start)

	start = time.Now()
	w.remove(0)
	if _, err := w.wait(ctx, settle, "leave"); err != nil {
		return r, err
	}
	r.leave = time.Since(start)

	start = time.Now()
	if err := w.add(); err != nil {
		return r, err
	}
	gen, err := w.wait(ctx, settle, "join")
	if err != nil {
		return r, err
	}
	r.join, r.generation = time.Since(start), gen
	w.mu.Lock()
	for _, m := range w.members {
		if !m.gone {
			r.members++
		}
	}
	w.mu.Unlock()
	return r, nil
}

// groupWatch follows the members of one group through kgo's callbacks.
type groupWatch struct {
	t     *target
	group string
	parts int
	hb    time.Duration

	mu      sync.Mutex
	members []*member
	change  chan struct{} // closed, and replaced, at every callback
}

// member is one kgo consumer of the group as its callbacks left it.
type member struct {
	cl    *kgo.Client
	owned map[int32]bool
	gen   int32 // of its last SyncGroup; -1 before the first
	gone  bool  // closed: no longer counted
}

// add starts a member. kgo joins the group from NewClient on, with no
// poll: the measurement needs no records.
func (w *groupWatch) add() error {
	m := &member{owned: map[int32]bool{}, gen: -1}
	w.mu.Lock()
	w.members = append(w.members, m)
	w.mu.Unlock()
	update := func(ps []int32, add bool, cl *kgo.Client) {
		// GroupMetadata before the lock: the callbacks run on kgo's
		// goroutines, not under w.mu.
		gen := int32(-1)
		if add {
			_, gen = cl.GroupMetadata()
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, p := range ps {
			if add {
				m.owned[p] = true
			} else {
				delete(m.owned, p)
			}
		}
		// kgo calls OnPartitionsAssigned after every SyncGroup, new
		// partitions or none: the generation is the member's last sync.
		if add {
			m.gen = gen
		}
		close(w.change)
		w.change = make(chan struct{})
	}
	cl, err := newClient(w.t,
		kgo.ConsumerGroup(w.group),
		kgo.ConsumeTopics(benchTopic),
		kgo.HeartbeatInterval(w.hb),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, a map[string][]int32) {
			update(a[benchTopic], true, cl)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, r map[string][]int32) {
			update(r[benchTopic], false, cl)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, l map[string][]int32) {
			update(l[benchTopic], false, cl)
		}),
	)
	if err != nil {
		return err
	}
	w.mu.Lock()
	m.cl = cl
	w.mu.Unlock()
	return nil
}

// remove closes member i, which leaves the group (LeaveGroup) in Close.
// It stops counting before Close: the revocations Close reports are its.
func (w *groupWatch) remove(i int) {
	w.mu.Lock()
	m := w.members[i]
	m.gone = true
	w.mu.Unlock()
	m.cl.Close()
}

// settledLocked reports whether every live member synced in one
// generation, owns a partition, and the live members own every
// partition once. It returns that generation.
// REQUIRES: w.mu held.
func (w *groupWatch) settledLocked() (int32, bool) {
	gen, live := int32(-1), 0
	owner := make([]int, w.parts)
	for _, m := range w.members {
		if m.gone {
			continue
		}
		live++
		if m.gen < 0 || (gen >= 0 && m.gen != gen) || len(m.owned) == 0 {
			return -1, false
		}
		gen = m.gen
		for p := range m.owned {
			if p < 0 || int(p) >= w.parts {
				return -1, false
			}
			owner[p]++
		}
	}
	for _, n := range owner {
		if n != 1 {
			return -1, false
		}
	}
	return gen, live > 0
}

// wait waits up to d for the group to settle and returns its generation.
func (w *groupWatch) wait(ctx context.Context, d time.Duration, phase string) (int32, error) {
	timeout := time.After(d)
	for {
		w.mu.Lock()
		gen, ok := w.settledLocked()
		ch := w.change
		w.mu.Unlock()
		if ok {
			return gen, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-timeout:
			return -1, fmt.Errorf("group %s, %s: not settled after %v: %s", w.group, phase, d, w.describe())
		}
	}
}

// describe is each member's generation and partitions, for an error.
func (w *groupWatch) describe() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for i, m := range w.members {
		if !m.gone {
			out = append(out, fmt.Sprintf("member %d gen %d owns %v", i, m.gen, slices.Sorted(maps.Keys(m.owned))))
		}
	}
	return strings.Join(out, "; ")
}

// closeAll closes the members still open, all at once.
func (w *groupWatch) closeAll() {
	w.mu.Lock()
	var cls []*kgo.Client
	for _, m := range w.members {
		if !m.gone && m.cl != nil {
			m.gone = true
			cls = append(cls, m.cl)
		}
	}
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, cl := range cls {
		wg.Go(cl.Close)
	}
	wg.Wait()
}
