package mirror

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/verify"
)

// BenchmarkVerify is `kmirror mirrors --verify`'s throughput against the
// bare fetch drain of both sides (issue 18 item 1): two in-process kmirror
// nodes hold the same batches at the same offsets (a source and its copy),
// -verify-bytes per side across 8 partitions, and each mode reads all of
// both:
//
//   - mode=drain: the drain mode's raw Fetch loop (drain_conn.go) with its
//     defaults (the mirror fetchers': 10 MiB responses, 1 MiB per
//     partition), -verify-drain-conns connections per side (1, the
//     fetchers' default: every partition in each request; 8: about one
//     partition per connection, as verify reads), no CRC check;
//   - mode=verify: verify.Run as the command runs it (a raw connection
//     per partition being read, one partition per request of up to
//     1 MiB, 8 partitions at once, every CRC32C recomputed, the streaming
//     merge).
//
// MB/s counts the bytes of both sides; cpu-s/GB is this process's CPU per
// 10^9 of those bytes, the two nodes' serving included (they run in this
// process), so the difference of the two modes is verify's own cost.
// Every iteration of either sub-benchmark runs both modes (the other one
// untimed), and verify/drain is verify's throughput over the drain's in
// those same iterations (the median of the iterations' ratios): the
// machine is shared, and a ratio of two runs minutes apart measures the
// neighbours.
//
//	go test ./perf/mirror -run '^$' -bench BenchmarkVerify -benchtime 5x [-verify-drain-conns 8]
var (
	verifyBenchBytes = flag.Int64("verify-bytes", 256<<20, "BenchmarkVerify: bytes per side")
	verifyDrainConns = flag.Int("verify-drain-conns", 1, "BenchmarkVerify: the drain's connections per side")
)

const verifyBenchPartitions = 8

// verifyBench is the two nodes, filled once for both sub-benchmarks.
type verifyBench struct {
	src, cp *node
	topic   string
	ends    []int64
	perSide int64
}

func (vb *verifyBench) close() {
	for _, n := range []*node{vb.src, vb.cp} {
		if n != nil {
			n.close()
		}
	}
}

// benchBatch is an uncompressed batch of n records of size random bytes
// each at base 0; only the base offset (outside the CRC) changes between
// the copies appended.
func benchBatch(n, size int) []byte {
	rng := rand.New(rand.NewPCG(7, 8))
	var recs []byte
	for i := range n {
		var body []byte
		body = append(body, 0)
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, -1)
		body = binary.AppendVarint(body, int64(size))
		for range size {
			body = append(body, byte(rng.Uint32()))
		}
		body = binary.AppendVarint(body, 0)
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	rb := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: 1_700_000_000_000,
		MaxTimestamp: 1_700_000_000_000, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n),
		Length: int32(batch.MinLength + len(recs)), Records: recs}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], batch.Checksum(b[21:]))
	return b
}

func setupVerifyBench() (*verifyBench, error) {
	vb := &verifyBench{topic: "verify-bench"}
	var err error
	if vb.src, err = startNode("kmirror-bench-verify-src-*"); err != nil {
		return nil, err
	}
	if vb.cp, err = startNode("kmirror-bench-verify-copy-*"); err != nil {
		vb.close()
		return nil, err
	}
	id := [16]byte{0x7e, 1, 2, 3}
	one := benchBatch(100, 160) // about 17 KB
	const chunk = 64            // batches per append
	perPart := *verifyBenchBytes / verifyBenchPartitions / int64(len(one)) / chunk * chunk
	vb.ends = make([]int64, verifyBenchPartitions)
	buf := make([]byte, 0, chunk*len(one))
	for _, n := range []*node{vb.src, vb.cp} {
		if err := n.b.CreateMirrorTopic(vb.topic, id, verifyBenchPartitions, "bench"); err != nil {
			vb.close()
			return nil, err
		}
		for p := range int32(verifyBenchPartitions) {
			mp, err := n.b.Partitions().MirrorPartition(vb.topic, p)
			if err != nil {
				vb.close()
				return nil, err
			}
			for at := int64(0); at < perPart; at += chunk {
				buf = buf[:0]
				for i := range int64(chunk) {
					start := len(buf)
					buf = append(buf, one...)
					binary.BigEndian.PutUint64(buf[start:], uint64((at+i)*100))
				}
				if _, err := mp.AppendMirror(buf); err != nil {
					vb.close()
					return nil, err
				}
			}
			vb.ends[p] = perPart * 100
		}
	}
	vb.perSide = perPart * int64(len(one)) * verifyBenchPartitions
	return vb, nil
}

func BenchmarkVerify(b *testing.B) {
	vb, err := setupVerifyBench()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(vb.close)
	both := 2 * vb.perSide
	ctx := context.Background()
	drainOpts := Options{}.WithDefaults()
	drain := func() error {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, n := range []*node{vb.src, vb.cp} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				leaders := make([]string, verifyBenchPartitions)
				for p := range leaders {
					leaders[p] = n.b.Addr()
				}
				var total atomic.Int64
				errs[i] = runDrainJobs(ctx, vb.topic, leaders, vb.ends, drainOpts, *verifyDrainConns, nil, &total, nil)
				if errs[i] == nil && total.Load() != vb.perSide {
					errs[i] = fmt.Errorf("drained %d bytes, want %d", total.Load(), vb.perSide)
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	var parts []verify.Partition
	for p := range int32(verifyBenchPartitions) {
		parts = append(parts, verify.Partition{Topic: vb.topic, Partition: p, StoppedAt: -1})
	}
	audit := func() error {
		src, err := kgo.NewClient(kgo.SeedBrokers(vb.src.b.Addr()))
		if err != nil {
			return err
		}
		defer src.Close()
		cp, err := kgo.NewClient(kgo.SeedBrokers(vb.cp.b.Addr()))
		if err != nil {
			return err
		}
		defer cp.Close()
		res, err := verify.Run(ctx, verify.Config{Source: src, Copy: cp, Partitions: parts})
		if err != nil {
			return err
		}
		var compared int64
		for _, r := range res {
			if r.Status != verify.Identical {
				return fmt.Errorf("%s-%d: %s %v %v", r.Topic, r.Partition, r.Status, r.Err, r.Notes)
			}
			compared += r.ComparedBytes
		}
		if compared != vb.perSide {
			return fmt.Errorf("compared %d bytes, want %d", compared, vb.perSide)
		}
		return nil
	}
	// timed runs fn, adds its CPU time and returns its wall time. Each run
	// ends with a collection of its own garbage, timed with it: without
	// it, what verify allocates (kgo reads every response into a fresh
	// buffer) would be collected during the drain that follows.
	timed := func(fn func() error, cpu *time.Duration) time.Duration {
		c0, _ := procCPU(0)
		t0 := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		took := time.Since(t0)
		c1, _ := procCPU(0)
		*cpu += c1 - c0
		return took
	}
	for _, mode := range []string{"drain", "verify"} {
		b.Run("mode="+mode, func(b *testing.B) {
			b.SetBytes(both)
			b.ReportAllocs()
			// Each iteration runs both modes, drain then verify, so
			// that the ratio compares runs under the same load (the
			// machine is shared); the timer counts this mode's only.
			var cpu, other time.Duration
			var ratios []float64
			b.ResetTimer()
			for range b.N {
				var d, v time.Duration
				b.StopTimer()
				if mode == "verify" {
					d = timed(drain, &other)
				} else {
					v = timed(audit, &other)
				}
				b.StartTimer()
				if mode == "drain" {
					d = timed(drain, &cpu)
				} else {
					v = timed(audit, &cpu)
				}
				ratios = append(ratios, d.Seconds()/v.Seconds())
			}
			b.StopTimer()
			slices.Sort(ratios)
			b.ReportMetric(cpu.Seconds()/(float64(both)*float64(b.N)/1e9), "cpu-s/GB")
			b.ReportMetric(ratios[len(ratios)/2], "verify/drain")
		})
	}
}
