package mirror

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/perf/internal/pagecache"
)

// mirrorName is the mirror the benchmark's fetch.Manager runs.
const mirrorName = "bench"

// mirrorRun is mode=mirror: a kmirror node and a fetch.Manager mirroring
// every partition of the source topic into it.
type mirrorRun struct {
	opts Options
	ds   *dataset
	src  *source

	node  *node
	mgr   *fetch.Manager
	parts []partition.Follower
	cons  *consumerRun
}

func (r *mirrorRun) setup(context.Context) error {
	n, err := startNode("kmirror-bench-mirror-*")
	if err != nil {
		return fmt.Errorf("starting the mirror node: %w", err)
	}
	r.node = n
	if err := n.b.CreateMirrorTopic(r.ds.topic, r.ds.topicID, int32(r.ds.partitions), mirrorName); err != nil {
		return err
	}
	for p := range r.ds.partitions {
		mp, err := n.b.Partitions().MirrorPartition(r.ds.topic, int32(p))
		if err != nil {
			return err
		}
		r.parts = append(r.parts, mp)
	}
	// The copy is written into pages just freed, as the drain it is
	// compared with reads into warm buffers (pagecache.WarmFreePages).
	if err := pagecache.WarmFreePages(r.ds.totalBytes + r.ds.totalBytes/4); err != nil {
		return err
	}
	// The fetchers log every partition they start at info; only their
	// warnings (reconnects, failures) belong in a benchmark's output.
	r.mgr = fetch.NewManager(fetch.Config{Logger: slog.New(minLevel{slog.LevelWarn, r.opts.Logger.Handler()})})
	return r.mgr.AddMirror(fetch.MirrorConfig{
		Name:                   mirrorName,
		Bootstrap:              r.src.addrs,
		FetchWaitMax:           r.opts.MaxWait,
		FetchMaxBytes:          r.opts.FetchMaxBytes,
		PartitionMaxBytes:      r.opts.PartitionMaxBytes,
		Fetchers:               r.opts.Fetchers,
		ThrottleBytesPerSecond: r.opts.Throttle,
	})
}

func (r *mirrorRun) start(ctx context.Context) error {
	if r.opts.Consumer {
		r.cons = startConsumer(ctx, r.node.b.Addr(), r.ds.topic, r.ds, r.opts)
	}
	for p, mp := range r.parts {
		if err := r.mgr.StartPartition(mirrorName, r.ds.topic, int32(p), mp, fetch.StartAlign); err != nil {
			return err
		}
	}
	return nil
}

func (r *mirrorRun) caughtUp() bool {
	for p, mp := range r.parts {
		if mp.LogEndOffset() < r.ds.ends[p] {
			return false
		}
	}
	return r.cons.done()
}

// lag is the fetchers' own view (fetch.Status.Lag: source high watermark
// minus local end); before a partition's first response, when Status
// knows no high watermark yet, the source end offset stands in.
func (r *mirrorRun) lag() int64 {
	var sum int64
	for _, st := range r.mgr.Statuses() {
		if st.SourceHighWatermark < 0 && st.Partition >= 0 && int(st.Partition) < len(r.ds.ends) {
			sum += max(r.ds.ends[st.Partition]-st.LogEndOffset, 0)
			continue
		}
		sum += st.Lag
	}
	return sum
}

func (r *mirrorRun) moved() (int64, int64) {
	var recs int64
	for p, mp := range r.parts {
		recs += min(mp.LogEndOffset(), r.ds.ends[p])
	}
	return r.mgr.Stats().BytesMirrored.Load(), recs
}

func (r *mirrorRun) err() error {
	for _, st := range r.mgr.Statuses() {
		if st.State == fetch.StateFailed {
			return fmt.Errorf("mirrored partition %s-%d failed: %v", st.Topic, st.Partition, st.Err)
		}
	}
	return r.cons.error()
}

func (r *mirrorRun) consumed() int64 { return r.cons.count() }

// verify compares the mirror's batches with the source's, byte for byte
// (SHA-256 of each partition's batches, read back over Fetch).
func (r *mirrorRun) verify(ctx context.Context) error {
	got, err := hashBatches(ctx, r.node.b.Addr(), r.ds, r.opts)
	if err != nil {
		return fmt.Errorf("reading the mirror: %w", err)
	}
	for p := range r.ds.partitions {
		if !bytes.Equal(got.hashes[p], r.ds.hashes[p]) || got.bytes[p] != r.ds.bytes[p] {
			return fmt.Errorf("partition %d: the mirror's batches (%d bytes) differ from the source's (%d bytes)",
				p, got.bytes[p], r.ds.bytes[p])
		}
	}
	if b := r.mgr.Stats().BytesMirrored.Load(); b != r.ds.totalBytes {
		return fmt.Errorf("the fetchers appended %d bytes, the source holds %d", b, r.ds.totalBytes)
	}
	return nil
}

func (r *mirrorRun) close() error {
	if r.mgr != nil {
		r.mgr.Close()
	}
	r.cons.close()
	if r.node != nil {
		return r.node.close()
	}
	return nil
}

// drainRun is mode=drain: the same Fetch requests as the fetchers, over
// plain sockets, the data discarded.
type drainRun struct {
	opts Options
	ds   *dataset

	offsets []atomic.Int64
	total   atomic.Int64
	perPart []int64 // with Verify: bytes per partition
	done    atomic.Bool
	errs    errBox
	wg      sync.WaitGroup
}

func (r *drainRun) setup(context.Context) error {
	r.offsets = make([]atomic.Int64, r.ds.partitions)
	r.perPart = make([]int64, r.ds.partitions)
	return nil
}

func (r *drainRun) start(ctx context.Context) error {
	var onData func(int32, []byte)
	if r.opts.Verify {
		// Partitions belong to one connection each: no locking needed.
		onData = func(p int32, b []byte) { r.perPart[p] += int64(len(b)) }
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		err := runDrainJobs(ctx, r.ds.topic, r.ds.leaders, r.ds.ends, r.opts, r.opts.Fetchers, onData, &r.total, r.offsets)
		r.errs.set(err)
		if err == nil {
			r.done.Store(true)
		}
	}()
	return nil
}

func (r *drainRun) caughtUp() bool { return r.done.Load() }

func (r *drainRun) lag() int64 {
	var sum int64
	for p, end := range r.ds.ends {
		sum += end - r.offsets[p].Load()
	}
	return sum
}

func (r *drainRun) moved() (int64, int64) {
	var recs int64
	for p := range r.offsets {
		recs += r.offsets[p].Load()
	}
	return r.total.Load(), recs
}

func (r *drainRun) err() error      { return r.errs.get() }
func (r *drainRun) consumed() int64 { return -1 }

func (r *drainRun) verify(context.Context) error {
	for p, end := range r.ds.ends {
		if got := r.offsets[p].Load(); got != end {
			return fmt.Errorf("partition %d: drained to offset %d, the source ends at %d", p, got, end)
		}
		if r.perPart[p] != r.ds.bytes[p] {
			return fmt.Errorf("partition %d: drained %d bytes, the source holds %d", p, r.perPart[p], r.ds.bytes[p])
		}
	}
	return nil
}

func (r *drainRun) close() error {
	r.wg.Wait()
	return nil
}

// pipelineRun is mode=pipeline: a kgo consumer on the source and a kgo
// producer into a plain topic of a kmirror node, as MirrorMaker 2 copies.
type pipelineRun struct {
	opts Options
	ds   *dataset
	src  *source

	node   *node
	dst    string
	prod   *kgo.Client
	cons   *kgo.Client
	reader *consumerRun

	acked []atomic.Int64
	total atomic.Int64
	errs  errBox
	wg    sync.WaitGroup
}

func (r *pipelineRun) setup(ctx context.Context) error {
	n, err := startNode("kmirror-bench-pipeline-*")
	if err != nil {
		return fmt.Errorf("starting the target node: %w", err)
	}
	r.node = n
	r.dst = r.ds.topic + "-pipeline"
	if err := createTopic(ctx, n.b.Addr(), r.dst, r.ds.partitions); err != nil {
		return err
	}
	codec, _ := CodecByName(r.opts.Codec)
	r.prod, err = kgo.NewClient(kgo.SeedBrokers(n.b.Addr()),
		kgo.DefaultProduceTopic(r.dst),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerBatchMaxBytes(1<<20),
	)
	if err != nil {
		return err
	}
	r.acked = make([]atomic.Int64, r.ds.partitions)
	// Connected and holding metadata before the clock starts.
	if err := r.prod.Ping(ctx); err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	return nil
}

func (r *pipelineRun) start(ctx context.Context) error {
	offsets := map[int32]kgo.Offset{}
	for p := range r.ds.partitions {
		offsets[int32(p)] = kgo.NewOffset().At(0)
	}
	var err error
	r.cons, err = kgo.NewClient(kgo.SeedBrokers(r.src.addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.ds.topic: offsets}),
		kgo.FetchMaxBytes(r.opts.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(r.opts.PartitionMaxBytes),
		kgo.FetchMaxWait(r.opts.MaxWait),
	)
	if err != nil {
		return err
	}
	if r.opts.Consumer {
		r.reader = startConsumer(ctx, r.node.b.Addr(), r.dst, r.ds, r.opts)
	}
	promise := func(rec *kgo.Record, err error) {
		if err != nil {
			r.errs.set(fmt.Errorf("producing to %s-%d: %w", rec.Topic, rec.Partition, err))
			return
		}
		r.acked[rec.Partition].Add(1)
		r.total.Add(1)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		var n int64
		for n < r.ds.records {
			fs := r.cons.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			if errs := fs.Errors(); len(errs) > 0 {
				e := errs[0]
				r.errs.set(fmt.Errorf("consuming %s-%d: %w", e.Topic, e.Partition, e.Err))
				return
			}
			fs.EachRecord(func(rec *kgo.Record) {
				n++
				r.prod.Produce(ctx, &kgo.Record{Partition: rec.Partition, Key: rec.Key, Value: rec.Value,
					Headers: rec.Headers, Timestamp: rec.Timestamp}, promise)
			})
		}
	}()
	return nil
}

func (r *pipelineRun) caughtUp() bool { return r.total.Load() >= r.ds.records && r.reader.done() }

func (r *pipelineRun) lag() int64 { return r.ds.records - r.total.Load() }

// moved counts source bytes in proportion to each partition's
// acknowledged records: records are not batches here.
func (r *pipelineRun) moved() (int64, int64) {
	var b int64
	for p := range r.acked {
		if end := r.ds.ends[p]; end > 0 {
			b += r.ds.bytes[p] * r.acked[p].Load() / end
		}
	}
	return b, r.total.Load()
}

func (r *pipelineRun) err() error {
	return errors.Join(r.errs.get(), r.reader.error())
}

func (r *pipelineRun) consumed() int64 { return r.reader.count() }

// verify checks the target's end offsets and that every partition holds
// the source's keys and values, in order.
func (r *pipelineRun) verify(ctx context.Context) error {
	ends, err := endOffsets(ctx, r.node.b.Addr(), r.dst, r.ds.partitions)
	if err != nil {
		return err
	}
	for p, end := range r.ds.ends {
		if ends[p] != end {
			return fmt.Errorf("partition %d: the pipeline's end offset is %d, the source's %d", p, ends[p], end)
		}
	}
	want, err := hashRecords(ctx, r.src.addrs, r.ds.topic, r.ds.ends)
	if err != nil {
		return fmt.Errorf("reading the source: %w", err)
	}
	got, err := hashRecords(ctx, []string{r.node.b.Addr()}, r.dst, r.ds.ends)
	if err != nil {
		return fmt.Errorf("reading the pipeline's topic: %w", err)
	}
	for p := range want {
		if !bytes.Equal(want[p], got[p]) {
			return fmt.Errorf("partition %d: the pipeline's records differ from the source's", p)
		}
	}
	return nil
}

func (r *pipelineRun) close() error {
	if r.cons != nil {
		r.cons.Close() // ends a PollFetches in progress
	}
	r.wg.Wait()
	if r.prod != nil {
		r.prod.Close()
	}
	r.reader.close()
	if r.node != nil {
		return r.node.close()
	}
	return nil
}

// consumerRun is the optional kgo consumer on the mirror node
// (Options.Consumer): what an application reading the copy costs. A nil
// *consumerRun is "no consumer" and is always done.
type consumerRun struct {
	cl   *kgo.Client
	want int64
	n    atomic.Int64
	errs errBox
	wg   sync.WaitGroup
}

func startConsumer(ctx context.Context, addr, topic string, ds *dataset, opts Options) *consumerRun {
	c := &consumerRun{want: ds.records}
	offsets := map[int32]kgo.Offset{}
	for p := range ds.partitions {
		offsets[int32(p)] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxBytes(opts.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(opts.PartitionMaxBytes),
		kgo.FetchMaxWait(opts.MaxWait),
	)
	if err != nil {
		c.errs.set(err)
		return c
	}
	c.cl = cl
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for c.n.Load() < c.want {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			if errs := fs.Errors(); len(errs) > 0 {
				e := errs[0]
				c.errs.set(fmt.Errorf("consumer on the mirror: %s-%d: %w", e.Topic, e.Partition, e.Err))
				return
			}
			c.n.Add(int64(fs.NumRecords()))
		}
	}()
	return c
}

func (c *consumerRun) done() bool { return c == nil || c.n.Load() >= c.want }

func (c *consumerRun) count() int64 {
	if c == nil {
		return -1
	}
	return c.n.Load()
}

func (c *consumerRun) error() error {
	if c == nil {
		return nil
	}
	return c.errs.get()
}

func (c *consumerRun) close() {
	if c == nil || c.cl == nil {
		return
	}
	c.cl.Close()
	c.wg.Wait()
}

// fetcherID spreads partitions over fetchers exactly as fetch/mirror.go
// does (FNV-1a of the topic plus the partition, modulo the count), so the
// drain's connections carry the same partitions as the mirror's.
func fetcherID(topic string, partition int32, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(topic))
	return int((h.Sum32() + uint32(partition)) % uint32(n))
}

// runDrainJobs reads every partition of topic from offset 0 to ends, one
// connection per (leader, fetcher id), and returns when all are done or
// one failed. offsets (one per partition, may be nil) track progress;
// total counts whole-batch bytes.
func runDrainJobs(ctx context.Context, topic string, leaders []string, ends []int64, opts Options, fetchers int,
	onData func(int32, []byte), total *atomic.Int64, offsets []atomic.Int64) error {
	if offsets == nil {
		offsets = make([]atomic.Int64, len(ends))
	}
	type key struct {
		addr string
		id   int
	}
	jobs := map[key]*drainJob{}
	var order []*drainJob
	for p := range ends {
		k := key{leaders[p], fetcherID(topic, int32(p), fetchers)}
		j := jobs[k]
		if j == nil {
			j = &drainJob{addr: k.addr, topic: topic, ends: ends, offsets: offsets, bytes: total, onData: onData,
				fetchMaxBytes: opts.FetchMaxBytes, partitionMaxBytes: opts.PartitionMaxBytes, maxWait: opts.MaxWait}
			jobs[k] = j
			order = append(order, j)
		}
		j.partitions = append(j.partitions, int32(p))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(order))
	for _, j := range order {
		go func() {
			err := j.run(ctx)
			if err != nil {
				cancel() // the others stop too
			}
			errs <- err
		}()
	}
	var first error
	for range order {
		if err := <-errs; err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
	return first
}

// batchHashes are a topic's whole-batch bytes and their SHA-256 per
// partition.
type batchHashes struct {
	bytes  []int64
	hashes [][]byte
}

// hashBatches reads every partition of the dataset's topic from addr.
func hashBatches(ctx context.Context, addr string, ds *dataset, opts Options) (batchHashes, error) {
	out := batchHashes{bytes: make([]int64, ds.partitions), hashes: make([][]byte, ds.partitions)}
	hs := make([]hash.Hash, ds.partitions)
	for p := range hs {
		hs[p] = sha256.New()
	}
	leaders := make([]string, ds.partitions)
	for p := range leaders {
		leaders[p] = addr
	}
	var total atomic.Int64
	onData := func(p int32, b []byte) {
		out.bytes[p] += int64(len(b))
		hs[p].Write(b)
	}
	if err := runDrainJobs(ctx, ds.topic, leaders, ds.ends, opts, 1, onData, &total, nil); err != nil {
		return out, err
	}
	for p, h := range hs {
		out.hashes[p] = h.Sum(nil)
	}
	return out, nil
}

// hashRecords consumes topic up to ends and hashes each partition's keys
// and values in order.
func hashRecords(ctx context.Context, addrs []string, topic string, ends []int64) ([][]byte, error) {
	offsets := map[int32]kgo.Offset{}
	for p := range ends {
		offsets[int32(p)] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	hs := make([]hash.Hash, len(ends))
	for p := range hs {
		hs[p] = sha256.New()
	}
	var want, n int64
	for _, e := range ends {
		want += e
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var lenBuf [binary.MaxVarintLen64]byte
	for n < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("after %d of %d records: %w", n, want, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return nil, fmt.Errorf("%s-%d: %w", errs[0].Topic, errs[0].Partition, errs[0].Err)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			n++
			h := hs[rec.Partition]
			h.Write(binary.AppendVarint(lenBuf[:0], int64(len(rec.Key))))
			h.Write(rec.Key)
			h.Write(binary.AppendVarint(lenBuf[:0], int64(len(rec.Value))))
			h.Write(rec.Value)
		})
	}
	out := make([][]byte, len(hs))
	for p, h := range hs {
		out[p] = h.Sum(nil)
	}
	return out, nil
}

// createTopic creates a plain topic on addr.
func createTopic(ctx context.Context, addr, topic string, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	return nil
}

// endOffsets lists a topic's end offsets on addr.
func endOffsets(ctx context.Context, addr, topic string, partitions int) ([]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make([]int64, partitions)
	var lerr error
	listed.Each(func(o kadm.ListedOffset) {
		switch {
		case o.Err != nil:
			lerr = errors.Join(lerr, fmt.Errorf("%s-%d: %w", o.Topic, o.Partition, o.Err))
		case o.Partition >= 0 && int(o.Partition) < partitions:
			out[o.Partition] = o.Offset
		}
	})
	return out, lerr
}

// deleteTopic removes the topic a run created on an external source.
func deleteTopic(src *source, topic string, log *slog.Logger) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(src.addrs...))
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).DeleteTopics(ctx, topic); err != nil {
		log.Warn("deleting the benchmark topic on the source", "topic", topic, "err", err)
	}
}

// minLevel drops records below a level before they reach h.
type minLevel struct {
	min slog.Level
	h   slog.Handler
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}

func (m minLevel) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }

func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler { return minLevel{m.min, m.h.WithAttrs(as)} }

func (m minLevel) WithGroup(name string) slog.Handler { return minLevel{m.min, m.h.WithGroup(name)} }
