package tests

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testutil"
)

// Apache Kafka's tools against a kmirror cluster of three nodes (issue
// 20), each tool bootstrapped from one node and its result read back
// through another: kafka-topics, kafka-configs, kafka-acls and
// kafka-metadata-quorum, for each Java version. realkafka_tools_test.go
// holds the tools against one node.

// clusterController waits until every node's Metadata names the same
// controller, one of the nodes, and returns its id.
func clusterController(t *testing.T, ctx context.Context, nodes []*ctlNode) int32 {
	t.Helper()
	var ctl int32
	testutil.CheckFor(t, testutil.Timeout, func() error {
		seen := map[string]int32{}
		for _, n := range nodes {
			md, err := newAdmin(t, n.addr()).BrokerMetadata(ctx)
			if err != nil {
				return fmt.Errorf("node %s: Metadata: %w", n.name, err)
			}
			if len(md.Brokers) != len(nodes) {
				return fmt.Errorf("node %s lists brokers %v, want %d", n.name, md.Brokers.NodeIDs(), len(nodes))
			}
			seen[n.name] = md.Controller
		}
		ctl = seen[nodes[0].name]
		for _, c := range seen {
			if c != ctl || ctl < 1 || int(ctl) > len(nodes) {
				return fmt.Errorf("controllers by node: %v", seen)
			}
		}
		return nil
	})
	return ctl
}

// kafka-topics (replication factors 1 and 3), kafka-leader-election,
// kafka-configs, kafka-acls and kafka-metadata-quorum
// against three nodes: a topic created through node 2 is described
// through node 3 with its six partitions led by nodes 1, 2 and 3; a
// config altered through node 3 is described through node 1; an ACL
// added through node 1 is listed through node 2; the quorum described
// through node 3 is led by the controller, of the three voters.
func TestKafkaToolsCluster(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	forEachJava(t, func(t *testing.T, k javaKafka) {
		nodes := startCtlCluster(t, "tools-cluster-"+k.version, 3)
		ctx := testCtx(t, 3*time.Minute)
		ctl := clusterController(t, ctx, nodes)
		tool := func(via int, name string, args ...string) string {
			t.Helper()
			return k.run(t, ctx, name, append([]string{"--bootstrap-server", nodes[via-1].addr()}, args...)...)
		}
		const topic = "tools-spread"

		out := tool(2, "kafka-topics", "--create", "--topic", topic, "--partitions", "6", "--replication-factor", "1")
		if !hasLine(out, "Created topic "+topic+".") {
			t.Fatalf("kafka-topics --create through node 2: want %q, got:\n%s", "Created topic "+topic+".", out)
		}
		testutil.CheckFor(t, testutil.Timeout, func() error {
			if td := listTopicsFresh(t, ctx, nodes[2].addr(), topic)[topic]; len(td.Partitions) != 6 {
				return fmt.Errorf("node 3 knows %d partitions of %s, want 6", len(td.Partitions), topic)
			}
			return nil
		})
		out = tool(3, "kafka-topics", "--describe", "--topic", topic)
		d := parseTopicDescribe(t, out, topic)
		if d.header["PartitionCount"] != "6" || d.header["ReplicationFactor"] != "1" || len(d.partitions) != 6 {
			t.Fatalf("kafka-topics --describe through node 3: want PartitionCount 6, ReplicationFactor 1 and 6 partition lines, got:\n%s", out)
		}
		led := map[string]int{}
		for _, p := range d.partitions {
			led[p["Leader"]]++
			if p["Replicas"] != p["Leader"] || p["Isr"] != p["Leader"] {
				t.Errorf("partition %s: Leader %s, Replicas %s, Isr %s; want the leader its one replica, in sync", p["Partition"], p["Leader"], p["Replicas"], p["Isr"])
			}
		}
		if led["1"] != 2 || led["2"] != 2 || led["3"] != 2 {
			t.Errorf("partitions led by node: %v; want two on each of nodes 1, 2 and 3", led)
		}
		if t.Failed() {
			t.Fatalf("kafka-topics --describe through node 3:\n%s", out)
		}

		// Replicated: three replicas in sync, and the preferred leaders
		// already lead.
		const replicated = "tools-replicated"
		tool(1, "kafka-topics", "--create", "--topic", replicated, "--partitions", "3", "--replication-factor", "3")
		testutil.CheckFor(t, testutil.Timeout, func() error {
			d := parseTopicDescribe(t, tool(2, "kafka-topics", "--describe", "--topic", replicated), replicated)
			if d.header["ReplicationFactor"] != "3" || len(d.partitions) != 3 {
				return fmt.Errorf("describe: %v, %d partitions", d.header, len(d.partitions))
			}
			for _, p := range d.partitions {
				if len(strings.Split(p["Replicas"], ",")) != 3 || len(strings.Split(p["Isr"], ",")) != 3 ||
					!strings.HasPrefix(p["Replicas"], p["Leader"]+",") {
					return fmt.Errorf("partition %s: Leader %s, Replicas %s, Isr %s; want three replicas in sync, the first leading",
						p["Partition"], p["Leader"], p["Replicas"], p["Isr"])
				}
			}
			return nil
		})
		out = tool(3, "kafka-leader-election", "--election-type", "PREFERRED", "--topic", replicated, "--partition", "0")
		if !strings.Contains(out, "Valid replica already elected for partitions "+replicated+"-0") {
			t.Fatalf("kafka-leader-election --election-type PREFERRED through node 3: want the replica already elected, got:\n%s", out)
		}

		topicArgs := []string{"--entity-type", "topics", "--entity-name", topic}
		out = tool(3, "kafka-configs", append([]string{"--alter", "--add-config", "retention.ms=1000"}, topicArgs...)...)
		if want := "Completed updating config for topic " + topic + "."; !hasLine(out, want) {
			t.Fatalf("kafka-configs --alter through node 3: want %q, got:\n%s", want, out)
		}
		out = tool(1, "kafka-configs", append([]string{"--describe"}, topicArgs...)...)
		if got := describedConfigs(t, out, "Dynamic configs for topic "+topic+" are:"); got["retention.ms"] != "1000" || len(got) != 1 {
			t.Fatalf("kafka-configs --describe through node 1: dynamic configs %v, want retention.ms=1000 only\n%s", got, out)
		}

		// kmirror takes CreateAcls without an authorizer (Kafka answers
		// SECURITY_DISABLED): the nodes need none for this.
		const acl = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
		resource := "ResourcePattern(resourceType=TOPIC, name=" + topic + ", patternType=LITERAL)"
		out = tool(1, "kafka-acls", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
		if !strings.Contains(out, acl) {
			t.Fatalf("kafka-acls --add through node 1: want %s, got:\n%s", acl, out)
		}
		out = tool(2, "kafka-acls", "--list", "--topic", topic)
		if !strings.Contains(out, "Current ACLs for resource `"+resource+"`:") || !strings.Contains(out, acl) {
			t.Fatalf("kafka-acls --list through node 2: want %s on %s, got:\n%s", acl, resource, out)
		}

		status := tool(3, "kafka-metadata-quorum", "describe", "--status")
		field := func(name string) string {
			m := regexp.MustCompile(`(?m)^` + name + `:\s+(.*)$`).FindStringSubmatch(status)
			if m == nil {
				t.Fatalf("describe --status has no %s:\n%s", name, status)
			}
			return strings.TrimSpace(m[1])
		}
		if got, want := field("ClusterId"), nodes[0].b.ClusterID(); got != want {
			t.Errorf("ClusterId %s, want %s", got, want)
		}
		if got, want := field("LeaderId"), strconv.Itoa(int(ctl)); got != want {
			t.Errorf("LeaderId %s, want the controller %s", got, want)
		}
		var voters []int
		for _, m := range regexp.MustCompile(`"id": (\d+)`).FindAllStringSubmatch(field("CurrentVoters"), -1) {
			id, _ := strconv.Atoi(m[1])
			voters = append(voters, id)
		}
		if slices.Sort(voters); !slices.Equal(voters, []int{1, 2, 3}) {
			t.Errorf("CurrentVoters %s: ids %v, want 1, 2 and 3", field("CurrentVoters"), voters)
		}
		if t.Failed() {
			t.Fatalf("kafka-metadata-quorum describe --status through node 3:\n%s", status)
		}

		// Every voter with its role, its log end offset and a lag of
		// zero or more: node 3 asks the controller, which knows each
		// voter's position from its heartbeats (Kafka forwards
		// DescribeQuorum to the controller too).
		repl := tool(3, "kafka-metadata-quorum", "describe", "--replication")
		rows := map[string]string{} // node id: status
		row := regexp.MustCompile(`^(\d+)\s+\S+\s+(-?\d+)\s+(-?\d+)\s+.*\s(Leader|Follower|Observer)\s*$`)
		for _, l := range outputLines(repl) {
			m := row.FindStringSubmatch(strings.TrimSpace(l))
			if m == nil {
				continue
			}
			rows[m[1]] = m[4]
			if leo, lag := m[2], m[3]; strings.HasPrefix(leo, "-") || leo == "0" || strings.HasPrefix(lag, "-") {
				t.Errorf("voter %s: log end offset %s, lag %s; want a known offset and a lag >= 0", m[1], leo, lag)
			}
		}
		want := map[string]string{"1": "Follower", "2": "Follower", "3": "Follower"}
		want[strconv.Itoa(int(ctl))] = "Leader"
		if !maps.Equal(rows, want) {
			t.Fatalf("kafka-metadata-quorum describe --replication through node 3: voters %v, want %v:\n%s", rows, want, repl)
		}
		t.Logf("describe --replication through node 3:\n%s", repl)
	})
}
