// Command cluster is the metadata quorum benchmark of issue 20: a 3-voter
// kmirror cluster next to Apache Kafka 4.4's 3-node combined KRaft
// cluster, on the same machine in one run. Run it as `go run
// ./perf/cluster` or `make bench-cluster`.
//
//	+--------------------+  IncrementalAlterConfigs,  +---------------------------+
//	| this process:      |  CreateTopics, one at a    | 3 x kmirror serve         |
//	| one connection per |  time, to one node         |   (hashicorp/raft voters) |
//	| node, no retries   | -------------------------> | 3 x Kafka 4.4.0 JVM       |
//	+--------------------+  (it forwards them to the  |   (KRaft, combined nodes) |
//	                         controller, or is it)    +---------------------------+
//
// Every node is its own process (kmirror serve children; Kafka through
// internal/realkafka with kafka-run-class.sh's JVM options), so the
// controller can be killed with SIGKILL, and both systems run their
// quorum across processes over loopback TCP. Both clusters run for the
// whole benchmark.
//
// 1. Metadata-write latency. --ops sequential writes per cell, timed in
// this process from just before the request is sent to its answer: a
// topic config change (IncrementalAlterConfigs of retention.ms on one
// topic, a new value each time: one record) and a 1-partition topic of
// replication factor 1 (CreateTopics, a new name each time), each sent
// to a node that is not the controller (which forwards it in an
// Envelope) and to the controller's client listener. The controller is
// the metadata quorum's leader as DescribeQuorum names it. Cells run in
// blocks of --block writes, the two systems alternating (AB, BA), so a
// load that grows or fades weighs on both; before them, --warmup writes
// of each op per system (Kafka's JIT) are not counted.
//
// 2. Failover. --kills rounds per system, the systems alternating; each
// round kills the controller twice with SIGKILL. After the first kill the
// client sends CreateTopics to the lowest-id survivor, one at a time, each
// on a new connection and given 30 s (the default request.timeout.ms),
// the next --retry-every after one fails, until one succeeds. The time is
// from just before the SIGKILL to that answer. After the second kill the
// probe asks when the survivor could first take a write: a new
// CreateTopics every --retry-every, each given --attempt-timeout, at most
// --max-in-flight unanswered. (Its own kill: the attempts it gives up on
// still run inside the survivor.) The
// node killed is restarted and the cluster waited on (every node names
// one controller, lists 3 brokers and takes a CreateTopics) before the
// next round. Both systems keep their quorum timeouts' defaults:
// hashicorp/raft's (HeartbeatTimeout and ElectionTimeout 1 s) for
// kmirror, controller.quorum.election.timeout.ms=1000 and
// controller.quorum.fetch.timeout.ms=2000 for Kafka; both get
// broker.session.timeout.ms=6000 and broker.heartbeat.interval.ms=1000
// (internal/realkafka's Cluster sets them for Kafka).
//
// "other CPU s" is the machine's busy time (/proc/stat) minus this
// process's and the six nodes' during a cell's blocks: the noise meter.
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

	"github.com/kmirror/kmirror/internal/settings"
	"github.com/kmirror/kmirror/perf/internal/benchcluster"
	"github.com/kmirror/kmirror/perf/internal/benchrun"
)

// options are the command line.
type options struct {
	systems        []string
	ops            int
	block          int
	warmup         int
	kills          int
	retryEvery     time.Duration
	attemptTimeout time.Duration
	maxInFlight    int
	kmirrorBin     string
	heapMB         int
	out            string
	kmirrorLog     string
	keepDir        bool
}

const usage = `Usage: go run ./perf/cluster [flags]

Starts a 3-node kmirror cluster and Apache Kafka 4.4.0's 3-node combined
KRaft cluster on this machine, every node its own process, and measures
the latency of sequential metadata writes (IncrementalAlterConfigs,
CreateTopics) sent to a non-controller node and to the controller, then
the time from a kill -9 of the controller to the next CreateTopics that
succeeds. Kafka needs java and mvn (internal/realkafka).

Flags:
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func parseFlags(args []string, stderr io.Writer) (options, int) {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var (
		o       options
		systems string
	)
	fs.StringVar(&systems, "systems", strings.Join(allSystems, ","), "comma list of systems: kmirror, kafka")
	fs.IntVar(&o.ops, "ops", 300, "writes per cell (op, node sent to, system)")
	fs.IntVar(&o.block, "block", 50, "writes of one cell before the other system's turn")
	fs.IntVar(&o.warmup, "warmup", 100, "unmeasured writes of each op per system first (JIT)")
	fs.IntVar(&o.kills, "kills", 5, "kill -9 rounds per system (each kills the controller twice: for the client, for the probe); 0 skips the failover measure")
	fs.DurationVar(&o.retryEvery, "retry-every", 5*time.Millisecond, "during a failover, the client sends the next CreateTopics this long after one failed; the probe starts one this often")
	fs.DurationVar(&o.attemptTimeout, "attempt-timeout", time.Second, "the probe gives up on one CreateTopics after this long (the client waits 30 s)")
	fs.IntVar(&o.maxInFlight, "max-in-flight", 4, "the probe's unanswered CreateTopics at most")
	fs.StringVar(&o.kmirrorBin, "kmirror-bin", "", "kmirror binary (kmirror serve); empty builds ./cmd/kmirror")
	fs.IntVar(&o.heapMB, "broker-heap-mb", 1024, "each Kafka node's -Xmx (kafka-server-start.sh's default is 1G)")
	fs.StringVar(&o.out, "out", "", "also write the report and the progress log to this `file`")
	fs.StringVar(&o.kmirrorLog, "kmirror-log-level", "warn", "the kmirror nodes' --log-level (their logs: node-N/kmirror.log in the run's directory)")
	fs.BoolVar(&o.keepDir, "keep-dir", false, "leave the run's directory (the kmirror nodes' data and logs) behind and print its path")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, 0
		}
		return o, 2
	}
	bad := func(format string, a ...any) (options, int) {
		fmt.Fprintf(stderr, "cluster: "+format+"\n", a...)
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
	case o.ops < 0 || o.block < 1 || o.warmup < 0 || o.kills < 0:
		return bad("--ops, --warmup and --kills: want >= 0; --block: want >= 1")
	case o.retryEvery < time.Millisecond || o.attemptTimeout <= 0 || o.maxInFlight < 1:
		return bad("--retry-every: want >= 1ms; --attempt-timeout: want > 0; --max-in-flight: want >= 1")
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
	return benchrun.Run("cluster", o.out, stdout, stderr, rep, func(ctx context.Context, log *slog.Logger) error {
		return runAll(ctx, o, rep, log)
	})
}

// runAll starts both clusters, runs the latency cells, then the kill
// rounds, and stops the clusters; rep fills as it goes.
func runAll(ctx context.Context, o options, rep *report, log *slog.Logger) error {
	work, err := os.MkdirTemp("", "cluster-bench-")
	if err != nil {
		return err
	}
	if o.keepDir {
		log.Info("the run's directory is kept", "dir", work)
	} else {
		defer os.RemoveAll(work)
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
			c, err = benchcluster.StartKmirror(ctx, bin, filepath.Join(work, name), o.kmirrorLog, o.keepDir, sessionProps)
		case systemKafka:
			c, err = benchcluster.StartKafka(filepath.Join(work, name), o.heapMB, sessionProps)
		}
		if err != nil {
			return err
		}
		clusters = append(clusters, c)
		rep.versions[name] = c.Version()
		log.Info("cluster started", "system", name, "took", time.Since(began).Round(time.Millisecond))
	}
	for _, c := range clusters {
		if _, err := healthy(ctx, c, "start", 2*time.Minute); err != nil {
			return err
		}
	}
	if o.ops > 0 {
		if err := runLatency(ctx, o, clusters, rep, log); err != nil {
			return err
		}
	}
	for round := range o.kills {
		order := clusters
		if round%2 == 1 {
			order = reversed(clusters)
		}
		for _, c := range order {
			for _, patient := range []bool{true, false} {
				ctl, err := healthy(ctx, c, fmt.Sprintf("r%d-%v", round, patient), 2*time.Minute)
				if err != nil {
					return err
				}
				f, err := killController(ctx, c, ctl, round+1, patient, o.retryEvery, o.attemptTimeout, o.maxInFlight, time.Minute)
				if err != nil {
					return err
				}
				rep.failover = append(rep.failover, f)
				log.Info("failover", "system", c.Name(), "round", round+1, "patient", patient, "killed", f.killed,
					"sent_to", f.survivor, "next_controller", f.next, "took_ms", ms(f.took), "sent_at_ms", ms(f.sentAt),
					"attempts", f.attempts)
				if err := c.Restart(ctx, f.killed); err != nil {
					return fmt.Errorf("%s: restarting node %d: %w", c.Name(), f.killed, err)
				}
			}
		}
	}
	return nil
}

// runLatency measures every latency cell on every cluster.
func runLatency(ctx context.Context, o options, clusters []cluster, rep *report, log *slog.Logger) error {
	type side struct {
		c     cluster
		w     *writer
		conns map[string]*conn // by toFollower, toController
		nodes map[string]int32
	}
	var sides []*side
	defer func() {
		for _, s := range sides {
			for _, cn := range s.conns {
				cn.close()
			}
		}
	}()
	for _, c := range clusters {
		ctl, err := healthy(ctx, c, "latency", 2*time.Minute)
		if err != nil {
			return err
		}
		s := &side{c: c, w: &writer{system: c.Name()}, conns: map[string]*conn{}, nodes: map[string]int32{toController: ctl}}
		sides = append(sides, s)
		for _, id := range c.IDs() {
			if id != ctl {
				s.nodes[toFollower] = id
				break
			}
		}
		for to, id := range s.nodes {
			cn, err := dial(c.Addr(id))
			if err != nil {
				return err
			}
			s.conns[to] = cn
		}
		if err := s.conns[toController].createTopic(ctx, alterTopic); err != nil {
			return fmt.Errorf("%s: %w", c.Name(), err)
		}
		log.Info("latency targets", "system", c.Name(), "controller", ctl, "non_controller", s.nodes[toFollower])
		for _, op := range []string{opAlter, opCreate} {
			for range o.warmup {
				if _, err := s.w.write(ctx, s.conns[toFollower], op); err != nil {
					return fmt.Errorf("%s warm-up: %w", c.Name(), err)
				}
			}
		}
	}
	pids := allPIDs(clusters)
	i := 0
	for done := 0; done < o.ops; done += o.block {
		n := min(o.block, o.ops-done)
		for _, op := range []string{opAlter, opCreate} {
			for _, to := range []string{toFollower, toController} {
				order := sides
				if i%2 == 1 {
					order = []*side{sides[len(sides)-1]}
					order = append(order, sides[:len(sides)-1]...)
				}
				i++
				for _, s := range order {
					k := cellKey{s.c.Name(), op, to}
					before := snapshot(pids)
					for range n {
						d, err := s.w.write(ctx, s.conns[to], op)
						if err != nil {
							if ctx.Err() != nil {
								return ctx.Err()
							}
							rep.fails[k]++
							log.Warn("write failed", "system", s.c.Name(), "op", op, "to", to, "err", err)
							continue
						}
						rep.add(k, d)
					}
					rep.others[k] += snapshot(pids).othersSince(before)
				}
			}
		}
		log.Info("latency block done", "writes", done+n, "of", o.ops)
	}
	return nil
}

func reversed(s []cluster) []cluster {
	out := make([]cluster, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}
