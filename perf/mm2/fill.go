package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/bench"
)

// dataset is the source topic once filled.
type dataset struct {
	topic      string
	partitions int
	ends       []int64 // end offset per partition; the topic starts at 0
	records    int64
	// logBytes is the topic's size on the source (DescribeLogDirs: the
	// bytes of its segment files, that is its record batches).
	logBytes int64
	// uncompressed is the key, value and header bytes produced.
	uncompressed int64
	fillTime     time.Duration
}

// poolSize is how many distinct records the fill cycles through: far more
// than one 1 MB batch holds (~2,700 clickstream records), so the cycle
// does not help the compressor.
const poolSize = 1 << 16

// recordPool returns the records the fill produces: the clickstream
// records of bench.GenRecords (a user key, a ~390 B JSON value, one or two
// headers; about 3x with lz4) or, with valueSize > 0, keyless
// bench.LoadValues JSON values of that size.
func recordPool(valueSize int) ([]kgo.Record, int64) {
	out := make([]kgo.Record, 0, poolSize)
	var bytes int64
	if valueSize > 0 {
		for _, v := range bench.LoadValues(poolSize, valueSize) {
			out = append(out, kgo.Record{Value: v})
			bytes += int64(len(v))
		}
		return out, bytes
	}
	for _, r := range bench.GenRecords(poolSize) {
		rec := kgo.Record{Key: r.Key, Value: r.Value}
		bytes += int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			bytes += int64(len(h.Key) + len(h.Value))
		}
		out = append(out, rec)
	}
	return out, bytes
}

// fill creates topic on the source and produces records, lz4 in batches of
// up to 1 MB (uncompressed, kgo's default ProducerBatchMaxBytes), until
// its log holds at least target bytes. The first round calibrates the
// compression ratio, the next ones aim at the target.
func fill(ctx context.Context, addr, topic string, partitions int, target int64, valueSize int, log *slog.Logger) (*dataset, error) {
	start := time.Now()
	adm, admCl, err := newAdmin(addr)
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	cr, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = cr.Err
	}
	if err != nil {
		return nil, fmt.Errorf("creating %s on the source: %w", topic, err)
	}
	pool, poolBytes := recordPool(valueSize)
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.ProducerLinger(20*time.Millisecond),
		kgo.MaxBufferedRecords(200_000),
		kgo.ProducerBatchMaxBytes(1<<20),
	)
	if err != nil {
		return nil, err
	}
	defer prod.Close()

	ds := &dataset{topic: topic, partitions: partitions}
	var (
		perr   atomic.Pointer[error]
		failed atomic.Bool
		n      int64 // records produced so far
	)
	promise := func(_ *kgo.Record, err error) {
		if err != nil && failed.CompareAndSwap(false, true) {
			perr.Store(&err)
		}
	}
	avgRecord := float64(poolBytes) / float64(len(pool))
	perRecord := avgRecord / 3 // log bytes per record: a guess until measured
	round := min(target, 64<<20)/int64(perRecord) + 1
	for round > 0 {
		log.Info("filling the source", "topic", topic, "records", round, "log_bytes_so_far", ds.logBytes)
		for i := int64(0); i < round && !failed.Load(); i++ {
			r := pool[(n+i)%int64(len(pool))]
			prod.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value, Headers: r.Headers}, promise)
			ds.uncompressed += int64(len(r.Key) + len(r.Value))
			for _, h := range r.Headers {
				ds.uncompressed += int64(len(h.Key) + len(h.Value))
			}
		}
		if err := prod.Flush(ctx); err != nil {
			return nil, fmt.Errorf("filling the source: %w", err)
		}
		if e := perr.Load(); e != nil {
			return nil, fmt.Errorf("filling the source: %w", *e)
		}
		n += round
		if ds.logBytes, err = logBytes(ctx, adm, topic); err != nil {
			return nil, err
		}
		perRecord = float64(ds.logBytes) / float64(n)
		// 0.5% over the estimate, so the next round usually is the last.
		round = int64(float64(target-ds.logBytes)/perRecord*1.005) + 1
		if ds.logBytes >= target {
			round = 0
		}
	}
	ds.fillTime = time.Since(start)
	if ds.ends, err = endOffsets(ctx, adm, topic, partitions); err != nil {
		return nil, fmt.Errorf("the source: %w", err)
	}
	for _, e := range ds.ends {
		ds.records += e
	}
	if ds.records != n {
		return nil, fmt.Errorf("the source holds %d records after the fill, want %d", ds.records, n)
	}
	return ds, nil
}

// newAdmin connects an admin client to addr.
func newAdmin(addr string, opts ...kgo.Opt) (*kadm.Client, *kgo.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

// logBytes is topic's size on the cluster (DescribeLogDirs, summed over
// partitions and directories).
func logBytes(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	// nil asks for every partition: a set naming the topic without
	// partitions would ask for none of them.
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("describing log dirs: %w", err)
	}
	var sum int64
	var derr error
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			derr = errors.Join(derr, fmt.Errorf("log dir %s: %w", d.Dir, d.Err))
		}
		for _, p := range d.Topics[topic] {
			sum += p.Size
		}
	})
	if derr != nil {
		return 0, fmt.Errorf("describing log dirs: %w", derr)
	}
	return sum, nil
}

// errNoTopic: the topic does not exist (yet) on the cluster asked.
var errNoTopic = errors.New("topic does not exist")

// endOffsets lists topic's end offsets, one per partition.
func endOffsets(ctx context.Context, adm *kadm.Client, topic string, partitions int) ([]int64, error) {
	listed, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make([]int64, partitions)
	seen := 0
	var lerr error
	listed.Each(func(o kadm.ListedOffset) {
		switch {
		case o.Err != nil:
			lerr = errors.Join(lerr, fmt.Errorf("%s-%d: %w", o.Topic, o.Partition, o.Err))
		case o.Partition >= 0 && int(o.Partition) < partitions:
			out[o.Partition] = o.Offset
			seen++
		}
	})
	if lerr != nil {
		return nil, lerr
	}
	if seen == 0 {
		return nil, errNoTopic
	}
	return out, nil
}
