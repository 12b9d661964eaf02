package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
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

// inProcCluster is three kmirror nodes of one quorum in this process (no
// JVM, no binary): enough to run the benchmark's core in `make test`.
// kill closes a node (a clean stop, where the benchmark's kill is
// SIGKILL), so a failover here shows that the loop works, not how long
// a crash takes.
type inProcCluster struct {
	cfgs  []broker.Config
	nodes []*node.Node
}

func startInProc(t *testing.T) *inProcCluster {
	t.Helper()
	c := &inProcCluster{cfgs: nodetest.ClusterConfigs(t, 3), nodes: make([]*node.Node, 3)}
	ports, err := benchcluster.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.cfgs {
		// A fixed client port: a node restarted after a kill is found
		// where it was.
		c.cfgs[i].Listeners = []broker.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: ports[i]}}
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range c.cfgs {
		wg.Go(func() { c.nodes[i], errs[i] = node.Start(c.cfgs[i], control.Config{}) })
	}
	wg.Wait()
	t.Cleanup(func() { c.Close() })
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (c *inProcCluster) Name() string    { return systemKmirror }
func (c *inProcCluster) Version() string { return "in-process" }
func (c *inProcCluster) IDs() []int32    { return []int32{1, 2, 3} }
func (c *inProcCluster) Addr(id int32) string {
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(c.cfgs[id-1].Listeners[0].Port))
}
func (c *inProcCluster) Running(id int32) bool { return c.nodes[id-1] != nil }
func (c *inProcCluster) PIDs() []int           { return nil }

func (c *inProcCluster) Kill(id int32) error {
	err := c.nodes[id-1].Close()
	c.nodes[id-1] = nil
	return err
}

func (c *inProcCluster) Restart(_ context.Context, id int32) error {
	n, err := node.Start(c.cfgs[id-1], control.Config{})
	c.nodes[id-1] = n
	return err
}

func (c *inProcCluster) Close() error {
	for i, n := range c.nodes {
		if n != nil {
			n.Close()
			c.nodes[i] = nil
		}
	}
	return nil
}

// The benchmark's core against an in-process cluster: every latency cell
// measured with no failure, a failover for each client that ends with a
// CreateTopics answered by the survivor and another controller, and a
// report that holds both.
func TestLatencyAndFailoverInProcess(t *testing.T) {
	t.Parallel()
	c := startInProc(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := options{ops: 6, block: 4, warmup: 2}
	rep := newReport(nil, o)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := runLatency(ctx, o, []cluster{c}, rep, log); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{opAlter, opCreate} {
		for _, to := range []string{toFollower, toController} {
			k := cellKey{systemKmirror, op, to}
			if got := len(rep.lat[k]); got != o.ops || rep.fails[k] != 0 {
				t.Errorf("%v: %d samples, %d failed; want %d, 0", k, got, rep.fails[k], o.ops)
			}
		}
	}
	for _, patient := range []bool{false, true} {
		ctl, err := healthy(ctx, c, fmt.Sprint(patient), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		f, err := killController(ctx, c, ctl, 1, patient, 10*time.Millisecond, time.Second, 20, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if f.took <= 0 || f.sentAt > f.took || f.survivor == ctl || f.next == ctl || f.next < 1 || (patient && f.attempts < 1) {
			t.Fatalf("failover, patient %v: %+v", patient, f)
		}
		rep.failover = append(rep.failover, f)
		if err := c.Restart(ctx, ctl); err != nil {
			t.Fatal(err)
		}
	}
	var sb strings.Builder
	rep.Write(&sb)
	for _, want := range []string{"| IncrementalAlterConfigs | non-controller | kmirror | 6 |", "| CreateTopics | controller | kmirror | 6 |",
		"| kmirror | 1 | client |", "| kmirror | 1 | probe |"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, sb.String())
		}
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	var ls latencies
	for i := 300; i >= 1; i-- { // 1 ms .. 300 ms, out of order
		ls = append(ls, time.Duration(i)*time.Millisecond)
	}
	s := summarize(ls)
	if s.n != 300 || s.p50 != 150*time.Millisecond || s.p99 != 297*time.Millisecond ||
		s.mean != 150500*time.Microsecond || s.min != time.Millisecond || s.max != 300*time.Millisecond {
		t.Fatalf("summary %+v", s)
	}
	if got := summarize(latencies{7}); got.p50 != 7 || got.p99 != 7 {
		t.Fatalf("one sample: %+v", got)
	}
	if got := median([]time.Duration{4, 1, 3, 2}); got != 2 {
		t.Fatalf("median of 1-4: %v, want 2 (the integer mean of 2 and 3)", got)
	}
}
