package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/internal/testutil"
)

// The mirror while its source changes or fails under it (the harness is in
// mirror_e2e_test.go).
//
// Changes: the source log start moves (DeleteRecords), compaction leaves
// offset gaps, leaders move, the mirror is throttled, stopped and restarted.
//
// Faults: errors the source answers (kfake faults), connections that break
// (kfake closing them, or a dialer that breaks them mid-response), and
// responses kfake never sends (a diverging epoch, a corrupt batch) crafted
// by ControlKey interceptors. The interceptors act on the mirror's fetches
// only (isMirrorFetch); the tests' own reads of the source pass through.

// deleteRecords moves the source log start of topic/p to offset.
func (e *mirrorEnv) deleteRecords(topic string, p int32, offset int64) {
	e.t.Helper()
	var os kadm.Offsets
	os.AddOffset(topic, p, offset, -1)
	resp, err := e.srcAdm.DeleteRecords(e.ctx, os)
	if err != nil {
		e.t.Fatalf("DeleteRecords %s-%d to %d: %v", topic, p, offset, err)
	}
	if r, ok := resp.Lookup(topic, p); !ok || r.Err != nil || r.LowWatermark != offset {
		e.t.Fatalf("DeleteRecords %s-%d to %d: %+v", topic, p, offset, r)
	}
}

// checkOutOfRange checks that the node answers OFFSET_OUT_OF_RANGE at
// offset.
func (e *mirrorEnv) checkOutOfRange(topic string, p int32, offset int64) {
	e.t.Helper()
	rp := fetchPartition(e.t, e.ctx, e.locCl, -1, topic, p, offset)
	if rp.ErrorCode != kerr.OffsetOutOfRange.Code {
		e.t.Fatalf("node: fetch %s-%d at %d below the log start: %v, want OFFSET_OUT_OF_RANGE", topic, p, offset, kerr.ErrorForCode(rp.ErrorCode))
	}
}

// waitLocalStart waits until the node's log start of topic/p is start.
func (e *mirrorEnv) waitLocalStart(topic string, p int32, start int64) {
	e.t.Helper()
	testutil.CheckFor(e.t, mirrorCatchUp, testutil.Named(fmt.Sprintf("%s-%d log start following the source to %d", topic, p, start), func() error {
		if got := e.localStarts(topic)[p]; got != start {
			return fmt.Errorf("local log start %d", got)
		}
		return nil
	}))
}

// TestMirrorE2ELogStart moves the source log start (DeleteRecords) before
// and while mirroring: the local log start follows, reads below it are
// OFFSET_OUT_OF_RANGE, and a source log start beyond the local log end
// restarts the local log there (DESIGN.md decision 1).
func TestMirrorE2ELogStart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 40*time.Second)
	env := newMirrorEnv(t, ctx, fetch.MirrorConfig{})
	const topic = "log-start"
	env.createSourceTopic(topic, 3, nil)
	pr := manualProducer(t, env.seeds())
	ends := map[int32]int64{}
	for p := range int32(3) {
		ends[p] = produceBatchesTo(t, ctx, pr, topic, p, 10, 10, "a")
	}
	// Partition 0: the log start inside a batch, before mirroring starts:
	// the empty local log restarts there, and the source answers with the
	// whole batch that holds it.
	env.deleteRecords(topic, 0, 35)
	// Partition 1: everything deleted, then more data.
	env.deleteRecords(topic, 1, ends[1])
	ends[1] = produceBatchesTo(t, ctx, pr, topic, 1, 2, 10, "b")
	env.mirrorTopic(topic)
	env.waitCaughtUp(topic)
	env.checkIdentical(topic)
	env.checkOutOfRange(topic, 0, 10)
	env.checkOutOfRange(topic, 1, 50)

	// While mirroring: the local log start follows the source's.
	env.deleteRecords(topic, 2, 55)
	env.deleteRecords(topic, 0, 70)
	env.waitLocalStart(topic, 2, 55)
	env.waitLocalStart(topic, 0, 70)
	env.checkOutOfRange(topic, 2, 54)
	env.checkOutOfRange(topic, 0, 69)
	env.checkIdentical(topic)

	// Stopped, the source moves its log start past the local log end;
	// restarted, the local log restarts at the source log start (inside a
	// batch again).
	env.stopPartition(topic, 2)
	ends[2] = produceBatchesTo(t, ctx, pr, topic, 2, 3, 10, "c")
	env.deleteRecords(topic, 2, ends[2]-15)
	env.startPartition(topic, 2)
	env.waitCaughtUp(topic)
	env.checkIdentical(topic)
	env.checkOutOfRange(topic, 2, ends[2]-16)
	if got := env.localStarts(topic)[2]; got != ends[2]-15 {
		t.Fatalf("partition 2: local log start %d after the restart, want %d", got, ends[2]-15)
	}
}

// TestMirrorE2ECompactionGaps mirrors a compacted source log: offset gaps
// stay gaps, at the source's offsets, including gaps that fall on the
// mirror's fetch position (one batch per response).
func TestMirrorE2ECompactionGaps(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	env := newMirrorEnv(t, ctx, fetch.MirrorConfig{PartitionMaxBytes: 1})
	const topic = "compacted"
	env.createSourceTopic(topic, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")})
	pr := manualProducer(t, env.seeds())
	for round := range 12 {
		rs := make([]*kgo.Record, 0, 6)
		for k := range 5 {
			rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint("key-", k)), Value: []byte(fmt.Sprint("round-", round))})
		}
		// Every third round also writes a key of its own, which survives.
		if round%3 == 0 {
			rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint("once-", round)), Value: []byte("kept")})
		}
		if err := pr.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	env.src.Compact()
	start, end := env.sourceStarts(topic)[0], env.sourceEnds(topic)[0]
	gaps := 0
	var gapAt, gapEnd int64
	next := start
	for _, b := range splitBatches(t, readRaw(t, ctx, env.srcCl, env.src.LeaderFor(topic, 0), topic, 0, start, end)) {
		if b.BaseOffset() > next {
			gaps++
			gapAt, gapEnd = next, b.BaseOffset()
		}
		next = b.NextOffset()
	}
	if gaps < 2 {
		t.Fatalf("kfake compaction left %d offset gaps in [%d, %d); the test needs some", gaps, start, end)
	}

	env.mirrorTopic(topic)
	env.waitCaughtUp(topic)
	env.checkIdentical(topic)
	// A read inside a gap gets the batch after it, as at the source.
	rp := fetchPartition(t, ctx, env.locCl, -1, topic, 0, gapAt)
	if bs := splitBatches(t, rp.RecordBatches); rp.ErrorCode != 0 || len(bs) == 0 || bs[0].BaseOffset() != gapEnd {
		t.Fatalf("node: fetch at %d (in the gap [%d, %d)): error %d, %d batches", gapAt, gapAt, gapEnd, rp.ErrorCode, len(bs))
	}
}

// TestMirrorE2EThrottle mirrors about 1 MiB at 200 KiB/s
// (mirror.replication.throttled.rate): it takes about 4 s (one second of
// credit to start with), and the rate measured over a window after the
// start is within a factor 2 of the limit.
func TestMirrorE2EThrottle(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 40*time.Second)
	const rate = 200 << 10
	env := newMirrorEnv(t, ctx, fetch.MirrorConfig{ThrottleBytesPerSecond: rate})
	const topic = "throttled"
	env.createSourceTopic(topic, 2, nil)
	pr := manualProducer(t, env.seeds(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := bytes.Repeat([]byte("0123456789abcdef"), 64) // 1 KiB
	for p := range int32(2) {
		for i := range 32 {
			rs := make([]*kgo.Record, 16)
			for j := range rs {
				rs[j] = &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "%d-%d", i, j), Value: value}
			}
			if err := pr.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	ends := env.sourceEnds(topic)

	type sample struct {
		at    time.Duration
		bytes int64
	}
	var samples []sample
	stats := env.m.Stats()
	start := time.Now()
	env.mirrorTopic(topic)
	testutil.CheckFor(t, 15*time.Second, testutil.Named("throttled mirroring", func() error {
		samples = append(samples, sample{time.Since(start), stats.BytesMirrored.Load()})
		for p, end := range ends {
			if st := env.status(topic, p); st.LogEndOffset != end {
				return fmt.Errorf("partition %d: %+v, want log end %d", p, st, end)
			}
		}
		samples = append(samples, sample{time.Since(start), stats.BytesMirrored.Load()})
		return nil
	}))
	elapsed := time.Since(start)
	total := samples[len(samples)-1].bytes
	if total < 1<<20 {
		t.Fatalf("mirrored %d bytes, want >= 1 MiB", total)
	}
	if elapsed < 3*time.Second {
		t.Fatalf("mirrored %d bytes in %v at %d B/s, want >= 3s", total, elapsed, rate)
	}
	// The window starts after the initial second of credit and ends with
	// the last sample before the end.
	var from, to sample
	for _, s := range samples {
		if from.at == 0 && s.at >= time.Second {
			from = s
		}
		if s.bytes < total {
			to = s
		}
	}
	if to.at-from.at < time.Second {
		t.Fatalf("window [%v, %v] too short to measure (samples %v)", from.at, to.at, samples)
	}
	got := float64(to.bytes-from.bytes) / (to.at - from.at).Seconds()
	if got < rate/2 || got > 2*rate {
		t.Fatalf("mirrored at %.0f B/s over [%v, %v], limit %d B/s", got, from.at, to.at, rate)
	}
	t.Logf("%d bytes in %v; %.0f B/s over [%v, %v]", total, elapsed, got, from.at, to.at)
	env.checkIdentical(topic)
}

// TestMirrorE2ELeaderMoves moves source partition leaders (with epoch
// bumps) many times while a producer writes: the mirror follows every move
// and ends identical, without gaps or duplicates.
func TestMirrorE2ELeaderMoves(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 40*time.Second)
	const topic = "moves"
	const parts = 4
	env := newMirrorEnv(t, ctx, fetch.MirrorConfig{}, kfake.NumBrokers(3), kfake.SeedTopics(parts, topic))
	env.mirrorTopic(topic)

	// Round robin: progress wants records on every partition, and kgo's
	// default partitioner stays on one until 64 KiB went there (some 300
	// of these rounds; under -race on a loaded machine, longer than the
	// 10 s progress allows: partition 1 once had none).
	pr := newClient(t, env.seeds()[0], kgo.SeedBrokers(env.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.SnappyCompression()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	bg := startProducing(t, ctx, pr, func(i int) []*kgo.Record {
		rs := make([]*kgo.Record, 16)
		for j := range rs {
			rs[j] = kgo.StringRecord(fmt.Sprintf("value-%d-%d", i, j))
		}
		return rs
	})

	// progress waits until the mirror appended at least 100 more records
	// on every partition.
	progress := func(step int) {
		t.Helper()
		from := map[int32]int64{}
		for p := range int32(parts) {
			from[p] = env.status(topic, p).LogEndOffset
		}
		testutil.CheckFor(t, mirrorCatchUp, testutil.Named(fmt.Sprintf("mirror progress after move %d", step), func() error {
			bg.check(t)
			for p := range int32(parts) {
				if st := env.status(topic, p); st.LogEndOffset < from[p]+100 {
					return fmt.Errorf("partition %d: %+v, want log end >= %d", p, st, from[p]+100)
				}
			}
			return nil
		}))
	}
	progress(0)
	for step := 1; step <= 6; step++ {
		if step%2 == 1 {
			for p := range int32(parts) {
				if err := env.src.MoveTopicPartition(topic, p, (env.src.LeaderFor(topic, p)+1)%3); err != nil {
					t.Fatal(err)
				}
			}
		} else {
			env.src.ShufflePartitionLeaders()
		}
		progress(step)
	}
	bg.stop(t)
	env.waitCaughtUp(topic)
	raw := env.checkIdentical(topic)

	// The mirror followed the epochs: the batches carry several source
	// epochs, and the node's leader epoch stays above all of them
	// (DESIGN.md decision 3).
	md, err := env.locAdm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(parts) {
		epochs := map[int32]bool{}
		maxEpoch := int32(-1)
		for _, b := range splitBatches(t, raw[p]) {
			epochs[b.PartitionLeaderEpoch()] = true
			maxEpoch = max(maxEpoch, b.PartitionLeaderEpoch())
		}
		if len(epochs) < 4 {
			t.Errorf("partition %d: batches carry source epochs %v; the leader moves were not mirrored", p, epochs)
		}
		pd, ok := md.Topics[topic].Partitions[p]
		if !ok || pd.LeaderEpoch < maxEpoch+3 {
			t.Errorf("partition %d: node leader epoch %d, want >= %d (3 above the newest source epoch %d)", p, pd.LeaderEpoch, maxEpoch+3, maxEpoch)
		}
	}
}

// TestMirrorE2EStopStart stops and restarts mirroring a partition while a
// producer writes: stopped, its log end stays put (while the other
// partition keeps mirroring); restarted, it resumes at the local log end,
// without gaps or duplicates.
func TestMirrorE2EStopStart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 40*time.Second)
	env := newMirrorEnv(t, ctx, fetch.MirrorConfig{})
	const topic = "stop-start"
	env.createSourceTopic(topic, 2, nil)
	env.mirrorTopic(topic)

	bg := startProducing(t, ctx, manualProducer(t, env.seeds()), func(i int) []*kgo.Record {
		var rs []*kgo.Record
		for p := range int32(2) {
			for j := range 8 {
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "v-%d-%d", i, j)})
			}
		}
		return rs
	})
	// grown waits until the node's partition p reached at least n.
	grown := func(what string, p int32, n int64) {
		t.Helper()
		testutil.CheckFor(t, mirrorCatchUp, testutil.Named(what, func() error {
			bg.check(t)
			if leo := env.localLogEnd(topic, p); leo < n {
				return fmt.Errorf("partition %d log end %d, want >= %d", p, leo, n)
			}
			return nil
		}))
	}

	for round := range 3 {
		grown(fmt.Sprintf("round %d: partition 0 mirrored", round), 0, env.localLogEnd(topic, 0)+50)
		env.stopPartition(topic, 0)
		stoppedAt := env.localLogEnd(topic, 0)
		if _, err := env.m.Status(env.name, topic, 0); err == nil {
			t.Fatalf("round %d: Status of a stopped partition answered", round)
		}
		// Partition 1 shares the fetcher: once it mirrored 100 more
		// records, fetches that would have carried partition 0 went
		// out too; the source holds more of partition 0 than the node.
		grown(fmt.Sprintf("round %d: partition 1 mirrored", round), 1, env.localLogEnd(topic, 1)+100)
		if leo, srcEnd := env.localLogEnd(topic, 0), env.sourceEnds(topic)[0]; leo != stoppedAt || srcEnd <= stoppedAt {
			t.Fatalf("round %d: stopped partition 0 log end %d, %d when stopped; source at %d", round, leo, stoppedAt, srcEnd)
		}
		env.startPartition(topic, 0)
	}
	bg.stop(t)
	env.waitCaughtUp(topic)
	env.checkIdentical(topic)
}

// fetchTopic names a source topic in a Fetch: by name up to v12, by id
// from v13 (mirror fetchers fetch by id from sources that have ids).
type fetchTopic struct {
	name string
	id   [16]byte
}

// sourceTopic looks up a source topic's id, before any interceptor is
// installed (inside one, a request to the source would wait on itself).
func sourceTopic(t testing.TB, ctx context.Context, adm *kadm.Client, name string) fetchTopic {
	t.Helper()
	tds, err := adm.ListTopics(ctx, name)
	if err != nil || tds[name].Err != nil {
		t.Fatalf("source topic %s: %v %v", name, err, tds[name].Err)
	}
	return fetchTopic{name: name, id: tds[name].ID}
}

// is reports whether a request's topic is ft.
func (ft fetchTopic) is(version int16, name string, id [16]byte) bool {
	if version >= 13 {
		return id == ft.id
	}
	return name == ft.name
}

// craftFetch builds the answer to a mirror Fetch: every partition the
// request names, plus ft/partition, answered with empty records (the
// session keeps no state of it: the reply carries the request's session id
// and the next real fetch re-syncs), then fill adjusts ft/partition.
func craftFetch(req *kmsg.FetchRequest, ft fetchTopic, partition int32, fill func(*kmsg.FetchResponseTopicPartition)) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SessionID = req.SessionID
	answer := func(name string, id [16]byte, p int32) {
		var rt *kmsg.FetchResponseTopic
		for i := range resp.Topics {
			if resp.Topics[i].Topic == name && resp.Topics[i].TopicID == id {
				rt = &resp.Topics[i]
			}
		}
		if rt == nil {
			resp.Topics = append(resp.Topics, kmsg.NewFetchResponseTopic())
			rt = &resp.Topics[len(resp.Topics)-1]
			rt.Topic, rt.TopicID = name, id
		}
		for _, sp := range rt.Partitions {
			if sp.Partition == p {
				return
			}
		}
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.Partition, sp.RecordBatches = p, []byte{}
		if ft.is(req.Version, name, id) && p == partition {
			fill(&sp)
		}
		rt.Partitions = append(rt.Partitions, sp)
	}
	if req.Version >= 13 {
		answer("", ft.id, partition)
	} else {
		answer(ft.name, [16]byte{}, partition)
	}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			answer(rt.Topic, rt.TopicID, rp.Partition)
		}
	}
	return resp
}

// serveFirstFetch answers the first mirror fetch of ft/0 at offset 0, and
// only that one, with records (the source's high watermark end); until
// then it observes. The flag says whether it answered.
func serveFirstFetch(src *kfake.Cluster, ft fetchTopic, end int64, records []byte) *atomic.Bool {
	served := new(atomic.Bool)
	src.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req, ok := r.(*kmsg.FetchRequest)
		if !isMirrorFetch(r) || !ok || !fetchesAt(req, ft, 0, 0) {
			return nil, nil, false
		}
		served.Store(true) // answered once, then the control is dropped
		return craftFetch(req, ft, 0, func(sp *kmsg.FetchResponseTopicPartition) {
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = end, end, 0
			sp.RecordBatches = records
		}), nil, true
	})
	return served
}

// fetchesAt reports whether req asks for ft/partition at offset.
func fetchesAt(req *kmsg.FetchRequest, ft fetchTopic, partition int32, offset int64) bool {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if ft.is(req.Version, rt.Topic, rt.TopicID) && rp.Partition == partition && rp.FetchOffset == offset {
				return true
			}
		}
	}
	return false
}

// breakingDialer dials real connections; once a connection has read
// budget bytes it breaks (the source seems to drop it mid-response), as
// long as breaks are left. Only fetch connections read that much: the
// mirror's metadata client shares the dialer and never breaks.
type breakingDialer struct {
	budget int
	breaks atomic.Int32 // left
	broken atomic.Int32
}

var errBrokenConn = errors.New("tests: connection broken on purpose")

func (d *breakingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &breakingConn{Conn: c, d: d, left: d.budget}, nil
}

type breakingConn struct {
	net.Conn
	d      *breakingDialer
	left   int  // bytes until the break; only the reading goroutine uses it
	broken bool // likewise
}

func (c *breakingConn) Read(p []byte) (int, error) {
	if c.broken {
		return 0, errBrokenConn
	}
	if c.left > 0 && len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	if c.left > 0 {
		if c.left -= n; c.left <= 0 {
			if c.d.breaks.Add(-1) >= 0 {
				c.d.broken.Add(1)
				c.broken = true
				c.Conn.Close()
			}
		}
	}
	return n, err
}

// TestMirrorE2EFetchErrors injects the errors a source answers while
// leaders change (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER,
// UNKNOWN_LEADER_EPOCH) and connections that break (closed by the source
// between requests, cut by the network mid-response): the mirror recovers
// by itself and ends identical.
func TestMirrorE2EFetchErrors(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 40*time.Second)
	dialer := &breakingDialer{budget: 24 << 10} // responses carry up to 2 x 16 KiB
	dialer.breaks.Store(3)
	env := newMirrorEnv(t, ctx, fetch.MirrorConfig{PartitionMaxBytes: 16 << 10, Dialer: dialer.dial})
	const topic = "faulty"
	env.createSourceTopic(topic, 2, nil)
	pr := manualProducer(t, env.seeds(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for p := range int32(2) {
		produceBatchesTo(t, ctx, pr, topic, p, 40, 20, "before")
	}

	codes := []struct {
		err       *kerr.Error
		partition int32
	}{
		{kerr.FencedLeaderEpoch, 0},
		{kerr.NotLeaderForPartition, 1},
		{kerr.UnknownLeaderEpoch, 0},
		{kerr.UnknownLeaderEpoch, 1},
	}
	var handles []*kfake.FaultHandle
	for _, c := range codes {
		handles = append(handles, env.src.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: topic,
			Partitions: []int32{c.partition}, Err: c.err, Count: 2, When: isMirrorFetch}))
	}
	// The source closes the connection instead of answering two fetches.
	var closes atomic.Int32
	env.src.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		if !isMirrorFetch(r) {
			return nil, nil, false
		}
		if closes.Add(1) > 2 {
			env.src.DropControl()
			return nil, nil, false
		}
		env.src.KeepControl()
		return nil, errors.New("tests: closing the mirror's connection"), true
	})

	env.mirrorTopic(topic)
	for i, h := range handles {
		wctx, cancel := context.WithTimeout(ctx, mirrorCatchUp)
		err := h.Wait(wctx, 2)
		cancel()
		if err != nil {
			t.Fatalf("fault %s on partition %d answered %d of 2 fetches: %v; mirror: %+v",
				codes[i].err, codes[i].partition, h.Hits(), err, env.m.Statuses())
		}
	}
	for p := range int32(2) {
		produceBatchesTo(t, ctx, pr, topic, p, 10, 20, "after")
	}
	env.waitCaughtUp(topic)
	env.checkIdentical(topic)

	stats := env.m.Stats()
	for _, c := range []*kerr.Error{kerr.FencedLeaderEpoch, kerr.NotLeaderForPartition, kerr.UnknownLeaderEpoch} {
		if got := stats.ErrorsByCode[c.Code].Load(); got < 2 {
			t.Errorf("Stats.ErrorsByCode[%s] = %d, want >= 2", c.Message, got)
		}
	}
	if closes.Load() < 2 || dialer.broken.Load() != 3 {
		t.Errorf("%d connections closed by the source, %d broken mid-response; want 2 and 3", min(closes.Load(), 2), dialer.broken.Load())
	}
	if got := stats.ConnectionErrors.Load(); got < 5 {
		t.Errorf("Stats.ConnectionErrors = %d, want >= 5", got)
	}
}

// TestMirrorE2EDivergingEpoch answers a caught-up mirror's fetch with a
// diverging epoch below its log end (as Kafka does after an unclean
// election). While the partition mirrors, the copy is never cut for it:
// the partition fails, not retriable, naming both ends, its log intact.
// Restarted to align (StartAlign: LOG_ALIGNMENT, or ULE_RECOVERY when the
// operator allows it), the same answer cuts the local log there, and once
// the source answers normally again the mirror converges to identical
// bytes.
func TestMirrorE2EDivergingEpoch(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	env := newMirrorEnv(t, ctx, fetch.MirrorConfig{})
	const topic = "diverging"
	env.createSourceTopic(topic, 1, nil)
	pr := manualProducer(t, env.seeds())
	end := produceBatchesTo(t, ctx, pr, topic, 0, 10, 10, "a")
	env.mirrorTopic(topic)
	env.waitCaughtUp(topic)

	// Diverge inside a batch in the middle: the batch goes whole.
	src := readRaw(t, ctx, env.srcCl, env.src.LeaderFor(topic, 0), topic, 0, 0, end)
	bs := splitBatches(t, src)
	cut := bs[len(bs)/2]
	divergeAt := cut.BaseOffset() + min(1, int64(cut.LastOffsetDelta()))
	want := cut.BaseOffset()
	if want == 0 {
		t.Fatalf("batches %d: nothing to keep below the divergence", len(bs))
	}

	ft := sourceTopic(t, ctx, env.srcAdm, topic)
	// Every mirror fetch is answered with the divergence until the test
	// has seen what it does (a fetch already in flight when the partition
	// fails must not use up the one meant for the restarted partition).
	var diverge atomic.Bool
	diverge.Store(true)
	env.src.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		if !isMirrorFetch(r) {
			return nil, nil, false
		}
		env.src.KeepControl()
		if !diverge.Load() {
			return nil, nil, false
		}
		return craftFetch(r.(*kmsg.FetchRequest), ft, 0, func(sp *kmsg.FetchResponseTopicPartition) {
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = end, end, 0
			sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = 0, divergeAt
		}), nil, true
	})

	testutil.CheckFor(t, mirrorCatchUp, testutil.Named("the mirroring partition failing on the divergence", func() error {
		st := env.status(topic, 0)
		var te *fetch.SourceTruncatedError
		if st.State != fetch.StateFailed || !errors.As(st.Err, &te) || !errors.Is(st.Err, fetch.ErrNotRetriable) {
			return fmt.Errorf("status %+v, want failed with a SourceTruncatedError", st)
		}
		if te.LocalEnd != end || te.SourceEnd != divergeAt {
			return fmt.Errorf("error %+v, want local end %d, source end %d", te, end, divergeAt)
		}
		return nil
	}))
	if got := env.localEnds(topic)[0]; got != end {
		t.Fatalf("local log end %d after the divergence while mirroring, want %d: the copy was cut", got, end)
	}
	env.checkIdentical(topic)

	env.startPartition(topic, 0) // env.mode is StartAlign
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named(fmt.Sprintf("truncation to %d after a divergence at %d", want, divergeAt), func() error {
		if got := env.localEnds(topic)[0]; got != want {
			return fmt.Errorf("local log end %d, want %d (the base of the batch holding it)", got, want)
		}
		if st := env.status(topic, 0); st.LogEndOffset != want || st.State != fetch.StateFetching {
			return fmt.Errorf("status %+v, want fetching at %d", st, want)
		}
		return nil
	}))
	prefix := readRaw(t, ctx, env.locCl, -1, topic, 0, 0, want)
	if !bytes.Equal(prefix, src[:len(prefix)]) || len(prefix) == 0 {
		t.Fatalf("the kept prefix differs from the source's: %s", diffRaw(src, prefix))
	}
	diverge.Store(false)
	env.waitCaughtUp(topic)
	env.checkIdentical(topic)
}

// TestMirrorE2ECorruptBatch answers a mirror fetch with the source's batches
// of which the second has a flipped byte: the partition stops failed with
// an error naming the batch's offset, the batch before it is kept, nothing
// from it on is appended, and the other partition keeps mirroring. A
// restart resumes at the bad batch.
func TestMirrorE2ECorruptBatch(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	env := newMirrorEnv(t, ctx, fetch.MirrorConfig{})
	const topic = "corrupt"
	env.createSourceTopic(topic, 2, nil)
	pr := manualProducer(t, env.seeds())
	ends := map[int32]int64{}
	for p := range int32(2) {
		ends[p] = produceBatchesTo(t, ctx, pr, topic, p, 5, 10, "a")
	}
	src := readRaw(t, ctx, env.srcCl, env.src.LeaderFor(topic, 0), topic, 0, 0, ends[0])
	bs := splitBatches(t, src)
	if len(bs) < 3 {
		t.Fatalf("%d batches on partition 0, want >= 3", len(bs))
	}
	badAt := bs[1].BaseOffset()
	corrupt := bytes.Clone(src)
	corrupt[len(bs[0])+len(bs[1])-3] ^= 0x5a // in the second batch's records

	ft := sourceTopic(t, ctx, env.srcAdm, topic)
	served := serveFirstFetch(env.src, ft, ends[0], corrupt)
	env.mirrorTopic(topic)

	checkFailed := func(what string) {
		t.Helper()
		st := env.status(topic, 0)
		if st.State != fetch.StateFailed || st.Err == nil || !strings.Contains(st.Err.Error(), fmt.Sprintf("offset %d", badAt)) {
			t.Fatalf("%s: partition 0 %+v, want failed naming offset %d", what, st, badAt)
		}
		if leo := env.localLogEnd(topic, 0); leo != badAt {
			t.Fatalf("%s: partition 0 log end %d, want %d (the corrupt batch's base offset)", what, leo, badAt)
		}
	}
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named("partition 0 failing on the corrupt batch", func() error {
		if st := env.status(topic, 0); st.State != fetch.StateFailed {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	}))
	if !served.Load() {
		t.Fatal("the partition failed without the corrupt response")
	}
	checkFailed("after the corrupt response")
	if got := readRaw(t, ctx, env.locCl, -1, topic, 0, 0, badAt); !bytes.Equal(got, src[:len(bs[0])]) {
		t.Fatalf("the batch before the corrupt one: %s", diffRaw(src[:len(bs[0])], got))
	}
	env.waitLogEnd(topic, 1, ends[1])
	// More data: partition 1 follows, failed partition 0 does not.
	for p := range int32(2) {
		ends[p] = produceBatchesTo(t, ctx, pr, topic, p, 2, 10, "b")
	}
	env.waitLogEnd(topic, 1, ends[1])
	checkFailed("after partition 1 mirrored more")
	// What the control plane hears: partition 0 failed, naming the
	// offset, and never fetched; partition 1 fetched, once (not per
	// batch) and never failed.
	if evs := env.eventsOf(topic, 0); len(evs) != 1 || evs[0].Kind != fetch.EventFailed ||
		!strings.Contains(fmt.Sprint(evs[0].Err), fmt.Sprintf("offset %d", badAt)) {
		t.Fatalf("events of partition 0: %+v, want one EventFailed naming offset %d", evs, badAt)
	}
	if evs := env.eventsOf(topic, 1); len(evs) != 1 || evs[0].Kind != fetch.EventFetching {
		t.Fatalf("events of partition 1: %+v, want one EventFetching", evs)
	}

	env.startPartition(topic, 0)
	env.waitCaughtUp(topic)
	env.checkIdentical(topic)
}
