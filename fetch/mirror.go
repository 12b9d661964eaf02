package fetch

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/retry"
	"github.com/kmirror/kmirror/partition"
)

type topicPartition struct {
	topic     string
	partition int32
}

// fetcherKey names a fetcher: source broker and fetcher id (SPEC.md
// section 5 keys fetchers by (fetcher id, source broker, mirror)).
type fetcherKey struct {
	broker int32
	id     int
}

// mirror is one mirror's partitions, fetchers and metadata client.
type mirror struct {
	m      *Manager
	cfg    MirrorConfig
	admin  *kgo.Client
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	parts    map[topicPartition]*partState
	fetchers map[fetcherKey]*fetcher
	throttle *throttle
	// noIDsLogged are the topics whose source was logged to have no
	// topic ids (once per topic, not per partition).
	noIDsLogged map[string]bool

	resolve chan struct{} // wakes the resolver
	wg      sync.WaitGroup
}

func newMirror(m *Manager, cfg MirrorConfig, admin *kgo.Client) *mirror {
	ctx, cancel := context.WithCancel(context.Background())
	mr := &mirror{m: m, cfg: cfg, admin: admin, ctx: ctx, cancel: cancel,
		parts: map[topicPartition]*partState{}, fetchers: map[fetcherKey]*fetcher{}, noIDsLogged: map[string]bool{},
		throttle: newThrottle(cfg.ThrottleBytesPerSecond), resolve: make(chan struct{}, 1)}
	mr.wg.Add(1)
	go mr.resolver()
	return mr
}

func (mr *mirror) wakeResolver() {
	select {
	case mr.resolve <- struct{}{}:
	default:
	}
}

func (mr *mirror) start(tp topicPartition, local partition.Follower, mode StartMode) {
	mr.stopPartition(tp)
	ps := &partState{tp: tp, local: local, mirror: mr, leader: -1, sourceEpoch: -1,
		sourceHW: -1, sourceLogStart: -1, state: StateResolving, checkEpoch: true, started: time.Now(),
		align: mode == StartAlign, verifyTopic: true, lag: newLagTracker()}
	mr.mu.Lock()
	mr.parts[tp] = ps
	mr.mu.Unlock()
	mr.m.log.Info("mirroring partition", "mirror", mr.cfg.Name, "topic", tp.topic, "partition", tp.partition)
	mr.wakeResolver()
}

func (mr *mirror) stop(tp topicPartition) { mr.stopPartition(tp) }

// stopPartition removes a partition and waits until its fetcher no longer
// touches it.
func (mr *mirror) stopPartition(tp topicPartition) {
	mr.mu.Lock()
	ps := mr.parts[tp]
	delete(mr.parts, tp)
	mr.mu.Unlock()
	if ps == nil {
		return
	}
	ps.mu.Lock()
	ps.stopped = true
	f := ps.fetcher
	ps.mu.Unlock()
	if f != nil {
		f.remove(ps) // waits for an in-flight response to be handled
	}
}

func (mr *mirror) status(tp topicPartition) (Status, error) {
	mr.mu.Lock()
	ps := mr.parts[tp]
	mr.mu.Unlock()
	if ps == nil {
		return Status{}, fmt.Errorf("fetch: %s-%d is not mirrored by %s", tp.topic, tp.partition, mr.cfg.Name)
	}
	return ps.status(), nil
}

func (mr *mirror) statuses() []Status {
	mr.mu.Lock()
	ps := make([]*partState, 0, len(mr.parts))
	for _, p := range mr.parts {
		ps = append(ps, p)
	}
	mr.mu.Unlock()
	out := make([]Status, len(ps))
	for i, p := range ps {
		out[i] = p.status()
	}
	return out
}

func (mr *mirror) close() {
	mr.cancel()
	mr.mu.Lock()
	fs := mr.fetchers
	mr.fetchers = map[fetcherKey]*fetcher{}
	mr.mu.Unlock()
	for _, f := range fs {
		f.wait()
	}
	mr.wg.Wait()
	mr.admin.Close()
}

// resolver finds the source leader of every partition that needs one and
// hands it to the fetcher for that leader. It runs when woken and, while
// some partition waits, every backoff.
func (mr *mirror) resolver() {
	defer mr.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-mr.ctx.Done():
			return
		case <-mr.resolve:
		case <-t.C:
		}
		if pending := mr.resolveOnce(); pending {
			t.Reset(retry.Jitter(mr.cfg.FetchBackoff))
		}
	}
}

// resolveOnce assigns what it can; it reports whether partitions remain
// unassigned (to retry after a backoff).
func (mr *mirror) resolveOnce() (pending bool) {
	var waiting []*partState
	topics := map[string]bool{}
	mr.mu.Lock()
	for _, ps := range mr.parts {
		if ps.needsLeader() {
			waiting = append(waiting, ps)
			topics[ps.tp.topic] = true
		}
	}
	mr.mu.Unlock()
	if len(waiting) == 0 {
		return false
	}
	meta, err := mr.metadata(topics)
	if err != nil {
		mr.m.log.Warn("source metadata failed; retrying", "mirror", mr.cfg.Name, "err", err)
		return true
	}
	for _, ps := range waiting {
		li, ok := meta.leaders[ps.tp]
		switch {
		case !ok || li.err != nil || li.leader < 0:
			pending = true
			continue
		}
		if err := mr.checkTopic(ps, li); err != nil {
			ps.fail(err, !errors.Is(err, ErrNotRetriable))
			pending = true
			continue
		}
		if ps.takeEpochCheck() {
			if err := mr.truncateToSource(ps, li); err != nil {
				retriable := !errors.Is(err, ErrNotRetriable)
				if retriable {
					// The check must run before the first fetch: a source
					// without diverging epochs in Fetch would otherwise
					// hand over records of a history the copy left.
					ps.mu.Lock()
					ps.checkEpoch = true
					ps.mu.Unlock()
				}
				ps.fail(err, retriable)
				pending = true
				continue
			}
		}
		addr, ok := meta.brokers[li.leader]
		if !ok {
			pending = true
			continue
		}
		mr.assign(ps, li, addr)
	}
	return pending
}

// leaderInfo is a source partition's leader, and its topic's id (zero
// for sources without topic ids).
type leaderInfo struct {
	leader  int32
	epoch   int32
	topicID [16]byte
	err     error
}

type sourceMetadata struct {
	brokers map[int32]string
	leaders map[topicPartition]leaderInfo
}

// metadata asks the source for the leaders of topics.
func (mr *mirror) metadata(topics map[string]bool) (sourceMetadata, error) {
	req := kmsg.NewPtrMetadataRequest()
	for t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(mr.ctx, mr.cfg.RequestTimeout)
	defer cancel()
	resp, err := req.RequestWith(ctx, mr.admin)
	if err != nil {
		return sourceMetadata{}, err
	}
	sm := sourceMetadata{brokers: map[int32]string{}, leaders: map[topicPartition]leaderInfo{}}
	for _, b := range resp.Brokers {
		sm.brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			for tp := range topics {
				if tp == *t.Topic {
					mr.m.log.Warn("source topic unavailable", "mirror", mr.cfg.Name, "topic", tp, "err", err)
				}
			}
			continue
		}
		for _, p := range t.Partitions {
			sm.leaders[topicPartition{*t.Topic, p.Partition}] = leaderInfo{leader: p.Leader, epoch: p.LeaderEpoch,
				topicID: t.TopicID, err: kerr.ErrorForCode(p.ErrorCode)}
		}
	}
	return sm, nil
}

// truncateToSource runs OffsetForLeaderEpoch for a (re)started partition
// with local data: the local log is cut where it diverges from the source
// (sources before Kafka 2.7 have no diverging epochs in Fetch; newer ones
// get the same answer here as Fetch would give).
func (mr *mirror) truncateToSource(ps *partState, li leaderInfo) error {
	latest, ok := wholeLog(ps.local).latest()
	if !ok {
		return nil
	}
	epoch, end, err := mr.sourceEpochEnd(ps.tp, li.epoch, latest)
	if err != nil {
		return err
	}
	return ps.truncateDiverged(epoch, end, "OffsetForLeaderEpoch at start")
}

// sourceEpochEnd asks the source leader (at its epoch current) where
// epoch ends there: the largest source epoch at most epoch, and its end
// offset.
func (mr *mirror) sourceEpochEnd(tp topicPartition, current, epoch int32) (int32, int64, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = tp.topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = tp.partition, current, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(mr.ctx, mr.cfg.RequestTimeout)
	defer cancel()
	resp, err := req.RequestWith(ctx, mr.admin)
	if err != nil {
		return 0, 0, fmt.Errorf("OffsetForLeaderEpoch: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, 0, errors.New("OffsetForLeaderEpoch: malformed response")
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return 0, 0, fmt.Errorf("OffsetForLeaderEpoch: %w", err)
	}
	return p.LeaderEpoch, p.EndOffset, nil
}

// assign hands ps to the fetcher for its leader, creating the fetcher.
func (mr *mirror) assign(ps *partState, li leaderInfo, addr string) {
	key := fetcherKey{broker: li.leader, id: fetcherID(ps.tp, mr.cfg.Fetchers)}
	mr.mu.Lock()
	if mr.parts[ps.tp] != ps {
		mr.mu.Unlock()
		return // stopped meanwhile
	}
	f := mr.fetchers[key]
	if f == nil || f.addr != addr {
		if f != nil {
			f.close()
		}
		f = newFetcher(mr, key, addr)
		mr.fetchers[key] = f
	}
	mr.mu.Unlock()
	ps.assigned(f, li)
	f.add(ps)
}

func fetcherID(tp topicPartition, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(tp.topic))
	return int((h.Sum32() + uint32(tp.partition)) % uint32(n))
}

// wakeResolverAfter wakes the resolver once d has passed.
func (mr *mirror) wakeResolverAfter(d time.Duration) {
	time.AfterFunc(d, mr.wakeResolver)
}

// sourceOffsets returns a source partition's log start and high watermark.
func (mr *mirror) sourceOffsets(tp topicPartition) (start, end int64, err error) {
	ask := func(ts int64) (int64, error) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = tp.topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = tp.partition, ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(mr.ctx, mr.cfg.RequestTimeout)
		defer cancel()
		resp, err := req.RequestWith(ctx, mr.admin)
		if err != nil {
			return 0, err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, errors.New("ListOffsets: malformed response")
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return 0, err
		}
		return p.Offset, nil
	}
	if start, err = ask(-2); err != nil {
		return 0, 0, fmt.Errorf("source ListOffsets earliest: %w", err)
	}
	if end, err = ask(-1); err != nil {
		return 0, 0, fmt.Errorf("source ListOffsets latest: %w", err)
	}
	return start, end, nil
}
