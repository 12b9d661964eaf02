package tests

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
)

// kcat's balanced consumer (-G) is librdkafka's KafkaConsumer: its own
// JoinGroup/SyncGroup state machine, the range assignor, and commits from
// a background timer and on close. These tests check that it reads a
// topic through a kmirror group, alone and split across two processes.

// kcatGroupArgs make kcat consume topic in group from the beginning (for
// partitions the group has no offset for) and exit once every partition
// it owns is at its end, printing partition:offset:value lines.
// librdkafka's group debug log (-d cgrp) goes to stderr, which a failing
// test prints.
func kcatGroupArgs(group, topic string) []string {
	return []string{"-d", "cgrp", "-G", group, topic, "-o", "beginning", "-e", "-f", `%p:%o:%s\n`}
}

// kcatProcess is a kcat running in the background.
type kcatProcess struct {
	cmd            *exec.Cmd
	cancel         context.CancelFunc
	stdout, stderr bytes.Buffer
}

// startKcat starts kcat against addr, bounded by kcatTimeout; wait
// collects it.
func startKcat(t *testing.T, addr string, args ...string) *kcatProcess {
	t.Helper()
	path := kcatPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), kcatTimeout)
	p := &kcatProcess{cancel: cancel}
	// IPv4 only, as runKcat.
	p.cmd = exec.CommandContext(ctx, path, append([]string{"-b", addr, "-X", "broker.address.family=v4"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = time.Second
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting kcat: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		p.cmd.Wait() // reaps it if the test failed before wait
		if t.Failed() {
			t.Logf("kcat %s stderr:\n%s", strings.Join(p.cmd.Args[1:], " "), p.stderr.String())
		}
	})
	return p
}

// wait waits for kcat to exit and returns its stdout.
func (p *kcatProcess) wait(t *testing.T) string {
	t.Helper()
	err := p.cmd.Wait()
	p.cancel()
	if err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s\nstdout:\n%s", strings.Join(p.cmd.Args[1:], " "), err, p.stderr.String(), p.stdout.String())
	}
	return p.stdout.String()
}

// kcatGroupValue is the value of record i of the kcat group tests.
func kcatGroupValue(i int) string { return fmt.Sprintf("kcat-group-%05d", i) }

// parseKcatGroup parses partition:offset:value lines into the records
// read (partition -> offset -> times read), checking every value against
// what was produced at that position (record i at partition i%parts,
// offset i/parts).
func parseKcatGroup(t *testing.T, out string, parts int32, read map[int32]map[int64]int) {
	t.Helper()
	for line := range strings.Lines(out) {
		fields := strings.SplitN(strings.TrimSuffix(line, "\n"), ":", 3)
		if len(fields) != 3 {
			t.Fatalf("kcat line %q: want partition:offset:value", line)
		}
		p, err1 := strconv.ParseInt(fields[0], 10, 32)
		o, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("kcat line %q: bad partition or offset", line)
		}
		if want := kcatGroupValue(int(o)*int(parts) + int(p)); fields[2] != want {
			t.Fatalf("kcat read %q at [%d]@%d, want %q", fields[2], p, o, want)
		}
		if read[int32(p)] == nil {
			read[int32(p)] = map[int64]int{}
		}
		read[int32(p)][o]++
	}
}

func TestKcatGroupConsumer(t *testing.T) {
	t.Parallel()
	kcatPath(t)
	// Both processes of the split case must land in the group's first
	// generation: librdkafka heartbeats every 3 s, so a member that joins
	// a generation late may find the other already gone. The initial
	// rebalance delay (group.initial.rebalance.delay.ms) is what
	// gathers them.
	const delay = 2 * time.Second
	n := startNode(t, func(c *broker.Config) {
		c.GroupInitialRebalanceDelay = delay
		c.Logger = testutil.LogOnFailure(t, slog.LevelDebug)
	})
	ctx := testCtx(t, 45*time.Second)
	adm := newAdmin(t, n.addr())
	const (
		topic   = "kcat-group"
		parts   = 4
		records = 2000
	)
	createTopic(t, ctx, adm, topic, parts, nil)
	rs := make([]*kgo.Record, records)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Partition: int32(i % parts), Value: []byte(kcatGroupValue(i))}
	}
	produceAll(t, ctx, newClient(t, n.addr(), kgo.RecordPartitioner(kgo.ManualPartitioner())), rs)
	ends := endOffsets(t, ctx, adm, topic)

	// checkAll checks that read holds every record exactly once.
	checkAll := func(t *testing.T, read map[int32]map[int64]int) {
		t.Helper()
		for p, end := range ends {
			for o := range end {
				if times := read[p][o]; times != 1 {
					t.Errorf("[%d]@%d read %d times, want once", p, o, times)
				}
			}
			if len(read[p]) != int(end) {
				t.Errorf("partition %d: %d offsets read, want %d", p, len(read[p]), end)
			}
		}
	}
	checkGroupDone := func(t *testing.T, ctx context.Context, group string) {
		t.Helper()
		if got := committedOffsets(t, ctx, adm, group, topic); !maps.Equal(got, ends) {
			t.Errorf("committed offsets after kcat exited %v, want the end offsets %v", got, ends)
		}
		if d := describeGroup(t, ctx, adm, group); d.State != "Empty" || len(d.Members) != 0 {
			t.Errorf("group after kcat exited: %s with %d members, want Empty", d.State, len(d.Members))
		}
	}

	t.Run("one consumer", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t, 45*time.Second) // its own: it may wait for a parallel slot
		const group = "kcat-group-one"
		read := map[int32]map[int64]int{}
		parseKcatGroup(t, runKcat(t, n.addr(), "", kcatGroupArgs(group, topic)...), parts, read)
		checkAll(t, read)
		checkGroupDone(t, ctx, group)
	})

	t.Run("two consumers", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t, 45*time.Second) // its own: it may wait for a parallel slot
		const group = "kcat-group-two"
		procs := []*kcatProcess{
			startKcat(t, n.addr(), kcatGroupArgs(group, topic)...),
			startKcat(t, n.addr(), kcatGroupArgs(group, topic)...),
		}
		read := map[int32]map[int64]int{}
		var owned [2][]int32
		for i, p := range procs {
			own := map[int32]map[int64]int{}
			parseKcatGroup(t, p.wait(t), parts, own)
			for part, offs := range own {
				owned[i] = append(owned[i], part)
				if read[part] == nil {
					read[part] = map[int64]int{}
				}
				for o, times := range offs {
					read[part][o] += times
				}
			}
		}
		t.Logf("partitions read by each process: %v", owned)
		for i, ps := range owned {
			if len(ps) == 0 {
				t.Errorf("kcat process %d read nothing: the partitions were not split between the two", i)
			}
		}
		// The first to finish commits on close before it leaves, so the
		// other, given its partitions, resumes at their end: nothing is
		// read twice.
		checkAll(t, read)
		checkGroupDone(t, ctx, group)
	})
}
