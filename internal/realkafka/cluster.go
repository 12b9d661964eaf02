package realkafka

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Cluster is a running multi-node KRaft cluster: every node is broker and
// controller (combined mode) and a voter of the controller quorum, so a
// cluster of 3 keeps its quorum, and serves every partition of RF 3
// topics, with any one node down. Its nodes have ids 1 to N.
type Cluster struct {
	version, libs, dir string
	nodes              []*Node
}

// clusterProps make a dead broker cost seconds, not the defaults' tens:
// the controller fences a broker whose heartbeats stop for
// broker.session.timeout.ms (9 s by default, heartbeats every 2 s) and
// only then elects new leaders for its partitions and drops it from their
// ISR. 6 s leaves room for a JVM stalled by GC or JIT on a loaded 2-core
// machine, so that a live broker is not fenced. The controller quorum's
// own defaults (a follower gives up on the leader after 2 s without a
// fetch, then an election of about 1 s) already fit. Topics created
// without a replication factor get one replica per node, up to 3.
func clusterProps(n int) map[string]string {
	return map[string]string{
		"broker.session.timeout.ms":    "6000",
		"broker.heartbeat.interval.ms": "1000",
		"default.replication.factor":   strconv.Itoa(min(n, 3)),
	}
}

// clusterJVM trade peak speed for CPU: the JIT's first tier only and the
// serial collector. A test's load needs no more, and three JVMs starting on
// a 2-core machine then take about half the CPU time (15 s instead of
// 27 s for TestRealKafkaClusterKillRestart's 4.4.0 run), which is what their
// start time and the other tests running meanwhile wait on.
var clusterJVM = []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}

// KafkaRunClassJVM are the JVM options Kafka's bin/kafka-run-class.sh
// gives a broker (KAFKA_JVM_PERFORMANCE_OPTS): G1 with short pauses and
// every JIT tier. A benchmark passes them as Config.JVM so that a
// Cluster runs as Kafka's scripts would run it.
var KafkaRunClassJVM = []string{"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent"}

// StartCluster installs (if needed), formats and starts an n-node cluster
// and returns once every node answers Metadata and lists itself. Each
// node's directory is node-<id> in cfg.Dir; cfg.Props go to every node;
// HeapMB defaults to 384 per node (three JVMs share the machine).
func StartCluster(n int, cfg Config) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("realkafka: a cluster of %d nodes", n)
	}
	cfg, libs, err := cfg.prepare(384)
	if err != nil {
		return nil, err
	}
	dirOf := func(id int32) string { return filepath.Join(cfg.Dir, "node-"+strconv.Itoa(int(id))) }
	nodes, err := newNodes(cfg, libs, layout{count: n, dirOf: dirOf, props: clusterProps(n), jvm: cfg.jvm(clusterJVM)})
	if err != nil {
		return nil, err
	}
	if err := startNodes(nodes); err != nil {
		return nil, err
	}
	return &Cluster{version: cfg.Version, libs: libs, dir: cfg.Dir, nodes: nodes}, nil
}

// Nodes are the cluster's nodes, by id (Nodes()[0] has id 1).
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node is the node with node.id id, nil if there is none.
func (c *Cluster) Node(id int32) *Node {
	if id < 1 || int(id) > len(c.nodes) {
		return nil
	}
	return c.nodes[id-1]
}

// Bootstrap is every node's address, running or not: a client tries them
// in turn, as with a real cluster's bootstrap.servers.
func (c *Cluster) Bootstrap() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr()
	}
	return out
}

// Version is the cluster's Kafka version.
func (c *Cluster) Version() string { return c.version }

// Libs is the directory of the version's jars (for Tool and JVM clients).
func (c *Cluster) Libs() string { return c.libs }

// Dir holds the nodes' directories.
func (c *Cluster) Dir() string { return c.dir }

// Tool runs one of Kafka's command line tools with the cluster's jars
// (see the package's Tool).
func (c *Cluster) Tool(ctx context.Context, tool string, args ...string) (string, error) {
	return Tool(ctx, c.libs, tool, args...)
}

// Close kills every node and removes the cluster's directory. It does not
// stop the nodes cleanly: the data goes anyway, and a controlled shutdown
// waits on the controller quorum, which the last nodes to stop no longer
// have.
func (c *Cluster) Close() error {
	for _, n := range c.nodes {
		n.kill()
	}
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("realkafka: %w", err)
	}
	return nil
}
