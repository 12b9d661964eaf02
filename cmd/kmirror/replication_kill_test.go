package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/storage"
)

// The Jepsen-style kill -9 test of replication (issue 21: "Repeated
// kill -9 of partition leaders (child processes) while idempotent
// acks=all producers write: every acknowledged record is present exactly
// once at its offset, and all replicas are byte-identical afterwards";
// "a node restarted after a crash truncates its unacknowledged tail and
// catches up"). Three `kmirror serve` children hold an RF-3 topic with
// min.insync.replicas=2; idempotent acks=all producers write unique
// values to every partition while, round after round, the leader of a
// random partition gets SIGKILL at a random moment and is restarted on
// its data after a random pause; most rounds wait until the ISRs are
// full again, a hurried one kills again at once. Afterwards every
// acknowledged record must be read back once, at the offset it was
// acknowledged at, no value may appear twice, and the three copies of
// each partition, read from disk once the nodes stopped, must be the
// same batches byte for byte.

const (
	rkTopic     = "rk9"
	rkParts     = 3
	rkProducers = 2
	rkRounds    = 5
	// rkRoundsBound stops the rounds early on a slow machine: the test
	// must end well within two minutes on two cores.
	rkRoundsBound = 70 * time.Second
	// rkMaxDown is the longest a killed node stays down.
	rkMaxDown = 2 * time.Second
	// rkLagMs is replica.lag.time.max.ms: a follower alive but stuck
	// leaves the ISR within seconds rather than Kafka's 30.
	rkLagMs = 5000
)

// rkAck is where an acknowledged record is.
type rkAck struct {
	partition int32
	offset    int64
}

// rkLedger is what the producers were told.
type rkLedger struct {
	mu     sync.Mutex
	acked  map[string]rkAck
	failed map[string]error
	// took is each acknowledgement's latency (kgo stamps a record's
	// Timestamp when it is produced).
	took []time.Duration
}

func (l *rkLedger) record(r *kgo.Record, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed[string(r.Value)] = err
		return
	}
	l.acked[string(r.Value)] = rkAck{r.Partition, r.Offset}
	l.took = append(l.took, time.Since(r.Timestamp))
}

// latencies is the median and the largest acknowledgement latency.
func (l *rkLedger) latencies() (p50, most time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.took) == 0 {
		return 0, 0
	}
	took := slices.Sorted(slices.Values(l.took))
	return took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond)
}

func (l *rkLedger) counts() (acked, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked), len(l.failed)
}

// rkProduce writes "p<id>-<n>" to partition n%rkParts until stop is set,
// each record's outcome in led. It returns how many it produced.
func rkProduce(ctx context.Context, cl *kgo.Client, id int, stop *atomic.Bool, led *rkLedger) int {
	n := 0
	for ; !stop.Load() && ctx.Err() == nil; n++ {
		r := &kgo.Record{Partition: int32(n % rkParts), Value: fmt.Appendf(nil, "p%d-%d", id, n)}
		cl.Produce(ctx, r, led.record)
	}
	return n
}

// rkISR is topic's leaders and sorted ISRs by partition in node id's
// Metadata.
func (c *serveCluster) rkISR(ctx context.Context, id int32, topic string) (leaders map[int32]int32, isr map[int32][]int32, err error) {
	md, err := c.metadata(ctx, id, topic)
	if err != nil {
		return nil, nil, err
	}
	if len(md.Topics) != 1 {
		return nil, nil, fmt.Errorf("node %d: Metadata of %s: %d topics", id, topic, len(md.Topics))
	}
	mt := md.Topics[0]
	if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
		return nil, nil, fmt.Errorf("node %d: Metadata of %s: %w", id, topic, err)
	}
	leaders, isr = map[int32]int32{}, map[int32][]int32{}
	for _, p := range mt.Partitions {
		leaders[p.Partition] = p.Leader
		isr[p.Partition] = slices.Sorted(slices.Values(p.ISR))
	}
	return leaders, isr, nil
}

// waitFullISR waits until every running node's Metadata shows each of
// topic's rkParts partitions led, with all three nodes in its ISR.
func (c *serveCluster) waitFullISR(ctx context.Context, topic string, d time.Duration) {
	c.t.Helper()
	c.waitFullISROf(ctx, topic, rkParts, d)
}

// waitFullISROf is waitFullISR for a topic of parts partitions.
func (c *serveCluster) waitFullISROf(ctx context.Context, topic string, parts int, d time.Duration) {
	c.t.Helper()
	testutil.CheckFor(c.t, d, func() error {
		for _, id := range c.up() {
			leaders, isr, err := c.rkISR(ctx, id, topic)
			if err != nil {
				return err
			}
			if len(leaders) != parts {
				return fmt.Errorf("node %d: %s has %d partitions, want %d", id, topic, len(leaders), parts)
			}
			for p, l := range leaders {
				if l < 0 || !slices.Equal(isr[p], []int32{1, 2, 3}) {
					return fmt.Errorf("node %d: %s-%d leader %d ISR %v, want a leader and ISR [1 2 3]", id, topic, p, l, isr[p])
				}
			}
		}
		return nil
	})
}

// pinClientPorts makes every node's client listener keep the port it
// has now across restarts, as a real cluster's addresses do: a client
// whose known addresses all changed (each node restarted once) could
// reach none of them.
func (c *serveCluster) pinClientPorts() {
	for i, args := range c.args {
		for j := 0; j+1 < len(args); j++ {
			if args[j] == "--override" && strings.HasPrefix(args[j+1], "listeners=") {
				args[j+1] = strings.Replace(args[j+1], "PLAINTEXT://127.0.0.1:0", "PLAINTEXT://"+c.addrs[i], 1)
			}
		}
	}
}

// Set KMIRROR_RK9_SEED to replay a run's kill choices and pauses (the
// timing of the children is not replayed).
func TestServeClusterKill9LeadersWhileProducing(t *testing.T) {
	t.Parallel()
	began := time.Now()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KMIRROR_RK9_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("KMIRROR_RK9_SEED: %v", err)
		}
	}
	t.Logf("seed %d (KMIRROR_RK9_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Second)
	defer cancel()

	c := startServeClusterWith(t, "--override", "replica.lag.time.max.ms="+strconv.Itoa(rkLagMs),
		"--log-level", "info")
	c.pinClientPorts()
	c.waitBrokers(ctx, 1, 2, 3)
	c.createWith(ctx, c.controller(ctx), rkTopic, rkParts, 3, map[string]string{"min.insync.replicas": "2"})
	c.waitFullISR(ctx, rkTopic, clusterBound)
	t.Logf("cluster up, %s created with full ISRs: %v", rkTopic, time.Since(began).Round(time.Millisecond))

	// The producers: seeded with every node, they learn the restarted
	// nodes' new client ports from Metadata.
	ps := startRKWriters(t, ctx, c)
	led := ps.led
	ps.waitAcked("before the first kill", 200)

	roundsEnd := time.Now().Add(rkRoundsBound)
	rounds := 0
	for ; rounds < rkRounds && time.Now().Before(roundsEnd); rounds++ {
		p := rng.Int32N(rkParts)
		var victim int32
		testutil.CheckFor(t, clusterBound, func() error {
			leaders, err := c.leaders(ctx, c.up()[rng.IntN(len(c.up()))], rkTopic)
			if err != nil {
				return err
			}
			if victim = leaders[p]; victim <= 0 {
				return fmt.Errorf("%s-%d has no leader", rkTopic, p)
			}
			return nil
		})
		// A short random wait first, so that the kill lands at no
		// particular point of the producers' requests.
		time.Sleep(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
		before, _ := led.counts()
		if err := c.signal(victim, syscall.SIGKILL, 10*time.Second); err == nil {
			t.Fatalf("node %d exited 0 after kill -9", victim)
		}
		killedAt := time.Now()
		down := time.Duration(rng.Int64N(int64(rkMaxDown)))
		time.Sleep(down)
		c.start(victim)
		servedAt := time.Now()
		if rounds < rkRounds-1 && rng.IntN(3) == 0 {
			// A hurried round: the next kill comes while the
			// restarted node may still be catching up (a partition
			// whose ISR is one node may go offline until it is back).
			after, failed := led.counts()
			t.Logf("round %d: killed node %d (leader of %s-%d) with %d acknowledged, down %v, serving again after %v; %d acknowledged, %d failed; next kill at once",
				rounds+1, victim, rkTopic, p, before, down.Round(time.Millisecond), servedAt.Sub(killedAt).Round(time.Millisecond), after, failed)
			continue
		}
		c.waitFullISR(ctx, rkTopic, clusterBound)
		after, failed := led.counts()
		t.Logf("round %d: killed node %d (leader of %s-%d) with %d acknowledged, down %v, serving again after %v, full ISRs after %v more; %d acknowledged, %d failed",
			rounds+1, victim, rkTopic, p, before, down.Round(time.Millisecond), servedAt.Sub(killedAt).Round(time.Millisecond),
			time.Since(servedAt).Round(time.Millisecond), after, failed)
		// Produce a while with every node up before the next kill;
		// acknowledgements must go on.
		time.Sleep(time.Duration(500+rng.Int64N(1000)) * time.Millisecond)
		testutil.CheckFor(t, clusterBound, func() error {
			if n, _ := led.counts(); n <= after {
				return fmt.Errorf("round %d: no record acknowledged since the ISRs are full again (%d acknowledged, every node up)", rounds+1, n)
			}
			return nil
		})
	}
	if rounds < 2 {
		t.Fatalf("only %d kill rounds within %v", rounds, rkRoundsBound)
	}

	ps.stop()
	acked, failed := led.counts()
	p50, most := led.latencies()
	t.Logf("%d rounds; produced %v, %d acknowledged (latency p50 %v, max %v), %d failed; %v so far",
		rounds, ps.produced, acked, p50, most, failed, time.Since(began).Round(time.Millisecond))
	if failed > 0 {
		// Failures are allowed (the outcome was unknown to the client),
		// but say what they were.
		led.mu.Lock()
		for v, err := range led.failed {
			t.Logf("e.g. %s failed: %v", v, err)
			break
		}
		led.mu.Unlock()
	}
	c.waitFullISR(ctx, rkTopic, clusterBound)
	ends := rkSettledEnds(t, ctx, c)
	t.Logf("high watermarks %v", ends)

	rkCheckRead(t, ctx, c, led, ends)

	// Stop every node cleanly and compare the copies on disk.
	for _, id := range []int32{1, 2, 3} {
		if err := c.signal(id, syscall.SIGTERM, 20*time.Second); err != nil {
			t.Fatalf("node %d after SIGTERM: %v\n%s", id, err, c.procs[id-1].stderr.String())
		}
	}
	rkCheckReplicas(t, c, ends)
	// The restarted nodes' truncations (replicate's info lines): a kill
	// that left a tail the new leader never had is cut here.
	var cuts []string
	for i, p := range c.procs {
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			if strings.Contains(line, "replica diverged from its leader") || strings.Contains(line, "replica out of the leader's range") {
				cuts = append(cuts, fmt.Sprintf("node %d: %s", i+1, line))
			}
		}
	}
	t.Logf("%d truncations in the last lives of the nodes", len(cuts))
	for _, line := range cuts[:min(len(cuts), 6)] {
		t.Log(line)
	}
	t.Logf("done in %v", time.Since(began).Round(time.Millisecond))
}

// rkWriters are rkProducers idempotent acks=all producers writing to
// rkTopic through every node, each record's outcome in led; their logs
// and the nodes' stderr are shown when the test fails.
type rkWriters struct {
	t       *testing.T
	led     *rkLedger
	stopped atomic.Bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	cls     []*kgo.Client
	logs    []testutil.SyncBuffer
	// produced is how many records each producer produced, once
	// stopped.
	produced []int
}

// startRKWriters starts the producers; they stop when the test ends if
// not before.
func startRKWriters(t *testing.T, ctx context.Context, c *serveCluster) *rkWriters {
	t.Helper()
	ps := &rkWriters{t: t, led: &rkLedger{acked: map[string]rkAck{}, failed: map[string]error{}},
		cls: make([]*kgo.Client, rkProducers), logs: make([]testutil.SyncBuffer, rkProducers), produced: make([]int, rkProducers)}
	pctx, cancel := context.WithCancel(ctx)
	ps.cancel = cancel
	t.Cleanup(func() {
		ps.stop()
		if t.Failed() {
			for i := range ps.logs {
				t.Logf("producer %d's log:\n%s", i, rkTail(ps.logs[i].String(), 60))
			}
			for i, p := range c.procs {
				t.Logf("node %d's stderr:\n%s", i+1, rkTail(p.stderr.String(), 40))
			}
		}
	})
	for i := range ps.cls {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.DefaultProduceTopic(rkTopic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.MaxBufferedRecords(200), kgo.ProducerLinger(5*time.Millisecond),
			kgo.RetryTimeout(clusterBound), kgo.WithLogger(kgo.BasicLogger(&ps.logs[i], kgo.LogLevelInfo, nil)))
		if err != nil {
			t.Fatal(err)
		}
		ps.cls[i] = cl
		ps.wg.Add(1)
		go func() {
			defer ps.wg.Done()
			ps.produced[i] = rkProduce(pctx, cl, i, &ps.stopped, ps.led)
		}()
	}
	return ps
}

// stop stops the producers, waits for every outstanding record's outcome
// and closes the clients; it fails the test when they cannot finish.
func (ps *rkWriters) stop() {
	if ps.stopped.Swap(true) {
		return
	}
	defer ps.cancel()
	if ps.t.Failed() {
		// A failed test (its throttle or partition may still be
		// there) abandons the outstanding records at once rather
		// than wait for each producer in turn.
		ps.cancel()
		ps.wg.Wait()
		for _, cl := range ps.cls {
			if cl != nil { // nil: the test failed making the clients
				cl.Close()
			}
		}
		return
	}
	// A producer blocks in Produce while its buffer is full: a stalled
	// partition holds it there.
	waited := make(chan struct{})
	go func() { ps.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(clusterBound):
		acked, failed := ps.led.counts()
		ps.t.Errorf("producers still blocked in Produce %v after they were told to stop (%d acknowledged, %d failed)", clusterBound, acked, failed)
		ps.cancel()
		<-waited
	}
	for i, cl := range ps.cls {
		fctx, fcancel := context.WithTimeout(context.Background(), clusterBound)
		if err := cl.Flush(fctx); err != nil {
			ps.t.Errorf("producer %d: flushing with every node up and reachable: %v", i, err)
		}
		fcancel()
		cl.Close()
	}
}

// waitAcked waits until more than n records are acknowledged.
func (ps *rkWriters) waitAcked(what string, n int) {
	ps.t.Helper()
	ps.waitAckedWithin(what, n, clusterBound)
}

// waitAckedWithin is waitAcked bounded by d.
func (ps *rkWriters) waitAckedWithin(what string, n int, d time.Duration) {
	ps.t.Helper()
	testutil.CheckFor(ps.t, d, func() error {
		if got, _ := ps.led.counts(); got <= n {
			return fmt.Errorf("%s: %d records acknowledged, want more than %d", what, got, n)
		}
		return nil
	})
}

// rkSettledEnds waits until topic's high watermarks (ListOffsets latest)
// are the same in two answers a second apart, and returns them.
func rkSettledEnds(t *testing.T, ctx context.Context, c *serveCluster) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var last map[int32]int64
	testutil.CheckFor(t, clusterBound, func() error {
		lo, err := adm.ListEndOffsets(ctx, rkTopic)
		if err != nil {
			return err
		}
		if err := lo.Error(); err != nil {
			return err
		}
		got := map[int32]int64{}
		lo.Each(func(o kadm.ListedOffset) { got[o.Partition] = o.Offset })
		prev := last
		last = got
		if len(got) != rkParts || !maps.Equal(prev, got) {
			time.Sleep(time.Second)
			return fmt.Errorf("high watermarks %v, a second ago %v", got, prev)
		}
		return nil
	})
	return last
}

// rkCheckRead reads every partition from its start up to ends
// (read_uncommitted, from the leaders) and checks that each value is
// there once, and each acknowledged one at its acknowledged offset.
func rkCheckRead(t *testing.T, ctx context.Context, c *serveCluster, led *rkLedger, ends map[int32]int64) {
	t.Helper()
	starts := map[int32]kgo.Offset{}
	for p := range int32(rkParts) {
		starts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{rkTopic: starts}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]rkAck{}
	next := map[int32]int64{}
	var dups []string
	testutil.CheckFor(t, clusterBound, func() error {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		fs := cl.PollFetches(pctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil && pctx.Err() == nil {
				t.Logf("fetching %s-%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			at := rkAck{r.Partition, r.Offset}
			if prev, ok := seen[string(r.Value)]; ok {
				dups = append(dups, fmt.Sprintf("%s at %d/%d and %d/%d", r.Value, prev.partition, prev.offset, at.partition, at.offset))
			}
			seen[string(r.Value)] = at
			next[r.Partition] = r.Offset + 1
		})
		for p, end := range ends {
			if next[p] < end {
				return fmt.Errorf("%s-%d read up to %d of %d", rkTopic, p, next[p], end)
			}
		}
		return nil
	})
	if len(dups) > 0 {
		t.Errorf("%d values read twice, e.g. %v", len(dups), dups[:min(len(dups), 10)])
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	var missing, moved []string
	for v, at := range led.acked {
		got, ok := seen[v]
		switch {
		case !ok:
			missing = append(missing, fmt.Sprintf("%s (acknowledged at %d/%d)", v, at.partition, at.offset))
		case got != at:
			moved = append(moved, fmt.Sprintf("%s acknowledged at %d/%d, read at %d/%d", v, at.partition, at.offset, got.partition, got.offset))
		}
	}
	slices.Sort(missing)
	slices.Sort(moved)
	if len(missing) > 0 {
		t.Errorf("%d of %d acknowledged records missing, e.g. %v", len(missing), len(led.acked), missing[:min(len(missing), 10)])
	}
	if len(moved) > 0 {
		t.Errorf("%d of %d acknowledged records at another offset, e.g. %v", len(moved), len(led.acked), moved[:min(len(moved), 10)])
	}
	t.Logf("read %d records (%d acknowledged, all checked)", len(seen), len(led.acked))
}

// rkBatch is one record batch of a log on disk.
type rkBatch struct {
	base, last int64
	epoch      int32
	raw        []byte
}

// rkReadLog reads the whole partition log in dir (its node stopped) as
// batches, with its start and end offsets.
func rkReadLog(dir string) (start, end int64, out []rkBatch, err error) {
	l, err := storage.Open(dir, storage.DefaultConfig())
	if err != nil {
		return 0, 0, nil, err
	}
	defer l.Close()
	start, end = l.LogStartOffset(), l.LogEndOffset()
	for off := start; off < end; {
		buf, _, err := l.Read(off, 1<<20, end, nil)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("reading %s at %d: %w", dir, off, err)
		}
		if len(buf) == 0 {
			return 0, 0, nil, fmt.Errorf("reading %s at %d: nothing before the log end %d", dir, off, end)
		}
		for pos := 0; pos < len(buf); {
			// The RecordBatch header: baseOffset int64, batchLength
			// int32, partitionLeaderEpoch int32, magic int8, crc
			// int32, attributes int16, lastOffsetDelta int32.
			if len(buf)-pos < 27 {
				return 0, 0, nil, fmt.Errorf("%s at byte %d of the read at %d: a torn batch header", dir, pos, off)
			}
			n := 12 + int(int32(binary.BigEndian.Uint32(buf[pos+8:])))
			if n < 27 || pos+n > len(buf) {
				return 0, 0, nil, fmt.Errorf("%s at byte %d of the read at %d: batch length %d", dir, pos, off, n)
			}
			b := rkBatch{
				base:  int64(binary.BigEndian.Uint64(buf[pos:])),
				epoch: int32(binary.BigEndian.Uint32(buf[pos+12:])),
				raw:   buf[pos : pos+n],
			}
			b.last = b.base + int64(int32(binary.BigEndian.Uint32(buf[pos+23:])))
			out = append(out, b)
			off, pos = b.last+1, pos+n
		}
	}
	return start, end, out, nil
}

// rkCheckReplicas compares each partition's three copies on disk: the
// same start and end, ends being the high watermarks, and the same
// batches byte for byte.
func rkCheckReplicas(t *testing.T, c *serveCluster, ends map[int32]int64) {
	t.Helper()
	checkReplicasOf(t, c, rkTopic, ends)
}

// checkReplicasOf is rkCheckReplicas for topic, whose partitions are
// those of ends.
func checkReplicasOf(t *testing.T, c *serveCluster, topic string, ends map[int32]int64) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(ends)) {
		var ref []rkBatch
		var refStart int64
		for i := range c.args {
			dir := filepath.Join(overrideValue(c.args[i], "log.dirs"), topic+"-"+strconv.Itoa(int(p)))
			start, end, batches, err := rkReadLog(dir)
			if err != nil {
				t.Errorf("node %d: %v", i+1, err)
				continue
			}
			if end != ends[p] {
				t.Errorf("%s-%d on node %d: log end %d, high watermark %d", topic, p, i+1, end, ends[p])
			}
			if i == 0 {
				ref, refStart = batches, start
				t.Logf("%s-%d: %d batches, offsets [%d, %d)", topic, p, len(batches), start, end)
				continue
			}
			if start != refStart {
				t.Errorf("%s-%d on node %d: log start %d, node 1's %d", topic, p, i+1, start, refStart)
			}
			if d := rkDiverge(ref, batches); d != "" {
				t.Errorf("%s-%d on node %d differs from node 1's: %s", topic, p, i+1, d)
			}
		}
	}
}

// rkDiverge describes the first difference of two logs' batches, "" when
// they are the same.
func rkDiverge(a, b []rkBatch) string {
	for i := range min(len(a), len(b)) {
		x, y := a[i], b[i]
		if x.base != y.base || x.last != y.last || x.epoch != y.epoch || string(x.raw) != string(y.raw) {
			return fmt.Sprintf("batch %d: [%d, %d] epoch %d (%d bytes) against [%d, %d] epoch %d (%d bytes)",
				i, x.base, x.last, x.epoch, len(x.raw), y.base, y.last, y.epoch, len(y.raw))
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d batches against %d", len(a), len(b))
	}
	return ""
}

// rkTail is the last n lines of s.
func rkTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
