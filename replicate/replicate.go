// Package replicate is the follower side of Kafka's replication (DESIGN.md
// "The cluster", "Data"): for every partition this node follows, it
// fetches from the partition's leader with Fetch as a replica (its node
// id and broker epoch, the current leader epoch, the epoch of its last
// record), appends the leader's batches byte for byte at the leader's
// offsets through the partition's append path (the one mirroring uses),
// takes the leader's high watermark as far as its own log reaches, and
// truncates where the leader says its log diverged (KIP-320's
// DivergingEpoch) or to the leader's bounds when its offset is out of
// range.
//
// num.replica.fetchers fetchers per leader node, each a goroutine with
// one connection, ask for the partitions that node leads for this one,
// each partition on the fetcher its topic id and number hash to. The set comes from the metadata image at each
// reconcile (Manager.Follow): a partition whose leader moves leaves one
// fetcher and joins another, at its own log end.
//
// WHY its own package: the mirror fetchers (fetch/) copy another
// cluster, with its identity, throttles and KIP-1279 states; a replica
// fetcher copies a leader of this cluster and needs none of it. What they
// share is the append path (partition/) and the raw connection
// (fetch.Conn: one reused read buffer, where a kgo client allocates one
// per response).
package replicate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/partition"
)

// Replica is a partition as its follower writes it (*partition.Partition).
type Replica interface {
	LogEndOffset() int64
	// LatestEpoch is the leader epoch of the log's last record.
	LatestEpoch() (epoch int32, ok bool)
	// EndOffsetForEpoch is the largest epoch of the log at most epoch
	// and the offset where the next one begins (the log end for the
	// last), -1, -1 when the log has no such epoch (KIP-101).
	EndOffsetForEpoch(epoch int32) (int32, int64)
	// AppendReplicaChunk appends verified batches at their own offsets,
	// from the summary the fetcher's walk collected, then takes the
	// leader's high watermark and log start.
	AppendReplicaChunk(c *batch.Chunk, leaderHW, leaderLogStart int64) error
	TruncateReplicaTo(offset int64) error
	RestartReplicaAt(offset int64) error
	// AsFollower runs fn while the partition follows leader at
	// leaderEpoch and cannot change its role, partition.ErrNotFollowing
	// otherwise: every write of a fetch's answer runs in it, so an
	// answer that arrives after the node became leader (or followed
	// another leader) writes nothing.
	AsFollower(leader, leaderEpoch int32, fn func() error) error
}

// Target is one partition to follow.
type Target struct {
	Topic       string
	TopicID     [16]byte
	Partition   int32
	Replica     Replica
	Leader      int32
	LeaderEpoch int32
}

// key names a followed partition.
type key struct {
	id        [16]byte
	partition int32
}

// Config configures the fetchers, with Kafka's settings.
type Config struct {
	// NodeID is this node's id, the replica id of its fetches;
	// BrokerEpoch its broker epoch (-1 while unregistered).
	NodeID      int32
	BrokerEpoch func() int64
	// LeaderAddr is the host:port of node id's inter-broker listener,
	// false while the image lists no such node.
	LeaderAddr func(id int32) (string, bool)
	// Fetchers is num.replica.fetchers (1): fetchers per leader.
	Fetchers int
	// MaxWait is replica.fetch.wait.max.ms (500 ms), MinBytes
	// replica.fetch.min.bytes (1), MaxBytes replica.fetch.response.max.bytes
	// (10 MiB), PartitionMaxBytes replica.fetch.max.bytes (1 MiB),
	// Backoff replica.fetch.backoff.ms (1 s): the wait of a partition
	// whose fetch failed.
	MaxWait           time.Duration
	MinBytes          int32
	MaxBytes          int32
	PartitionMaxBytes int32
	Backoff           time.Duration
	// Conn is how a fetcher connects to a leader: the inter-broker
	// listener's TLS (SSL), and the client id.
	Conn   fetch.ConnConfig
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.Fetchers <= 0 {
		c.Fetchers = 1
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 500 * time.Millisecond
	}
	if c.MinBytes <= 0 {
		c.MinBytes = 1
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 10 << 20
	}
	if c.PartitionMaxBytes <= 0 {
		c.PartitionMaxBytes = 1 << 20
	}
	if c.Backoff <= 0 {
		c.Backoff = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Conn.ClientID == "" {
		c.Conn.ClientID = fmt.Sprintf("kmirror-replica-%d", c.NodeID)
	}
	if c.BrokerEpoch == nil {
		c.BrokerEpoch = func() int64 { return -1 }
	}
}

// Manager runs the node's replica fetchers.
type Manager struct {
	cfg Config

	mu       sync.Mutex
	fetchers map[slot]*fetcher
	closed   bool
}

// slot is one of a leader's fetchers.
type slot struct {
	leader int32
	n      int
}

// slotOf is the fetcher of t among Fetchers per leader.
func (m *Manager) slotOf(t Target) slot {
	h := uint32(t.Partition)
	for _, b := range t.TopicID {
		h = h*31 + uint32(b)
	}
	return slot{t.Leader, int(h % uint32(m.cfg.Fetchers))}
}

// NewManager is a manager following nothing yet.
func NewManager(cfg Config) *Manager {
	cfg.defaults()
	return &Manager{cfg: cfg, fetchers: map[slot]*fetcher{}}
}

// Follow makes targets the partitions this node follows: each is fetched
// from its leader, from its own log end; a partition no longer listed
// stops being fetched (its leader moved here, or it left this node).
func (m *Manager) Follow(targets []Target) {
	bySlot := map[slot][]Target{}
	for _, t := range targets {
		bySlot[m.slotOf(t)] = append(bySlot[m.slotOf(t)], t)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for sl, f := range m.fetchers {
		if _, ok := bySlot[sl]; !ok {
			f.stop()
			delete(m.fetchers, sl)
		}
	}
	for sl, ts := range bySlot {
		f := m.fetchers[sl]
		if f == nil {
			f = newFetcher(m.cfg, sl.leader)
			m.fetchers[sl] = f
		}
		f.set(ts)
	}
}

// Close stops every fetcher and waits for them.
func (m *Manager) Close() {
	m.mu.Lock()
	fs := m.fetchers
	m.fetchers, m.closed = map[slot]*fetcher{}, true
	m.mu.Unlock()
	for _, f := range fs {
		f.stop()
	}
}

// fetcher fetches the partitions one leader leads for this node.
type fetcher struct {
	cfg    Config
	leader int32

	mu      sync.Mutex
	parts   map[key]*followed
	changed chan struct{}
	// interrupt cuts the Fetch on the wire short (nil when none is), and
	// interrupted says it did: set does so when it adds partitions (see
	// beginFetch), at most once per MaxWait (lastInterrupt). added counts
	// the sets that added partitions, so that a Fetch built before one
	// of them is cut short too.
	interrupt     context.CancelFunc
	interrupted   bool
	lastInterrupt time.Time
	added         uint64

	cancel context.CancelFunc
	done   chan struct{}

	// chunk is the summary of the batches being appended, reused: only
	// the run goroutine applies answers.
	chunk batch.Chunk
}

// followed is a partition's target, after a failure when it may be
// fetched again, and the offset its last fetch asked from (its log end
// then: only the run goroutine touches it).
type followed struct {
	Target
	retryAt     time.Time
	fetchOffset int64
}

// errStaleAnswer is an answer for a fetch from an offset that is no
// longer the log's end (the log was emptied or cut meanwhile: a
// reassignment took the replica away and back). Dropped: the next fetch
// asks from the log's end.
var errStaleAnswer = errors.New("replicate: the answer is for a fetch offset that is no longer the log end")

func newFetcher(cfg Config, leader int32) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fetcher{cfg: cfg, leader: leader, parts: map[key]*followed{}, changed: make(chan struct{}, 1),
		cancel: cancel, done: make(chan struct{})}
	go f.run(ctx)
	return f
}

// set replaces the fetcher's partitions; a partition kept keeps its
// backoff unless its leader epoch changed.
func (f *fetcher) set(ts []Target) {
	f.mu.Lock()
	old := f.parts
	f.parts = make(map[key]*followed, len(ts))
	added := false
	for _, t := range ts {
		k := key{t.TopicID, t.Partition}
		fp := &followed{Target: t}
		if o := old[k]; o != nil && o.LeaderEpoch == t.LeaderEpoch && o.Replica == t.Replica {
			fp.retryAt = o.retryAt
		}
		added = added || old[k] == nil
		f.parts[k] = fp
	}
	if added {
		f.added++
	}
	// At most once per MaxWait: a burst of new partitions (topics created
	// one after another) must not cut every Fetch of the others short;
	// one added within it waits for the Fetch on the wire, a long poll
	// at most.
	if added && f.interrupt != nil && time.Since(f.lastInterrupt) >= f.cfg.MaxWait {
		f.interrupted, f.lastInterrupt = true, time.Now()
		f.interrupt()
	}
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// beginFetch is the context of one Fetch round trip, which set cuts short
// when it adds partitions, and its end, which reports whether it did.
// WHY: the leader holds a Fetch of partitions without new records for up
// to replica.fetch.wait.max.ms (500 ms); a partition added meanwhile (a
// new replica of a reassignment, a leader that moved to this fetcher's
// leader) would wait out that long poll before its first fetch, and so
// would its ISR (re)join and every acks=all write waiting on it. Kafka's
// fetcher waits; cutting the round trip costs a reconnect, and nothing is
// lost: no answer of it was applied, and the next Fetch asks from the
// same log ends.
//
// seen is f.added when the Fetch's partitions were read (ready): a set
// that added partitions since, before there was a round trip to cut, cuts
// this one at once.
func (f *fetcher) beginFetch(ctx context.Context, seen uint64) (context.Context, func() (interrupted bool)) {
	fctx, cancel := context.WithCancel(ctx)
	f.mu.Lock()
	f.interrupt, f.interrupted = cancel, false
	if f.added != seen {
		f.interrupted = true
		cancel()
	}
	f.mu.Unlock()
	return fctx, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.interrupt = nil
		cancel()
		return f.interrupted
	}
}

// addedSoFar is f.added (beginFetch).
func (f *fetcher) addedSoFar() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.added
}

func (f *fetcher) stop() {
	f.cancel()
	<-f.done
}

func (f *fetcher) run(ctx context.Context) {
	defer close(f.done)
	var conn *fetch.Conn
	var connAddr string
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var lastWarn time.Time
	warn := func(msg string, args ...any) {
		if time.Since(lastWarn) > 10*time.Second {
			lastWarn = time.Now()
			f.cfg.Logger.Warn(msg, append([]any{"leader", f.leader}, args...)...)
		}
	}
	for ctx.Err() == nil {
		seen := f.addedSoFar()
		ready, next := f.ready(time.Now())
		addr, ok := f.cfg.LeaderAddr(f.leader)
		if len(ready) == 0 || !ok {
			f.sleep(ctx, next)
			continue
		}
		if conn != nil && addr != connAddr {
			conn.Close()
			conn = nil
		}
		if conn == nil {
			var err error
			if conn, err = fetch.DialConn(ctx, addr, f.cfg.Conn); err != nil {
				conn = nil
				if ctx.Err() == nil {
					warn("replica fetcher: connecting to the leader", "addr", addr, "err", err)
					f.backoff(ready)
				}
				continue
			}
			connAddr = addr
		}
		if f.addedSoFar() != seen {
			continue // partitions joined since ready: ask for them too
		}
		fctx, endFetch := f.beginFetch(ctx, seen)
		resp, err := f.fetch(fctx, conn, ready)
		if interrupted := endFetch(); err != nil {
			conn.Close() // a failed round trip closed it already; a refused answer leaves it open
			conn = nil
			if ctx.Err() == nil && !interrupted {
				warn("replica fetcher: fetching from the leader", "addr", addr, "err", err)
				f.backoff(ready)
			}
			continue
		}
		told, err := f.apply(ctx, conn, ready, resp)
		for _, res := range told {
			warn("replica fetcher", "topic", res.t.Topic, "partition", res.t.Partition, "err", res.err)
		}
		if err != nil { // the connection failed under a ListOffsets
			conn.Close()
			conn = nil
		}
	}
}

// ready is the partitions that may be fetched now, and the next time one
// will be when none may.
func (f *fetcher) ready(now time.Time) ([]*followed, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ready []*followed
	next := now.Add(time.Second)
	for _, fp := range f.parts {
		if !now.Before(fp.retryAt) {
			ready = append(ready, fp)
		} else if fp.retryAt.Before(next) {
			next = fp.retryAt
		}
	}
	return ready, next
}

// sleep waits until next, a change of the partitions, or the end.
func (f *fetcher) sleep(ctx context.Context, next time.Time) {
	t := time.NewTimer(max(time.Until(next), time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-f.changed:
	case <-t.C:
	}
}

// backoff holds parts back for the configured backoff.
func (f *fetcher) backoff(parts []*followed) {
	at := time.Now().Add(f.cfg.Backoff)
	f.mu.Lock()
	for _, fp := range parts {
		fp.retryAt = at
	}
	f.mu.Unlock()
}

// fetch sends one Fetch for parts, from each one's log end.
func (f *fetcher) fetch(ctx context.Context, conn *fetch.Conn, parts []*followed) (*kmsg.FetchResponse, error) {
	v := conn.Version(kmsg.Fetch, 13, maxFetchVersion)
	if v < 0 {
		return nil, errors.New("the leader serves no Fetch v13 or later (topic ids)")
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	req.ReplicaID, req.ReplicaState.ID, req.ReplicaState.Epoch = f.cfg.NodeID, f.cfg.NodeID, f.cfg.BrokerEpoch()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(f.cfg.MaxWait/time.Millisecond), f.cfg.MinBytes, f.cfg.MaxBytes
	req.SessionID, req.SessionEpoch = 0, -1 // sessionless
	byTopic := map[[16]byte]int{}
	for _, fp := range parts {
		i, ok := byTopic[fp.TopicID]
		if !ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = fp.Topic, fp.TopicID
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			byTopic[fp.TopicID] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		fp.fetchOffset = fp.Replica.LogEndOffset()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch = fp.Partition, fp.fetchOffset, fp.LeaderEpoch
		rp.LastFetchedEpoch = -1
		if e, ok := fp.Replica.LatestEpoch(); ok {
			rp.LastFetchedEpoch = e
		}
		rp.LogStartOffset, rp.PartitionMaxBytes = -1, f.cfg.PartitionMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if err := conn.RoundTrip(ctx, req, resp); err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	return resp, nil
}

// maxFetchVersion is the newest Fetch the fetchers speak (Kafka 4's):
// v15 carries the replica id in ReplicaState.
const maxFetchVersion = 17

// partResult is a partition's failure, for the log.
type partResult struct {
	t   *followed
	err error
}

// apply applies a Fetch answer to each partition, and backs off those
// that failed; it returns the failures worth telling, and an error when
// the connection failed. The partitions out of the leader's range come
// last: asking the leader for its bounds reuses the connection's buffer,
// which the other partitions' batches are read from.
func (f *fetcher) apply(ctx context.Context, conn *fetch.Conn, parts []*followed, resp *kmsg.FetchResponse) ([]partResult, error) {
	byKey := make(map[key]*followed, len(parts))
	for _, fp := range parts {
		byKey[key{fp.TopicID, fp.Partition}] = fp
	}
	var failed, outOfRange []*followed
	var told []partResult
	fail := func(fp *followed, err error) {
		if errors.Is(err, errStaleAnswer) {
			return // nothing wrong: the next fetch asks from the log end
		}
		failed = append(failed, fp)
		if !isTransient(err) {
			told = append(told, partResult{fp, err})
		}
	}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			sp := &rt.Partitions[j]
			fp := byKey[key{rt.TopicID, sp.Partition}]
			switch {
			case fp == nil:
			case sp.ErrorCode == kerr.OffsetOutOfRange.Code:
				outOfRange = append(outOfRange, fp)
			case sp.ErrorCode != 0:
				fail(fp, kerr.ErrorForCode(sp.ErrorCode))
			default:
				if err := f.asFollower(fp, func() error { return f.applyData(fp, sp) }); err != nil {
					fail(fp, err)
				}
			}
		}
	}
	var connErr error
	for i, fp := range outOfRange {
		fix, err := f.outOfRange(ctx, conn, fp) // asks the leader: not under the role lock
		if err == nil {
			err = f.asFollower(fp, fix)
		} else if !isRefusal(err) {
			connErr = err
			failed = append(failed, outOfRange[i:]...)
			told = append(told, partResult{fp, err})
			break
		}
		if err != nil {
			fail(fp, err)
		}
	}
	f.backoff(failed)
	return told, connErr
}

// asFollower runs write, an answer's write to fp, while fp still follows
// the leader and epoch fetched from and its log still ends where the
// fetch asked from (Kafka's fetcher checks both), errStaleAnswer or
// partition.ErrNotFollowing otherwise.
func (f *fetcher) asFollower(fp *followed, write func() error) error {
	return fp.Replica.AsFollower(fp.Leader, fp.LeaderEpoch, func() error {
		if end := fp.Replica.LogEndOffset(); end != fp.fetchOffset {
			return fmt.Errorf("%w: asked from %d, the log ends at %d", errStaleAnswer, fp.fetchOffset, end)
		}
		return write()
	})
}

// isRefusal reports a leader's answer (a Kafka error code), as opposed to
// a failed connection.
func isRefusal(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke)
}

// isTransient reports errors that a change of leader explains, which the
// next image fixes: not worth a warning.
func isTransient(err error) bool {
	return errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.FencedLeaderEpoch) ||
		errors.Is(err, kerr.UnknownLeaderEpoch) || errors.Is(err, kerr.UnknownTopicID) ||
		errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, partition.ErrNotFollowing) ||
		errors.Is(err, errStaleAnswer)
}

// applyData applies an answer without error: a truncation at a
// divergence, or the leader's batches and high watermark.
func (f *fetcher) applyData(fp *followed, sp *kmsg.FetchResponseTopicPartition) error {
	r := fp.Replica
	if d := sp.DivergingEpoch; d.EndOffset >= 0 {
		// The leader's log holds epoch d.Epoch up to d.EndOffset only:
		// what this log has after it diverged (KIP-320). This log's
		// own d.Epoch may end first, later epochs the leader does not
		// have following it, or this log may lack d.Epoch and hold a
		// later one from the end of its largest epoch below it: cut
		// there too (Kafka's getOffsetTruncationState), or the next
		// fetch, with the same last epoch, meets the same answer and
		// the follower never moves again.
		to := min(d.EndOffset, r.LogEndOffset())
		if _, end := r.EndOffsetForEpoch(d.Epoch); end >= 0 {
			to = min(to, end)
		}
		if to >= r.LogEndOffset() {
			// Nothing to cut, yet the leader says the logs diverge: a
			// fetch at once would meet the same answer. Backed off, and
			// told, rather than spinning.
			return fmt.Errorf("the leader answers a divergence at epoch %d offset %d, but this log (end %d) has nothing to cut there",
				d.Epoch, d.EndOffset, r.LogEndOffset())
		}
		f.cfg.Logger.Info("replica diverged from its leader: truncating", "topic", fp.Topic, "partition", fp.Partition,
			"to", to, "log end", r.LogEndOffset(), "leader epoch", d.Epoch)
		return r.TruncateReplicaTo(to)
	}
	// The walk that checks the CRCs collects the summary the log
	// appends from, so no header is walked twice.
	it := batch.NewIterator(sp.RecordBatches)
	it.Collect(&f.chunk)
	defer f.chunk.Reset() // the response's buffer is not ours to keep
	for _, ok := it.Next(); ok; _, ok = it.Next() {
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("the leader's batches: %w", err)
	}
	// A response cut at its size limit may end in a partial batch: it
	// comes whole with the next fetch.
	return r.AppendReplicaChunk(&f.chunk, sp.HighWatermark, sp.LogStartOffset)
}

// outOfRange asks the leader for its bounds and returns the write that
// brings a log whose end the leader cannot place back into its range:
// restarted at the leader's log start when behind it, else cut to the
// leader's high watermark, and restarted at its log start when that
// changed nothing (the leader knows none of its epochs).
func (f *fetcher) outOfRange(ctx context.Context, conn *fetch.Conn, fp *followed) (func() error, error) {
	start, err := f.listOffset(ctx, conn, fp, -2)
	if err != nil {
		return nil, err
	}
	hw, err := f.listOffset(ctx, conn, fp, -1)
	if err != nil {
		return nil, err
	}
	return func() error {
		r := fp.Replica
		end := r.LogEndOffset()
		f.cfg.Logger.Info("replica out of the leader's range", "topic", fp.Topic, "partition", fp.Partition,
			"log end", end, "leader log start", start, "leader high watermark", hw)
		switch {
		case end < start:
			return r.RestartReplicaAt(start)
		case end > hw:
			return r.TruncateReplicaTo(hw)
		default:
			return r.RestartReplicaAt(start)
		}
	}, nil
}

// listOffset asks the leader for the partition's earliest (-2) or latest
// (-1) offset.
func (f *fetcher) listOffset(ctx context.Context, conn *fetch.Conn, fp *followed, ts int64) (int64, error) {
	v := conn.Version(kmsg.ListOffsets, 1, maxListOffsetsVersion)
	if v < 0 {
		return 0, errors.New("the leader serves no ListOffsets v1 or later")
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = v, f.cfg.NodeID
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = fp.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = fp.Partition, ts, fp.LeaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	if err := conn.RoundTrip(rctx, req, resp); err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("ListOffsets answered %d topics", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return 0, fmt.Errorf("ListOffsets: %w", err)
	}
	return p.Offset, nil
}

// maxListOffsetsVersion is the newest ListOffsets the fetchers speak.
const maxListOffsetsVersion = 10
