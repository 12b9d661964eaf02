package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testutil"
)

// The network fault tests of replication (issue 21: "a network partition
// isolating the leader, built with network namespaces and veth pairs: the
// isolated leader acknowledges no acks=all write once it can no longer
// reach the ISR; after healing, no acknowledged write is lost and no
// replica diverges"; "a slow follower (throttled, e.g. tc on a veth)
// leaves the ISR and rejoins"). Each of three `kmirror serve` children
// runs in its own network namespace, linked by a veth pair to a bridge in
// the test's namespace, which holds an address on the same /24: the test
// reaches every node, and the nodes reach each other, through the bridge.
//
//	root namespace: bridge kmb<sfx> 10.A.B.254/24
//	  |-- kmv<sfx>n1 <-veth-> kmp<sfx>n1 10.A.B.1 (namespace kmn<sfx>-1: node 1)
//	  |-- kmv<sfx>n2 <-veth-> kmp<sfx>n2 10.A.B.2 (namespace kmn<sfx>-2: node 2)
//	  `-- kmv<sfx>n3 <-veth-> kmp<sfx>n3 10.A.B.3 (namespace kmn<sfx>-3: node 3)
//
// The kernel these tests run on may lack netem and most tc classifiers
// (CI's does); they use only what it has: neighbour entries for a silent
// partition, htb with a u32 filter for a throttle.

// Each node's ports on its own address.
const (
	nnClientPort = 9092
	nnCtlPort    = 9093
	// nnLagMs is replica.lag.time.max.ms: short, so that a follower
	// that cannot keep up leaves the ISR within seconds.
	nnLagMs = 3000
)

// nnBogusMAC is the link address a cut node's neighbour entries point
// to: no interface on the bridge has it, so frames to it are dropped
// silently (every port sees them flooded and none takes them), as
// packets are in a real partition.
const nnBogusMAC = "02:00:00:00:00:01"

// nnSubnets serializes the choice of a free subnet among the tests of
// this process.
var nnSubnets sync.Mutex

// netnsNet is the network of a test cluster: three namespaces on a
// bridge, removed when the test ends.
type netnsNet struct {
	t      *testing.T
	sfx    string
	prefix string // "10.A.B."
}

// netnsTools fails the test under CI (skips it elsewhere) when ip or tc
// is missing or the test may not create namespaces: .ci/run installs
// iproute2 and runs as root.
func netnsTools(t *testing.T) {
	t.Helper()
	var missing []string
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, fmt.Sprintf("%s not installed (.ci/run installs it: apt-get install iproute2): %v", tool, err))
		}
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "network namespaces need root (CAP_NET_ADMIN)")
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(strings.Join(missing, "; "))
	}
	t.Skip(strings.Join(missing, "; ") + "; skipping outside CI")
}

// nnRun runs a command (ip or tc) and fails the test with its output
// when it fails.
func nnRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// newNetnsNet builds the network, its names unique to this process and
// test (the suffix holds the pid and a random number), its subnet one no
// interface of the test's namespace is on.
func newNetnsNet(t *testing.T) *netnsNet {
	t.Helper()
	netnsTools(t)
	n := &netnsNet{t: t, sfx: fmt.Sprintf("%d%03d", os.Getpid()%100000, rand.IntN(1000))}
	nnSubnets.Lock()
	defer nnSubnets.Unlock()
	out, err := exec.Command("ip", "-4", "-o", "addr").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -4 -o addr: %v\n%s", err, out)
	}
	for range 100 {
		p := fmt.Sprintf("10.%d.%d.", 64+rand.IntN(64), rand.IntN(256))
		if !strings.Contains(string(out), " "+p) {
			n.prefix = p
			break
		}
	}
	if n.prefix == "" {
		t.Fatal("no free 10.x.y.0/24 subnet in 100 tries")
	}
	br := "kmb" + n.sfx
	// Registered before anything exists: a failure half way still
	// removes what was made. The veth pairs go by their ends here (a
	// deleted namespace takes its ends with it only once the kernel
	// frees it, which a run once left pending for minutes).
	t.Cleanup(func() {
		for id := 1; id <= 3; id++ {
			exec.Command("ip", "link", "del", n.hostVeth(id)).Run()
			exec.Command("ip", "netns", "del", n.ns(id)).Run()
		}
		exec.Command("ip", "link", "del", br).Run()
	})
	nnRun(t, "ip", "link", "add", br, "type", "bridge")
	nnRun(t, "ip", "addr", "add", n.prefix+"254/24", "dev", br)
	nnRun(t, "ip", "link", "set", br, "up")
	for id := 1; id <= 3; id++ {
		ns := n.ns(id)
		nnRun(t, "ip", "netns", "add", ns)
		nnRun(t, "ip", "link", "add", n.hostVeth(id), "type", "veth", "peer", "name", n.nodeVeth(id), "netns", ns)
		nnRun(t, "ip", "link", "set", n.hostVeth(id), "master", br, "up")
		nnRun(t, "ip", "-n", ns, "link", "set", "lo", "up")
		nnRun(t, "ip", "-n", ns, "addr", "add", n.addr(id)+"/24", "dev", n.nodeVeth(id))
		nnRun(t, "ip", "-n", ns, "link", "set", n.nodeVeth(id), "up")
	}
	return n
}

func (n *netnsNet) ns(id int) string       { return fmt.Sprintf("kmn%s-%d", n.sfx, id) }
func (n *netnsNet) hostVeth(id int) string { return fmt.Sprintf("kmv%sn%d", n.sfx, id) }
func (n *netnsNet) nodeVeth(id int) string { return fmt.Sprintf("kmp%sn%d", n.sfx, id) }
func (n *netnsNet) addr(id int) string     { return n.prefix + strconv.Itoa(id) }

// cut isolates node id from the two other nodes, both ways, silently:
// their neighbour entries for each other point to nnBogusMAC. The test's
// namespace (the bridge's address) still reaches every node.
func (n *netnsNet) cut(id int) {
	n.t.Helper()
	for other := 1; other <= 3; other++ {
		if other == id {
			continue
		}
		nnRun(n.t, "ip", "-n", n.ns(id), "neigh", "replace", n.addr(other), "lladdr", nnBogusMAC, "nud", "permanent", "dev", n.nodeVeth(id))
		nnRun(n.t, "ip", "-n", n.ns(other), "neigh", "replace", n.addr(id), "lladdr", nnBogusMAC, "nud", "permanent", "dev", n.nodeVeth(other))
	}
}

// heal undoes cut(id): the entries go, ARP finds the real ones again.
func (n *netnsNet) heal(id int) {
	n.t.Helper()
	for other := 1; other <= 3; other++ {
		if other == id {
			continue
		}
		nnRun(n.t, "ip", "-n", n.ns(id), "neigh", "del", n.addr(other), "dev", n.nodeVeth(id))
		nnRun(n.t, "ip", "-n", n.ns(other), "neigh", "del", n.addr(id), "dev", n.nodeVeth(other))
	}
}

// throttle limits to rate what reaches node id from the other nodes'
// client ports (the replica fetch responses it gets as a follower):
// htb on the bridge side of its veth, a u32 filter on the source port.
// Everything else (the metadata log and heartbeats on the CONTROLLER
// port, the test's requests) passes at full speed, so that the node
// stays unfenced and leaves the ISRs by lagging alone.
func (n *netnsNet) throttle(id int, rate string) {
	n.t.Helper()
	dev := n.hostVeth(id)
	n.t.Cleanup(func() {
		if n.t.Failed() {
			out, _ := exec.Command("tc", "-s", "class", "show", "dev", dev).CombinedOutput()
			n.t.Logf("tc -s class show dev %s:\n%s", dev, out)
		}
	})
	nnRun(n.t, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "20")
	nnRun(n.t, "tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate", rate)
	nnRun(n.t, "tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:20", "htb", "rate", "10gbit")
	nnRun(n.t, "tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
		"u32", "match", "ip", "sport", strconv.Itoa(nnClientPort), "0xffff", "classid", "1:10")
}

// unthrottle removes throttle(id).
func (n *netnsNet) unthrottle(id int) {
	n.t.Helper()
	nnRun(n.t, "tc", "qdisc", "del", "dev", n.hostVeth(id), "root")
}

// startNetnsCluster starts three nodes, node i in n's namespace i on
// its own address (fixed ports: the address is the node's alone), with
// short sessions, a short replica.lag.time.max.ms and extra on every
// command line, and waits until all serve.
func startNetnsCluster(t *testing.T, n *netnsNet, extra ...string) *serveCluster {
	t.Helper()
	c := &serveCluster{t: t, args: make([][]string, 3), procs: make([]*serveProc, 3), addrs: make([]string, 3), wrap: make([][]string, 3)}
	var voters []string
	for id := 1; id <= 3; id++ {
		voters = append(voters, fmt.Sprintf("%d@%s:%d", id, n.addr(id), nnCtlPort))
	}
	for i := range c.args {
		a := n.addr(i + 1)
		listeners := fmt.Sprintf("PLAINTEXT://%s:%d,CONTROLLER://%s:%d", a, nnClientPort, a, nnCtlPort)
		c.args[i] = append(clusterSettings(i+1, listeners, strings.Join(voters, ",")),
			"--override", "broker.session.timeout.ms="+strconv.Itoa(clusterSessionMs),
			"--override", "broker.heartbeat.interval.ms="+strconv.Itoa(clusterHeartbeatMs),
			"--override", "replica.lag.time.max.ms="+strconv.Itoa(nnLagMs),
			"--override", "log.dirs="+t.TempDir(), "--override", "metrics.listener=", "--log-level", "info")
		c.args[i] = append(c.args[i], extra...)
		c.wrap[i] = []string{"ip", "netns", "exec", n.ns(i + 1)}
		c.procs[i] = c.launchWrapped(c.wrap[i], c.args[i])
	}
	for i, p := range c.procs {
		c.addrs[i] = p.waitServing(t, clusterBound)
	}
	return c
}

// nnCheckHealed waits for full ISRs, stops the producers, and checks
// that every acknowledged record is read back once at its offset and
// that the three copies of each partition on disk are the same bytes.
func nnCheckHealed(t *testing.T, ctx context.Context, c *serveCluster, ps *rkWriters) {
	t.Helper()
	c.waitFullISR(ctx, rkTopic, clusterBound)
	ps.stop()
	acked, failed := ps.led.counts()
	p50, most := ps.led.latencies()
	t.Logf("%d acknowledged (latency p50 %v, max %v), %d failed", acked, p50, most, failed)
	c.waitFullISR(ctx, rkTopic, clusterBound)
	ends := rkSettledEnds(t, ctx, c)
	t.Logf("high watermarks %v", ends)
	rkCheckRead(t, ctx, c, ps.led, ends)
	for _, id := range []int32{1, 2, 3} {
		if err := c.signal(id, syscall.SIGTERM, 20*time.Second); err != nil {
			t.Fatalf("node %d after SIGTERM: %v\n%s", id, err, c.procs[id-1].stderr.String())
		}
	}
	rkCheckReplicas(t, c, ends)
}

// errNotTheIsolatedNode is the probe's dial error for any other node.
var errNotTheIsolatedNode = errors.New("the probe talks to the isolated node only")

// nnProbe is an acks=all producer that can reach one node only (its
// dialer refuses every other address), so that it keeps writing to that
// node while the node believes it leads, whatever the other nodes say.
type nnProbe struct {
	cl *kgo.Client
	n  atomic.Int64
}

func newNNProbe(t *testing.T, addr string) *nnProbe {
	t.Helper()
	var d net.Dialer
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(rkTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(), kgo.ProduceRequestTimeout(2*time.Second),
		kgo.RecordDeliveryTimeout(4*time.Second),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if host != addr {
				return nil, fmt.Errorf("dialing %s: %w", host, errNotTheIsolatedNode)
			}
			return d.DialContext(ctx, network, host)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &nnProbe{cl: cl}
}

// produce writes one record "probe-<n>" to partition p and waits for
// its outcome: its offset, or the error.
func (pr *nnProbe) produce(ctx context.Context, p int32) (string, int64, error) {
	v := "probe-" + strconv.FormatInt(pr.n.Add(1), 10)
	r, err := pr.cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(v)}).First()
	if err != nil {
		return v, -1, err
	}
	return v, r.Offset, nil
}

// The leader of a partition is cut off from the two other nodes (a
// silent partition: its packets to them, and theirs to it, go nowhere)
// while the test's namespace still reaches it. Before the cut a probe
// that talks to that node alone gets its acks=all writes acknowledged;
// from a moment after the cut on, it must get none (the node can reach
// no follower of its ISR, nor the controller to shrink it), while the
// majority side fences the node, elects another leader from the ISR and
// goes on acknowledging the producers' writes. Healed, the node rejoins:
// every acknowledged record is there once at its offset and the copies
// on disk are byte-identical (the isolated node cut its unacknowledged
// tail).
func TestNetnsPartitionIsolatesTheLeader(t *testing.T) {
	t.Parallel()
	began := time.Now()
	n := newNetnsNet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Second)
	defer cancel()
	c := startNetnsCluster(t, n)
	c.waitBrokers(ctx, 1, 2, 3)
	c.createWith(ctx, c.controller(ctx), rkTopic, rkParts, 3, map[string]string{"min.insync.replicas": "2"})
	c.waitFullISR(ctx, rkTopic, clusterBound)
	t.Logf("cluster up in namespaces %s..., subnet %s0/24, %s created with full ISRs: %v",
		n.ns(1), n.prefix, rkTopic, time.Since(began).Round(time.Millisecond))

	leaders, err := c.leaders(ctx, 1, rkTopic)
	if err != nil {
		t.Fatal(err)
	}
	const p = 0
	victim := leaders[p]
	probe := newNNProbe(t, c.addrs[victim-1])
	if v, off, err := probe.produce(ctx, p); err != nil {
		t.Fatalf("node %d, leader of %s-%d, before the cut: probe %s: %v, want it acknowledged", victim, rkTopic, p, v, err)
	} else {
		t.Logf("before the cut node %d acknowledged probe %s at %s-%d@%d", victim, v, rkTopic, p, off)
	}

	ps := startRKWriters(t, ctx, c)
	ps.waitAcked("before the cut", 200)

	n.cut(int(victim))
	cutAt := time.Now()
	ackedAtCut, _ := ps.led.counts()
	t.Logf("node %d (leader of %s-%d) cut off from the other nodes with %d acknowledged", victim, rkTopic, p, ackedAtCut)
	// Whatever the node sent before the cut may still reach a
	// follower: a write sent after this grace cannot.
	const grace = 500 * time.Millisecond
	time.Sleep(grace)

	// The probes run for three sessions after the cut (the majority
	// side fences the node and elects another leader meanwhile) and
	// until at least three reached the node. A probe whose client tried
	// another node (a metadata refresh) fails at the dialer: it reached
	// nothing and counts for nothing.
	probesDone := make(chan struct{})
	var probes, refused []string
	var acknowledged []string
	go func() {
		defer close(probesDone)
		for ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 8*time.Second)
			v, off, err := probe.produce(pctx, p)
			pcancel()
			probes = append(probes, v)
			switch {
			case err == nil:
				acknowledged = append(acknowledged, fmt.Sprintf("%s at %d (%v after the cut)", v, off, time.Since(cutAt).Round(time.Millisecond)))
			case errors.Is(err, errNotTheIsolatedNode):
				refused = append(refused, v)
			default:
				if len(probes) <= 3 {
					t.Logf("probe %s: %v (as it should, %v after the cut)", v, err, time.Since(cutAt).Round(time.Millisecond))
				}
			}
			if len(probes)-len(refused) >= 3 && time.Since(cutAt) > 3*time.Duration(clusterSessionMs)*time.Millisecond {
				return
			}
		}
	}()

	others := slices.DeleteFunc([]int32{1, 2, 3}, func(id int32) bool { return id == victim })
	saved := c.addrs[victim-1]
	c.addrs[victim-1] = "" // c.up() is the majority side for the waits below
	c.waitBrokers(ctx, others...)
	var next int32
	testutil.CheckFor(t, clusterBound, func() error {
		got, err := c.leaders(ctx, others[0], rkTopic)
		if err != nil {
			return err
		}
		if next = got[p]; next <= 0 || next == victim {
			return fmt.Errorf("%s-%d led by %d on the majority side, want one of %v", rkTopic, p, next, others)
		}
		return nil
	})
	t.Logf("majority side fenced node %d and elected node %d leader of %s-%d %v after the cut",
		victim, next, rkTopic, p, time.Since(cutAt).Round(time.Millisecond))
	afterElection, _ := ps.led.counts()
	// Up to the producers' RetryTimeout (clusterBound) and then some: a
	// producer whose metadata came from the isolated node (which still
	// answers as the leader) retries its batches there until then, and
	// an idempotent producer resets its epoch, holding every partition's
	// sends, only once those batches failed (kgo's log: "producer id
	// needs reloading"). Under make test's load that took past 30 s twice.
	ps.waitAckedWithin("on the majority side after the election", afterElection+100, 2*clusterBound)
	// The isolated node still answers the test, and (not knowing the
	// new metadata) still believes it leads.
	c.addrs[victim-1] = saved
	if got, err := c.leaders(ctx, victim, rkTopic); err != nil {
		t.Errorf("the isolated node %d no longer answers the test's Metadata: %v", victim, err)
	} else {
		t.Logf("the isolated node %d's own Metadata of %s: leaders %v", victim, rkTopic, got)
	}
	<-probesDone
	t.Logf("%d probes to the isolated node after the cut: %d acknowledged, %d refused by the probe's dialer", len(probes), len(acknowledged), len(refused))
	if len(acknowledged) > 0 {
		t.Errorf("the isolated node %d acknowledged %d acks=all writes it could not replicate, e.g. %v",
			victim, len(acknowledged), acknowledged[:min(len(acknowledged), 10)])
	}
	if len(probes)-len(refused) < 3 {
		t.Errorf("%d probes reached the isolated node %d, want 3: the check above proves little", len(probes)-len(refused), victim)
	}

	n.heal(int(victim))
	healedAt := time.Now()
	c.waitBrokers(ctx, 1, 2, 3)
	c.waitFullISR(ctx, rkTopic, clusterBound)
	t.Logf("healed: node %d back in every ISR %v later", victim, time.Since(healedAt).Round(time.Millisecond))
	nnCheckHealed(t, ctx, c, ps)
	t.Logf("done in %v", time.Since(began).Round(time.Millisecond))
}

// A follower whose fetches from its leaders are throttled (htb on its
// veth, the leaders' client port only: it stays unfenced) falls behind
// the producers and leaves the ISRs of the partitions it follows within
// replica.lag.time.max.ms; writes go on acknowledged by the two others
// (min.insync.replicas=2). Unthrottled it catches up and rejoins every
// ISR, and the copies on disk are byte-identical.
func TestNetnsSlowFollowerLeavesAndRejoinsTheISR(t *testing.T) {
	t.Parallel()
	began := time.Now()
	n := newNetnsNet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Second)
	defer cancel()
	c := startNetnsCluster(t, n)
	c.waitBrokers(ctx, 1, 2, 3)
	c.createWith(ctx, c.controller(ctx), rkTopic, rkParts, 3, map[string]string{"min.insync.replicas": "2"})
	c.waitFullISR(ctx, rkTopic, clusterBound)
	t.Logf("cluster up in namespaces %s..., subnet %s0/24: %v", n.ns(1), n.prefix, time.Since(began).Round(time.Millisecond))

	leaders, err := c.leaders(ctx, 1, rkTopic)
	if err != nil {
		t.Fatal(err)
	}
	const p = 0
	slow := leaders[p]%3 + 1 // a follower of partition p
	ps := startRKWriters(t, ctx, c)
	ps.waitAcked("before the throttle", 200)
	// The acks=all producers alone would not do: their bounded buffers
	// wait for the slow follower, which then catches up with a leader
	// that has little more, again and again (and stays in the ISR, as
	// in Kafka). A filler writing acks=1 keeps the leader's log ahead.
	stopFiller := nnFiller(t, ctx, c, p)

	n.throttle(int(slow), "16kbit")
	throttledAt := time.Now()
	var isr map[int32][]int32
	testutil.CheckFor(t, clusterBound, func() error {
		var err error
		if _, isr, err = c.rkISR(ctx, leaders[p], rkTopic); err != nil {
			return err
		}
		if slices.Contains(isr[p], slow) {
			return fmt.Errorf("%s-%d's ISR %v still holds the throttled node %d", rkTopic, p, isr[p], slow)
		}
		return nil
	})
	t.Logf("throttled node %d left %s-%d's ISR %v after the throttle (ISRs %v)",
		slow, rkTopic, p, time.Since(throttledAt).Round(time.Millisecond), isr)
	// It left by lagging, not by losing its session: it is still one of
	// the brokers, and the writes go on.
	c.waitBrokers(ctx, 1, 2, 3)
	acked, _ := ps.led.counts()
	ps.waitAcked("with the throttled node out of the ISR", acked+100)

	n.unthrottle(int(slow))
	unthrottledAt := time.Now()
	t.Logf("filler: %d records of %d bytes acknowledged by the leader alone", stopFiller(), nnFillerSize)
	c.waitFullISR(ctx, rkTopic, clusterBound)
	t.Logf("node %d back in every ISR %v after the throttle was lifted", slow, time.Since(unthrottledAt).Round(time.Millisecond))
	nnCheckHealed(t, ctx, c, ps)
	t.Logf("done in %v", time.Since(began).Round(time.Millisecond))
}

// nnFillerSize is the size of each of nnFiller's values.
const nnFillerSize = 4 << 10

// nnFiller writes nnFillerSize-byte values "f-<n>-..." to partition p
// of rkTopic with acks=1, about 200 KiB/s, until the returned stop is
// called; stop returns how many were acknowledged.
func nnFiller(t *testing.T, ctx context.Context, c *serveCluster, p int32) (stop func() int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.DefaultProduceTopic(rkTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	fctx, cancel := context.WithCancel(ctx)
	var acked atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		pad := strings.Repeat("x", nnFillerSize)
		for i := 0; ; i++ {
			select {
			case <-fctx.Done():
				return
			case <-tick.C:
			}
			v := fmt.Sprintf("f-%d-", i)
			cl.Produce(fctx, &kgo.Record{Partition: p, Value: []byte(v + pad[len(v):])}, func(_ *kgo.Record, err error) {
				if err == nil {
					acked.Add(1)
				}
			})
		}
	}()
	return func() int {
		cancel()
		<-done
		return int(acked.Load())
	}
}
