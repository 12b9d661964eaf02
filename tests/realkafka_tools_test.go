package tests

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/realkafka"
)

// Apache Kafka's own command line tools against kmirror: kafka-topics,
// kafka-configs, the console producer and consumer, kafka-consumer-groups
// and the perf tests, each from the newest 4.x release and from the 3.9
// line (realkafka.Versions). The tools are thin shells over Kafka's Java
// Admin, producer and consumer clients, so these tests are also the Java
// clients' compatibility tests: their ApiVersions negotiation, the request
// versions they pick from kmirror's ranges, and their parsing of every
// answer. realkafka_clients_test.go holds the Java client reads of
// mirrored transactions.
//
// Each version runs as a parallel subtest against its own in-process node.
// The jars come from realkafka.Install (Maven, cached); a machine without
// java or Maven fails these tests, it never skips them.

// javaToolTimeout bounds one tool run: a JVM start is 1-2 s, but the
// package's tests share two cores with every other JVM and node.
const javaToolTimeout = 90 * time.Second

// javaKafka is one Kafka version's jars: its tools and its Java clients.
type javaKafka struct {
	version string
	libs    string
}

// installJava finds java and the version's jars, failing the test (never
// skipping it) when either is missing.
func installJava(t *testing.T, version string) javaKafka {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("java is needed to run Apache Kafka %s's tools (.ci/run installs a JDK); looked it up in PATH: %v", version, err)
	}
	libs, err := realkafka.Install(version)
	if err != nil {
		t.Fatalf("installing Apache Kafka %s's jars: %v", version, err)
	}
	return javaKafka{version: version, libs: libs}
}

// forEachJava runs fn as a parallel subtest, named after the version, for
// every Kafka version the tests cover.
func forEachJava(t *testing.T, fn func(t *testing.T, k javaKafka)) {
	t.Helper()
	for _, v := range realkafka.Versions {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			fn(t, installJava(t, v))
		})
	}
}

// run runs a tool (named as its bin/ script) with empty stdin and returns
// its output, stdout and stderr together; a failed run fails the test with
// the tool's output.
func (k javaKafka) run(t *testing.T, ctx context.Context, tool string, args ...string) string {
	t.Helper()
	return k.runInput(t, ctx, "", tool, args...)
}

// runInput is run with stdin.
func (k javaKafka) runInput(t *testing.T, ctx context.Context, stdin, tool string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, javaToolTimeout)
	defer cancel()
	start := time.Now()
	out, err := realkafka.ToolWithInput(ctx, k.libs, stdin, tool, args...)
	if err != nil {
		// err names the tool, its arguments and exit status, and ends
		// with the output's tail.
		t.Fatalf("Kafka %s: want exit 0, got: %v (after %v, context: %v)", k.version, err, time.Since(start).Round(time.Millisecond), ctx.Err())
	}
	t.Logf("%s %s: %v", tool, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return out
}

// old reports whether the version predates Kafka 4's renames of the
// console tools' property options.
func (k javaKafka) old() bool { return strings.HasPrefix(k.version, "3.") }

// The console tools' property options: Kafka 4 renamed them (the old
// spellings still work there, with a deprecation warning); 3.9 knows only
// the old ones.
func (k javaKafka) consumerPropFlag() string {
	return k.pick("--consumer-property", "--command-property")
}
func (k javaKafka) formatterPropFlag() string { return k.pick("--property", "--formatter-property") }
func (k javaKafka) readerPropFlag() string    { return k.pick("--property", "--reader-property") }

func (k javaKafka) pick(old, v4 string) string {
	if k.old() {
		return old
	}
	return v4
}

// outputLines splits a tool's output into lines.
func outputLines(out string) []string {
	return strings.Split(strings.ReplaceAll(strings.TrimRight(out, "\n"), "\r", ""), "\n")
}

// hasLine reports whether out has a line equal to line.
func hasLine(out, line string) bool { return slices.Contains(outputLines(out), line) }

// kafkaUUID is how Kafka's tools print a topic id (Uuid.toString: URL-safe
// base64 without padding).
func kafkaUUID(id kadm.TopicID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// listTopicsFresh lists topics (all without names) with kadm on a new
// client: kadm answers ListTopics from its client's metadata cache (kgo's
// MetadataMinAge, 5 s), which would hide what a tool just changed.
func listTopicsFresh(t *testing.T, ctx context.Context, addr string, topics ...string) kadm.TopicDetails {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatalf("creating kgo client: %v", err)
	}
	defer cl.Close()
	tds, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err != nil {
		t.Fatalf("ListTopics %v: %v", topics, err)
	}
	return tds
}

// topicDetail lists one topic with kadm (see listTopicsFresh), failing
// unless it exists.
func topicDetail(t *testing.T, ctx context.Context, addr, topic string) kadm.TopicDetail {
	t.Helper()
	td, ok := listTopicsFresh(t, ctx, addr, topic)[topic]
	if !ok || td.Err != nil {
		t.Fatalf("ListTopics %s: want the topic, got %+v (listed: %v)", topic, td, ok)
	}
	return td
}

// describedTopic is kafka-topics --describe's view of one topic: the
// fields of its header line and one field map per partition line.
type describedTopic struct {
	header     map[string]string
	partitions []map[string]string
}

// tabFields parses "Key: value<TAB>Key: value..." lines.
func tabFields(line string) map[string]string {
	out := map[string]string{}
	for f := range strings.SplitSeq(strings.TrimSpace(line), "\t") {
		k, v, _ := strings.Cut(f, ": ")
		out[k] = strings.TrimSpace(v)
	}
	return out
}

// parseTopicDescribe finds topic's header line ("Topic: name<TAB>TopicId:
// ...") and its partition lines ("<TAB>Topic: name<TAB>Partition: ...").
func parseTopicDescribe(t *testing.T, out, topic string) describedTopic {
	t.Helper()
	var d describedTopic
	for _, l := range outputLines(out) {
		f := tabFields(l)
		if f["Topic"] != topic {
			continue
		}
		if _, ok := f["Partition"]; ok {
			d.partitions = append(d.partitions, f)
		} else if _, ok := f["TopicId"]; ok {
			d.header = f
		}
	}
	if d.header == nil {
		t.Fatalf("kafka-topics --describe: want a header line for %s, got none in:\n%s", topic, out)
	}
	return d
}

// checkTopicDescribe checks a described topic against kmirror's own view:
// the topic id, partition count and partition lines (led by node 1, one
// replica), and the dynamic configs want.
func checkTopicDescribe(t *testing.T, out, topic string, td kadm.TopicDetail, want map[string]string) {
	t.Helper()
	d := parseTopicDescribe(t, out, topic)
	h := d.header
	if got, want := h["TopicId"], kafkaUUID(td.ID); got != want {
		t.Errorf("%s: TopicId %q, want kmirror's topic id %q\n%s", topic, got, want, out)
	}
	if got, want := h["PartitionCount"], strconv.Itoa(len(td.Partitions)); got != want {
		t.Errorf("%s: PartitionCount %q, want %q\n%s", topic, got, want, out)
	}
	if h["ReplicationFactor"] != "1" {
		t.Errorf("%s: ReplicationFactor %q, want 1\n%s", topic, h["ReplicationFactor"], out)
	}
	configs := map[string]string{}
	for kv := range strings.SplitSeq(h["Configs"], ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			configs[k] = v
		}
	}
	if !maps.Equal(configs, want) {
		t.Errorf("%s: Configs %v, want %v\n%s", topic, configs, want, out)
	}
	if len(d.partitions) != len(td.Partitions) {
		t.Fatalf("%s: %d partition lines, want %d\n%s", topic, len(d.partitions), len(td.Partitions), out)
	}
	for i, p := range d.partitions {
		want := map[string]string{"Partition": strconv.Itoa(i), "Leader": "1", "Replicas": "1", "Isr": "1"}
		for k, v := range want {
			if p[k] != v {
				t.Errorf("%s: partition line %d: %s %q, want %q (line %v)", topic, i, k, p[k], v, p)
			}
		}
	}
}

// TestKafkaToolsTopics creates, describes, grows, lists and deletes a
// topic with kafka-topics, checking each step with kadm.
func TestKafkaToolsTopics(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	forEachJava(t, func(t *testing.T, k javaKafka) {
		n := startNode(t)
		ctx := testCtx(t, 3*time.Minute)
		adm := newAdmin(t, n.addr())
		bs := []string{"--bootstrap-server", n.addr()}
		topics := func(args ...string) string { t.Helper(); return k.run(t, ctx, "kafka-topics", append(bs, args...)...) }
		const topic, other = "tools-orders", "tools-other"
		configs := map[string]string{"retention.ms": "3600000", "cleanup.policy": "compact"}

		out := topics("--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1",
			"--config", "retention.ms=3600000", "--config", "cleanup.policy=compact")
		if !hasLine(out, "Created topic "+topic+".") {
			t.Fatalf("kafka-topics --create: want %q, got:\n%s", "Created topic "+topic+".", out)
		}
		td := topicDetail(t, ctx, n.addr(), topic)
		if len(td.Partitions) != 3 {
			t.Fatalf("after kafka-topics --create --partitions 3: kadm sees %d partitions, want 3", len(td.Partitions))
		}
		for name, want := range configs {
			if c := topicConfig(t, ctx, adm, topic, name); c.MaybeValue() != want || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
				t.Errorf("after kafka-topics --create --config %s=%s: kadm sees %s=%q (source %v), want %q set on the topic (source %v)",
					name, want, name, c.MaybeValue(), c.Source, want, kmsg.ConfigSourceDynamicTopicConfig)
			}
		}

		checkTopicDescribe(t, topics("--describe", "--topic", topic), topic, td, configs)

		topics("--alter", "--topic", topic, "--partitions", "5")
		td2 := topicDetail(t, ctx, n.addr(), topic)
		if len(td2.Partitions) != 5 || td2.ID != td.ID {
			t.Fatalf("after kafka-topics --alter --partitions 5: kadm sees %d partitions and id %s, want 5 and the same id %s",
				len(td2.Partitions), td2.ID, td.ID)
		}
		checkTopicDescribe(t, topics("--describe", "--topic", topic), topic, td2, configs)

		createTopic(t, ctx, adm, other, 1, nil)
		out = topics("--list")
		if !hasLine(out, topic) || !hasLine(out, other) {
			t.Fatalf("kafka-topics --list: want lines %q and %q, got:\n%s", topic, other, out)
		}

		topics("--delete", "--topic", topic)
		if tds := listTopicsFresh(t, ctx, n.addr()); tds.Has(topic) || !tds.Has(other) {
			t.Fatalf("after kafka-topics --delete --topic %s: kadm lists %v, want %s listed and %s gone", topic, tds.Names(), other, topic)
		}
		out = topics("--list")
		if hasLine(out, topic) || !hasLine(out, other) {
			t.Fatalf("kafka-topics --list after deleting %s: want %q only, got:\n%s", topic, other, out)
		}
	})
}

// describedConfigs parses kafka-configs --describe: the lines
// "  name=value sensitive=... synonyms={...}" under the header line that
// starts with header ("Dynamic configs for topic x are:", ...).
func describedConfigs(t *testing.T, out, header string) map[string]string {
	t.Helper()
	var (
		in    bool
		found bool
	)
	got := map[string]string{}
	for _, l := range outputLines(out) {
		switch {
		case strings.HasPrefix(l, header):
			in, found = true, true
		case in && strings.HasPrefix(l, "  "):
			kv, _, _ := strings.Cut(strings.TrimSpace(l), " sensitive=")
			k, v, _ := strings.Cut(kv, "=")
			got[k] = v
		default:
			in = false
		}
	}
	if !found {
		t.Fatalf("kafka-configs --describe: want a line starting %q, got:\n%s", header, out)
	}
	return got
}

// topicConfig is one config of topic as kadm describes it.
func topicConfig(t *testing.T, ctx context.Context, adm *kadm.Client, topic, name string) kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("DescribeTopicConfigs %s: %v", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatalf("DescribeTopicConfigs %s: %v", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			return c
		}
	}
	t.Fatalf("DescribeTopicConfigs %s: want config %s, got none", topic, name)
	return kadm.Config{}
}

// TestKafkaToolsConfigs describes and alters a topic's configs with
// kafka-configs (add and delete retention.ms), checking each change with
// kadm, and describes the broker's configs.
func TestKafkaToolsConfigs(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	forEachJava(t, func(t *testing.T, k javaKafka) {
		n := startNode(t)
		ctx := testCtx(t, 3*time.Minute)
		adm := newAdmin(t, n.addr())
		bs := []string{"--bootstrap-server", n.addr()}
		configsTool := func(args ...string) string {
			t.Helper()
			return k.run(t, ctx, "kafka-configs", append(bs, args...)...)
		}
		const topic = "tools-configs"
		createTopic(t, ctx, adm, topic, 1, map[string]*string{"segment.bytes": kadm.StringPtr("1048576")})
		topicArgs := []string{"--entity-type", "topics", "--entity-name", topic}
		header := "Dynamic configs for topic " + topic + " are:"
		describe := func() map[string]string {
			t.Helper()
			return describedConfigs(t, configsTool(append([]string{"--describe"}, topicArgs...)...), header)
		}
		checkKadm := func(step, want string, source kmsg.ConfigSource) {
			t.Helper()
			c := topicConfig(t, ctx, adm, topic, "retention.ms")
			if c.MaybeValue() != want || c.Source != source {
				t.Fatalf("after %s: kadm sees retention.ms=%q (source %v), want %q (source %v)", step, c.MaybeValue(), c.Source, want, source)
			}
		}

		if got, want := describe(), map[string]string{"segment.bytes": "1048576"}; !maps.Equal(got, want) {
			t.Fatalf("kafka-configs --describe %s: dynamic configs %v, want %v", topic, got, want)
		}

		out := configsTool(append([]string{"--alter", "--add-config", "retention.ms=7200000"}, topicArgs...)...)
		if !hasLine(out, "Completed updating config for topic "+topic+".") {
			t.Fatalf("kafka-configs --alter --add-config: want %q, got:\n%s", "Completed updating config for topic "+topic+".", out)
		}
		checkKadm("kafka-configs --add-config retention.ms=7200000", "7200000", kmsg.ConfigSourceDynamicTopicConfig)
		if got, want := describe(), map[string]string{"segment.bytes": "1048576", "retention.ms": "7200000"}; !maps.Equal(got, want) {
			t.Fatalf("kafka-configs --describe after --add-config: dynamic configs %v, want %v", got, want)
		}

		configsTool(append([]string{"--alter", "--delete-config", "retention.ms"}, topicArgs...)...)
		checkKadm("kafka-configs --delete-config retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig)
		if got, want := describe(), map[string]string{"segment.bytes": "1048576"}; !maps.Equal(got, want) {
			t.Fatalf("kafka-configs --describe after --delete-config: dynamic configs %v, want %v", got, want)
		}

		// The broker: no dynamic configs (per broker or cluster-wide
		// defaults), and with --all every config, static ones included.
		out = configsTool("--describe", "--entity-type", "brokers")
		if got := describedConfigs(t, out, "Dynamic configs for broker 1 are:"); len(got) != 0 {
			t.Errorf("kafka-configs --describe --entity-type brokers: want no dynamic configs of broker 1, got %v\n%s", got, out)
		}
		if got := describedConfigs(t, out, "Default configs for brokers in the cluster are:"); len(got) != 0 {
			t.Errorf("kafka-configs --describe --entity-type brokers: want no cluster-wide defaults, got %v\n%s", got, out)
		}
		out = configsTool("--describe", "--entity-type", "brokers", "--entity-name", "1", "--all")
		all := describedConfigs(t, out, "All configs for broker 1 are:")
		for name, want := range map[string]string{
			"node.id":          "1",
			"listeners":        "PLAINTEXT://127.0.0.1:0", // as configured: the node asked for a free port
			"log.retention.ms": "604800000",
			"num.partitions":   "1",
		} {
			if all[name] != want {
				t.Errorf("kafka-configs --describe --entity-name 1 --all: %s=%q, want %q\n%s", name, all[name], want, out)
			}
		}

		// A consumer group's own configs (KIP-848), set before the group
		// exists; kafka-configs knows the entity type from Kafka 4.0.
		if strings.HasPrefix(k.version, "3.") {
			return
		}
		groupArgs := []string{"--entity-type", "groups", "--entity-name", "tools-config-group"}
		out = configsTool(append([]string{"--alter", "--add-config", "consumer.session.timeout.ms=50000"}, groupArgs...)...)
		if want := "Completed updating config for group tools-config-group."; !hasLine(out, want) {
			t.Fatalf("kafka-configs --alter --entity-type groups: want %q, got:\n%s", want, out)
		}
		out = configsTool(append([]string{"--describe"}, groupArgs...)...)
		got := describedConfigs(t, out, "Dynamic configs for group tools-config-group are:")
		if want := map[string]string{"consumer.session.timeout.ms": "50000"}; !maps.Equal(got, want) {
			t.Fatalf("kafka-configs --describe --entity-type groups: dynamic configs %v, want %v\n%s", got, want, out)
		}
	})
}

// consoleRecord parses a kafka-console-consumer line printed with
// print.partition, print.offset and print.key and key.separator "|"
// ("Partition:0|Offset:5|key|value") into a mirrorRecord string
// ("0:5:key:value"); ok is false for other lines (warnings, log lines).
func consoleRecord(line string) (string, bool) {
	f := strings.SplitN(line, "|", 4)
	if len(f) != 4 {
		return "", false
	}
	ps, ok1 := strings.CutPrefix(f[0], "Partition:")
	offs, ok2 := strings.CutPrefix(f[1], "Offset:")
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(offs, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		return "", false
	}
	return mirrorRecord{int32(p), o, f[2], f[3]}.String(), true
}

// consoleConsume runs kafka-console-consumer for want records from
// addr's topic (plus args: --from-beginning or --partition/--offset, a
// group, an isolation level) and returns them as sorted mirrorRecord
// strings, checking the tool's own count.
func (k javaKafka) consoleConsume(t *testing.T, ctx context.Context, addr, topic string, want int, args ...string) []string {
	t.Helper()
	fp := k.formatterPropFlag()
	args = append([]string{"--bootstrap-server", addr, "--topic", topic,
		"--max-messages", strconv.Itoa(want), "--timeout-ms", "30000",
		fp, "print.partition=true", fp, "print.offset=true", fp, "print.key=true", fp, "key.separator=|"}, args...)
	out := k.run(t, ctx, "kafka-console-consumer", args...)
	var got []string
	for _, l := range outputLines(out) {
		if r, ok := consoleRecord(l); ok {
			got = append(got, r)
		}
	}
	if !hasLine(out, fmt.Sprintf("Processed a total of %d messages", want)) || len(got) != want {
		t.Fatalf("kafka-console-consumer %s: want %d records (and %q), got %d:\n%s",
			strings.Join(args, " "), want, fmt.Sprintf("Processed a total of %d messages", want), len(got), out)
	}
	slices.Sort(got)
	return got
}

// TestKafkaToolsConsole produces keyed records with
// kafka-console-producer (lz4, idempotent as the Java producer is by
// default) and reads them back with kafka-console-consumer at
// read_committed, printing keys, from the beginning (a subscription) and
// from an offset of one partition (an assignment), checking both against
// what kgo reads.
func TestKafkaToolsConsole(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	forEachJava(t, func(t *testing.T, k javaKafka) {
		n := startNode(t, noRebalanceDelay)
		ctx := testCtx(t, 3*time.Minute)
		adm := newAdmin(t, n.addr())
		const (
			topic = "tools-console"
			count = 40
		)
		createTopic(t, ctx, adm, topic, 2, nil)
		var input strings.Builder
		sent := map[string]string{}
		for i := range count {
			key, value := fmt.Sprintf("key-%02d", i), fmt.Sprintf("value-%02d-%s", i, k.version)
			fmt.Fprintf(&input, "%s:%s\n", key, value)
			sent[key] = value
		}
		rp := k.readerPropFlag()
		k.runInput(t, ctx, input.String(), "kafka-console-producer", "--bootstrap-server", n.addr(), "--topic", topic,
			"--compression-codec", "lz4", rp, "parse.key=true", rp, "key.separator=:")

		// What kmirror stored, as kgo reads it.
		cons := newClient(t, n.addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		rs := pollN(t, ctx, cons, count)
		for _, r := range rs {
			if want, ok := sent[string(r.Key)]; !ok || string(r.Value) != want {
				t.Fatalf("kgo read %s=%s at %d@%d, want a key the console producer sent with its value (%q)", r.Key, r.Value, r.Partition, r.Offset, want)
			}
			if r.ProducerID < 0 || r.Attrs.CompressionType() != 3 {
				t.Fatalf("record %s at %d@%d: producer id %d, compression %d; want an idempotent (producer id >= 0) lz4 (3) batch",
					r.Key, r.Partition, r.Offset, r.ProducerID, r.Attrs.CompressionType())
			}
		}
		if len(byPartition(rs)) != 2 {
			t.Fatalf("the console producer wrote to partitions %v, want both of 0 and 1 (keys spread by hash)", slices.Collect(maps.Keys(byPartition(rs))))
		}
		want := asMirrorRecords(rs)

		got := k.consoleConsume(t, ctx, n.addr(), topic, count, "--from-beginning",
			k.consumerPropFlag(), "isolation.level=read_committed")
		checkSameRecords(t, "kafka-console-consumer --from-beginning, isolation.level=read_committed, print.key", got, want)

		// An assignment from offset 2 of partition 1: ListOffsets and
		// Fetch without a group.
		var p1 []string
		for _, r := range byPartition(rs)[1][2:] {
			p1 = append(p1, mirrorRecord{r.Partition, r.Offset, string(r.Key), string(r.Value)}.String())
		}
		slices.Sort(p1)
		got = k.consoleConsume(t, ctx, n.addr(), topic, len(p1), "--partition", "1", "--offset", "2")
		checkSameRecords(t, "kafka-console-consumer --partition 1 --offset 2", got, p1)
	})
}

// groupRow is a row of kafka-consumer-groups --describe: GROUP TOPIC
// PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID.
type groupRow struct {
	partition          int32
	current, end, lag  string
	consumer, clientID string
}

// parseGroupDescribe finds the rows of group and topic.
func parseGroupDescribe(out, group, topic string) map[int32]groupRow {
	rows := map[int32]groupRow{}
	for _, l := range outputLines(out) {
		f := strings.Fields(l)
		if len(f) != 9 || f[0] != group || f[1] != topic {
			continue
		}
		p, err := strconv.ParseInt(f[2], 10, 32)
		if err != nil {
			continue
		}
		rows[int32(p)] = groupRow{int32(p), f[3], f[4], f[5], f[6], f[8]}
	}
	return rows
}

// listedGroups lists the groups kmirror knows with kadm.
func listedGroups(t *testing.T, ctx context.Context, adm *kadm.Client) []string {
	t.Helper()
	lgs, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	return lgs.Groups()
}

// TestKafkaToolsConsumerGroups reads a topic with a console consumer in a
// group, on the classic protocol (JoinGroup, SyncGroup) and on the
// consumer protocol (group.protocol=consumer: ConsumerGroupHeartbeat,
// KIP-848), committing on close; then lists, describes, resets (to the
// earliest offsets, checked with kadm FetchOffsets) and deletes the group
// with kafka-consumer-groups.
func TestKafkaToolsConsumerGroups(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	forEachJava(t, func(t *testing.T, k javaKafka) {
		n := startNode(t, noRebalanceDelay)
		ctx := testCtx(t, 3*time.Minute)
		adm := newAdmin(t, n.addr())
		const (
			topic = "tools-groups"
			count = 30
			parts = 3
		)
		createTopic(t, ctx, adm, topic, parts, nil)
		produceSpread(t, ctx, n.addr(), topic, count, parts)
		ends := endOffsets(t, ctx, adm, topic)
		for _, protocol := range []string{"classic", "consumer"} {
			t.Run(protocol, func(t *testing.T) {
				k.checkConsumerGroupTools(t, ctx, n.addr(), adm, topic, "tools-group-"+protocol, protocol, ends)
			})
		}
	})
}

// checkConsumerGroupTools runs TestKafkaToolsConsumerGroups' steps for
// group on the group protocol.
func (k javaKafka) checkConsumerGroupTools(t *testing.T, ctx context.Context, addr string, adm *kadm.Client,
	topic, group, protocol string, ends map[int32]int64) {
	count := 0
	for _, end := range ends {
		count += int(end)
	}
	k.consoleConsume(t, ctx, addr, topic, count, "--group", group, "--from-beginning",
		"--consumer-property", "group.protocol="+protocol)
	if got := committedOffsets(t, ctx, adm, group, topic); !maps.Equal(got, ends) {
		t.Fatalf("after the console consumer of group %s exited: committed offsets %v, want the end offsets %v", group, got, ends)
	}
	if listed, err := adm.ListGroups(ctx); err != nil || listed[group].GroupType != protocol {
		t.Fatalf("ListGroups: %v, %+v; want %s of type %s", err, listed[group], group, protocol)
	}

	bs := []string{"--bootstrap-server", addr}
	groups := func(args ...string) string {
		t.Helper()
		return k.run(t, ctx, "kafka-consumer-groups", append(bs, args...)...)
	}
	if out := groups("--list"); !hasLine(out, group) {
		t.Fatalf("kafka-consumer-groups --list: want a line %q, got:\n%s", group, out)
	}

	out := groups("--describe", "--group", group)
	rows := parseGroupDescribe(out, group, topic)
	if len(rows) != len(ends) {
		t.Fatalf("kafka-consumer-groups --describe --group %s: want %d rows of %s, got %d:\n%s", group, len(ends), topic, len(rows), out)
	}
	for p, end := range ends {
		e := strconv.FormatInt(end, 10)
		want := groupRow{p, e, e, "0", "-", "-"}
		if rows[p] != want {
			t.Errorf("kafka-consumer-groups --describe: partition %d row %+v, want %+v (committed at the end, lag 0, no member)", p, rows[p], want)
		}
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", out)
	}

	out = groups("--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic)
	zeros := map[int32]int64{}
	for p := range ends {
		zeros[p] = 0
	}
	if got := committedOffsets(t, ctx, adm, group, topic); !maps.Equal(got, zeros) {
		t.Fatalf("after kafka-consumer-groups --reset-offsets --to-earliest --execute: kadm FetchOffsets %v, want %v\n%s", got, zeros, out)
	}

	out = groups("--delete", "--group", group)
	if want := "Deletion of requested consumer groups ('" + group + "') was successful."; !hasLine(out, want) {
		t.Fatalf("kafka-consumer-groups --delete: want %q, got:\n%s", want, out)
	}
	if gs := listedGroups(t, ctx, adm); slices.Contains(gs, group) {
		t.Fatalf("after kafka-consumer-groups --delete: kadm lists groups %v, want no %s", gs, group)
	}
	if out := groups("--list"); hasLine(out, group) {
		t.Fatalf("kafka-consumer-groups --list after --delete: want no line %q, got:\n%s", group, out)
	}
}

// TestKafkaToolsPerf runs kafka-producer-perf-test and
// kafka-consumer-perf-test (20,000 records of 100 bytes): both exit 0 and
// report every record, as kmirror's offsets and the perf consumer's
// group commits confirm.
func TestKafkaToolsPerf(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	forEachJava(t, func(t *testing.T, k javaKafka) {
		n := startNode(t, noRebalanceDelay)
		ctx := testCtx(t, 3*time.Minute)
		adm := newAdmin(t, n.addr())
		const (
			topic   = "tools-perf"
			records = 20000
		)
		createTopic(t, ctx, adm, topic, 3, nil)
		sum := func(m map[int32]int64) (s int64) {
			for _, v := range m {
				s += v
			}
			return s
		}

		out := k.run(t, ctx, "kafka-producer-perf-test", "--topic", topic, "--num-records", strconv.Itoa(records),
			"--record-size", "100", "--throughput", "-1", "--producer-props", "bootstrap.servers="+n.addr())
		// The last line is the total (with percentiles); earlier ones
		// are 5 s windows.
		var total string
		for _, l := range outputLines(out) {
			if strings.Contains(l, " records sent, ") && strings.Contains(l, "99.9th") {
				total = l
			}
		}
		if !strings.HasPrefix(total, fmt.Sprintf("%d records sent, ", records)) {
			t.Fatalf("kafka-producer-perf-test: want a total line starting %q, got %q in:\n%s", fmt.Sprintf("%d records sent, ", records), total, out)
		}
		ends := endOffsets(t, ctx, adm, topic)
		if s := sum(ends); s != records {
			t.Fatalf("after kafka-producer-perf-test: the partitions' end offsets %v add up to %d, want %d", ends, s, records)
		}

		out = k.run(t, ctx, "kafka-consumer-perf-test", "--bootstrap-server", n.addr(), "--topic", topic,
			"--messages", strconv.Itoa(records))
		lines := outputLines(out)
		consumed := ""
		for i, l := range lines {
			if !strings.HasPrefix(l, "start.time, ") || i+1 >= len(lines) {
				continue
			}
			cols, vals := strings.Split(l, ", "), strings.Split(lines[i+1], ", ")
			if j := slices.Index(cols, "data.consumed.in.nMsg"); j >= 0 && j < len(vals) {
				consumed = vals[j]
			}
		}
		if consumed != strconv.Itoa(records) {
			t.Fatalf("kafka-consumer-perf-test: want data.consumed.in.nMsg %d, got %q in:\n%s", records, consumed, out)
		}
		// The perf consumer reads in a group of its own and commits.
		var perfGroups []string
		for _, g := range listedGroups(t, ctx, adm) {
			if strings.HasPrefix(g, "perf-consumer-") {
				perfGroups = append(perfGroups, g)
			}
		}
		if len(perfGroups) != 1 {
			t.Fatalf("after kafka-consumer-perf-test: want one perf-consumer-* group, got %v", perfGroups)
		}
		if got := committedOffsets(t, ctx, adm, perfGroups[0], topic); !maps.Equal(got, ends) {
			t.Fatalf("kafka-consumer-perf-test's group %s committed %v, want the end offsets %v", perfGroups[0], got, ends)
		}
	})
}
