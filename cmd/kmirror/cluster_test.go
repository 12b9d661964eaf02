package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
)

// Three `kmirror serve` processes configured as a Kafka KRaft cluster of
// combined nodes (process.roles=broker,controller, controller.quorum.voters
// naming the three CONTROLLER listeners): they form one cluster from
// empty data dirs, survive a kill -9 of their controller and a SIGTERM
// of another node, and a node whose data is another cluster's refuses to
// start. node/cluster_test.go tests the same cluster in one process; here
// each node is a real process, killed for real.

// Short sessions, so that a dead node is fenced within seconds.
const (
	clusterSessionMs   = 3000
	clusterHeartbeatMs = 300
)

// clusterBound bounds each wait on the cluster (an election, a fencing, a
// restart catching up): several sessions, on a loaded machine.
const clusterBound = 30 * time.Second

// serveCluster is three `kmirror serve` children of one cluster, node
// ids 1 to 3 at index 0 to 2. Each node's data dir and CONTROLLER port
// survive its restarts; its client port (port 0) changes at each.
type serveCluster struct {
	t     *testing.T
	args  [][]string
	procs []*serveProc
	addrs []string // "" while the node is down
	// wrap is each node's command prefix (none when nil), such as the
	// `ip netns exec NS` of a node in its own network namespace.
	wrap [][]string
}

// clusterSettings are node id's settings (--override flags) as a voter
// of a cluster, Kafka's combined mode: listeners holds its CONTROLLER
// listener, voters is controller.quorum.voters.
func clusterSettings(id int, listeners, voters string) []string {
	var args []string
	for _, kv := range []string{
		"process.roles=broker,controller",
		"node.id=" + strconv.Itoa(id),
		"listeners=" + listeners,
		"controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"controller.quorum.voters=" + voters,
	} {
		args = append(args, "--override", kv)
	}
	return args
}

// unusedVoters are three voters nothing listens on, for the settings a
// node refuses before it binds anything.
const unusedVoters = "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3"

// clusterArgs is node id's command line in a test cluster: its client
// listener on port 0, its CONTROLLER listener on ctl, short sessions.
func clusterArgs(id int, voters, ctl, dir string) []string {
	return append(clusterSettings(id, "PLAINTEXT://127.0.0.1:0,CONTROLLER://"+ctl, voters),
		"--override", "broker.session.timeout.ms="+strconv.Itoa(clusterSessionMs),
		"--override", "broker.heartbeat.interval.ms="+strconv.Itoa(clusterHeartbeatMs),
		"--override", "log.dirs="+dir, "--override", "metrics.listener=", "--log-level", "warn")
}

// startServeCluster launches the three nodes at once (each waits for a
// majority of the voters before it serves) and waits until all serve.
func startServeCluster(t *testing.T) *serveCluster {
	t.Helper()
	return startServeClusterWith(t)
}

// startServeClusterWith is startServeCluster with extra arguments
// (--override flags) on every node's command line.
func startServeClusterWith(t *testing.T, extra ...string) *serveCluster {
	t.Helper()
	c := &serveCluster{t: t, args: make([][]string, 3), procs: make([]*serveProc, 3), addrs: make([]string, 3)}
	ctls := []string{testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)}
	var voters []string
	for i, a := range ctls {
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, a))
	}
	for i := range c.args {
		c.args[i] = append(clusterArgs(i+1, strings.Join(voters, ","), ctls[i], t.TempDir()), extra...)
		c.procs[i] = c.launch(c.args[i])
	}
	for i, p := range c.procs {
		c.addrs[i] = p.waitServing(t, clusterBound)
	}
	return c
}

// start starts node id again on its data and waits until it serves.
func (c *serveCluster) start(id int32) {
	c.t.Helper()
	var wrap []string
	if c.wrap != nil {
		wrap = c.wrap[id-1]
	}
	c.procs[id-1] = c.launchWrapped(wrap, c.args[id-1])
	c.addrs[id-1] = c.procs[id-1].waitServing(c.t, clusterBound)
}

// launch is launchServe, the child's stderr checked for data races when
// the test ends (a child built with -race that is killed never reaches
// the race detector's exit status).
func (c *serveCluster) launch(args []string) *serveProc {
	c.t.Helper()
	return c.launchWrapped(nil, args)
}

// launchWrapped is launch with the command prefix wrap (see
// launchServeWrapped).
func (c *serveCluster) launchWrapped(wrap, args []string) *serveProc {
	c.t.Helper()
	var p *serveProc
	// Registered first, run last: after launchServe's cleanup killed
	// the child and Wait copied all its stderr.
	c.t.Cleanup(func() {
		if p != nil {
			p.checkNoRace(c.t)
		}
	})
	p = launchServeWrapped(c.t, wrap, args...)
	return p
}

// signal sends sig to node id and waits up to d for it to exit, returning
// how it exited.
func (c *serveCluster) signal(id int32, sig syscall.Signal, d time.Duration) error {
	c.t.Helper()
	p := c.procs[id-1]
	if err := p.cmd.Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
	c.addrs[id-1] = ""
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-done
		c.t.Fatalf("node %d still running %v after %v:\n%s", id, d, sig, p.stderr.String())
		return nil
	}
}

// up is the ids of the running nodes.
func (c *serveCluster) up() []int32 {
	var ids []int32
	for i, a := range c.addrs {
		if a != "" {
			ids = append(ids, int32(i+1))
		}
	}
	return ids
}

// ask sends req to node id itself (a fresh client's seed broker, with
// opts: kgo would route it to any broker it knows) and returns the
// answer.
func (c *serveCluster) ask(ctx context.Context, id int32, req kmsg.Request, opts ...kgo.Opt) (kmsg.Response, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs[id-1])}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// controller waits until every running node's DescribeCluster names the
// same controller, one of the running nodes, and returns it.
func (c *serveCluster) controller(ctx context.Context) int32 {
	c.t.Helper()
	var ctl int32
	testutil.CheckFor(c.t, clusterBound, func() error {
		seen := map[int32]int32{}
		for _, id := range c.up() {
			resp, err := c.ask(ctx, id, kmsg.NewPtrDescribeClusterRequest())
			if err != nil {
				return fmt.Errorf("DescribeCluster on node %d: %w", id, err)
			}
			r := resp.(*kmsg.DescribeClusterResponse)
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return fmt.Errorf("DescribeCluster on node %d: %w", id, err)
			}
			seen[id] = r.ControllerID
		}
		ctl = seen[c.up()[0]]
		for _, got := range seen {
			if got != ctl || !slices.Contains(c.up(), ctl) {
				return fmt.Errorf("DescribeCluster's ControllerID by node: %v; want one running node (running: %v)", seen, c.up())
			}
		}
		return nil
	})
	return ctl
}

// metadata is node id's own Metadata answer for topics.
func (c *serveCluster) metadata(ctx context.Context, id int32, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := c.ask(ctx, id, req)
	if err != nil {
		return nil, fmt.Errorf("Metadata on node %d: %w", id, err)
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// waitBrokers waits until the Metadata of every running node lists
// exactly the brokers want.
func (c *serveCluster) waitBrokers(ctx context.Context, want ...int32) {
	c.t.Helper()
	testutil.CheckFor(c.t, clusterBound, func() error {
		for _, id := range c.up() {
			md, err := c.metadata(ctx, id)
			if err != nil {
				return err
			}
			var ids []int32
			for _, b := range md.Brokers {
				ids = append(ids, b.NodeID)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, want) {
				return fmt.Errorf("node %d lists brokers %v, want %v", id, ids, want)
			}
		}
		return nil
	})
}

// leaders is topic's partition leaders in node id's Metadata (-1: none),
// or an error while the node does not know the topic.
func (c *serveCluster) leaders(ctx context.Context, id int32, topic string) (map[int32]int32, error) {
	md, err := c.metadata(ctx, id, topic)
	if err != nil {
		return nil, err
	}
	if len(md.Topics) != 1 {
		return nil, fmt.Errorf("node %d: Metadata of %s: %d topics", id, topic, len(md.Topics))
	}
	mt := md.Topics[0]
	if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
		return nil, fmt.Errorf("node %d: Metadata of %s: %w", id, topic, err)
	}
	out := map[int32]int32{}
	for _, p := range mt.Partitions {
		out[p.Partition] = p.Leader
	}
	return out, nil
}

// waitLeaders waits until every running node's Metadata of topic has the
// partitions of want, each led by want's leader (-1: offline).
func (c *serveCluster) waitLeaders(ctx context.Context, topic string, want map[int32]int32) {
	c.t.Helper()
	testutil.CheckFor(c.t, clusterBound, func() error {
		for _, id := range c.up() {
			got, err := c.leaders(ctx, id, topic)
			if err != nil {
				return err
			}
			if !maps.Equal(got, want) {
				return fmt.Errorf("node %d: %s's leaders %v, want %v", id, topic, got, want)
			}
		}
		return nil
	})
}

// createSpread creates topic (6 partitions, RF 1) through node via and
// waits until every running node sees it with leaders on every node
// (two each), returning the leaders.
func (c *serveCluster) createSpread(ctx context.Context, via int32, topic string) map[int32]int32 {
	c.t.Helper()
	c.create(ctx, via, topic)
	var leaders map[int32]int32
	testutil.CheckFor(c.t, clusterBound, func() error {
		var err error
		if leaders, err = c.leaders(ctx, via, topic); err != nil {
			return err
		}
		count := map[int32]int{}
		for _, l := range leaders {
			count[l]++
		}
		if len(leaders) != 6 || count[1] != 2 || count[2] != 2 || count[3] != 2 {
			return fmt.Errorf("%s's leaders %v; want two partitions on each of nodes 1, 2, 3", topic, leaders)
		}
		return nil
	})
	c.waitLeaders(ctx, topic, leaders)
	return leaders
}

// create sends CreateTopics for topic (6 partitions, RF 1) to node via
// itself until it succeeds, within clusterBound.
func (c *serveCluster) create(ctx context.Context, via int32, topic string) {
	c.t.Helper()
	c.createWith(ctx, via, topic, 6, 1, nil)
}

// createWith is create with partitions partitions of rf replicas and
// the topic configs configs.
func (c *serveCluster) createWith(ctx context.Context, via int32, topic string, partitions int32, rf int16, configs map[string]string) {
	c.t.Helper()
	start := time.Now()
	testutil.CheckFor(c.t, clusterBound, func() error {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, rf
		for _, k := range slices.Sorted(maps.Keys(configs)) {
			rc := kmsg.NewCreateTopicsRequestTopicConfig()
			rc.Name, rc.Value = k, kmsg.StringPtr(configs[k])
			rt.Configs = append(rt.Configs, rc)
		}
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 5000
		resp, err := c.ask(ctx, via, req)
		if err != nil {
			return fmt.Errorf("CreateTopics %s on node %d: %w", topic, via, err)
		}
		r := resp.(*kmsg.CreateTopicsResponse).Topics[0]
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil && err != kerr.TopicAlreadyExists {
			var msg string
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			return fmt.Errorf("CreateTopics %s on node %d: %w (%s)", topic, via, err, msg)
		}
		return nil
	})
	c.t.Logf("CreateTopics %s through node %d: %v", topic, via, time.Since(start).Round(time.Millisecond))
}

// offline is leaders with the partitions led by id offline (-1).
func offline(leaders map[int32]int32, id int32) map[int32]int32 {
	out := maps.Clone(leaders)
	for p, l := range out {
		if l == id {
			out[p] = -1
		}
	}
	return out
}

// Three processes form one cluster; kill -9 of the controller elects
// another, whose survivors take CreateTopics; once the dead node's
// session expires its partitions (RF 1) are offline and it is no longer
// listed. Restarted on its data it catches up (the topic created while it
// was down) and leads its partitions again.
func TestServeClusterKill9Controller(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startServeCluster(t)
	c.waitBrokers(ctx, 1, 2, 3)
	old := c.controller(ctx)
	before := c.createSpread(ctx, 1, "before-kill")

	if err := c.signal(old, syscall.SIGKILL, 10*time.Second); err == nil {
		t.Fatalf("node %d exited 0 after kill -9", old)
	}
	killedAt := time.Now()
	next := c.controller(ctx)
	if next == old {
		t.Fatalf("node %d, killed, still the controller", old)
	}
	t.Logf("controller %d killed; %d elected after %v", old, next, time.Since(killedAt).Round(time.Millisecond))
	survivor := slices.DeleteFunc(c.up(), func(id int32) bool { return id == next })[0]
	c.create(ctx, survivor, "during-kill")

	c.waitLeaders(ctx, "before-kill", offline(before, old))
	c.waitBrokers(ctx, slices.DeleteFunc([]int32{1, 2, 3}, func(id int32) bool { return id == old })...)
	t.Logf("node %d's partitions offline %v after the kill", old, time.Since(killedAt).Round(time.Millisecond))
	during, err := c.leaders(ctx, survivor, "during-kill")
	if err != nil {
		t.Fatal(err)
	}
	for p, l := range during {
		if l == old {
			// Placed on a broker whose session had not expired yet:
			// Kafka places new partitions on unfenced brokers only,
			// and so may kmirror; this one is offline until the
			// restart.
			t.Logf("during-kill-%d placed on the dead node %d", p, l)
		}
	}

	c.start(old)
	c.waitBrokers(ctx, 1, 2, 3)
	c.waitLeaders(ctx, "before-kill", before)
	testutil.CheckFor(t, clusterBound, func() error {
		got, err := c.leaders(ctx, old, "during-kill")
		if err != nil {
			return err
		}
		if len(got) != 6 || slices.Contains(slices.Collect(maps.Values(got)), -1) {
			return fmt.Errorf("the restarted node %d sees during-kill's leaders %v, want 6 partitions, each led", old, got)
		}
		return nil
	})
}

// SIGTERM of a node that is not the controller is Kafka's controlled
// shutdown: the process exits 0 within a bound, and its partitions (RF 1:
// nowhere to move) are offline. Started on another cluster's data
// (formatted with another id) the node refuses, naming both ids; started
// again on its own data it leads its partitions again.
func TestServeClusterSIGTERMAndAnotherClustersData(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startServeCluster(t)
	c.waitBrokers(ctx, 1, 2, 3)
	ctl := c.controller(ctx)
	leaders := c.createSpread(ctx, ctl, "sigterm")
	stopped := ctl%3 + 1

	start := time.Now()
	if err := c.signal(stopped, syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("node %d after SIGTERM: %v, want exit 0\n%s", stopped, err, c.procs[stopped-1].stderr.String())
	}
	t.Logf("node %d exited 0 %v after SIGTERM", stopped, time.Since(start).Round(time.Millisecond))
	c.waitLeaders(ctx, "sigterm", offline(leaders, stopped))
	c.waitBrokers(ctx, slices.DeleteFunc([]int32{1, 2, 3}, func(id int32) bool { return id == stopped })...)
	if got := c.controller(ctx); got != ctl {
		t.Fatalf("controller %d after node %d's shutdown, want %d still", got, stopped, ctl)
	}

	clusterID := c.clusterID(ctx, ctl)
	_, out, _ := storageCLI("random-uuid")
	other := strings.TrimSpace(out)
	otherDir := t.TempDir()
	if code, out, errOut := storageCLI("format", "--cluster-id", other, "--log-dirs", otherDir); code != 0 {
		t.Fatalf("storage format --cluster-id %s: exit %d\n%s%s", other, code, out, errOut)
	}
	args := append(slices.Clone(c.args[stopped-1]), "--override", "log.dirs="+otherDir)
	p := c.launch(args)
	select {
	case addr, ok := <-p.serving:
		if ok {
			t.Fatalf("node %d on the data of cluster %s serves on %s in cluster %s", stopped, other, addr, clusterID)
		}
	case <-time.After(clusterBound):
		t.Fatalf("node %d on another cluster's data neither served nor exited within %v:\n%s", stopped, clusterBound, p.stderr.String())
	}
	err := p.cmd.Wait()
	if stderr := p.stderr.String(); err == nil || !strings.Contains(stderr, clusterID) || !strings.Contains(stderr, other) {
		t.Fatalf("node %d on the data of cluster %s joining cluster %s: exit %v; want a failure naming both ids:\n%s",
			stopped, other, clusterID, err, stderr)
	}
	c.waitLeaders(ctx, "sigterm", offline(leaders, stopped))

	c.start(stopped)
	c.waitBrokers(ctx, 1, 2, 3)
	c.waitLeaders(ctx, "sigterm", leaders)
}

// clusterID is the cluster id in node id's DescribeCluster.
func (c *serveCluster) clusterID(ctx context.Context, id int32) string {
	c.t.Helper()
	resp, err := c.ask(ctx, id, kmsg.NewPtrDescribeClusterRequest())
	if err != nil {
		c.t.Fatalf("DescribeCluster on node %d: %v", id, err)
	}
	return resp.(*kmsg.DescribeClusterResponse).ClusterID
}

// SIGTERM stops a voter still waiting for a majority of its quorum at
// once, rather than after the wait's bound.
func TestServeSIGTERMWhileWaitingForTheQuorum(t *testing.T) {
	t.Parallel()
	ctl := testutil.FreeAddr(t)
	voters := "1@" + ctl + ",2@" + testutil.FreeAddr(t) + ",3@" + testutil.FreeAddr(t)
	p := launchServe(t, clusterArgs(1, voters, ctl, t.TempDir())...)
	time.Sleep(time.Second) // it binds, and waits for voters that never come
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit %v, want status 1 (it never served)", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15 s after SIGTERM:\n%s", p.stderr.String())
	}
	if out := p.stderr.String(); !strings.Contains(out, "waiting for the metadata quorum") {
		t.Fatalf("stderr does not say what it was waiting for:\n%s", out)
	}
}

// A fourth `kmirror serve`, broker-only (process.roles=broker, no
// CONTROLLER listener), joins the three voters: every node lists it, a
// topic created through it is there, and it takes its share of
// leaderships. It follows the log across kill -9 of the controller, and
// restarted after its own kill -9 it catches up with what changed while
// it was down.
func TestServeClusterBrokerOnlyNode(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startServeCluster(t)
	voters := ""
	for i := range c.args {
		if v := overrideValue(c.args[i], "controller.quorum.voters"); v != "" {
			voters = v
		}
	}
	args := []string{"--override", "process.roles=broker", "--override", "node.id=4",
		"--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "controller.listener.names=CONTROLLER",
		"--override", "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"--override", "controller.quorum.voters=" + voters,
		"--override", "broker.session.timeout.ms=" + strconv.Itoa(clusterSessionMs),
		"--override", "broker.heartbeat.interval.ms=" + strconv.Itoa(clusterHeartbeatMs),
		"--override", "log.dirs=" + t.TempDir(), "--override", "metrics.listener=", "--log-level", "warn"}
	c.args, c.procs, c.addrs = append(c.args, args), append(c.procs, nil), append(c.addrs, "")
	c.start(4)
	c.waitBrokers(ctx, 1, 2, 3, 4)

	c.create(ctx, 4, "via-broker")
	testutil.CheckFor(t, clusterBound, func() error {
		leaders, err := c.leaders(ctx, 4, "via-broker")
		if err != nil {
			return err
		}
		if !slices.Contains(slices.Collect(maps.Values(leaders)), 4) {
			return fmt.Errorf("via-broker's leaders %v: none on the broker-only node", leaders)
		}
		return nil
	})

	ctl := c.controller(ctx)
	if err := c.signal(ctl, syscall.SIGKILL, 10*time.Second); err == nil {
		t.Fatalf("node %d exited 0 after kill -9", ctl)
	}
	c.create(ctx, 4, "after-controller-kill")
	c.start(ctl)

	if err := c.signal(4, syscall.SIGKILL, 10*time.Second); err == nil {
		t.Fatal("node 4 exited 0 after kill -9")
	}
	c.create(ctx, c.controller(ctx), "while-broker-down")
	c.start(4)
	c.waitBrokers(ctx, 1, 2, 3, 4)
	for _, topic := range []string{"via-broker", "after-controller-kill", "while-broker-down"} {
		testutil.CheckFor(t, clusterBound, func() error {
			_, err := c.leaders(ctx, 4, topic)
			return err
		})
	}
}

// overrideValue is the value args override key with, "" without one.
func overrideValue(args []string, key string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--override" && strings.HasPrefix(args[i+1], key+"=") {
			return strings.TrimPrefix(args[i+1], key+"=")
		}
	}
	return ""
}
