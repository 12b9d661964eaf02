package realkafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Node is one Kafka process, broker and controller in one JVM (KRaft
// combined mode): a Broker's only node or one of a Cluster's. It keeps its
// ports and directory across Stop, Kill and Restart. Its methods are not
// safe for concurrent use.
type Node struct {
	id           int32
	version      string
	libs         string
	logging      string // the SLF4J binding's jars, "" if libs has one
	heapMB       int
	jvm          []string // JVM options besides the heap
	startTimeout time.Duration
	dir          string
	port, ctrl   int
	props        map[string]string // server.properties

	cmd    *exec.Cmd
	exited chan struct{}
}

// ID is the node's node.id, as Metadata answers name it.
func (n *Node) ID() int32 { return n.id }

// Addr is the node's PLAINTEXT listener.
func (n *Node) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// Dir is the node's directory: server.properties, data/ and broker.log.
func (n *Node) Dir() string { return n.dir }

// PID is the node JVM's process id (for CPU and memory readings).
// REQUIRES: the node is running.
func (n *Node) PID() int { return n.cmd.Process.Pid }

// Running reports whether the node's JVM was started and not stopped or
// killed since (it may have crashed on its own).
func (n *Node) Running() bool { return n.cmd != nil }

// LogTail is the end of the node's broker.log (for test failures).
func (n *Node) LogTail(max int) string {
	data, err := os.ReadFile(filepath.Join(n.dir, "broker.log"))
	if err != nil {
		return err.Error()
	}
	return tail(string(data), max)
}

// baseProps are the server.properties of node id of a cluster whose
// controllers are voters; rf is the replication factor of Kafka's internal
// topics (the consumer offsets, transaction and share state), which must
// not exceed the number of brokers.
func baseProps(id int32, dir string, port, ctrl int, voters string, rf int) map[string]string {
	rfs := strconv.Itoa(rf)
	return map[string]string{
		"process.roles":                                    "broker,controller",
		"node.id":                                          strconv.Itoa(int(id)),
		"controller.quorum.voters":                         voters,
		"listeners":                                        "PLAINTEXT://127.0.0.1:" + strconv.Itoa(port) + ",CONTROLLER://127.0.0.1:" + strconv.Itoa(ctrl),
		"advertised.listeners":                             "PLAINTEXT://127.0.0.1:" + strconv.Itoa(port),
		"controller.listener.names":                        "CONTROLLER",
		"listener.security.protocol.map":                   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs":                                         filepath.Join(dir, "data"),
		"offsets.topic.replication.factor":                 rfs,
		"offsets.topic.num.partitions":                     "4",
		"transaction.state.log.replication.factor":         rfs,
		"transaction.state.log.min.isr":                    "1",
		"transaction.state.log.num.partitions":             "4",
		"share.coordinator.state.topic.replication.factor": rfs,
		"share.coordinator.state.topic.min.isr":            "1",
		"group.initial.rebalance.delay.ms":                 "0",
		"num.partitions":                                   "1",
	}
}

// layout is how newNodes lays out the nodes of one cluster.
type layout struct {
	count int
	dirOf func(id int32) string // each node's directory
	props map[string]string     // over the base properties, under Config.Props
	jvm   []string              // JVM options besides the heap
}

// kafkaJVM are the JVM options of a Broker and of the tools: G1 and every
// JIT tier, as Kafka's own scripts run them (perf/ benchmarks a Broker).
var kafkaJVM = []string{"-XX:+UseG1GC"}

// newNodes lays out l.count nodes of one KRaft cluster, ids 1 to count,
// every one a voter, on free loopback ports.
// REQUIRES: cfg is prepared (Config.prepare).
func newNodes(cfg Config, libs string, l layout) ([]*Node, error) {
	count := l.count
	logging, err := installLogging(cfg.Version)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2 * count)
	if err != nil {
		return nil, err
	}
	var voters []string
	for i := range count {
		voters = append(voters, strconv.Itoa(i+1)+"@127.0.0.1:"+strconv.Itoa(ports[2*i+1]))
	}
	rf := min(count, 3)
	nodes := make([]*Node, count)
	for i := range nodes {
		id := int32(i + 1)
		n := &Node{id: id, version: cfg.Version, libs: libs, logging: logging, heapMB: cfg.HeapMB, jvm: l.jvm,
			startTimeout: cfg.StartTimeout, dir: l.dirOf(id), port: ports[2*i], ctrl: ports[2*i+1]}
		n.props = baseProps(id, n.dir, n.port, n.ctrl, strings.Join(voters, ","), rf)
		maps.Copy(n.props, l.props)
		maps.Copy(n.props, cfg.Props)
		nodes[i] = n
	}
	return nodes, nil
}

// startNodes formats nodes with one new cluster id, starts them all and
// waits until each answers, within StartTimeout. The nodes of a cluster
// start together: none is ready before a majority of the voters runs. On
// error the nodes are killed.
func startNodes(nodes []*Node) error {
	clusterID := randomClusterID()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.format(clusterID) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var err error
	for _, n := range nodes {
		if err = n.launch(); err != nil {
			break
		}
	}
	if err == nil {
		deadline := time.Now().Add(nodes[0].startTimeout)
		for _, n := range nodes {
			if err = n.waitReady(deadline); err != nil {
				break
			}
		}
	}
	if err != nil {
		for _, n := range nodes {
			n.kill()
		}
	}
	return err
}

func (n *Node) propsFile() string { return filepath.Join(n.dir, "server.properties") }

func (n *Node) writeProps() error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(n.props)) {
		fmt.Fprintf(&buf, "%s=%s\n", k, n.props[k])
	}
	if err := os.WriteFile(filepath.Join(n.dir, "log4j.properties"), []byte(log4jProps), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.dir, "log4j2.properties"), []byte(log4j2Props), 0o644); err != nil {
		return err
	}
	return os.WriteFile(n.propsFile(), buf.Bytes(), 0o644)
}

// The broker's log goes to its standard output, broker.log, at INFO, as
// Kafka's own config/log4j*.properties would write server.log: log4j 1
// (reload4j) for the 3.x line, log4j 2 for 4.x. Without a configuration
// the first logs nothing and the second only errors. The configuration
// dumps at start (every config's value, twice) stay out: hundreds of lines
// that push what went wrong out of a log tail.
const (
	log4jProps = `log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka.common.config.AbstractConfig=WARN
`
	log4j2Props = `status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = STDOUT
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = warn
`
)

// format writes the properties and formats the metadata log with
// clusterID, as kafka-storage.sh format does.
func (n *Node) format(clusterID string) error {
	if err := n.writeProps(); err != nil {
		return fmt.Errorf("realkafka: %w", err)
	}
	main, err := Main(n.libs, "kafka-storage")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.startTimeout)
	defer cancel()
	out, err := javaCmd(ctx, []string{n.libs}, n.heapMB, n.jvm, main, "format", "-t", clusterID, "-c", n.propsFile()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("realkafka: formatting Kafka %s node %d: %v\n%s", n.version, n.id, err, tail(string(out), 2000))
	}
	return nil
}

// randomClusterID is a Kafka cluster id: 16 random bytes, base64 URL
// encoding without padding (what kafka-storage.sh random-uuid prints).
// Like Kafka's Uuid.randomUuid, it never starts with '-': the format
// command would read such an id as an option.
func randomClusterID() string {
	for {
		var id [16]byte
		rand.Read(id[:])
		if s := base64.RawURLEncoding.EncodeToString(id[:]); s[0] != '-' {
			return s
		}
	}
}

// javaCmd is the command running main from the jars in jarDirs, with a
// heap of heapMB and the JVM options jvm.
func javaCmd(ctx context.Context, jarDirs []string, heapMB int, jvm []string, main string, args ...string) *exec.Cmd {
	var cp []string
	for _, d := range jarDirs {
		cp = append(cp, filepath.Join(d, "*"))
	}
	jargs := append([]string{fmt.Sprintf("-Xmx%dm", heapMB)}, jvm...)
	jargs = append(jargs, "-Djava.awt.headless=true", "-cp", strings.Join(cp, string(os.PathListSeparator)), main)
	cmd := exec.CommandContext(ctx, "java", append(jargs, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// launch runs the node's JVM, its output appended to broker.log.
func (n *Node) launch() error {
	logFile, err := os.OpenFile(filepath.Join(n.dir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("realkafka: %w", err)
	}
	jarDirs := []string{n.libs}
	if n.logging != "" {
		jarDirs = append(jarDirs, n.logging)
	}
	jvm := append(slices.Clip(n.jvm), "-Dlog4j.configuration=file:"+filepath.Join(n.dir, "log4j.properties"),
		"-Dlog4j2.configurationFile="+filepath.Join(n.dir, "log4j2.properties"))
	cmd := javaCmd(context.Background(), jarDirs, n.heapMB, jvm, "kafka.Kafka", n.propsFile())
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("realkafka: starting Kafka %s node %d: %w", n.version, n.id, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	n.cmd, n.exited = cmd, exited
	return nil
}

// start launches the node and waits until it answers, within
// StartTimeout; a node that does not is killed.
func (n *Node) start() error {
	if err := n.launch(); err != nil {
		return err
	}
	if err := n.waitReady(time.Now().Add(n.startTimeout)); err != nil {
		n.kill()
		return err
	}
	return nil
}

// waitReady polls the node's own Metadata until it lists itself: the node
// registered with the controller quorum and is not fenced, so it serves
// its partitions. It fails when the JVM exits or deadline passes, with
// the end of broker.log.
func (n *Node) waitReady(deadline time.Time) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.RequestRetries(0))
	if err != nil {
		return fmt.Errorf("realkafka: %w", err)
	}
	defer cl.Close()
	// The seed broker is this node; a client's Metadata could go to any
	// broker it has learned of.
	self := cl.SeedBrokers()[0]
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none (nil is all)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := self.Request(ctx, req)
		cancel()
		if err == nil && slices.ContainsFunc(resp.(*kmsg.MetadataResponse).Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.NodeID == n.id }) {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("node %d not among the brokers it lists", n.id)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("realkafka: Kafka %s node %d did not answer within %v (last: %v):\n%s",
				n.version, n.id, n.startTimeout, err, n.LogTail(3000))
		}
		select {
		case <-n.exited:
			return fmt.Errorf("realkafka: Kafka %s node %d exited at start:\n%s", n.version, n.id, n.LogTail(3000))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop ends the node cleanly (SIGTERM, as kafka-server-stop.sh: a
// controlled shutdown that moves its partition leaders away first),
// killing it if it has not exited within 60 s. A node not running is left
// as it is.
func (n *Node) Stop() error {
	if n.cmd == nil {
		return nil
	}
	syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(60 * time.Second):
		n.kill()
		return fmt.Errorf("realkafka: Kafka %s node %d ignored SIGTERM for 60 s; killed", n.version, n.id)
	}
	n.cmd = nil
	return nil
}

// Kill ends the node at once (SIGKILL, a crash: no controlled shutdown;
// the controller notices only when the broker's session times out).
func (n *Node) Kill() error {
	if n.cmd == nil {
		return fmt.Errorf("realkafka: Kafka %s node %d is not running", n.version, n.id)
	}
	n.kill()
	return nil
}

func (n *Node) kill() {
	if n.cmd == nil {
		return
	}
	syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.exited
	n.cmd = nil
}

// Restart stops the node if it runs and starts it again on the same
// directory and ports, returning once it answers: partition leader epochs
// move on, as after any broker restart.
func (n *Node) Restart() error {
	if err := n.Stop(); err != nil {
		return err
	}
	return n.start()
}
