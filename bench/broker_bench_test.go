package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// The broker benchmarks run a real node in-process and drive it with kgo
// over loopback, as the e2e tests do. They measure the whole path (netio,
// dispatch, the Fetch and Produce handlers, storage) against baselines that
// bound it: a bare TCP copy of the same bytes for Fetch, kfake (franz-go's
// in-memory fake cluster) for Produce.
//
//	go test -run '^$' -bench BenchmarkConsume -benchtime 3x -count 3 ./bench/
//	go test -run '^$' -bench BenchmarkProduce -benchtime 262144x -count 3 ./bench/
//
// One Consume op is a whole pass over the partition; one Produce op is one
// record, so Produce needs a record count (or a duration), not 3x.

const (
	// benchTopic is the one topic of every broker benchmark.
	benchTopic = "t"
	// benchRecordBytes is the value size of every produced record.
	benchRecordBytes = 1024
	// benchValues is how many distinct values producers cycle through
	// (4 MiB, far beyond the lz4 window).
	benchValues = 4096
	// benchBatchMaxBytes is the producer's ProducerBatchMaxBytes.
	benchBatchMaxBytes = 1 << 20
	// Consumer limits: kgo's defaults for a consumer that wants throughput.
	benchFetchMaxBytes     = 50 << 20
	benchFetchMaxPartBytes = 10 << 20
	// benchCopyBuffer is the read buffer of the tcp-copy baseline.
	benchCopyBuffer = 1 << 20
	// benchTimeout bounds every fill and every timed loop, so that a broker
	// bug fails the benchmark instead of hanging it.
	benchTimeout = 5 * time.Minute
)

// consumeBytesEnv raises BenchmarkConsume's partition size (bytes), for the
// 1 GiB run behind BENCHMARKS.md.
const consumeBytesEnv = "KMIRROR_BENCH_CONSUME_BYTES"

// defaultConsumeBytes keeps the default fill a few seconds long on 2 cores.
const defaultConsumeBytes = 256 << 20

// startBroker starts a kmirror node on 127.0.0.1:0 with its logs in a
// fresh temporary directory, closed when b ends. It returns the node and
// the log directory.
func startBroker(b *testing.B) (*broker.Broker, string) {
	b.Helper()
	cfg := nodetest.Config(b)
	return nodetest.Start(b, cfg), cfg.LogDirs[0]
}

// newProducer is the producer of both benchmarks: lz4, 1 MiB batches,
// acks=all, idempotent (kgo's default). The topic is auto-created, with the
// broker's num.partitions (1).
func newProducer(b *testing.B, addrs ...string) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.DefaultProduceTopic(benchTopic),
		kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.ProducerBatchMaxBytes(benchBatchMaxBytes),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	if err != nil {
		b.Fatalf("creating the producer: %v", err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// produceErrs collects the first error of async produce promises.
type produceErrs struct {
	mu    sync.Mutex
	first error
}

func (e *produceErrs) promise(_ *kgo.Record, err error) {
	if err == nil {
		return
	}
	e.mu.Lock()
	if e.first == nil {
		e.first = err
	}
	e.mu.Unlock()
}

func (e *produceErrs) err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.first
}

// produceN produces n records cycling through vals from *next on, and
// waits until all are acknowledged.
func produceN(ctx context.Context, cl *kgo.Client, vals [][]byte, next *int, n int) error {
	var errs produceErrs
	promise := errs.promise // bound once: a method value per call allocates
	for range n {
		cl.Produce(ctx, &kgo.Record{Value: vals[*next%len(vals)]}, promise)
		*next++
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return errs.err()
}

// partitionDir is where the broker keeps partition 0 of benchTopic.
func partitionDir(logDir string) string {
	return filepath.Join(logDir, benchTopic+"-0")
}

// segmentFiles are the partition's .log files in offset order (the names
// are zero-padded base offsets).
func segmentFiles(logDir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(partitionDir(logDir), "*.log"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	return files, nil
}

// segmentBytes is the size of the partition's log on disk.
func segmentBytes(logDir string) (int64, error) {
	files, err := segmentFiles(logDir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return 0, err
		}
		n += fi.Size()
	}
	return n, nil
}

// consumeFixture is a broker whose one partition holds size bytes of
// batches, records of them.
type consumeFixture struct {
	addr    string
	logDir  string
	size    int64 // bytes of the partition's segment files
	records int64 // the end offset: offsets run 0..records-1
}

// fillConsume starts a broker and produces 1 KiB records into benchTopic
// until its log holds at least target bytes. The compression ratio is not
// known up front, so it fills in rounds: one 16 MiB round to measure it,
// then what should reach the target, then small top-ups.
func fillConsume(b *testing.B, target int64) *consumeFixture {
	b.Helper()
	br, dir := startBroker(b)
	cl := newProducer(b, br.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	vals := LoadValues(benchValues, benchRecordBytes)

	start := time.Now()
	next := 0
	round := 16 << 20 / benchRecordBytes
	for {
		if err := produceN(ctx, cl, vals, &next, round); err != nil {
			b.Fatalf("filling the partition: %v", err)
		}
		size, err := segmentBytes(dir)
		if err != nil {
			b.Fatal(err)
		}
		if size >= target {
			b.Logf("filled %s: %d records, %d bytes of segments (lz4 ratio %.2f) in %v",
				benchTopic, next, size, float64(next*benchRecordBytes)/float64(size),
				time.Since(start).Round(time.Millisecond))
			cl.Close()
			return &consumeFixture{addr: br.Addr(), logDir: dir, size: size, records: int64(next)}
		}
		perRecord := float64(size) / float64(next)
		round = max(1024, int(float64(target-size)/perRecord)+1)
	}
}

// consumeBytes is the partition size for BenchmarkConsume.
func consumeBytes(b *testing.B) int64 {
	s := os.Getenv(consumeBytesEnv)
	if s == "" {
		return defaultConsumeBytes
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1<<20 {
		b.Fatalf("%s=%q: want a byte count of at least 1 MiB", consumeBytesEnv, s)
	}
	return n
}

// sizeName is n in the largest binary unit that divides it, for ladder
// names (256MiB, 1GiB); the fill overshoots the target by part of a batch,
// so names use the target.
func sizeName(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkConsume reads one partition of S bytes (lz4 batches of 1 KiB
// records, S = 256 MiB or $KMIRROR_BENCH_CONSUME_BYTES) from offset 0 to
// the end, one whole pass per op. The partition is filled once, before the
// modes run. Every mode sets S as its bytes, so the MB/s compare directly.
//
//	kmirror      a kgo consumer (ConsumePartitions, FetchMaxBytes 50 MiB,
//	             FetchMaxPartitionBytes 10 MiB) counting records: what an
//	             application sees, lz4 decompression and record decoding
//	             on the client included.
//	kmirror-raw  sessionless FetchRequests over a kgo broker connection,
//	             batches framed but not decompressed or CRC-checked: the
//	             broker's serving speed with little client CPU in the way.
//	kmirror-conn Fetch v11 over a plain net.Conn, each response read into
//	             one reused buffer and walked by hand: the client costs what
//	             tcp-copy's reader costs, so the ratio is the broker's.
//	tcp-copy     the baseline: the segment files' bytes, from memory, sent
//	             over a loopback TCP connection and read with 1 MiB
//	             buffers: one copy into the socket and one out of it per
//	             byte, the floor for a broker that writes from user memory
//	             (sendfile could go below it).
//
// A new consumer (or connection) per op is created outside the timer; its
// first metadata and fetch connection setup (well under a millisecond on
// loopback) are timed. B/op and allocs/op count the broker's allocations
// too: it runs in the same process.
func BenchmarkConsume(b *testing.B) {
	target := consumeBytes(b)
	fx := fillConsume(b, target)
	for _, mode := range []struct {
		name string
		run  func(b *testing.B, fx *consumeFixture)
	}{
		{"kmirror", benchConsumeKgo},
		{"kmirror-raw", benchConsumeRaw},
		{"kmirror-conn", benchConsumeConn},
		{"tcp-copy", benchConsumeTCP},
	} {
		b.Run(fmt.Sprintf("size=%s/mode=%s", sizeName(target), mode.name), func(b *testing.B) {
			b.SetBytes(fx.size)
			b.ReportAllocs()
			mode.run(b, fx)
		})
	}
}

// benchConsumeKgo consumes the partition with a fresh kgo consumer per op.
func benchConsumeKgo(b *testing.B, fx *consumeFixture) {
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(fx.addr),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
				benchTopic: {0: kgo.NewOffset().At(0)},
			}),
			kgo.FetchMaxBytes(benchFetchMaxBytes),
			kgo.FetchMaxPartitionBytes(benchFetchMaxPartBytes),
		)
		if err != nil {
			b.Fatalf("creating the consumer: %v", err)
		}
		b.StartTimer()
		var n int64
		for n < fx.records {
			fs := cl.PollFetches(ctx)
			if err := errors.Join(fetchErrs(fs)...); err != nil {
				cl.Close()
				b.Fatalf("consuming at record %d of %d: %v", n, fx.records, err)
			}
			n += int64(fs.NumRecords())
		}
		b.StopTimer()
		cl.Close()
		if n != fx.records {
			b.Fatalf("consumed %d records, want %d", n, fx.records)
		}
		b.StartTimer()
	}
}

// fetchErrs are the errors of a poll (kgo.Fetches.Errors, flattened).
func fetchErrs(fs kgo.Fetches) []error {
	var errs []error
	for _, e := range fs.Errors() {
		errs = append(errs, fmt.Errorf("%s-%d: %w", e.Topic, e.Partition, e.Err))
	}
	return errs
}

// benchConsumeRaw reads the partition with hand-built sessionless Fetch
// requests, whatever version kgo negotiates (v13+ address the topic by ID,
// older by name, so both are set). Batches are framed with batch.Iterator
// (no CRC check, no decompression) to find the next offset; only whole
// batches count.
func benchConsumeRaw(b *testing.B, fx *consumeFixture) {
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(fx.addr))
	if err != nil {
		b.Fatalf("creating the client: %v", err)
	}
	defer cl.Close()

	// The leader's node id and the topic id, and a connection warmed by a
	// first fetch, before the timer.
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(benchTopic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		b.Fatalf("metadata: %v", err)
	}
	if len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) != 1 {
		b.Fatalf("metadata: want 1 topic with 1 partition, got %+v", mresp.Topics)
	}
	leader := cl.Broker(int(mresp.Topics[0].Partitions[0].Leader))

	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MinBytes = 1
	req.MaxBytes = benchFetchMaxBytes
	req.SessionEpoch = -1 // no session: every request names its partitions
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = benchTopic
	rt.TopicID = mresp.Topics[0].TopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = 0
	rp.PartitionMaxBytes = benchFetchMaxPartBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	part := &req.Topics[0].Partitions[0]

	// fetch returns the whole-batch bytes at offset and the offset after
	// them.
	fetch := func(offset int64) (int64, int64, error) {
		part.FetchOffset = offset
		kresp, err := leader.Request(ctx, req)
		if err != nil {
			return 0, 0, err
		}
		resp := kresp.(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 {
			return 0, 0, fmt.Errorf("fetch error code %d", resp.ErrorCode)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, 0, fmt.Errorf("want 1 topic with 1 partition, got %d topics", len(resp.Topics))
		}
		p := &resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			return 0, 0, fmt.Errorf("partition error code %d at offset %d", p.ErrorCode, offset)
		}
		it := batch.NewIterator(p.RecordBatches)
		it.SkipCRC()
		for bb, ok := it.Next(); ok; bb, ok = it.Next() {
			offset = bb.NextOffset()
		}
		if err := it.Err(); err != nil {
			return 0, 0, err
		}
		return int64(it.Consumed()), offset, nil
	}
	if _, _, err := fetch(0); err != nil {
		b.Fatalf("warm-up fetch: %v", err)
	}

	b.ResetTimer()
	for range b.N {
		var read, offset int64
		for offset < fx.records {
			n, next, err := fetch(offset)
			if err != nil {
				b.Fatalf("fetching at offset %d: %v", offset, err)
			}
			if next == offset {
				b.Fatalf("no progress at offset %d of %d", offset, fx.records)
			}
			read, offset = read+n, next
		}
		if read != fx.size {
			b.Fatalf("read %d bytes of batches, the segments hold %d", read, fx.size)
		}
	}
}

// benchConsumeTCP is the baseline: the segment bytes over loopback TCP. The
// sender waits for one byte from the reader, sent once the timer runs, so
// that nothing is buffered in the socket before.
func benchConsumeTCP(b *testing.B, fx *consumeFixture) {
	files, err := segmentFiles(fx.logDir)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 0, fx.size)
	for _, f := range files {
		p, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		data = append(data, p...)
	}
	if int64(len(data)) != fx.size {
		b.Fatalf("read %d bytes of segments, want %d", len(data), fx.size)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()

	sent := make(chan error, 1)
	serve := func() {
		c, err := ln.Accept()
		if err != nil {
			sent <- err
			return
		}
		defer c.Close()
		var go1 [1]byte
		if _, err := io.ReadFull(c, go1[:]); err != nil {
			sent <- err
			return
		}
		_, err = c.Write(data)
		sent <- err
	}
	buf := make([]byte, benchCopyBuffer)
	// io.Discard is an io.ReaderFrom and *net.TCPConn an io.WriterTo, either
	// of which makes io.CopyBuffer ignore buf (and read 8 KiB at a time):
	// hide both.
	dst := struct{ io.Writer }{io.Discard}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		go serve()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := c.Write([]byte{1}); err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(dst, struct{ io.Reader }{c}, buf)
		b.StopTimer()
		c.Close()
		if err != nil {
			b.Fatal(err)
		}
		if err := <-sent; err != nil {
			b.Fatalf("sending: %v", err)
		}
		if n != fx.size {
			b.Fatalf("copied %d bytes, want %d", n, fx.size)
		}
		b.StartTimer()
	}
}

// BenchmarkProduce produces b.N records of 1 KiB (LoadValues, lz4, 1 MiB
// batches, acks=all, idempotent) asynchronously and flushes: one op is one
// record, so the MB/s are of uncompressed values. Targets:
//
//	kmirror  a node in-process, its log in a temporary directory (page
//	         cache: no fsync per batch, as Kafka's defaults).
//	kfake    franz-go's in-memory fake cluster, one broker: the cost of
//	         the Kafka protocol and kgo without a real log behind it.
//
// The producer id, metadata and connections are set up by one synchronous
// record before the timer. B/op and allocs/op count the whole process:
// kgo's allocations and the target's (both run in-process). -benchtime 3x means 3 records: use a count
// such as -benchtime 262144x (256 MiB) or a duration.
func BenchmarkProduce(b *testing.B) {
	vals := LoadValues(benchValues, benchRecordBytes)
	for _, target := range []struct {
		name  string
		start func(b *testing.B) []string
	}{
		{"kmirror", func(b *testing.B) []string {
			br, _ := startBroker(b)
			return []string{br.Addr()}
		}},
		{"kfake", func(b *testing.B) []string {
			return kfaketest.Source(b, kfake.SeedTopics(1, benchTopic)).ListenAddrs()
		}},
	} {
		b.Run("target="+target.name, func(b *testing.B) {
			cl := newProducer(b, target.start(b)...)
			ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
			defer cancel()
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: vals[0]}).FirstErr(); err != nil {
				b.Fatalf("warm-up record: %v", err)
			}
			var errs produceErrs
			promise := errs.promise // bound once: a method value per call allocates
			b.SetBytes(benchRecordBytes)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				cl.Produce(ctx, &kgo.Record{Value: vals[i%len(vals)]}, promise)
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatalf("flushing: %v", err)
			}
			b.StopTimer()
			if err := errs.err(); err != nil {
				b.Fatalf("producing: %v", err)
			}
		})
	}
}

// TestLoadValues checks what the broker benchmarks rely on: exact sizes,
// distinct values, the same values on every call.
func TestLoadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ n, size int }{{1, 1}, {3, 100}, {64, 1024}} {
		t.Run(fmt.Sprintf("n=%d/size=%d", tc.n, tc.size), func(t *testing.T) {
			t.Parallel()
			vals, again := LoadValues(tc.n, tc.size), LoadValues(tc.n, tc.size)
			if len(vals) != tc.n {
				t.Fatalf("got %d values, want %d", len(vals), tc.n)
			}
			seen := map[string]bool{}
			for i, v := range vals {
				if len(v) != tc.size {
					t.Errorf("value %d: %d bytes, want %d", i, len(v), tc.size)
				}
				if !slices.Equal(v, again[i]) {
					t.Errorf("value %d differs between calls", i)
				}
				if tc.size > 1 && seen[string(v)] {
					t.Errorf("value %d repeats an earlier one", i)
				}
				seen[string(v)] = true
			}
		})
	}
}

// benchConsumeConn reads the partition with Fetch v11 requests written to a
// plain TCP connection and responses read into one reused buffer, so the
// client does no more work per byte than tcp-copy's reader.
func benchConsumeConn(b *testing.B, fx *consumeFixture) {
	c, err := net.Dial("tcp", fx.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis = 500
	req.MinBytes = 1
	req.MaxBytes = benchFetchMaxBytes
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = benchTopic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = benchFetchMaxPartBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	part := &req.Topics[0].Partitions[0]

	var frame, buf []byte
	fetch := func(offset int64) (int64, int64, error) {
		part.FetchOffset = offset
		// Request header v1: size, key 1, version 11, correlation id, null client id.
		frame = append(frame[:0], 0, 0, 0, 0, 0, 1, 0, 11, 0, 0, 0, 1, 0xff, 0xff)
		frame = req.AppendTo(frame)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		if _, err := c.Write(frame); err != nil {
			return 0, 0, err
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return 0, 0, err
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(c, buf); err != nil {
			return 0, 0, err
		}
		// corr 4 | throttle 4 | error 2 | session 4 | topics 4 | name 2+len |
		// partitions 4 | partition 4 | error 2 | hw 8 | lso 8 | log start 8 |
		// aborted -1 (4) | preferred replica 4 | records 4+len
		at := 4 + 4 + 2 + 4 + 4 + 2 + len(benchTopic) + 4 + 4
		if code := binary.BigEndian.Uint16(buf[at:]); code != 0 {
			return 0, 0, fmt.Errorf("partition error code %d at offset %d", code, offset)
		}
		at += 2 + 8 + 8 + 8 + 4 + 4
		recs := buf[at+4 : at+4+int(binary.BigEndian.Uint32(buf[at:]))]
		it := batch.NewIterator(recs)
		it.SkipCRC()
		for bb, ok := it.Next(); ok; bb, ok = it.Next() {
			offset = bb.NextOffset()
		}
		return int64(it.Consumed()), offset, it.Err()
	}
	if _, _, err := fetch(0); err != nil {
		b.Fatalf("warm-up fetch: %v", err)
	}
	b.ResetTimer()
	for range b.N {
		var read, offset int64
		for offset < fx.records {
			n, next, err := fetch(offset)
			if err != nil {
				b.Fatalf("fetching at offset %d: %v", offset, err)
			}
			read, offset = read+n, next
		}
		if read != fx.size {
			b.Fatalf("read %d bytes, want %d", read, fx.size)
		}
	}
}
