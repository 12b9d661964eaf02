// Package benchcluster starts the two 3-node clusters the cluster
// benchmarks compare on one machine (perf/cluster, the metadata quorum;
// perf/replication, RF 3 produce and consume): three `kmirror serve`
// children of one quorum, and Apache Kafka's combined KRaft cluster
// through internal/realkafka, each given the benchmark's props beyond
// its defaults, behind one Cluster interface.
package benchcluster

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
	Kmirror = "kmirror"
	Kafka   = "kafka"
)

// AllSystems are the systems a benchmark compares.
var AllSystems = []string{Kmirror, Kafka}

// Cluster is a running 3-node cluster of one system: every node broker
// and controller, a voter of the metadata quorum. Node ids are 1 to 3.
type Cluster interface {
	Name() string
	Version() string
	IDs() []int32
	// addr is node id's client (PLAINTEXT) listener.
	Addr(id int32) string
	// running reports whether node id's process runs.
	Running(id int32) bool
	// kill ends node id's process with SIGKILL and waits for it to exit.
	Kill(id int32) error
	// restart starts node id again on its data and ports and returns once
	// it serves.
	Restart(ctx context.Context, id int32) error
	// pids are the running nodes' process ids.
	PIDs() []int
	Close() error
}

// kafkaCluster is Apache Kafka through internal/realkafka.
type kafkaCluster struct{ c *realkafka.Cluster }

// startKafka starts a 3-node combined KRaft cluster with Kafka's own JVM
// options (kafka-run-class.sh) and heapMB each. It tries three times: a
// JVM start on a loaded 2-core machine sometimes misses the deadline.
func StartKafka(dir string, heapMB int, props map[string]string) (Cluster, error) {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		d := filepath.Join(dir, fmt.Sprintf("attempt-%d", attempt))
		var c *realkafka.Cluster
		c, err = realkafka.StartCluster(3, realkafka.Config{Version: realkafka.Newest, HeapMB: heapMB, Dir: d,
			JVM: realkafka.KafkaRunClassJVM, Props: props})
		if err == nil {
			return &kafkaCluster{c}, nil
		}
		os.RemoveAll(d)
	}
	return nil, fmt.Errorf("starting Kafka: %w", err)
}

func (k *kafkaCluster) Name() string         { return Kafka }
func (k *kafkaCluster) Version() string      { return "Apache Kafka " + k.c.Version() }
func (k *kafkaCluster) IDs() []int32         { return []int32{1, 2, 3} }
func (k *kafkaCluster) Addr(id int32) string { return k.c.Node(id).Addr() }
func (k *kafkaCluster) Running(id int32) bool {
	return k.c.Node(id).Running()
}
func (k *kafkaCluster) Kill(id int32) error { return k.c.Node(id).Kill() }
func (k *kafkaCluster) Restart(_ context.Context, id int32) error {
	return k.c.Node(id).Restart()
}
func (k *kafkaCluster) Close() error { return k.c.Close() }

func (k *kafkaCluster) PIDs() []int {
	var out []int
	for _, n := range k.c.Nodes() {
		if n.Running() {
			out = append(out, n.PID())
		}
	}
	return out
}

// kmirrorCluster is three `kmirror serve` children of one quorum, set up
// with the server.properties of README "Running a cluster". Child
// processes rather than node.Start in this process: Kafka's nodes are
// JVM processes of their own, the controller must be killable with
// SIGKILL, and this process's client work stays out of the nodes' CPU.
type kmirrorCluster struct {
	bin, dir, ver string
	logLevel      string // kmirror serve --log-level
	keep          bool   // Close leaves dir (the nodes' logs)
	props         map[string]string
	ports         []int // PLAINTEXT, CONTROLLER of node 1, then of node 2, 3
	nodes         []*kmirrorNode
}

// kmirrorNode is one `kmirror serve` child.
type kmirrorNode struct {
	cmd    *exec.Cmd
	exited chan struct{}
	addr   string
	log    string
}

func StartKmirror(ctx context.Context, bin, dir, logLevel string, keep bool, props map[string]string) (Cluster, error) {
	ports, err := FreePorts(6)
	if err != nil {
		return nil, err
	}
	k := &kmirrorCluster{bin: bin, dir: dir, logLevel: logLevel, keep: keep, props: props, ports: ports, nodes: make([]*kmirrorNode, 3)}
	if out, err := exec.CommandContext(ctx, bin, "version").Output(); err == nil {
		k.ver = strings.TrimSpace(string(out))
	}
	// The nodes start together: none serves before a majority of the
	// voters has elected a controller.
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for _, id := range k.IDs() {
		wg.Go(func() { k.nodes[id-1], errs[id-1] = k.start(ctx, id) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		k.Close()
		return nil, err
	}
	return k, nil
}

func (k *kmirrorCluster) Name() string    { return Kmirror }
func (k *kmirrorCluster) Version() string { return k.ver }
func (k *kmirrorCluster) IDs() []int32    { return []int32{1, 2, 3} }
func (k *kmirrorCluster) Addr(id int32) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(k.ports[2*(id-1)]))
}
func (k *kmirrorCluster) Running(id int32) bool { return k.nodes[id-1] != nil }

func (k *kmirrorCluster) PIDs() []int {
	var out []int
	for _, n := range k.nodes {
		if n != nil {
			out = append(out, n.cmd.Process.Pid)
		}
	}
	return out
}

// args are node id's `kmirror serve` arguments: README "Running a
// cluster"'s settings, plus the benchmark's props.
func (k *kmirrorCluster) args(id int32) []string {
	var voters []string
	for _, v := range k.IDs() {
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
	for key, v := range k.props {
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

func (k *kmirrorCluster) Kill(id int32) error {
	n := k.nodes[id-1]
	if n == nil {
		return fmt.Errorf("kmirror node %d is not running", id)
	}
	n.stop(syscall.SIGKILL)
	k.nodes[id-1] = nil
	return nil
}

func (k *kmirrorCluster) Restart(ctx context.Context, id int32) error {
	if k.nodes[id-1] != nil {
		k.nodes[id-1].stop(syscall.SIGTERM)
		k.nodes[id-1] = nil
	}
	n, err := k.start(ctx, id)
	if err != nil {
		return err
	}
	k.nodes[id-1] = n
	return nil
}

// close kills every node (as realkafka's Cluster.Close does: the data
// goes anyway) and removes the cluster's directory unless kept.
func (k *kmirrorCluster) Close() error {
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
func FreePorts(n int) ([]int, error) {
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
