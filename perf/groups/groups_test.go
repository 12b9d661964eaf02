package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/node"
	"github.com/kmirror/kmirror/perf/internal/benchcluster"
)

// startInProc starts three kmirror nodes of one quorum in this process
// (no JVM, no binary), shaped as the benchmark shapes its children: no
// initial rebalance delay, __consumer_offsets at replication factor 3
// (6 partitions here, to be created quickly).
// Each of opts changes every node's config after that.
func startInProc(t *testing.T, opts ...func(*broker.Config)) *target {
	t.Helper()
	cfgs := nodetest.ClusterConfigs(t, 3)
	nodes := make([]*node.Node, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i := range cfgs {
		cfgs[i].GroupInitialRebalanceDelay = 0 // none
		cfgs[i].OffsetsTopicReplicationFactor = 3
		cfgs[i].OffsetsTopicPartitions = 6
		for _, opt := range opts {
			opt(&cfgs[i])
		}
		// The quorum needs a majority before any node serves: start
		// them together.
		wg.Go(func() { nodes[i], errs[i] = node.Start(cfgs[i], control.Config{}) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	})
	tg := &target{name: benchcluster.Kmirror, pids: func() []int { return nil }}
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		tg.seeds = append(tg.seeds, nodes[i].Addr())
	}
	return tg
}

// The benchmark's core against an in-process cluster: __consumer_offsets
// created at replication factor 3 by the first commit, every commit of
// both cells counted with none failed, rebalance rounds whose three
// phases settle with every partition owned once by the live members, and
// a report that holds all of it.
func TestCommitsAndRebalanceInProcess(t *testing.T) {
	t.Parallel()
	tg := startInProc(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	const partitions = 6
	o := options{commits: 60, block: 30, warmup: 5, committers: []int{1, 4}, partitions: partitions, members: 3, rounds: 2,
		heartbeat: 50 * time.Millisecond, settleTimeout: 20 * time.Second}
	rep := newReport(nil, o)
	info, err := prepare(ctx, tg, partitions)
	if err != nil {
		t.Fatal(err)
	}
	if info.partitions != 6 || info.minReplicas != 3 || info.minISR != 3 {
		t.Fatalf("__consumer_offsets: %+v, want 6 partitions of 3 replicas in sync", info)
	}
	rep.offsets[tg.name] = info
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := runCommits(ctx, o, []*target{tg}, rep, log); err != nil {
		t.Fatal(err)
	}
	for _, n := range o.committers {
		c := rep.commits[commitKey{tg.name, n}]
		if c == nil || c.ok != o.commits || c.failed != 0 || len(c.lat) != o.commits || c.rate() <= 0 {
			t.Fatalf("%d clients: %+v, want %d commits, none failed", n, c, o.commits)
		}
		if spread := rep.spread[commitKey{tg.name, n}]; strings.Count(spread, ":") < 1 {
			t.Fatalf("%d clients: coordinator spread %q", n, spread)
		}
	}
	if err := runRebalances(ctx, o, []*target{tg}, rep, log); err != nil {
		t.Fatal(err)
	}
	rs := rep.rounds[tg.name]
	if len(rs) != o.rounds {
		t.Fatalf("%d rounds, want %d", len(rs), o.rounds)
	}
	for i, r := range rs {
		// Settled means every partition owned by exactly one live member;
		// after the join the group is back to o.members.
		if r.form <= 0 || r.leave <= 0 || r.join <= 0 || r.generation < 3 || r.members != o.members {
			t.Fatalf("round %d: %+v", i+1, r)
		}
	}
	var sb strings.Builder
	rep.Write(&sb)
	for _, want := range []string{"| 1 | kmirror | 60 | 0 |", "| 4 | kmirror | 60 | 0 |", "| form | kmirror | 2 |",
		"| join | kmirror | 2 |", "__consumer_offsets has 6 partitions, replicas per partition >= 3"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, sb.String())
		}
	}
}

// settledLocked's rule on hand-made members: each partition owned once,
// by live members of one generation that all own something.
func TestSettled(t *testing.T) {
	t.Parallel()
	owns := func(ps ...int32) map[int32]bool {
		m := map[int32]bool{}
		for _, p := range ps {
			m[p] = true
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		members []*member
		want    bool
	}{
		{"split", []*member{{owned: owns(0, 1), gen: 4}, {owned: owns(2, 3), gen: 4}}, true},
		{"a closed member's partitions do not count", []*member{{owned: owns(0, 1, 2, 3), gen: 4}, {owned: owns(0), gen: 3, gone: true}}, true},
		{"overlap", []*member{{owned: owns(0, 1, 2), gen: 4}, {owned: owns(2, 3), gen: 4}}, false},
		{"a partition unowned", []*member{{owned: owns(0, 1), gen: 4}, {owned: owns(2), gen: 4}}, false},
		{"generations differ", []*member{{owned: owns(0, 1), gen: 4}, {owned: owns(2, 3), gen: 5}}, false},
		{"a member owns nothing", []*member{{owned: owns(0, 1, 2, 3), gen: 4}, {owned: owns(), gen: 4}}, false},
		{"never synced", []*member{{owned: owns(0, 1, 2, 3), gen: -1}}, false},
		{"no live member", []*member{{owned: owns(0, 1, 2, 3), gen: 2, gone: true}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := &groupWatch{parts: 4, members: tc.members}
			if _, got := w.settledLocked(); got != tc.want {
				t.Fatalf("settled %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPercentiles(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 10; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p := percentile(ds, 90); p != 9*time.Millisecond {
		t.Fatalf("p90 of 1-10 ms: %v, want 9ms (nearest rank)", p)
	}
	if m := median(ds); m != 5500*time.Microsecond {
		t.Fatalf("median of 1-10 ms: %v", m)
	}
	if ds[0] != 10*time.Millisecond {
		t.Fatal("percentile or median sorted its argument in place")
	}
	if rotate([]int{1, 2}, 1)[0] != 2 || rotate([]int{1, 2}, 2)[0] != 1 {
		t.Fatal("rotate")
	}
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
	}{
		{nil, -1},
		{[]string{"--committers", "1,2,8", "--members", "3"}, -1},
		{[]string{"--committers", "0"}, 2},
		{[]string{"--members", "13"}, 2},
		{[]string{"--systems", "redpanda"}, 2},
		{[]string{"--block", "0"}, 2},
		{[]string{"extra"}, 2},
	} {
		if _, code := parseFlags(tc.args, io.Discard); code != tc.code {
			t.Errorf("%q: status %d, want %d", tc.args, code, tc.code)
		}
	}
}
