// Command replication is the replication benchmark of issue 21: a
// 3-node kmirror cluster next to Apache Kafka 4.4's 3-node combined KRaft
// cluster, on the same machine in one run, each given the same topic of
// replication factor 3 (min.insync.replicas=2) and the same acks=all
// load from Kafka's own perf tools. Run it as `go run ./perf/replication`
// or `make bench-replication`.
//
//	+---------------------------+  acks=all Produce   +-------------------------+
//	| kafka-producer-perf-test  | -----------------> | 3 x kmirror serve       |
//	|   (Kafka 4.4.0 JVM)       |                    |   (leaders + followers) |
//	| kafka-consumer-perf-test  | <----------------- | 3 x Kafka 4.4.0 JVM     |
//	|   (after the leaders move)|   Fetch            |   (KRaft, combined)     |
//	+---------------------------+                    +-------------------------+
//
// Every node is its own process (kmirror serve children as perf/cluster
// starts them; Kafka through internal/realkafka with kafka-run-class.sh's
// JVM options), each with its data in a temporary directory on the same
// disk. Both clusters run for the whole benchmark.
//
// A run, on one system: create a fresh topic of --partitions partitions,
// RF 3, min.insync.replicas=2, and wait for its leaders and full ISRs;
// run kafka-producer-perf-test (--num-records, --record-size,
// --throughput -1, acks=all, every other producer setting the tool's
// default) and parse its total line (records/s, MB/s, avg, p50, p95, p99,
// p99.9, max latency); wait until every replica holds every record (ISR =
// replicas, the replicas' logs of equal size in DescribeLogDirs, the end
// offsets summing to --num-records); make a former follower the leader
// of every partition (AlterPartitionReassignments rotating each replica
// list, then a preferred ElectLeaders), so that what the consumer reads
// is the copy replication wrote; run kafka-consumer-perf-test for every
// record in a fresh group; check the replicas once more; delete the
// topic. Runs alternate between the systems (AB, BA, ...), --runs per
// system, after one unmeasured --warmup-records run per system (Kafka's
// JIT); the report gives every run and each system's medians. Then,
// with --catchup-bytes above 0, a follower catch-up measurement on each
// system (catchup.go).
//
// "nodes CPU s" is the three nodes' utime+stime during the producer (or
// consumer) tool's run; "other CPU s" is the machine's busy time
// (/proc/stat) minus that, this process's, the other system's nodes' and
// the tool JVM's: the noise meter.
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
	"strings"
	"time"

	"github.com/kmirror/kmirror/internal/realkafka"
	"github.com/kmirror/kmirror/internal/settings"
	"github.com/kmirror/kmirror/perf/internal/benchcluster"
	"github.com/kmirror/kmirror/perf/internal/benchrun"
)

// options are the command line.
type options struct {
	systems       []string
	records       int
	recordSize    int
	partitions    int
	runs          int
	warmupRecords int
	kmirrorBin    string
	heapMB        int
	out           string
	kmirrorLog    string
	keepDir       bool
	catchupBytes  int64
}

const usage = `Usage: go run ./perf/replication [flags]

Starts a 3-node kmirror cluster and Apache Kafka 4.4.0's 3-node combined
KRaft cluster on this machine, every node its own process, and runs
kafka-producer-perf-test (acks=all) into a topic of replication factor 3
on each, then kafka-consumer-perf-test after a former follower took over
every partition's leadership. Then, unless --catchup-bytes is 0, times a
third node catching up as a new replica of a filled topic on each system,
next to a plain Fetch drain of the same data. Kafka needs java and mvn
(internal/realkafka).

Flags:
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func parseFlags(args []string, stderr io.Writer) (options, int) {
	fs := flag.NewFlagSet("replication", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var (
		o       options
		systems string
	)
	fs.StringVar(&systems, "systems", strings.Join(allSystems, ","), "comma list of systems: kmirror, kafka")
	fs.IntVar(&o.records, "records", 1_000_000, "records per run (kafka-producer-perf-test --num-records)")
	fs.IntVar(&o.recordSize, "record-size", 512, "bytes per record value (--record-size)")
	fs.IntVar(&o.partitions, "partitions", 6, "partitions of each run's topic (replication factor 3)")
	fs.IntVar(&o.runs, "runs", 3, "measured runs per system, the systems alternating")
	fs.IntVar(&o.warmupRecords, "warmup-records", 200_000, "records of one unmeasured run per system first (JIT); 0 skips it")
	fs.StringVar(&o.kmirrorBin, "kmirror-bin", "", "kmirror binary (kmirror serve); empty builds ./cmd/kmirror")
	fs.IntVar(&o.heapMB, "broker-heap-mb", 1024, "each Kafka node's -Xmx (kafka-server-start.sh's default is 1G)")
	fs.StringVar(&o.out, "out", "", "also write the report and the progress log to this `file`")
	fs.StringVar(&o.kmirrorLog, "kmirror-log-level", "warn", "the kmirror nodes' --log-level (their logs: node-N/kmirror.log in the run's directory)")
	fs.Int64Var(&o.catchupBytes, "catchup-bytes", 512<<20, "record-value bytes of the follower catch-up measurement (catchup.go), once per system after the runs; 0 skips it")
	fs.BoolVar(&o.keepDir, "keep-dir", false, "leave the run's directory (the kmirror nodes' data and logs) behind and print its path")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, 0
		}
		return o, 2
	}
	bad := func(format string, a ...any) (options, int) {
		fmt.Fprintf(stderr, "replication: "+format+"\n", a...)
		return o, 2
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	for _, s := range settings.Items(systems) {
		if s != systemKmirror && s != systemKafka {
			return bad("--systems: unknown system %q", s)
		}
		o.systems = append(o.systems, s)
	}
	switch {
	case len(o.systems) == 0:
		return bad("--systems must not be empty")
	case o.records < 1 || o.recordSize < 1 || o.recordSize > 1<<20:
		return bad("--records: want >= 1; --record-size: want 1-1048576")
	case o.partitions < 1 || o.partitions > 1000:
		return bad("--partitions: want 1-1000, got %d", o.partitions)
	case o.runs < 1 || o.warmupRecords < 0:
		return bad("--runs: want >= 1; --warmup-records: want >= 0")
	case o.catchupBytes < 0:
		return bad("--catchup-bytes: want >= 0")
	case o.heapMB < 256:
		return bad("--broker-heap-mb: want >= 256")
	}
	return o, -1
}

func run(args []string, stdout, stderr io.Writer) int {
	o, code := parseFlags(args, stderr)
	if code >= 0 {
		return code
	}
	rep := newReport(args, o)
	return benchrun.Run("replication", o.out, stdout, stderr, rep, func(ctx context.Context, log *slog.Logger) error {
		return runAll(ctx, o, rep, log)
	})
}

// runAll starts both clusters, runs the warm-ups and the measured runs,
// and stops the clusters; rep fills as it goes.
func runAll(ctx context.Context, o options, rep *report, log *slog.Logger) error {
	work, err := os.MkdirTemp("", "replication-bench-")
	if err != nil {
		return err
	}
	if o.keepDir {
		log.Info("the run's directory is kept", "dir", work)
	} else {
		defer os.RemoveAll(work)
	}
	libs, err := realkafka.Install(realkafka.Newest)
	if err != nil {
		return err
	}
	bin := o.kmirrorBin
	if bin == "" {
		log.Info("building kmirror")
		bin = filepath.Join(work, "kmirror-bin")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/kmirror/kmirror/cmd/kmirror").CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/kmirror: %v\n%s", err, out)
		}
	}
	var clusters []cluster
	defer func() {
		for _, c := range clusters {
			if err := c.Close(); err != nil {
				log.Warn("stopping a cluster", "system", c.Name(), "err", err)
			}
		}
	}()
	for _, name := range o.systems {
		began := time.Now()
		var c cluster
		switch name {
		case systemKmirror:
			c, err = benchcluster.StartKmirror(ctx, bin, filepath.Join(work, name), o.kmirrorLog, o.keepDir, sharedProps)
		case systemKafka:
			c, err = benchcluster.StartKafka(filepath.Join(work, name), o.heapMB, sharedProps)
		}
		if err != nil {
			return err
		}
		clusters = append(clusters, c)
		rep.versions[name] = c.Version()
		log.Info("cluster started", "system", name, "took", time.Since(began).Round(time.Millisecond))
	}
	if o.warmupRecords > 0 {
		for _, c := range clusters {
			log.Info("warm-up run", "system", c.Name(), "records", o.warmupRecords)
			if _, err := runOne(ctx, o, libs, c, clusters, 0, o.warmupRecords, log); err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	for i := range o.runs {
		order := clusters
		if i%2 == 1 {
			order = reversed(clusters)
		}
		for _, c := range order {
			r, err := runOne(ctx, o, libs, c, clusters, i+1, o.records, log)
			if err != nil {
				return err
			}
			rep.runs = append(rep.runs, r)
		}
	}
	if o.catchupBytes > 0 {
		for _, c := range clusters {
			r, err := runCatchup(ctx, o, libs, c, log)
			if err != nil {
				return fmt.Errorf("catch-up: %w", err)
			}
			rep.catchups = append(rep.catchups, r)
		}
	}
	return nil
}

// runOne is one run of c (0: the warm-up): the steps of the package doc.
func runOne(ctx context.Context, o options, libs string, c cluster, all []cluster, n, records int, log *slog.Logger) (result, error) {
	res := result{system: c.Name(), run: n}
	adm, err := admin(c)
	if err != nil {
		return res, err
	}
	defer adm.Close()
	topic := fmt.Sprintf("repl-%d-r%d", o.partitions, n)
	if err := createTopic(ctx, adm, topic, o.partitions); err != nil {
		return res, fmt.Errorf("%s: %w", c.Name(), err)
	}
	own, idle := c.PIDs(), otherPIDs(all, c)

	before := snapshot(own, idle)
	prod, out, err := runProducerPerf(ctx, libs, c, topic, records, o.recordSize)
	res.produceCPU = snapshot(own, idle).since(before)
	if err != nil {
		return res, err
	}
	res.produce, res.produceOut = prod, out
	log.Info("produced", "system", c.Name(), "run", n, "records_per_s", prod.recordsPerSec, "mb_per_s", prod.mbPerSec,
		"p50_ms", prod.p50, "p99_ms", prod.p99, "nodes_cpu_s", fmt.Sprintf("%.1f", res.produceCPU.nodes.Seconds()),
		"other_cpu_s", fmt.Sprintf("%.1f", res.produceCPU.others.Seconds()))

	began := time.Now()
	if _, err := verifyReplicas(ctx, adm, topic, o.partitions, int64(records), 2*time.Minute); err != nil {
		return res, fmt.Errorf("%s after producing: %w", c.Name(), err)
	}
	res.catchUp = time.Since(began)
	res.leadersBefore, res.leadersAft, err = moveLeaders(ctx, adm, topic, o.partitions)
	if err != nil {
		return res, fmt.Errorf("%s: moving the leaders: %w", c.Name(), err)
	}

	before = snapshot(own, idle)
	cons, out, err := runConsumerPerf(ctx, libs, c, topic, int64(records))
	res.consumeCPU = snapshot(own, idle).since(before)
	if err != nil {
		return res, err
	}
	res.consume, res.consumeOut = cons, out
	log.Info("consumed", "system", c.Name(), "run", n, "mb_per_s", cons.mbPerSec, "fetch_mb_per_s", cons.fetchMBPerSec,
		"nodes_cpu_s", fmt.Sprintf("%.1f", res.consumeCPU.nodes.Seconds()), "other_cpu_s", fmt.Sprintf("%.1f", res.consumeCPU.others.Seconds()))

	st, err := verifyReplicas(ctx, adm, topic, o.partitions, int64(records), 30*time.Second)
	if err != nil {
		return res, fmt.Errorf("%s at the end of run %d: %w", c.Name(), n, err)
	}
	res.ends, res.sizes = st.ends, st.sizes
	if err := deleteTopic(ctx, adm, topic); err != nil {
		return res, fmt.Errorf("%s: %w", c.Name(), err)
	}
	return res, nil
}

// otherPIDs are the nodes of the clusters other than c.
func otherPIDs(all []cluster, c cluster) []int {
	var out []int
	for _, o := range all {
		if o != c {
			out = append(out, o.PIDs()...)
		}
	}
	return out
}

func reversed(s []cluster) []cluster {
	out := make([]cluster, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}
