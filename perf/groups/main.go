// Command groups is the group coordinator benchmark: a 3-node kmirror
// cluster next to Apache Kafka 4.4's 3-node combined KRaft cluster, on
// the same machine in one run, each with a topic of replication factor 3
// and __consumer_offsets at replication factor 3. Run it as `go run
// ./perf/groups` or `make bench-groups`.
//
//	+-------------------------+  OffsetCommit (gen -1)  +-----------------------+
//	| this process:           | ----------------------> | 3 x kmirror serve     |
//	|  1 or 8 committers,     |  JoinGroup, SyncGroup,  |   (coordinators on    |
//	|  each its own group     |  Heartbeat, LeaveGroup  |    __consumer_offsets)|
//	|  K kgo group members    | ----------------------> | 3 x Kafka 4.4.0 JVM   |
//	+-------------------------+                         +-----------------------+
//
// Every node is its own process (kmirror serve children and Kafka JVMs
// with kafka-run-class.sh's options, both through perf/internal/
// benchcluster). Both systems get group.initial.rebalance.delay.ms=0,
// offsets.topic.replication.factor=3 and offsets.topic.num.partitions
// (--offsets-partitions, 50: both systems' default, which
// internal/realkafka lowers to 4 for its tests), and create
// __consumer_offsets at the first FindCoordinator.
//
// 1. OffsetCommit throughput. Synchronous OffsetCommit requests of one
// partition offset each, outside group membership (generation -1, no
// member id, a group with no members: what kadm's CommitOffsets sends),
// from --committers clients one at a time and from 8 at once, each
// client its own kgo client (connection) and its own group, so the groups
// spread over the coordinators; kgo routes each to its group's
// coordinator. --commits per cell, in blocks of --block split over the
// cell's clients, the systems alternating (AB, BA) so machine noise
// weighs on both; --warmup commits per client first are not counted.
// commits/s is a cell's commits over the sum of its blocks' wall times.
//
// 2. Rebalance time. A round on one system: start --members kgo consumers
// (classic protocol, kgo's default cooperative-sticky balancer,
// --heartbeat heartbeats) of a fresh group on the --partitions topic and
// time until the group is settled ("form"); Close one member and time
// until the rest have settled ("leave"); start a new member and time
// from just before its client is made until all are settled again
// ("join"). Settled: every live member has synced in the same
// generation, owns at least one partition, and the owned partitions are
// all of the topic's, none twice, as kgo's OnPartitionsAssigned, Revoked
// and Lost callbacks report them. --rounds rounds per system, the
// systems alternating, after --warmup-rounds unmeasured ones each.
//
// 3. With --share, share consumers (KIP-932): throughput of 1 and 3
// kgo share consumers of one share group reading every record of a
// topic once, and the time a second member takes to get partitions and
// its first record; see share.go.
//
// "nodes CPU s" is the three nodes' utime+stime during a cell's blocks;
// "other CPU s" is the machine's busy time (/proc/stat) minus that, this
// process's and the other system's nodes': the noise meter.
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
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/internal/settings"
	"github.com/kmirror/kmirror/perf/internal/benchcluster"
	"github.com/kmirror/kmirror/perf/internal/benchrun"
)

// options are the command line.
type options struct {
	systems           []string
	commits           int
	block             int
	warmup            int
	committers        []int
	partitions        int
	offsetsPartitions int
	members           int
	rounds            int
	warmupRounds      int
	heartbeat         time.Duration
	settleTimeout     time.Duration
	kmirrorBin        string
	heapMB            int
	out               string
	kmirrorLog        string
	keepDir           bool

	// --share (share.go)
	share            bool
	shareRecords     int
	shareRecordBytes int
	sharePartitions  int
	shareConsumers   []int
	shareRounds      int
	shareWarmup      int
	shareJoinRounds  int
	shareHeartbeatMS int
	shareTimeout     time.Duration
}

const usage = `Usage: go run ./perf/groups [flags]

Starts a 3-node kmirror cluster and Apache Kafka 4.4.0's 3-node combined
KRaft cluster on this machine, every node its own process, and measures
the group coordinator: OffsetCommit throughput (generation -1 commits of
one partition, 1 and 8 concurrent clients, each its own group) and
rebalance time of a group of kgo consumers (forming, one member leaving,
one joining), on a topic and __consumer_offsets of replication factor 3.
Kafka needs java and mvn (internal/realkafka).

Flags:
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func parseFlags(args []string, stderr io.Writer) (options, int) {
	fs := flag.NewFlagSet("groups", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var (
		o                                   options
		systems, committers, shareConsumers string
	)
	fs.StringVar(&systems, "systems", strings.Join(benchcluster.AllSystems, ","), "comma list of systems: kmirror, kafka")
	fs.IntVar(&o.commits, "commits", 4000, "OffsetCommits per cell (clients, system); 0 skips the commit measure")
	fs.IntVar(&o.block, "block", 500, "commits of one cell before the other system's turn")
	fs.IntVar(&o.warmup, "warmup", 200, "unmeasured commits per client first (connections, Kafka's JIT)")
	fs.StringVar(&committers, "committers", "1,8", "comma list of concurrent commit clients per cell")
	fs.IntVar(&o.partitions, "partitions", 12, "partitions of the topic (replication factor 3) the groups consume and commit")
	fs.IntVar(&o.offsetsPartitions, "offsets-partitions", 50, "offsets.topic.num.partitions of both systems")
	fs.IntVar(&o.members, "members", 4, "members of a rebalance round's group (K)")
	fs.IntVar(&o.rounds, "rounds", 10, "rebalance rounds per system (form, leave, join each); 0 skips the rebalance measure")
	fs.IntVar(&o.warmupRounds, "warmup-rounds", 1, "unmeasured rebalance rounds per system first")
	fs.DurationVar(&o.heartbeat, "heartbeat", 100*time.Millisecond, "the members' heartbeat.interval.ms: how soon a member learns of a rebalance (kgo's default is 3 s)")
	fs.DurationVar(&o.settleTimeout, "settle-timeout", time.Minute, "a rebalance phase that has not settled after this long fails")
	fs.StringVar(&o.kmirrorBin, "kmirror-bin", "", "kmirror binary (kmirror serve); empty builds ./cmd/kmirror")
	fs.IntVar(&o.heapMB, "broker-heap-mb", 1024, "each Kafka node's -Xmx (kafka-server-start.sh's default is 1G)")
	fs.StringVar(&o.out, "out", "", "also write the report and the progress log to this `file`")
	fs.StringVar(&o.kmirrorLog, "kmirror-log-level", "warn", "the kmirror nodes' --log-level (their logs: node-N/kmirror.log in the run's directory)")
	fs.BoolVar(&o.keepDir, "keep-dir", false, "leave the run's directory (the kmirror nodes' data and logs) behind and print its path")
	shareFlags(fs, &o, &shareConsumers)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, 0
		}
		return o, 2
	}
	bad := func(format string, a ...any) (options, int) {
		fmt.Fprintf(stderr, "groups: "+format+"\n", a...)
		return o, 2
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	for _, s := range settings.Items(systems) {
		if s != benchcluster.Kmirror && s != benchcluster.Kafka {
			return bad("--systems: unknown system %q", s)
		}
		o.systems = append(o.systems, s)
	}
	for _, s := range settings.Items(committers) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return bad("--committers: %q is not an integer >= 1", s)
		}
		o.committers = append(o.committers, n)
	}
	switch {
	case len(o.systems) == 0 || len(o.committers) == 0:
		return bad("--systems and --committers must not be empty")
	case o.commits < 0 || o.block < 1 || o.warmup < 0 || o.rounds < 0 || o.warmupRounds < 0:
		return bad("--commits, --warmup, --rounds and --warmup-rounds: want >= 0; --block: want >= 1")
	case o.members < 2 || o.partitions < o.members:
		return bad("--members: want >= 2 and <= --partitions (every member owns a partition)")
	case o.offsetsPartitions < 1 || o.heartbeat < time.Millisecond || o.settleTimeout <= 0:
		return bad("--offsets-partitions: want >= 1; --heartbeat: want >= 1ms; --settle-timeout: want > 0")
	case o.heapMB < 256:
		return bad("--broker-heap-mb: want >= 256")
	}
	if err := checkShareFlags(&o, shareConsumers); err != nil {
		return bad("%v", err)
	}
	return o, -1
}

func run(args []string, stdout, stderr io.Writer) int {
	o, code := parseFlags(args, stderr)
	if code >= 0 {
		return code
	}
	rep := newReport(args, o)
	return benchrun.Run("groups", o.out, stdout, stderr, rep, func(ctx context.Context, log *slog.Logger) error {
		return runAll(ctx, o, rep, log)
	})
}

// props are what both systems are given beyond their defaults. The
// session timeouts are the ones internal/realkafka's Cluster sets for
// Kafka, so kmirror gets the same; no initial rebalance delay, so that a
// fresh group's first rebalance measures the coordinator rather than a
// 3 s wait; and the shape of __consumer_offsets, the same on both.
//
// Under --share both also get group.coordinator.rebalance.protocols with
// share: kmirror serves share groups only with it; Kafka 4.4 serves them
// through its share.version feature and takes the list as it is.
func props(o options) map[string]string {
	p := map[string]string{
		"broker.session.timeout.ms":        "6000",
		"broker.heartbeat.interval.ms":     "1000",
		"group.initial.rebalance.delay.ms": "0",
		"offsets.topic.replication.factor": "3",
		"offsets.topic.num.partitions":     strconv.Itoa(o.offsetsPartitions),
	}
	if o.share {
		p["group.coordinator.rebalance.protocols"] = shareProtocols
		if o.shareHeartbeatMS > 0 {
			// kmirror ignores the min (a Kafka setting it does not have).
			p["group.share.heartbeat.interval.ms"] = strconv.Itoa(o.shareHeartbeatMS)
			p["group.share.min.heartbeat.interval.ms"] = strconv.Itoa(min(o.shareHeartbeatMS, 5000))
		}
	}
	return p
}

// runAll starts both clusters, prepares each, runs the commit cells, then
// the rebalance rounds, and stops the clusters; rep fills as it goes.
func runAll(ctx context.Context, o options, rep *report, log *slog.Logger) error {
	work, err := os.MkdirTemp("", "groups-bench-")
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
	var clusters []benchcluster.Cluster
	defer func() {
		for _, c := range clusters {
			if err := c.Close(); err != nil {
				log.Warn("stopping a cluster", "system", c.Name(), "err", err)
			}
		}
	}()
	var targets []*target
	for _, name := range o.systems {
		began := time.Now()
		var c benchcluster.Cluster
		switch name {
		case benchcluster.Kmirror:
			c, err = benchcluster.StartKmirror(ctx, bin, filepath.Join(work, name), o.kmirrorLog, o.keepDir, props(o))
		case benchcluster.Kafka:
			c, err = benchcluster.StartKafka(filepath.Join(work, name), o.heapMB, props(o))
		}
		if err != nil {
			return err
		}
		clusters = append(clusters, c)
		rep.versions[name] = c.Version()
		log.Info("cluster started", "system", name, "took", time.Since(began).Round(time.Millisecond))
		targets = append(targets, targetOf(c))
	}
	for _, t := range targets {
		began := time.Now()
		info, err := prepare(ctx, t, o.partitions)
		if err != nil {
			return err
		}
		rep.offsets[t.name] = info
		log.Info("topics ready", "system", t.name, "took", time.Since(began).Round(time.Millisecond),
			"offsets_partitions", info.partitions, "offsets_min_replicas", info.minReplicas, "offsets_min_isr", info.minISR)
	}
	if o.commits > 0 {
		if err := runCommits(ctx, o, targets, rep, log); err != nil {
			return err
		}
	}
	if o.rounds > 0 {
		if err := runRebalances(ctx, o, targets, rep, log); err != nil {
			return err
		}
	}
	if o.share {
		if err := runShare(ctx, o, targets, rep, log); err != nil {
			return err
		}
	}
	return nil
}

// targetOf is what the measurements need of a started cluster.
func targetOf(c benchcluster.Cluster) *target {
	t := &target{name: c.Name(), pids: c.PIDs}
	for _, id := range c.IDs() {
		t.seeds = append(t.seeds, c.Addr(id))
	}
	return t
}

// runCommits measures every commit cell on every target: first each
// cell's clients and their warm-up, then the blocks, alternating.
func runCommits(ctx context.Context, o options, targets []*target, rep *report, log *slog.Logger) error {
	type cell struct {
		t  *target
		n  int // clients
		cs []*committer
	}
	var cells [][]*cell // by committers index, then target
	defer func() {
		for _, row := range cells {
			for _, c := range row {
				closeCommitters(c.cs)
			}
		}
	}()
	for _, n := range o.committers {
		var row []*cell
		for _, t := range targets {
			cs, err := newCommitters(ctx, t, n, fmt.Sprintf("c%d", n), o.partitions)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			row = append(row, &cell{t: t, n: n, cs: cs})
			if _, err := commitBlock(ctx, cs, o.warmup*n); err != nil {
				return fmt.Errorf("%s warm-up: %w", t.name, err)
			}
			spread, err := coordinatorSpread(ctx, cs)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			rep.spread[commitKey{t.name, n}] = spread
			log.Info("committers ready", "system", t.name, "clients", n, "coordinators", spread)
		}
		cells = append(cells, row)
	}
	others := pidsOf(targets)
	i := 0
	for done := 0; done < o.commits; done += o.block {
		n := min(o.block, o.commits-done)
		for _, row := range cells {
			order := rotate(row, i)
			i++
			for _, c := range order {
				before := snapshot(c.t.pids(), others)
				s, err := commitBlock(ctx, c.cs, n)
				if err != nil {
					return fmt.Errorf("%s, %d clients: %w", c.t.name, c.n, err)
				}
				rep.addCommits(commitKey{c.t.name, c.n}, s, snapshot(c.t.pids(), others).since(before))
			}
		}
		log.Info("commit block done", "commits", done+n, "of", o.commits)
	}
	return nil
}

// runRebalances runs the warm-up rounds, then the measured ones, the
// targets alternating.
func runRebalances(ctx context.Context, o options, targets []*target, rep *report, log *slog.Logger) error {
	for _, t := range targets {
		for w := range o.warmupRounds {
			if _, err := rebalanceRound(ctx, t, fmt.Sprintf("warm-%d", w), o.members, o.partitions, o.heartbeat, o.settleTimeout); err != nil {
				return fmt.Errorf("%s warm-up round: %w", t.name, err)
			}
		}
	}
	for round := range o.rounds {
		for _, t := range rotate(targets, round) {
			r, err := rebalanceRound(ctx, t, fmt.Sprintf("r%d", round), o.members, o.partitions, o.heartbeat, o.settleTimeout)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", t.name, round+1, err)
			}
			rep.addRound(t.name, r)
			log.Info("rebalance round", "system", t.name, "round", round+1, "form_ms", ms(r.form), "leave_ms", ms(r.leave),
				"join_ms", ms(r.join), "generation", r.generation)
		}
	}
	return nil
}

// rotate is s started at its i%len(s)-th element: AB, BA, AB, ...
func rotate[T any](s []T, i int) []T {
	k := i % len(s)
	return append(append([]T(nil), s[k:]...), s[:k]...)
}

// pidsOf is a function of every target's running nodes.
func pidsOf(targets []*target) func() []int {
	return func() []int {
		var out []int
		for _, t := range targets {
			out = append(out, t.pids()...)
		}
		return out
	}
}
