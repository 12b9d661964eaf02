// Command mm2 is the MirrorMaker 2 vs kmirror benchmark against real Apache
// Kafka (issue 9), run as `go run ./perf/mm2` or `make bench-mm2`.
//
//	                           copier (measured)             destination
//	+--------------+  Fetch   +-----------------------+      +--------------+
//	| Kafka 4.4.0  | -------> | MirrorMaker 2 (3.9.2) | ---> | Kafka 4.4.0  |
//	| source,      |          | JVM, dedicated mode   |      | (JVM)        |
//	| one topic    |          +-----------------------+      +--------------+
//	| >= 2 GiB of  |  Fetch   +-----------------------------------------+
//	| lz4 batches  | -------> | kmirror serve: fetchers + log store      |
//	+--------------+          | (the copier is its own destination)      |
//	                          +-----------------------------------------+
//
// One run fills the source once, then copies the topic with each
// contender, back to back, then reads it with kafka-consumer-perf-test from
// the source and from kmirror. Every number of one contender has its
// counterpart measured minutes apart on the same data, so the ratios are
// what to quote (BENCHMARKS.md).
//
// What is counted:
//
//   - Throughput: source log bytes (DescribeLogDirs of the topic on the
//     source: its record batches) per second, 10^6 B/s. "From launch"
//     starts when the copier's process starts (MM2's JVM and Connect
//     start-up included; kmirror's `serve` start included); the "copy
//     window" starts at the first poll (every 50 ms) that sees a record at
//     the destination, and counts only the bytes still to copy then. Both
//     end at the first poll that sees every destination end offset equal
//     to the source's.
//   - CPU: user+system seconds from /proc/<pid>/stat (every thread of the
//     process) per 10^9 source log bytes. "Copier": the MM2 JVM, or the
//     kmirror process. "Copier + destination": MM2 plus the destination
//     Kafka JVM (which decompresses, validates and stores what MM2
//     produces), or the kmirror process again, which stores its copy
//     itself. The source broker's CPU is shown apart; it is not part of
//     either contender. So is every other process's (the machine's busy
//     time from /proc/stat minus the processes above), the noise meter.
//   - Peak RSS: VmHWM of the copier process from /proc/<pid>/status, read
//     just before it is stopped; for MM2 also the destination broker's.
//   - Consumer reads: kafka-consumer-perf-test's MB.sec (MiB of keys and
//     values per second, group join included) reading every record, from
//     the source broker and from kmirror's copy, --perf-rounds times each
//     in ABBA order; the table shows each target's best run (noise only
//     ever slows a run) and lists every run.
//
// The machine these runs are made on is shared: before each copy and each
// consumer run the runner waits (--quiet-wait) for 2 s in which other
// processes use less than --quiet-share of the CPUs, and the table shows
// how much CPU other processes and the host took during each measured
// span, flagging NOISY ones.
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
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/internal/realkafka"
	"github.com/kmirror/kmirror/perf/mirror"
)

// options are the command line.
type options struct {
	size         int64
	partitions   int
	out          string
	kmirrorBin   string
	tasks        int
	mm2HeapMB    int
	brokerHeapMB int
	valueSize    int
	topic        string
	phases       map[string]bool
	timeout      time.Duration
	pollStep     time.Duration
	quietShare   float64
	quietWait    time.Duration
	perfRounds   int
	keep         bool
}

// The phases, in the order they run.
const (
	phaseMM2     = "mm2"
	phaseKmirror = "kmirror"
	phasePerf    = "consumer-perf"
)

var allPhases = []string{phaseMM2, phaseKmirror, phasePerf}

var topicRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)

const usage = `Usage: go run ./perf/mm2 [flags]

Fills a topic of a real Kafka 4.4.0 broker with lz4-compressed clickstream
records until its log holds --size bytes, then copies it (1) with MirrorMaker 2
(3.9.2 jars, dedicated mode) into a second Kafka 4.4.0 broker and (2) with a
kmirror node (kmirror serve, a cluster mirror), and reads it with
kafka-consumer-perf-test from the source and from kmirror. Needs java and mvn
(see internal/realkafka). Takes 5-15 minutes on 2 cores.

Flags:
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func parseFlags(args []string, stderr io.Writer) (options, int) {
	fs := flag.NewFlagSet("mm2", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var (
		o      options
		size   = "2GiB"
		phases string
	)
	fs.StringVar(&size, "size", size, "source log bytes to generate (lz4 batches as stored), with a unit: 2GiB, 512MiB")
	fs.IntVar(&o.partitions, "partitions", 8, "partitions of the source topic")
	fs.StringVar(&o.out, "out", "", "also write the report and the raw outputs (logs, tool output, mm2.properties) to this `file`")
	fs.StringVar(&o.kmirrorBin, "kmirror-bin", "", "kmirror binary to run; empty builds ./cmd/kmirror with go build")
	fs.IntVar(&o.tasks, "tasks", 2, "MirrorMaker 2 tasks.max")
	fs.IntVar(&o.mm2HeapMB, "mm2-heap-mb", 2048, "MirrorMaker 2 -Xmx (connect-mirror-maker.sh's default is 2G)")
	fs.IntVar(&o.brokerHeapMB, "broker-heap-mb", 1024, "Kafka brokers' -Xmx (kafka-server-start.sh's default is 1G)")
	fs.IntVar(&o.valueSize, "value-size", 0, "0: clickstream records (key, ~390 B JSON value, headers); N: keyless N-byte JSON values")
	fs.StringVar(&o.topic, "topic", "mm2-bench", "source topic name")
	fs.StringVar(&phases, "phases", strings.Join(allPhases, ","), "comma list of the phases to run: mm2, kmirror, consumer-perf")
	fs.DurationVar(&o.timeout, "timeout", 20*time.Minute, "give up on a copy that has not caught up after this long")
	fs.DurationVar(&o.pollStep, "poll", 50*time.Millisecond, "how often the destination's end offsets are polled")
	fs.Float64Var(&o.quietShare, "quiet-share", 0.15, "before each copy and each consumer-perf run, wait until other processes use less than this share of the CPUs for 2 s")
	fs.DurationVar(&o.quietWait, "quiet-wait", 10*time.Minute, "wait at most this long for that quiet; 0 does not wait")
	fs.IntVar(&o.perfRounds, "perf-rounds", 2, "kafka-consumer-perf-test rounds; each reads the topic from Kafka and from kmirror, in ABBA order")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory (brokers' data, MM2 and kmirror logs)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, 0
		}
		return o, 2
	}
	bad := func(format string, a ...any) (options, int) {
		fmt.Fprintf(stderr, "mm2: "+format+"\n", a...)
		return o, 2
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	n, err := mirror.ParseBytes(size)
	if err != nil || n < 1<<20 {
		return bad("--size: want at least 1MiB, got %q (%v)", size, err)
	}
	o.size = n
	o.phases = map[string]bool{}
	for _, p := range strings.Split(phases, ",") {
		p = strings.TrimSpace(p)
		switch p {
		case phaseMM2, phaseKmirror, phasePerf:
			o.phases[p] = true
		default:
			return bad("--phases: unknown phase %q (want %s)", p, strings.Join(allPhases, ", "))
		}
	}
	switch {
	case o.partitions < 1 || o.partitions > 1000:
		return bad("--partitions: want 1-1000, got %d", o.partitions)
	case o.tasks < 1:
		return bad("--tasks: want >= 1, got %d", o.tasks)
	case o.mm2HeapMB < 256 || o.brokerHeapMB < 256:
		return bad("--mm2-heap-mb and --broker-heap-mb: want >= 256")
	case o.valueSize < 0 || o.valueSize > 1<<20:
		return bad("--value-size: want 0-1048576, got %d", o.valueSize)
	case !topicRe.MatchString(o.topic):
		return bad("--topic: letters, digits, _ and - only (it goes into MM2's topic regex unquoted), got %q", o.topic)
	case o.timeout <= 0 || o.pollStep <= 0:
		return bad("--timeout and --poll must be positive")
	case o.perfRounds < 1 || o.perfRounds > 20:
		return bad("--perf-rounds: want 1-20, got %d", o.perfRounds)
	case o.quietShare <= 0 || o.quietShare > 1 || o.quietWait < 0:
		return bad("--quiet-share: want (0, 1], --quiet-wait: want >= 0")
	}
	return o, -1
}

func run(args []string, stdout, stderr io.Writer) int {
	o, code := parseFlags(args, stderr)
	if code >= 0 {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep := &report{started: time.Now(), args: args, opts: o, machine: machineInfo()}
	// The progress log goes to stderr and into the raw output.
	logBuf := &syncWriter{w: &strings.Builder{}}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(stderr, logBuf), nil))
	err := runPhases(ctx, o, rep, log)
	if err != nil {
		rep.errs = append(rep.errs, err.Error())
		log.Error("benchmark failed", "err", err)
	}
	rep.log = logBuf.String()
	rep.writeTable(stdout)
	if o.out != "" {
		if werr := rep.writeRaw(o.out); werr != nil {
			fmt.Fprintf(stderr, "mm2: writing %s: %v\n", o.out, werr)
			return 1
		}
		fmt.Fprintf(stderr, "raw output written to %s\n", o.out)
	}
	if err != nil {
		return 1
	}
	return 0
}

// runPhases runs the phases; it fills rep as it goes, so a failed phase still
// leaves the earlier ones' numbers.
func runPhases(ctx context.Context, o options, rep *report, log *slog.Logger) (err error) {
	work, err := os.MkdirTemp("", "mm2-bench-")
	if err != nil {
		return err
	}
	log.Info("work directory", "dir", work)
	if !o.keep {
		defer os.RemoveAll(work)
	}
	for _, v := range []string{realkafka.Newest, realkafka.Previous} {
		if _, err := realkafka.Install(v); err != nil {
			return err
		}
	}
	bin := o.kmirrorBin
	if bin == "" && o.phases[phaseKmirror] {
		log.Info("building kmirror")
		if bin, err = buildKmirror(ctx, work); err != nil {
			return err
		}
	}

	if bin != "" {
		if out, err := exec.CommandContext(ctx, bin, "version").Output(); err == nil {
			rep.kmirrorVersion = strings.TrimSpace(string(out))
		}
	}

	src, err := startBroker(work, "source", o.brokerHeapMB, nil, log)
	if err != nil {
		return err
	}
	defer src.Close()
	log.Info("source broker started", "version", src.Version(), "addr", src.Addr(), "pid", src.PID())

	ds, err := fill(ctx, src.Addr(), o.topic, o.partitions, o.size, o.valueSize, log)
	if err != nil {
		return err
	}
	rep.ds = ds
	log.Info("source filled", "records", ds.records, "log_bytes", ds.logBytes, "uncompressed", ds.uncompressed,
		"ratio", fmt.Sprintf("%.2f", float64(ds.uncompressed)/float64(ds.logBytes)), "took", ds.fillTime.Round(time.Millisecond))

	if o.phases[phaseMM2] {
		res, props, err := runMM2Phase(ctx, o, src, ds, work, log)
		rep.mm2Props = props
		if err != nil {
			return fmt.Errorf("MirrorMaker 2: %w", err)
		}
		rep.mm2 = &res
		log.Info("MirrorMaker 2 done", "mb_per_s_window", fmt.Sprintf("%.1f", res.MBps(true)), "done_at", res.DoneAt.Round(time.Millisecond))
	}
	if !o.phases[phaseKmirror] && !o.phases[phasePerf] {
		return nil
	}
	var km *kmirrorProc
	defer func() {
		if km != nil {
			km.stop()
		}
	}()
	if o.phases[phaseKmirror] {
		w := copyWatch{name: "kmirror", destTopic: ds.topic, source: src, ds: ds, timeout: o.timeout, pollStep: o.pollStep,
			quietShare: o.quietShare, quietWait: o.quietWait}
		w.start = func(ctx context.Context) (int, string, error) {
			p, err := startKmirror(ctx, bin, filepath.Join(work, "kmirror"))
			if err != nil {
				return 0, "", err
			}
			km = p
			if err := p.mirror(ctx, src.Addr(), ds.topic); err != nil {
				return 0, "", err
			}
			return p.pid(), p.addr, nil
		}
		w.health = func(ctx context.Context) ([]string, error) {
			if err := km.err(); err != nil {
				return nil, err
			}
			hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			probs, err := km.unhealthy(hctx)
			if err != nil {
				return []string{err.Error()}, nil
			}
			return probs, nil
		}
		log.Info("kmirror: starting")
		res, err := measureCopy(ctx, w, log)
		if km != nil {
			res.Problems = append(res.Problems, km.problems(40)...)
		}
		rep.km = &res
		if err != nil {
			return fmt.Errorf("kmirror: %w", err)
		}
		log.Info("kmirror done", "mb_per_s_window", fmt.Sprintf("%.1f", res.MBps(true)), "done_at", res.DoneAt.Round(time.Millisecond))
	}
	if o.phases[phasePerf] {
		if km == nil {
			return errors.New("consumer-perf needs the kmirror phase (it reads kmirror's copy)")
		}
		// The server read from is the "copier" of each span; the other
		// one idles (kmirror's fetchers long-poll the source).
		targets := map[string]struct {
			addr string
			ps   procs
		}{
			"kafka":   {src.Addr(), procs{copier: src.PID(), dest: km.pid()}},
			"kmirror": {km.addr, procs{copier: km.pid(), source: src.PID()}},
		}
		for i, name := range perfOrder(o.perfRounds) {
			t := targets[name]
			if o.quietWait > 0 {
				waitQuiet(ctx, t.ps, o.quietShare, o.quietWait, log)
			}
			log.Info("kafka-consumer-perf-test", "target", name, "addr", t.addr, "run", i+1)
			r, err := runConsumerPerf(ctx, name, t.addr, ds.topic, ds.records, t.ps)
			if err != nil {
				return fmt.Errorf("kafka-consumer-perf-test against %s: %w", name, err)
			}
			log.Info("kafka-consumer-perf-test done", "target", name, "mb_per_s", r.MBps, "fetch_mb_per_s", r.FetchMBps)
			rep.perfRuns = append(rep.perfRuns, r)
		}
		// Anything kmirror logged while serving the reads.
		if rep.km != nil {
			rep.kmLogAfter = km.problems(40)
		}
	}
	return nil
}

// perfOrder is the order of the consumer-perf runs: rounds of Kafka and
// kmirror, every other round reversed (ABBA), so that a load that grows or
// fades during the runs weighs on both alike.
func perfOrder(rounds int) []string {
	var out []string
	for i := range rounds {
		if i%2 == 0 {
			out = append(out, "kafka", "kmirror")
		} else {
			out = append(out, "kmirror", "kafka")
		}
	}
	return out
}

// runMM2Phase starts the destination broker, runs MirrorMaker 2 until the
// copy caught up, and stops both.
func runMM2Phase(ctx context.Context, o options, src *realkafka.Broker, ds *dataset, work string, log *slog.Logger) (copyResult, string, error) {
	// MM2 creates the topic; a producer racing it must not create a
	// one-partition topic instead.
	dst, err := startBroker(work, "mm2-destination", o.brokerHeapMB, map[string]string{"auto.create.topics.enable": "false"}, log)
	if err != nil {
		return copyResult{}, "", err
	}
	defer dst.Close()
	log.Info("destination broker started", "addr", dst.Addr(), "pid", dst.PID())
	cfg := mm2Config{SourceBootstrap: src.Addr(), TargetBootstrap: dst.Addr(), Topic: ds.topic, TasksMax: o.tasks}
	props := render(cfg.properties())
	dir, err := mkdir(work, "mm2")
	if err != nil {
		return copyResult{}, props, err
	}
	var mm *mm2Proc
	defer func() {
		if mm != nil {
			mm.stop()
		}
	}()
	w := copyWatch{name: "MirrorMaker 2", destTopic: mm2TargetTopic(ds.topic), destPID: dst.PID(),
		source: src, ds: ds, timeout: o.timeout, pollStep: o.pollStep, quietShare: o.quietShare, quietWait: o.quietWait}
	w.start = func(context.Context) (int, string, error) {
		p, err := startMM2(cfg, dir, o.mm2HeapMB)
		if err != nil {
			return 0, "", err
		}
		mm = p
		return p.pid(), dst.Addr(), nil
	}
	w.health = func(context.Context) ([]string, error) { return nil, mm.err() }
	log.Info("MirrorMaker 2: starting", "tasks_max", o.tasks, "heap_mb", o.mm2HeapMB)
	res, err := measureCopy(ctx, w, log)
	if mm != nil {
		res.Problems = append(res.Problems, mm.problems(40)...)
	}
	return res, props, err
}

// startBroker starts a Kafka 4.4.0 broker in work/name. It tries three
// times: realkafka's random cluster id is base64url, and one in 64 starts
// with '-', which kafka-storage format reads as an option and fails.
func startBroker(work, name string, heapMB int, props map[string]string, log *slog.Logger) (*realkafka.Broker, error) {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		var dir string
		if dir, err = mkdir(work, fmt.Sprintf("%s-%d", name, attempt)); err != nil {
			return nil, err
		}
		var b *realkafka.Broker
		b, err = realkafka.Start(realkafka.Config{Version: realkafka.Newest, HeapMB: heapMB, Dir: dir, Props: props})
		if err == nil {
			return b, nil
		}
		log.Warn("starting a Kafka broker failed", "broker", name, "attempt", attempt, "err", err)
		os.RemoveAll(dir)
	}
	return nil, fmt.Errorf("starting the %s broker: %w", name, err)
}

// mkdir makes the directory name in work.
func mkdir(work, name string) (string, error) {
	dir := filepath.Join(work, name)
	return dir, os.MkdirAll(dir, 0o755)
}

// syncWriter serializes writes to w and copies of what was written.
type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
