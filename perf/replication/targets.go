package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/internal/realkafka"
	"github.com/kmirror/kmirror/perf/internal/benchrun"
)

// The systems, in the order the first round runs them.
const (
	systemKmirror = "kmirror"
	systemKafka   = "kafka"
)

var allSystems = []string{systemKmirror, systemKafka}

// cluster is a running 3-node cluster of one system: every node broker
// and controller, a voter of the metadata quorum. Node ids are 1 to 3.
type cluster interface {
	name() string
	version() string
	ids() []int32
	// addr is node id's client (PLAINTEXT) listener.
	addr(id int32) string
	// pids are the nodes' process ids.
	pids() []int
	close() error
}

// bootstrap is every node's client listener, comma separated, as
// bootstrap.servers takes them.
func bootstrap(c cluster) string {
	var out []string
	for _, id := range c.ids() {
		out = append(out, c.addr(id))
	}
	return strings.Join(out, ",")
}

// sharedProps are what both systems are given beyond their defaults:
// internal/realkafka's Cluster sets the session timeouts for Kafka (a
// dead broker is fenced after 6 s rather than 9 s), so kmirror gets the
// same, and internal/realkafka's group.initial.rebalance.delay.ms=0 (the
// consumer tool's group would wait 3 s before its first fetch otherwise).
// Replication keeps each system's defaults (replica.fetch.*,
// replica.lag.time.max.ms=30000, num.replica.fetchers=1); the topics set
// min.insync.replicas=2 themselves.
var sharedProps = map[string]string{
	"broker.session.timeout.ms":        "6000",
	"broker.heartbeat.interval.ms":     "1000",
	"group.initial.rebalance.delay.ms": "0",
}

// kafkaCluster is Apache Kafka through internal/realkafka.
type kafkaCluster struct{ c *realkafka.Cluster }

// startKafka starts a 3-node combined KRaft cluster with Kafka's own JVM
// options (kafka-run-class.sh) and heapMB each. It tries three times: a
// JVM start on a loaded 2-core machine sometimes misses the deadline.
func startKafka(dir string, heapMB int) (*kafkaCluster, error) {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		d := filepath.Join(dir, fmt.Sprintf("attempt-%d", attempt))
		var c *realkafka.Cluster
		c, err = realkafka.StartCluster(3, realkafka.Config{Version: realkafka.Newest, HeapMB: heapMB, Dir: d,
			JVM: realkafka.KafkaRunClassJVM, Props: sharedProps})
		if err == nil {
			return &kafkaCluster{c}, nil
		}
		os.RemoveAll(d)
	}
	return nil, fmt.Errorf("starting Kafka: %w", err)
}

func (k *kafkaCluster) name() string         { return systemKafka }
func (k *kafkaCluster) version() string      { return "Apache Kafka " + k.c.Version() }
func (k *kafkaCluster) ids() []int32         { return []int32{1, 2, 3} }
func (k *kafkaCluster) addr(id int32) string { return k.c.Node(id).Addr() }
func (k *kafkaCluster) close() error         { return k.c.Close() }

func (k *kafkaCluster) pids() []int {
	var out []int
	for _, n := range k.c.Nodes() {
		if n.Running() {
			out = append(out, n.PID())
		}
	}
	return out
}

// kmirrorCluster is three `kmirror serve` children of one quorum, set up
// with the server.properties of README "Running a cluster" (perf/cluster's
// launcher, without its restarts). Child processes rather than node.Start
// in this process: Kafka's nodes are JVM processes of their own, and the
// client tools' JVMs and this process stay out of the nodes' CPU counts.
type kmirrorCluster struct {
	bin, dir, ver string
	logLevel      string // kmirror serve --log-level
	keep          bool   // close leaves dir (the nodes' logs)
	ports         []int  // PLAINTEXT, CONTROLLER of node 1, then of node 2, 3
	nodes         []*kmirrorNode
}

// kmirrorNode is one `kmirror serve` child.
type kmirrorNode struct {
	cmd    *exec.Cmd
	exited chan struct{}
	addr   string
	log    string
}

func startKmirror(ctx context.Context, bin, dir, logLevel string, keep bool) (*kmirrorCluster, error) {
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	k := &kmirrorCluster{bin: bin, dir: dir, logLevel: logLevel, keep: keep, ports: ports, nodes: make([]*kmirrorNode, 3)}
	if out, err := exec.CommandContext(ctx, bin, "version").Output(); err == nil {
		k.ver = strings.TrimSpace(string(out))
	}
	// The nodes start together: none serves before a majority of the
	// voters has elected a controller.
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for _, id := range k.ids() {
		wg.Go(func() { k.nodes[id-1], errs[id-1] = k.start(ctx, id) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		k.close()
		return nil, err
	}
	return k, nil
}

func (k *kmirrorCluster) name() string    { return systemKmirror }
func (k *kmirrorCluster) version() string { return k.ver }
func (k *kmirrorCluster) ids() []int32    { return []int32{1, 2, 3} }
func (k *kmirrorCluster) addr(id int32) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(k.ports[2*(id-1)]))
}

func (k *kmirrorCluster) pids() []int {
	var out []int
	for _, n := range k.nodes {
		if n != nil {
			out = append(out, n.cmd.Process.Pid)
		}
	}
	return out
}

// args are node id's `kmirror serve` arguments: README "Running a
// cluster"'s settings, plus sharedProps.
func (k *kmirrorCluster) args(id int32) []string {
	var voters []string
	for _, v := range k.ids() {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", v, k.ports[2*(v-1)+1]))
	}
	nd := filepath.Join(k.dir, "node-"+strconv.Itoa(int(id)))
	set := []string{
		"process.roles=broker,controller",
		"node.id=" + strconv.Itoa(int(id)),
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", k.ports[2*(id-1)], k.ports[2*(id-1)+1]),
		"controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"controller.quorum.voters=" + strings.Join(voters, ","),
		"log.dirs=" + filepath.Join(nd, "data"),
		"metrics.listener=",
	}
	for key, v := range sharedProps {
		set = append(set, key+"="+v)
	}
	args := []string{"serve", "--log-level", k.logLevel}
	for _, s := range set {
		args = append(args, "--override", s)
	}
	return args
}

// start runs node id and waits for the "kmirror serving on ADDR" line
// that `kmirror serve` prints once node.Start returned (the node joined
// the quorum and is unfenced).
func (k *kmirrorCluster) start(ctx context.Context, id int32) (*kmirrorNode, error) {
	nd := filepath.Join(k.dir, "node-"+strconv.Itoa(int(id)))
	if err := os.MkdirAll(nd, 0o755); err != nil {
		return nil, err
	}
	n := &kmirrorNode{log: filepath.Join(nd, "kmirror.log"), exited: make(chan struct{})}
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	n.cmd = exec.Command(k.bin, k.args(id)...)
	n.cmd.Stderr = logf
	n.cmd.SysProcAttr = childAttr()
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := n.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting kmirror node %d: %w", id, err)
	}
	var waitErr error
	go func() { waitErr = n.cmd.Wait(); logf.Close(); close(n.exited) }()
	addr := benchrun.ServingAddr(stdout)
	select {
	case n.addr = <-addr:
		return n, nil
	case <-n.exited:
		data, _ := os.ReadFile(n.log)
		return nil, fmt.Errorf("kmirror node %d exited before serving (%v):\n%s", id, waitErr, benchrun.Tail(string(data), 3000))
	case <-time.After(2 * time.Minute):
		n.stop(syscall.SIGKILL)
		return nil, fmt.Errorf("kmirror node %d did not serve within 2 minutes", id)
	case <-ctx.Done():
		n.stop(syscall.SIGKILL)
		return nil, ctx.Err()
	}
}

// stop sends sig to n's process group and waits for n to exit.
func (n *kmirrorNode) stop(sig syscall.Signal) {
	syscall.Kill(-n.cmd.Process.Pid, sig)
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.exited
	}
}

// close kills every node (as realkafka's Cluster.Close does: the data
// goes anyway) and removes the cluster's directory unless kept.
func (k *kmirrorCluster) close() error {
	for i, n := range k.nodes {
		if n != nil {
			n.stop(syscall.SIGKILL)
			k.nodes[i] = nil
		}
	}
	if k.keep {
		return nil
	}
	return os.RemoveAll(k.dir)
}

// freePorts picks n free loopback ports (released before use: another
// process could take one in between, and the node then fails loudly).
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
