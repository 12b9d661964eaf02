package verify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetch"
)

// side is one cluster the audit reads: the source or the copy. Metadata
// and offsets go through its kgo client; fetches go straight to each
// partition's leader on a raw connection per partition being read
// (fetch.Conn, with the side's security), which reads every response into
// one reused buffer where kgo allocates one per response, and lets the
// broker serve the partitions' requests side by side (a kmirror broker
// serves one connection's requests one at a time).
type side struct {
	name    string // "source" or "copy", for errors
	cl      *kgo.Client
	conn    fetch.ConnConfig
	timeout time.Duration

	// maxIdle bounds the connections kept for the next partitions: a
	// partition's reader takes one to its leader, or dials, and gives it
	// back when done, so a topic of many partitions is not a handshake
	// (TLS, SASL) per partition. Parallel, so a run holds at most
	// 2 x Parallel connections (and their buffers) per side.
	maxIdle int

	mu      sync.Mutex
	topics  map[string]topicMeta
	brokers map[int32]string // node id -> host:port, from metadata
	idle    map[int32][]*fetch.Conn
	nIdle   int
}

// getConn returns an idle connection to broker leader, or dials one.
func (s *side) getConn(ctx context.Context, leader int32) (*fetch.Conn, error) {
	s.mu.Lock()
	if cs := s.idle[leader]; len(cs) > 0 {
		c := cs[len(cs)-1]
		s.idle[leader] = cs[:len(cs)-1]
		s.nIdle--
		s.mu.Unlock()
		return c, nil
	}
	addr, ok := s.brokers[leader]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("the %s's metadata names no address for broker %d", s.name, leader)
	}
	c, err := fetch.DialConn(ctx, addr, s.conn)
	if err != nil {
		return nil, fmt.Errorf("connecting to the %s's broker %d at %s: %w", s.name, leader, addr, err)
	}
	return c, nil
}

// putConn keeps a healthy connection to broker leader for the next
// partition, or closes it when maxIdle are kept.
func (s *side) putConn(leader int32, c *fetch.Conn) {
	s.mu.Lock()
	if s.nIdle < s.maxIdle {
		if s.idle == nil {
			s.idle = map[int32][]*fetch.Conn{}
		}
		s.idle[leader] = append(s.idle[leader], c)
		s.nIdle++
		c = nil
	}
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// closeIdle closes the kept connections (the end of a run).
func (s *side) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cs := range s.idle {
		for _, c := range cs {
			c.Close()
		}
	}
	s.idle, s.nIdle = nil, 0
}

// topicMeta is a topic as the side's metadata describes it. The id is the
// side's own: a copy of a source without topic ids has one kmirror
// assigned, and each side is fetched by the id it knows (by name on
// brokers before Fetch v13, which kgo picks from ApiVersions).
type topicMeta struct {
	id      [16]byte
	leaders []int32 // by partition; -1 while none
}

// Errors of a side.
var (
	// ErrNoProgress: a side answered no whole batch where its high
	// watermark says there is one.
	ErrNoProgress = errors.New("verify: no progress")
	// ErrUnknownPartition: a side has no such topic or partition.
	ErrUnknownPartition = errors.New("verify: unknown topic or partition")
)

// DamagedError says a side's bytes at Offset are not a sequence of record
// batches (a bad length or magic byte): the partition differs there and
// nothing after it on that side can be read.
type DamagedError struct {
	Side   string
	Offset int64
	Err    error
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("the %s's bytes at offset %d are no record batch: %v", e.Side, e.Offset, e.Err)
}

func (e *DamagedError) Unwrap() error { return e.Err }

// meta returns topic's metadata, asking the side when refresh is set or
// nothing is cached.
func (s *side) meta(ctx context.Context, topic string, refresh bool) (topicMeta, error) {
	s.mu.Lock()
	m, ok := s.topics[topic]
	s.mu.Unlock()
	if ok && !refresh {
		return m, nil
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return topicMeta{}, fmt.Errorf("the %s's metadata: %w", s.name, err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return topicMeta{}, fmt.Errorf("the %s's metadata of topic %s: %w", s.name, topic, err)
		}
		s.mu.Lock()
		if s.brokers == nil {
			s.brokers = map[int32]string{}
		}
		for _, b := range resp.Brokers {
			s.brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		s.mu.Unlock()
		m = topicMeta{id: t.TopicID}
		for _, p := range t.Partitions {
			for int(p.Partition) >= len(m.leaders) {
				m.leaders = append(m.leaders, -1)
			}
			m.leaders[p.Partition] = p.Leader
		}
		s.mu.Lock()
		if s.topics == nil {
			s.topics = map[string]topicMeta{}
		}
		s.topics[topic] = m
		s.mu.Unlock()
		return m, nil
	}
	return topicMeta{}, fmt.Errorf("the %s has no topic %s: %w", s.name, topic, ErrUnknownPartition)
}

// fetchAttempts bounds the retries of one fetch after a leader moved or a
// connection broke.
const fetchAttempts = 5

// Fetch versions: v4 (Kafka 0.11, the first with record batches) to the
// fetchers' v16; by name (v12 at most) when the side has no topic id.
const (
	minFetchVersion       = 4
	maxFetchVersionByName = 12
	maxFetchVersion       = 16
)

// fetched is one partition's answer to a fetch. records aliases the
// reader's connection buffer until its next fetch.
type fetched struct {
	records       []byte
	highWatermark int64
}

// reader fetches one partition of one side, on a connection to the
// partition's leader that no other reader uses meanwhile. Owned by one
// stream's goroutine.
type reader struct {
	s      *side
	conn   *fetch.Conn
	leader int32
}

// release gives the connection back to the side for the next partition.
func (r *reader) release() {
	if r.conn != nil {
		r.s.putConn(r.leader, r.conn)
		r.conn = nil
	}
}

// drop closes a connection that failed.
func (r *reader) drop() {
	if r.conn != nil {
		r.conn.Close()
		r.conn = nil
	}
}

// fetch reads one response's worth of topic-partition p from offset at,
// READ_UNCOMMITTED (what the mirror copies), asking for at most maxBytes.
func (r *reader) fetch(ctx context.Context, topic string, p int32, at int64, maxBytes int32) (fetched, error) {
	var last error
	for attempt := range fetchAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return fetched{}, ctx.Err()
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
		}
		f, err, retry := r.fetchOnce(ctx, topic, p, at, maxBytes, attempt > 0)
		if err == nil || !retry || ctx.Err() != nil {
			return f, err
		}
		last = err
	}
	return fetched{}, last
}

// fetchOnce is one attempt; retry says whether another may succeed (a
// broken connection, a leader that moved), after a metadata refresh.
func (r *reader) fetchOnce(ctx context.Context, topic string, p int32, at int64, maxBytes int32, refresh bool) (_ fetched, _ error, retry bool) {
	s := r.s
	m, err := s.meta(ctx, topic, refresh)
	if err != nil {
		return fetched{}, err, true
	}
	if int(p) >= len(m.leaders) {
		return fetched{}, fmt.Errorf("the %s has no partition %s-%d: %w", s.name, topic, p, ErrUnknownPartition), false
	}
	leader := m.leaders[p]
	if leader < 0 {
		return fetched{}, fmt.Errorf("the %s's partition %s-%d: %w", s.name, topic, p, kerr.LeaderNotAvailable), true
	}
	if r.conn == nil || r.leader != leader {
		r.release()
		c, err := s.getConn(ctx, leader)
		if err != nil {
			return fetched{}, err, true
		}
		r.conn, r.leader = c, leader
	}
	maxVer := int16(maxFetchVersion)
	if m.id == ([16]byte{}) {
		maxVer = maxFetchVersionByName
	}
	req := kmsg.NewPtrFetchRequest()
	if req.Version = r.conn.Version(kmsg.Fetch, minFetchVersion, maxVer); req.Version < 0 {
		return fetched{}, fmt.Errorf("the %s's broker %d serves no Fetch version %d to %d", s.name, leader, minFetchVersion, maxVer), false
	}
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 0, maxBytes
	req.IsolationLevel = 0
	req.SessionID, req.SessionEpoch = 0, -1 // no fetch session: one partition per request
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, m.id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, at, maxBytes
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrFetchResponse()
	if err := r.conn.RoundTrip(ctx, req, resp); err != nil {
		r.drop() // the connection closed itself; dial again
		return fetched{}, fmt.Errorf("fetching %s-%d at offset %d from the %s: %w", topic, p, at, s.name, err), true
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fetched{}, fmt.Errorf("fetching %s-%d at offset %d from the %s: %w", topic, p, at, s.name, err), kerr.IsRetriable(err)
	}
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			if rp.Partition != p {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fetched{}, fmt.Errorf("fetching %s-%d at offset %d from the %s: %w", topic, p, at, s.name, err), kerr.IsRetriable(err)
			}
			return fetched{records: rp.RecordBatches, highWatermark: rp.HighWatermark}, nil, false
		}
	}
	return fetched{}, fmt.Errorf("the %s answered no partition %s-%d", s.name, topic, p), false
}

// chunk is what a stream's reader hands the merge: the headers of one
// response, or the error that ended the stream.
type chunk struct {
	hs  []header
	err error
}

// stream is one side's batches of one partition's window [from, to),
// read ahead by one response on its own goroutine so that both sides
// fetch while the merge compares. It holds its connection's buffer (one
// response) and at most two responses' headers (about 40 bytes a batch),
// never a partition.
type stream struct {
	chunks chan chunk
	// done is closed when the reader goroutine has ended (its connection
	// given back).
	done chan struct{}
	cur  []header
	i    int
}

// streamConfig is what every stream of one run shares.
type streamConfig struct {
	maxBytes int32
	throttle *throttle
	read     *atomic.Int64 // bytes read, across sides and partitions
}

// openStream starts reading; the reader stops when ctx ends.
func (s *side) openStream(ctx context.Context, cfg streamConfig, topic string, p int32, from, to int64) *stream {
	st := &stream{chunks: make(chan chunk, 1), done: make(chan struct{})}
	send := func(c chunk) bool {
		select {
		case st.chunks <- c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer close(st.done)
		defer close(st.chunks)
		rd := &reader{s: s}
		defer rd.release()
		pos, stuck := from, 0
		for pos < to {
			limit, err := cfg.throttle.take(ctx, cfg.maxBytes)
			if err != nil {
				send(chunk{err: err})
				return
			}
			f, err := rd.fetch(ctx, topic, p, pos, limit)
			if err != nil {
				send(chunk{err: err})
				return
			}
			cfg.read.Add(int64(len(f.records)))
			if err := cfg.throttle.done(ctx, limit, len(f.records)); err != nil {
				send(chunk{err: err})
				return
			}
			hs, next, done, serr := scan(nil, f.records, pos, to)
			if len(hs) > 0 && !send(chunk{hs: hs}) {
				return
			}
			switch {
			case serr != nil:
				send(chunk{err: &DamagedError{Side: s.name, Offset: next, Err: serr}})
				return
			case done:
				return
			case next > pos:
				pos, stuck = next, 0
			case f.highWatermark <= pos:
				// The side holds less than its offsets said at the
				// start (truncated since): the merge sees the other
				// side's batches as one-sided.
				return
			default:
				// An empty answer below the high watermark: a
				// broker that cut a batch too large for the limit
				// (Kafka returns the first one whole, KIP-74).
				if stuck++; stuck == fetchAttempts {
					send(chunk{err: fmt.Errorf("%s-%d at offset %d below the %s's high watermark %d: %w",
						topic, p, pos, s.name, f.highWatermark, ErrNoProgress)})
					return
				}
			}
		}
	}()
	return st
}

// next implements cursor.
func (st *stream) next() (header, bool, error) {
	for st.i >= len(st.cur) {
		c, ok := <-st.chunks
		if !ok {
			return header{}, false, nil
		}
		if c.err != nil {
			return header{}, false, c.err
		}
		st.cur, st.i = c.hs, 0
	}
	h := st.cur[st.i]
	st.i++
	return h, true, nil
}
