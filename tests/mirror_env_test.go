package tests

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
)

// The harness of the mirror end-to-end tests (mirror_e2e_test.go says what
// "identical" means there).

// isMirrorFetch reports whether r is a Fetch sent by a mirror fetcher.
func isMirrorFetch(r kmsg.Request) bool {
	req, ok := r.(*kmsg.FetchRequest)
	return ok && req.MaxBytes == mirrorFetchMaxBytes
}

// mirrorCatchUp bounds every wait for a mirror to catch up.
const mirrorCatchUp = 10 * time.Second

// mirrorEnv is a kfake source, a kmirror node and a manager running one
// mirror (named env.name) from the source into the node.
type mirrorEnv struct {
	t    *testing.T
	ctx  context.Context
	src  *kfake.Cluster
	n    *brokerNode
	m    *fetch.Manager
	name string
	// mode is how startPartition starts partitions: StartAlign (a fresh
	// start, may cut the local log to the source) unless a test resumes.
	mode fetch.StartMode

	srcCl, locCl   *kgo.Client // raw reads (Fetch pinned to v11, by name)
	srcAdm, locAdm *kadm.Client

	events *eventLog // what the manager reported
}

// eventLog records a manager's events in order.
type eventLog struct {
	mu  sync.Mutex
	evs []fetch.Event
}

func (l *eventLog) add(ev fetch.Event) {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
}

// eventsOf returns the events reported for topic-p so far, in order.
func (e *mirrorEnv) eventsOf(topic string, p int32) []fetch.Event {
	e.events.mu.Lock()
	defer e.events.mu.Unlock()
	var out []fetch.Event
	for _, ev := range e.events.evs {
		if ev.Topic == topic && ev.Partition == p {
			out = append(out, ev)
		}
	}
	return out
}

// newMirrorEnv starts the source (one broker unless srcOpts say otherwise),
// the node and the mirror. Zero fields of cfg get test defaults: short
// waits and backoffs, and the mirrorFetchMaxBytes marker.
func newMirrorEnv(t *testing.T, ctx context.Context, cfg fetch.MirrorConfig, srcOpts ...kfake.Opt) *mirrorEnv {
	t.Helper()
	src := kfaketest.Source(t, srcOpts...)
	n := startNode(t)
	// Warnings of the fetchers (errors, truncations, backoffs) go to the
	// test log, shown when a test fails.
	events := &eventLog{}
	m := fetch.NewManager(fetch.Config{Logger: slog.New(slog.NewTextHandler(t.Output(),
		&slog.HandlerOptions{Level: slog.LevelWarn})), Events: events.add})
	t.Cleanup(m.Close) // before the node and the source close (cleanups run last first)

	if cfg.Name == "" {
		cfg.Name = "m1"
	}
	cfg.Bootstrap = src.ListenAddrs()
	if cfg.FetchWaitMax == 0 {
		cfg.FetchWaitMax = 100 * time.Millisecond
	}
	if cfg.FetchBackoff == 0 {
		cfg.FetchBackoff = 100 * time.Millisecond
	}
	if cfg.FetchMaxBytes == 0 {
		cfg.FetchMaxBytes = mirrorFetchMaxBytes
	}
	if err := m.AddMirror(cfg); err != nil {
		t.Fatalf("AddMirror: %v", err)
	}
	env := &mirrorEnv{t: t, ctx: ctx, src: src, n: n, m: m, name: cfg.Name, mode: fetch.StartAlign, events: events}
	env.srcCl = newClient(t, src.ListenAddrs()[0], kgo.SeedBrokers(src.ListenAddrs()...), kgo.MaxVersions(rawFetchVersions()))
	env.locCl = newClient(t, n.addr(), kgo.MaxVersions(rawFetchVersions()))
	env.srcAdm = kadm.NewClient(env.srcCl)
	env.locAdm = kadm.NewClient(env.locCl)
	return env
}

// rawFetchVersions caps Fetch at v11, the last version that names topics:
// kgo otherwise sends the newest version, which names them by ID only.
func rawFetchVersions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.Fetch), 11)
	return v
}

// seeds are the source's addresses, for producers and consumers.
func (e *mirrorEnv) seeds() []string { return e.src.ListenAddrs() }

// in returns the env bound to subtest t, with a context of its own that
// ends within d: a failure inside a subtest must fail that subtest on its
// own goroutine, not the parent, and a parallel subtest that waited for
// a slot (under -parallel, behind other tests) must not find the parent's
// deadline spent (CI's race run did).
func (e *mirrorEnv) in(t *testing.T, d time.Duration) *mirrorEnv {
	c := *e
	c.t, c.ctx = t, testCtx(t, d)
	return &c
}

// createSourceTopic creates topic at the source.
func (e *mirrorEnv) createSourceTopic(topic string, partitions int32, configs map[string]*string) {
	e.t.Helper()
	createTopic(e.t, e.ctx, e.srcAdm, topic, partitions, configs)
}

// mirrorTopic creates the mirror topic on the node, with the source's topic
// ID and partition count, and starts mirroring every partition.
func (e *mirrorEnv) mirrorTopic(topic string) int32 {
	e.t.Helper()
	tds, err := e.srcAdm.ListTopics(e.ctx, topic)
	if err != nil {
		e.t.Fatalf("source ListTopics %s: %v", topic, err)
	}
	td, ok := tds[topic]
	if !ok || td.Err != nil {
		e.t.Fatalf("source topic %s: %+v", topic, td)
	}
	parts := int32(len(td.Partitions))
	if err := e.n.b.CreateMirrorTopic(topic, td.ID, parts, e.name); err != nil {
		e.t.Fatalf("CreateMirrorTopic %s: %v", topic, err)
	}
	for p := range parts {
		e.startPartition(topic, p)
	}
	return parts
}

func (e *mirrorEnv) startPartition(topic string, p int32) {
	e.t.Helper()
	local, err := e.n.b.Partitions().MirrorPartition(topic, p)
	if err != nil {
		e.t.Fatalf("MirrorPartition %s-%d: %v", topic, p, err)
	}
	if err := e.m.StartPartition(e.name, topic, p, local, e.mode); err != nil {
		e.t.Fatalf("StartPartition %s-%d: %v", topic, p, err)
	}
}

func (e *mirrorEnv) stopPartition(topic string, p int32) {
	e.t.Helper()
	if err := e.m.StopPartition(e.name, topic, p); err != nil {
		e.t.Fatalf("StopPartition %s-%d: %v", topic, p, err)
	}
}

// localLogEnd reads the local log end offset straight from the log (it
// works whether or not the partition is mirrored).
func (e *mirrorEnv) localLogEnd(topic string, p int32) int64 {
	e.t.Helper()
	local, err := e.n.b.Partitions().MirrorPartition(topic, p)
	if err != nil {
		e.t.Fatalf("MirrorPartition %s-%d: %v", topic, p, err)
	}
	return local.LogEndOffset()
}

func (e *mirrorEnv) status(topic string, p int32) fetch.Status {
	e.t.Helper()
	st, err := e.m.Status(e.name, topic, p)
	if err != nil {
		e.t.Fatalf("Status %s-%d: %v", topic, p, err)
	}
	return st
}

// listOffsets lists the earliest or latest offsets of topic through adm,
// retrying retriable errors (a source leader that just moved) for a few
// seconds.
func listOffsets(t testing.TB, ctx context.Context, adm *kadm.Client, topic string, earliest bool) map[int32]int64 {
	t.Helper()
	list, what := adm.ListEndOffsets, "latest"
	if earliest {
		list, what = adm.ListStartOffsets, "earliest"
	}
	out := map[int32]int64{}
	testutil.CheckFor(t, 5*time.Second, testutil.Named(fmt.Sprintf("ListOffsets %s %s", what, topic), func() error {
		lo, err := list(ctx, topic)
		if err == nil {
			err = lo.Error()
		}
		if err != nil {
			if !kerr.IsRetriable(err) {
				t.Fatalf("ListOffsets %s %s: %v", what, topic, err)
			}
			return err
		}
		for p, o := range lo[topic] {
			out[p] = o.Offset
		}
		return nil
	}))
	return out
}

func (e *mirrorEnv) sourceStarts(topic string) map[int32]int64 {
	return listOffsets(e.t, e.ctx, e.srcAdm, topic, true)
}
func (e *mirrorEnv) sourceEnds(topic string) map[int32]int64 {
	return listOffsets(e.t, e.ctx, e.srcAdm, topic, false)
}
func (e *mirrorEnv) localStarts(topic string) map[int32]int64 {
	return listOffsets(e.t, e.ctx, e.locAdm, topic, true)
}
func (e *mirrorEnv) localEnds(topic string) map[int32]int64 {
	return listOffsets(e.t, e.ctx, e.locAdm, topic, false)
}

// waitLogEnd waits until the mirror of topic/p has appended up to end.
func (e *mirrorEnv) waitLogEnd(topic string, p int32, end int64) {
	e.t.Helper()
	testutil.CheckFor(e.t, mirrorCatchUp, testutil.Named(fmt.Sprintf("mirroring %s-%d up to %d", topic, p, end), func() error {
		st := e.status(topic, p)
		if st.State == fetch.StateFailed {
			e.t.Fatalf("%s-%d failed while catching up to %d: %+v", topic, p, end, st)
		}
		if st.LogEndOffset != end {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	}))
}

// waitCaughtUp waits until every partition of topic reached the source's
// current log end.
func (e *mirrorEnv) waitCaughtUp(topic string) map[int32]int64 {
	e.t.Helper()
	ends := e.sourceEnds(topic)
	for p, end := range ends {
		e.waitLogEnd(topic, p, end)
	}
	// The fetcher's status moves with the append; the high watermark and
	// a followed log start a moment later. Wait for what clients see.
	testutil.CheckFor(e.t, mirrorCatchUp, testutil.Named("local offsets equal to the source's", func() error {
		starts, lstarts, lends := e.sourceStarts(topic), e.localStarts(topic), e.localEnds(topic)
		for p, end := range ends {
			if lstarts[p] != starts[p] || lends[p] != end {
				return fmt.Errorf("%s-%d: local [%d, %d), source [%d, %d)", topic, p, lstarts[p], lends[p], starts[p], end)
			}
		}
		return nil
	}))
	return ends
}

// checkIdentical checks that every partition of topic has the source's log
// start and end, and the same raw batches in between, and returns the
// source's batches by partition.
func (e *mirrorEnv) checkIdentical(topic string) map[int32][]byte {
	e.t.Helper()
	starts, ends := e.sourceStarts(topic), e.sourceEnds(topic)
	lstarts, lends := e.localStarts(topic), e.localEnds(topic)
	out := map[int32][]byte{}
	for p, end := range ends {
		start := starts[p]
		if lstarts[p] != start || lends[p] != end {
			e.t.Fatalf("%s-%d: local log [%d, %d), source [%d, %d)", topic, p, lstarts[p], lends[p], start, end)
		}
		want := readRaw(e.t, e.ctx, e.srcCl, e.src.LeaderFor(topic, p), topic, p, start, end)
		got := readRaw(e.t, e.ctx, e.locCl, -1, topic, p, start, end)
		if !bytes.Equal(want, got) {
			e.t.Fatalf("%s-%d: mirrored batches differ from the source's: %s", topic, p, diffRaw(want, got))
		}
		out[p] = want
	}
	return out
}

// fetchPartition sends one Fetch v11 for topic/p at offset to broker (-1:
// any broker of cl) and returns the partition's answer.
func fetchPartition(t testing.TB, ctx context.Context, cl *kgo.Client, broker int32, topic string, p int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = -1, 100, 10<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 10<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	var (
		resp *kmsg.FetchResponse
		err  error
	)
	if broker >= 0 {
		var kr kmsg.Response
		if kr, err = cl.Broker(int(broker)).Request(ctx, req); err == nil {
			resp = kr.(*kmsg.FetchResponse)
		}
	} else {
		resp, err = req.RequestWith(ctx, cl)
	}
	if err != nil {
		t.Fatalf("fetch %s-%d at %d: %v", topic, p, offset, err)
	}
	if resp.Version != 11 {
		t.Fatalf("fetch %s-%d went out as v%d, want v11 (by topic name)", topic, p, resp.Version)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch %s-%d at %d: malformed response %+v", topic, p, offset, resp)
	}
	return resp.Topics[0].Partitions[0]
}

// readRaw returns the raw batches of topic/p that hold offsets from..end-1,
// read with Fetch from broker (-1: any broker of cl). The first batch may
// start before from (a batch is never cut), and gaps are skipped as the
// server skips them.
func readRaw(t testing.TB, ctx context.Context, cl *kgo.Client, broker int32, topic string, p int32, from, end int64) []byte {
	t.Helper()
	var out []byte
	for offset := from; offset < end; {
		rp := fetchPartition(t, ctx, cl, broker, topic, p, offset)
		if rp.ErrorCode != 0 {
			t.Fatalf("fetch %s-%d at %d: %v", topic, p, offset, kerr.ErrorForCode(rp.ErrorCode))
		}
		progressed := false
		it := batch.NewIterator(rp.RecordBatches)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			if next := b.NextOffset(); next > offset {
				out = append(out, b...)
				offset, progressed = next, true
			}
		}
		if err := it.Err(); err != nil {
			t.Fatalf("fetch %s-%d at %d: %v", topic, p, offset, err)
		}
		if !progressed {
			t.Fatalf("fetch %s-%d: no progress at offset %d of %d", topic, p, offset, end)
		}
	}
	return out
}

// splitBatches splits raw batches, checking every CRC.
func splitBatches(t testing.TB, raw []byte) []batch.Batch {
	t.Helper()
	var out []batch.Batch
	it := batch.NewIterator(raw)
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		out = append(out, b)
	}
	if err := it.Err(); err != nil || it.Incomplete() {
		t.Fatalf("splitting %d bytes after %d batches: %v (incomplete %v)", len(raw), len(out), err, it.Incomplete())
	}
	return out
}

// diffRaw describes where two runs of batches first differ.
func diffRaw(want, got []byte) string {
	split := func(raw []byte) []batch.Batch {
		var out []batch.Batch
		it := batch.NewIterator(raw)
		it.SkipCRC()
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			out = append(out, b)
		}
		return out
	}
	w, g := split(want), split(got)
	for i := range min(len(w), len(g)) {
		if !bytes.Equal(w[i], g[i]) {
			return fmt.Sprintf("batch %d: source [%d, %d] %d bytes, mirror [%d, %d] %d bytes", i,
				w[i].BaseOffset(), w[i].LastOffset(), len(w[i]), g[i].BaseOffset(), g[i].LastOffset(), len(g[i]))
		}
	}
	return fmt.Sprintf("source has %d batches (%d bytes), mirror %d (%d bytes)", len(w), len(want), len(g), len(got))
}

// mirrorRecord is a record as a consumer shows it, comparable.
type mirrorRecord struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
}

func (r mirrorRecord) String() string {
	return fmt.Sprintf("%d:%d:%s:%s", r.Partition, r.Offset, r.Key, r.Value)
}

func asMirrorRecords(rs []*kgo.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = mirrorRecord{r.Partition, r.Offset, string(r.Key), string(r.Value)}.String()
	}
	slices.Sort(out)
	return out
}

// txnMix is what produceTxnMix wrote: every data record, and the ones a
// read_committed consumer sees (all but the aborted ones), as sorted
// mirrorRecord strings.
type txnMix struct {
	all, committed []string
	rounds         int
}

// producerBelow returns a producer whose producer id is below limit. kfake
// draws producer ids at random from [0, 2^63) (Kafka counts up from 0), so
// it tries new producers (with the options opts(try) gives) until one fits;
// 40 tries fail with odds of 2^-40 for limit 2^62.
func producerBelow(t testing.TB, ctx context.Context, limit int64, opts func(try int) []kgo.Opt) *kgo.Client {
	t.Helper()
	for try := range 40 {
		cl, err := kgo.NewClient(opts(try)...)
		if err != nil {
			t.Fatalf("creating kgo client: %v", err)
		}
		pid, _, err := cl.ProducerID(ctx)
		if err != nil {
			cl.Close()
			t.Fatalf("initializing a producer id: %v", err)
		}
		if pid < limit {
			t.Cleanup(cl.Close)
			return cl
		}
		cl.Close()
	}
	t.Fatalf("no producer id below %d in 40 tries", limit)
	return nil
}

// produceTxnMix writes, to partitions 0-2 of topic, rounds transactions
// (committed, aborted, committed, ...; the last one committed) on
// partitions 0 and 1, each of two batches per partition, interleaved with
// idempotent non-transactional batches on partitions 1 and 2, then one last
// idempotent batch on every partition (so that aborted records are never
// the tail a consumer could stop before).
//
// With lowPIDs, both producers get producer ids below 2^62 (see
// producerBelow).
func produceTxnMix(t testing.TB, ctx context.Context, seeds []string, topic string, codec kgo.CompressionCodec, rounds int, lowPIDs bool) txnMix {
	t.Helper()
	if rounds%2 == 0 {
		rounds++ // end with a commit
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(codec)}
	var txn, plain *kgo.Client
	if lowPIDs {
		txn = producerBelow(t, ctx, 1<<62, func(try int) []kgo.Opt {
			return append(opts, kgo.TransactionalID(fmt.Sprintf("txn-%s-%d", topic, try)))
		})
		plain = producerBelow(t, ctx, 1<<62, func(int) []kgo.Opt { return opts })
	} else {
		txn = newClient(t, seeds[0], append(opts, kgo.TransactionalID("txn-"+topic))...)
		plain = newClient(t, seeds[0], opts...)
	}
	var mix txnMix
	mix.rounds = rounds
	value := func(tag string) []byte {
		return []byte(strings.Repeat(tag+";", 8))
	}
	records := func(round int, tag string, parts ...int32) []*kgo.Record {
		var rs []*kgo.Record
		for _, p := range parts {
			for i := range 6 {
				key := fmt.Sprintf("%s-r%d-p%d-%d", tag, round, p, i)
				rs = append(rs, &kgo.Record{Partition: p, Key: []byte(key), Value: value(key)})
			}
		}
		return rs
	}
	keep := func(rs kgo.ProduceResults, committed bool) {
		if err := rs.FirstErr(); err != nil {
			t.Fatalf("producing to %s: %v", topic, err)
		}
		got := make([]*kgo.Record, len(rs))
		for i, r := range rs {
			got[i] = r.Record
		}
		strs := asMirrorRecords(got)
		mix.all = append(mix.all, strs...)
		if committed {
			mix.committed = append(mix.committed, strs...)
		}
	}
	for round := range rounds {
		commit := round%2 == 0
		if err := txn.BeginTransaction(); err != nil {
			t.Fatalf("BeginTransaction: %v", err)
		}
		keep(txn.ProduceSync(ctx, records(round, "txn-a", 0, 1)...), commit)
		keep(plain.ProduceSync(ctx, records(round, "plain", 1, 2)...), true)
		keep(txn.ProduceSync(ctx, records(round, "txn-b", 0, 1)...), commit)
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		if err := txn.EndTransaction(ctx, end); err != nil {
			t.Fatalf("EndTransaction (commit %v): %v", commit, err)
		}
	}
	keep(plain.ProduceSync(ctx, records(rounds, "tail", 0, 1, 2)...), true)
	slices.Sort(mix.all)
	slices.Sort(mix.committed)
	return mix
}

// produceBatchesTo produces n batches of per records each to topic/p, one
// ProduceSync per batch (kgo sends what one call buffered as one batch,
// or a few), and returns the offset after the last one.
func produceBatchesTo(t testing.TB, ctx context.Context, cl *kgo.Client, topic string, p int32, n, per int, tag string) int64 {
	t.Helper()
	var next int64
	for i := range n {
		rs := make([]*kgo.Record, per)
		for j := range rs {
			key := fmt.Sprintf("%s-%d-%d", tag, i, j)
			rs[j] = &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte(strings.Repeat(key, 4))}
		}
		res := cl.ProduceSync(ctx, rs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("producing to %s-%d: %v", topic, p, err)
		}
		for _, r := range res {
			next = max(next, r.Record.Offset+1)
		}
	}
	return next
}

// manualProducer is an idempotent producer that writes each record to the
// partition it names.
func manualProducer(t testing.TB, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, seeds[0], append([]kgo.Opt{kgo.SeedBrokers(seeds...),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// bgProducer produces in the background, round after round, until
// stopped.
type bgProducer struct {
	stopCh chan struct{}
	done   chan struct{}
	once   sync.Once
	err    atomic.Pointer[error]
}

// startProducing produces records(i) synchronously with cl, for i = 0, 1,
// ..., until stop (or the test's end).
func startProducing(t testing.TB, ctx context.Context, cl *kgo.Client, records func(i int) []*kgo.Record) *bgProducer {
	bg := &bgProducer{stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(bg.done)
		for i := 0; ; i++ {
			select {
			case <-bg.stopCh:
				return
			default:
			}
			if err := cl.ProduceSync(ctx, records(i)...).FirstErr(); err != nil {
				bg.err.Store(&err)
				return
			}
		}
	}()
	t.Cleanup(bg.halt) // before cl closes
	return bg
}

func (bg *bgProducer) halt() {
	bg.once.Do(func() { close(bg.stopCh) })
	<-bg.done
}

// check fails the test if a round failed.
func (bg *bgProducer) check(t testing.TB) {
	t.Helper()
	if err := bg.err.Load(); err != nil {
		t.Fatalf("background producer: %v", *err)
	}
}

// stop waits for the round in flight and checks for errors.
func (bg *bgProducer) stop(t testing.TB) {
	t.Helper()
	bg.halt()
	bg.check(t)
}
