package verify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// side is one cluster the audit reads: the source or the copy. Fetches go
// straight to each partition's leader (kgo's Request would send a Fetch
// to any broker), found with a Metadata request that also teaches the
// client the brokers' addresses.
type side struct {
	name    string // "source" or "copy", for errors
	cl      *kgo.Client
	timeout time.Duration

	mu     sync.Mutex
	topics map[string]topicMeta
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

// fetched is one partition's answer to a fetch.
type fetched struct {
	records       []byte
	highWatermark int64
}

// fetch reads one response's worth of topic-partition p from offset at,
// READ_UNCOMMITTED (what the mirror copies), asking for at most maxBytes.
func (s *side) fetch(ctx context.Context, topic string, p int32, at int64, maxBytes int32) (fetched, error) {
	var last error
	for attempt := range fetchAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return fetched{}, ctx.Err()
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
		}
		f, err := s.fetchOnce(ctx, topic, p, at, maxBytes, attempt > 0)
		if err == nil || !retriable(err) || ctx.Err() != nil {
			return f, err
		}
		last = err
	}
	return fetched{}, last
}

// retriable: a leader moved or is being elected, or a connection broke.
func retriable(err error) bool {
	var ne net.Error
	return kerr.IsRetriable(err) || errors.As(err, &ne) || errors.Is(err, net.ErrClosed)
}

func (s *side) fetchOnce(ctx context.Context, topic string, p int32, at int64, maxBytes int32, refresh bool) (fetched, error) {
	m, err := s.meta(ctx, topic, refresh)
	if err != nil {
		return fetched{}, err
	}
	if int(p) >= len(m.leaders) {
		return fetched{}, fmt.Errorf("the %s has no partition %s-%d: %w", s.name, topic, p, ErrUnknownPartition)
	}
	if m.leaders[p] < 0 {
		return fetched{}, fmt.Errorf("the %s's partition %s-%d: %w", s.name, topic, p, kerr.LeaderNotAvailable)
	}
	req := kmsg.NewPtrFetchRequest()
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
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	kresp, err := s.cl.Broker(int(m.leaders[p])).Request(rctx, req)
	if err != nil {
		return fetched{}, fmt.Errorf("fetching %s-%d at offset %d from the %s: %w", topic, p, at, s.name, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fetched{}, fmt.Errorf("fetching %s-%d at offset %d from the %s: %w", topic, p, at, s.name, err)
	}
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			if rp.Partition != p {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fetched{}, fmt.Errorf("fetching %s-%d at offset %d from the %s: %w", topic, p, at, s.name, err)
			}
			return fetched{records: rp.RecordBatches, highWatermark: rp.HighWatermark}, nil
		}
	}
	return fetched{}, fmt.Errorf("the %s answered no partition %s-%d", s.name, topic, p)
}

// chunk is what a stream's reader hands the merge: the headers of one
// response, or the error that ended the stream.
type chunk struct {
	hs  []header
	err error
}

// stream is one side's batches of one partition's window [from, to),
// read ahead by one response on its own goroutine so that both sides
// fetch while the merge compares. It holds at most two responses' headers
// (about 40 bytes a batch), never the records.
type stream struct {
	chunks chan chunk
	cur    []header
	i      int
}

// streamConfig is what every stream of one run shares.
type streamConfig struct {
	maxBytes int32
	throttle *throttle
	read     *atomic.Int64 // bytes read, across sides and partitions
}

// openStream starts reading; the reader stops when ctx ends.
func (s *side) openStream(ctx context.Context, cfg streamConfig, topic string, p int32, from, to int64) *stream {
	st := &stream{chunks: make(chan chunk, 1)}
	send := func(c chunk) bool {
		select {
		case st.chunks <- c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer close(st.chunks)
		pos, stuck := from, 0
		for pos < to {
			limit, err := cfg.throttle.take(ctx, cfg.maxBytes)
			if err != nil {
				send(chunk{err: err})
				return
			}
			f, err := s.fetch(ctx, topic, p, pos, limit)
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
