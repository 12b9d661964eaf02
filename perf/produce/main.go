// Command produce is the produce throughput benchmark of issue 17 item 3:
// the same produce load, per codec, against kmirror, franz-go's kfake and
// Apache Kafka 4.4 on the same machine in one run. Run it as
// `go run ./perf/produce` or `make bench-produce`.
//
//	+-------------------+  Produce v11, pre-built batches  +----------------------+
//	| this process:     | -------------------------------> | kmirror serve        |
//	| --conns sockets,  |   (one request = one batch for   | kmirror bench        |
//	| --in-flight each  |    every partition, sent again   |   --kfake-source     |
//	+-------------------+    and again)                    | Kafka 4.4.0 (KRaft)  |
//	                                                       +----------------------+
//
// The load is raw Produce requests carrying pre-built batches: a
// bench.GenBatch batch (clickstream JSON records, compressed as kgo
// compresses, at most --batch-size bytes as sent) made a plain producer's
// (no idempotence, so every copy is appended) and stamped with the current
// time. The request is encoded once; each send patches its correlation id.
// So the client does no compression and almost no work, and the broker's
// decompression and validation of every batch (Kafka's LogValidator,
// kmirror's storage validateRecords) is what the codecs change. There is no
// linger to set: each batch is already full, as a producer's is when
// batch.size and not linger.ms closes it.
//
// Every target runs in its own process (kmirror and kfake as children of
// the kmirror binary, Kafka through internal/realkafka), so CPU seconds
// per GB are the target's alone. All targets run for the whole benchmark;
// each cell (codec, acks, batch size) creates a fresh topic on each target
// in turn, warms up, measures a window, and deletes the topic. The target
// order alternates between cells (ABC, CBA) so that a load that grows or
// fades weighs on all alike.
//
// What is counted, in the window only: partition batches acknowledged with
// no error, times the batch's wire bytes, its uncompressed bytes (header
// plus the decompressed records section) and its records. MB = 10^6 B.
// CPU: utime+stime from /proc/<pid>/stat per 10^9 uncompressed bytes.
// "other CPU" is the machine's busy time (/proc/stat) minus the target's
// and this process's: the noise meter.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/settings"
	"github.com/kmirror/kmirror/perf/internal/benchrun"
	"github.com/kmirror/kmirror/perf/mirror"
)

// options are the command line.
type options struct {
	codecs       []batch.Codec
	targets      []string
	acks         []int16
	batchSizes   []int
	partitions   int
	conns        int
	inFlight     int
	warmup       time.Duration
	duration     time.Duration
	maxBytes     int64
	kmirrorBin   string
	heapMB       int
	out          string
	rounds       int
	targetWarmup time.Duration
	quietShare   float64
	quietWait    time.Duration
}

const usage = `Usage: go run ./perf/produce [flags]

Produces the same pre-built batches (raw Produce requests, no client-side
compression) into kmirror, kfake and Apache Kafka 4.4.0, each in its own
process on this machine, for every codec, acks and batch size, and prints
MB/s, records/s and the broker's CPU seconds per GB, with the ratios
kmirror/kfake and kmirror/Kafka. Kafka needs java and mvn (internal/realkafka).

Flags:
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

var codecNames = map[string]batch.Codec{"none": batch.CodecNone, "gzip": batch.CodecGzip,
	"snappy": batch.CodecSnappy, "lz4": batch.CodecLz4, "zstd": batch.CodecZstd}

func parseFlags(args []string, stderr io.Writer) (options, int) {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var (
		o                                   options
		codecs, targets, acks, sizes, total string
	)
	fs.StringVar(&codecs, "codecs", "none,gzip,snappy,lz4,zstd", "comma list of batch codecs")
	fs.StringVar(&targets, "targets", strings.Join(allTargets, ","), "comma list of targets: kmirror, kfake, kafka")
	fs.StringVar(&acks, "acks", "-1,1", "comma list of acks values: -1 (all) and/or 1")
	fs.StringVar(&sizes, "batch-size", "256KiB", "comma list of batch sizes as sent (compressed), with a unit")
	fs.IntVar(&o.partitions, "partitions", 4, "partitions of each topic; each request carries one batch for every one")
	fs.IntVar(&o.conns, "conns", 2, "connections (producers) to the target")
	fs.IntVar(&o.inFlight, "in-flight", 5, "unanswered requests per connection (max.in.flight.requests.per.connection)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "produce this long before each window, unmeasured")
	fs.DurationVar(&o.duration, "duration", 6*time.Second, "length of each measured window")
	fs.StringVar(&total, "bytes", "1GiB", "end a window early once this many wire bytes are acknowledged in it (0: no limit); bounds kfake's memory")
	fs.StringVar(&o.kmirrorBin, "kmirror-bin", "", "kmirror binary (kmirror serve and the kfake source); empty builds ./cmd/kmirror")
	fs.IntVar(&o.heapMB, "broker-heap-mb", 1024, "Kafka's -Xmx (kafka-server-start.sh's default is 1G)")
	fs.IntVar(&o.rounds, "rounds", 2, "measure every cell this many times, the target order reversed each round; the ratios use each target's best")
	fs.DurationVar(&o.targetWarmup, "target-warmup", 20*time.Second, "before the first cell, produce this long into each target, spread over the codecs, unmeasured (JIT)")
	fs.Float64Var(&o.quietShare, "quiet-share", 0.25, "before each window, wait until other processes use less than this share of the CPUs for 1 s")
	fs.DurationVar(&o.quietWait, "quiet-wait", 10*time.Second, "wait at most this long for that quiet; 0 does not wait")
	fs.StringVar(&o.out, "out", "", "also write the report and the progress log to this `file`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, 0
		}
		return o, 2
	}
	bad := func(format string, a ...any) (options, int) {
		fmt.Fprintf(stderr, "produce: "+format+"\n", a...)
		return o, 2
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	for _, c := range settings.Items(codecs) {
		codec, ok := codecNames[c]
		if !ok {
			return bad("--codecs: unknown codec %q", c)
		}
		o.codecs = append(o.codecs, codec)
	}
	for _, t := range settings.Items(targets) {
		if t != targetKmirror && t != targetKfake && t != targetKafka {
			return bad("--targets: unknown target %q", t)
		}
		o.targets = append(o.targets, t)
	}
	for _, a := range settings.Items(acks) {
		n, err := strconv.Atoi(a)
		if err != nil || (n != -1 && n != 1) {
			return bad("--acks: want -1 or 1, got %q", a)
		}
		o.acks = append(o.acks, int16(n))
	}
	for _, s := range settings.Items(sizes) {
		n, err := mirror.ParseBytes(s)
		if err != nil || n < 1<<10 || n > 1<<20 {
			return bad("--batch-size: want 1KiB-1MiB, got %q (%v)", s, err)
		}
		o.batchSizes = append(o.batchSizes, int(n))
	}
	n, err := mirror.ParseBytes(total)
	if err != nil {
		return bad("--bytes: %v", err)
	}
	o.maxBytes = n
	switch {
	case len(o.codecs) == 0 || len(o.targets) == 0 || len(o.acks) == 0 || len(o.batchSizes) == 0:
		return bad("--codecs, --targets, --acks and --batch-size must not be empty")
	case o.partitions < 1 || o.partitions > 1000:
		return bad("--partitions: want 1-1000, got %d", o.partitions)
	case o.conns < 1 || o.conns > 64 || o.inFlight < 1 || o.inFlight > 64:
		return bad("--conns and --in-flight: want 1-64")
	case o.warmup < 0 || o.duration <= 0:
		return bad("--warmup must be >= 0 and --duration positive")
	case o.heapMB < 256:
		return bad("--broker-heap-mb: want >= 256")
	case o.rounds < 1 || o.rounds > 20:
		return bad("--rounds: want 1-20, got %d", o.rounds)
	case o.targetWarmup < 0 || o.quietWait < 0 || o.quietShare <= 0 || o.quietShare > 1:
		return bad("--target-warmup and --quiet-wait: want >= 0; --quiet-share: want (0, 1]")
	}
	return o, -1
}

func run(args []string, stdout, stderr io.Writer) int {
	o, code := parseFlags(args, stderr)
	if code >= 0 {
		return code
	}
	rep := &report{started: time.Now(), args: args, opts: o}
	return benchrun.Run("produce", o.out, stdout, stderr, rep, func(ctx context.Context, log *slog.Logger) error {
		return runAll(ctx, o, rep, log)
	})
}

// runAll starts the targets, runs every cell and stops them; rep fills as
// it goes, so a failure keeps the cells measured before it.
func runAll(ctx context.Context, o options, rep *report, log *slog.Logger) error {
	work, err := os.MkdirTemp("", "produce-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := o.kmirrorBin
	if bin == "" {
		log.Info("building kmirror")
		bin = filepath.Join(work, "kmirror")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/kmirror/kmirror/cmd/kmirror").CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/kmirror: %v\n%s", err, out)
		}
	}
	if out, err := exec.CommandContext(ctx, bin, "version").Output(); err == nil {
		rep.kmirrorVersion = strings.TrimSpace(string(out))
	}
	targets := map[string]*target{}
	defer func() {
		for _, t := range targets {
			if err := t.close(); err != nil {
				log.Warn("stopping a target", "target", t.name, "err", err)
			}
		}
	}()
	for _, name := range o.targets {
		t, err := startTarget(ctx, name, bin, work, o.heapMB, log)
		if err != nil {
			return err
		}
		targets[name] = t
		log.Info("target started", "target", name, "addr", t.addr, "pid", t.pid)
		if t.version != "" {
			rep.kafkaVersion = t.version
		}
	}
	// fresh returns target name ready for a cell, and the processes of the
	// other targets (idle during it). kfake
	// keeps every batch in memory and a deleted topic's are not all freed
	// (a run that kept one kfake was OOM-killed at 22 GB), so it is
	// restarted before each cell.
	fresh := func(name string) (*target, []int, error) {
		if name == targetKfake {
			if err := targets[name].close(); err != nil {
				log.Warn("stopping kfake", "err", err)
			}
			delete(targets, name)
			t, err := startTarget(ctx, name, bin, work, o.heapMB, log)
			if err != nil {
				return nil, nil, err
			}
			targets[name] = t
		}
		var idle []int
		for n, t := range targets {
			if n != name {
				idle = append(idle, t.pid)
			}
		}
		return targets[name], idle, nil
	}
	var payloads []payload // by batch size, then codec
	for _, size := range o.batchSizes {
		for _, codec := range o.codecs {
			p, err := newPayload(codec, size, time.Now())
			if err != nil {
				return fmt.Errorf("generating the %v batch of %d bytes: %w", codec, size, err)
			}
			payloads = append(payloads, p)
		}
	}
	// A JVM interprets before it compiles: give every target (Kafka's JIT
	// above all) the same unmeasured run of each codec first.
	if o.targetWarmup > 0 {
		each := o.targetWarmup / time.Duration(len(payloads))
		for _, name := range o.targets {
			log.Info("warming up", "target", name, "for", o.targetWarmup)
			for _, p := range payloads {
				t, idle, err := fresh(name)
				if err != nil {
					return err
				}
				if _, err := runCell(ctx, o, t, idle, p, -1, 0, each, log); err != nil {
					return fmt.Errorf("warming up: %w", err)
				}
			}
		}
	}
	i := 0
	for round := range o.rounds {
		for _, p := range payloads {
			for _, acks := range o.acks {
				order := o.targets
				if (i+round)%2 == 1 {
					order = reversed(order)
				}
				i++
				for _, name := range order {
					t, idle, err := fresh(name)
					if err != nil {
						return err
					}
					if o.quietWait > 0 {
						waitQuiet(ctx, append(idle, t.pid), o.quietShare, o.quietWait, log)
					}
					c, err := runCell(ctx, o, t, idle, p, acks, round+1, o.duration, log)
					if err != nil {
						return err
					}
					rep.cells = append(rep.cells, c)
				}
			}
		}
	}
	return nil
}

// waitQuiet waits, up to maxWait, for a 1 s stretch in which processes
// other than this one and pids (other engineers' builds, the kernel
// writing back the previous cell's data) use less than share of the
// machine's CPUs, so that a window does not start into someone else's
// burst. After maxWait the window starts anyway; the table shows the noise.
func waitQuiet(ctx context.Context, pids []int, share float64, maxWait time.Duration, log *slog.Logger) {
	deadline := time.Now().Add(maxWait)
	for {
		a, t0 := snapshot(0, pids...), time.Now()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		b := snapshot(0, pids...)
		other := (b.busy - a.busy) - (b.self - a.self) - (b.idle - a.idle)
		got := other.Seconds() / (time.Since(t0).Seconds() * float64(runtime.NumCPU()))
		if got < share {
			return
		}
		if time.Now().After(deadline) {
			log.Warn("the machine is still busy; measuring anyway", "other_cpu_share", fmt.Sprintf("%.2f", got))
			return
		}
	}
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// runCell creates a topic on t, drives the load for a window of d, and
// deletes the topic. Round 0 is a warm-up: nothing is logged.
func runCell(ctx context.Context, o options, t *target, idle []int, p payload, acks int16, round int, d time.Duration, log *slog.Logger) (cell, error) {
	c := cell{target: t.name, codec: p.codec, batchSize: p.size, acks: acks, round: round,
		batchBytes: len(p.batch), batchRecords: p.records, batchPlain: p.plain}
	cl, err := adminClient(t.addr)
	if err != nil {
		return c, err
	}
	defer cl.Close()
	topic := fmt.Sprintf("produce-%v-acks%d-%d-r%d", p.codec, acks, p.size, round)
	if err := createTopic(ctx, cl, topic, o.partitions); err != nil {
		return c, fmt.Errorf("%s: %w", t.name, err)
	}
	l := load{topic: topic, partitions: o.partitions, acks: acks, conns: o.conns, inFlight: o.inFlight,
		warmup: o.warmup, duration: d, maxBytes: o.maxBytes}
	c.res, err = produce(ctx, t.addr, t.pid, idle, p, l)
	if err != nil {
		return c, fmt.Errorf("%s, %v, acks=%d: %w", t.name, p.codec, acks, err)
	}
	if err := deleteTopic(ctx, cl, topic); err != nil {
		return c, fmt.Errorf("%s: %w", t.name, err)
	}
	if round == 0 {
		return c, nil
	}
	log.Info("cell done", "target", t.name, "round", round, "codec", p.codec.String(), "acks", acks, "batch", p.size,
		"mb_per_s", fmt.Sprintf("%.1f", c.res.MBps(false)), "wire_mb_per_s", fmt.Sprintf("%.1f", c.res.MBps(true)),
		"cpu_s_per_gb", fmt.Sprintf("%.2f", c.res.CPUPerGB()), "other_cpu_s", fmt.Sprintf("%.2f", c.res.others.Seconds()))
	return c, nil
}
