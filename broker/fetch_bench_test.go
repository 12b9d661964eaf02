package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/bufpool"
	"github.com/kmirror/kmirror/netio"
	"github.com/kmirror/kmirror/partition"
)

// fetchServer runs the Fetch serving path after request decoding, as
// handleFetch does with MaxWait 0: session, plan, encode into a pooled
// buffer with the header room netio reserves, and release the buffer.
type fetchServer struct {
	b   *Broker
	req *kmsg.FetchRequest
	fs  fetchScratch
	// sent is the response size of the last run, sessionID its session.
	sent      int
	sessionID int32
}

func (s *fetchServer) serve(tb testing.TB) {
	req, fs := s.req, &s.fs
	fs.parts, fs.topics = fs.parts[:0], fs.topics[:0]
	fs.img = s.b.image() // as handleFetch: the per-partition image lookups are measured too
	sess, sessErr := s.b.fetchSessionFor(req, fs)
	if sessErr != nil {
		tb.Fatalf("session: %v", sessErr)
	}
	sessionID, incremental := int32(0), false
	if sess != nil {
		sessionID, incremental = sess.id, req.SessionEpoch > sessionEpochInitial
	}
	committed := req.IsolationLevel == 1
	s.b.planFetch(req.Version, fs, committed, req.MaxBytes, incremental)
	out := bufpool.Get(4096)[:8]
	out = s.b.encodeFetch(out, req.Version, sessionID, fs, committed)
	s.sent = len(out)
	bufpool.Put(out)
	if sess != nil {
		// The next request carries the next epoch (a client's own loop).
		req.SessionEpoch, s.sessionID = sess.epoch, sess.id
		sess.mu.Unlock()
	}
}

// fillPartition appends batches of batchSize bytes until the partition
// holds size bytes.
func fillPartition(tb testing.TB, p *partition.Partition, size, batchSize int) {
	tb.Helper()
	one := plainBatch(1, batchSize-100)
	valueSize := batchSize - 100 + batchSize - len(one) // the varints keep their width
	for n := 0; n < size; n += batchSize {
		raw := plainBatch(1, valueSize)
		if len(raw) != batchSize {
			tb.Fatalf("batch of %d bytes, want %d", len(raw), batchSize)
		}
		if _, err := p.Log().AppendProduce(raw, 0); err != nil {
			tb.Fatal(err)
		}
	}
	p.Appended() // the node's step after its appends: the high watermark follows
}

// abortedTxns leaves n aborted transactions in a partition, each a
// transactional batch and an ABORT marker.
func abortedTxns(tb testing.TB, p *partition.Partition, n int) {
	tb.Helper()
	ts := time.Now().UnixMilli()
	for i := range n {
		pid := int64(1000 + i)
		if _, err := p.Log().AppendProduce(buildBatch(pid, 0, 0, attrTxn, ts, valueRecords(1, 10)...), 0); err != nil {
			tb.Fatal(err)
		}
		marker := batch.AppendTxnMarker(nil, batch.TxnMarker{ProducerID: pid, Timestamp: ts})
		if _, err := p.Log().AppendControl(marker, 0); err != nil {
			tb.Fatal(err)
		}
	}
	p.Appended() // the node's step after its appends: the high watermark follows
}

func fullFetchReq(v int16, tp *partition.Topic, partitionMaxBytes int32) *kmsg.FetchRequest {
	req := newFetchReq(v)
	for i := range tp.Partitions() {
		addPart(req, tp, int32(i), 0).PartitionMaxBytes = partitionMaxBytes
	}
	return req
}

// TestFetchServeAllocs is not parallel: AllocsPerRun counts the allocations
// of the whole process.
func TestFetchServeAllocs(t *testing.T) {
	b := newTestBroker(t)
	small := mustTopic(t, b, "allocs", 4)
	long := mustTopic(t, b, strings.Repeat("long-topic-name-", 15), 3)
	txns := mustTopic(t, b, "allocs-aborted", 2)
	// A 249-byte name (Kafka's longest) and a region sized so that an
	// estimate ignoring the name lands exactly on a pool class: the
	// response would outgrow its buffer.
	edge := mustTopic(t, b, strings.Repeat("e", 249), 1)
	fillPartition(t, edge.Partitions()[0], 16384-8-16-40-fetchPartOverhead, 16384-8-16-40-fetchPartOverhead)
	for _, p := range small.Partitions() {
		fillPartition(t, p, 64<<10, 4<<10)
	}
	for _, p := range long.Partitions() {
		fillPartition(t, p, 8<<10, 1<<10)
	}
	for _, p := range txns.Partitions() {
		abortedTxns(t, p, 40)
	}

	tests := []struct {
		name string
		req  func() *kmsg.FetchRequest
	}{
		{"v4", func() *kmsg.FetchRequest { return fullFetchReq(4, small, 1<<20) }},
		{"v17", func() *kmsg.FetchRequest { return fullFetchReq(17, small, 1<<20) }},
		{"v12 long topic names", func() *kmsg.FetchRequest { return fullFetchReq(12, long, 1<<20) }},
		{"v12 longest topic name at a pool class edge", func() *kmsg.FetchRequest { return fullFetchReq(12, edge, 1<<20) }},
		{"v17 read_committed aborted txns", func() *kmsg.FetchRequest {
			req := fullFetchReq(17, txns, 1<<20)
			req.IsolationLevel = 1
			return req
		}},
		{"v17 response limit", func() *kmsg.FetchRequest {
			req := fullFetchReq(17, small, 1<<20)
			req.MaxBytes = 20 << 10
			return req
		}},
		{"v17 unknown topic", func() *kmsg.FetchRequest {
			req := fullFetchReq(17, small, 1<<20)
			addPart(req, partition.NewTopic("nope", [16]byte{1}), 0, 0)
			return req
		}},
		{"v17 incremental session", func() *kmsg.FetchRequest {
			// A full fetch at epoch 0 opens the session; then every
			// request lists its partitions again (as a client does when
			// offsets move), which is the session's update path.
			req := fullFetchReq(17, small, 1<<20)
			req.SessionID, req.SessionEpoch = 0, 0
			return req
		}},
		{"v12 incremental session listing nothing", func() *kmsg.FetchRequest {
			req := fullFetchReq(12, small, 1<<20)
			req.SessionID, req.SessionEpoch = 0, 0
			return req
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &fetchServer{b: b, req: tc.req()}
			if s.req.SessionEpoch == sessionEpochInitial {
				s.serve(t)
				if s.sessionID == 0 || s.req.SessionEpoch != 1 {
					t.Fatalf("no session opened: id %d, next epoch %d", s.sessionID, s.req.SessionEpoch)
				}
				s.req.SessionID = s.sessionID
				if strings.Contains(tc.name, "listing nothing") {
					s.req.Topics = nil
				}
			}
			for range 3 { // warm the pools and the scratch
				s.serve(t)
			}
			if s.sent < 100 {
				t.Fatalf("response of %d bytes", s.sent)
			}
			allocs := testing.AllocsPerRun(200, func() { s.serve(t) })
			t.Logf("%.1f allocations per response of %d bytes", allocs, s.sent)
			if allocs != 0 && !raceEnabled {
				t.Fatalf("%.1f allocations per Fetch response, want 0", allocs)
			}
		})
	}

	// For the record: the whole of Serve, decoding included, next to what
	// decoding alone costs.
	req := fullFetchReq(17, small, 1<<20)
	body := req.AppendTo(nil)
	conn := &netio.Conn{}
	hdr := &netio.Header{Key: 1, Version: 17, Flexible: true}
	serve := func() {
		out, _, err := b.Serve(conn, hdr, body, bufpool.Get(4096)[:8])
		if err != nil {
			t.Fatal(err)
		}
		bufpool.Put(out)
	}
	decode := func() {
		r := kmsg.RequestForKey(1)
		r.SetVersion(17)
		if err := r.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
	}
	serve()
	t.Logf("Serve: %.0f allocations per Fetch; decoding alone: %.0f",
		testing.AllocsPerRun(100, serve), testing.AllocsPerRun(100, decode))
}

func BenchmarkFetchServe(b *testing.B) {
	br := newTestBroker(b)
	for _, size := range []struct {
		name  string
		bytes int
	}{{"16KiB", 16 << 10}, {"1MiB", 1 << 20}} {
		for _, parts := range []int32{1, 16} {
			tp := mustTopic(b, br, fmt.Sprintf("bench-%s-%d", size.name, parts), parts)
			for _, p := range tp.Partitions() {
				fillPartition(b, p, size.bytes, 16<<10)
			}
			b.Run(fmt.Sprintf("size=%s/partitions=%d", size.name, parts), func(b *testing.B) {
				s := &fetchServer{b: br, req: fullFetchReq(17, tp, int32(size.bytes))}
				s.serve(b)
				if want := size.bytes * int(parts); s.sent < want {
					b.Fatalf("response of %d bytes, want at least %d", s.sent, want)
				}
				b.SetBytes(int64(size.bytes) * int64(parts))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					s.serve(b)
				}
			})
		}
	}
}
