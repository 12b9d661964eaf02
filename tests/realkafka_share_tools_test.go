package tests

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/realkafka"
	"github.com/kmirror/kmirror/internal/testutil"
)

// shareGroupsOn serves share groups (KIP-932).
func shareGroupsOn(c *broker.Config) {
	c.GroupRebalanceProtocols = []string{"classic", "consumer", "share"}
}

// shareStartOffsets is kadm's DescribeShareGroupOffsets of group's topic,
// by partition.
func shareStartOffsets(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	d, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		t.Fatalf("DescribeShareGroupOffsets: %v", err)
	}
	out := map[int32]int64{}
	for p, o := range d[group].Offsets[topic] {
		out[p] = o.StartOffset
	}
	return out
}

// TestKafkaToolsShareGroups runs Kafka 4.4's kafka-share-groups against a
// share group whose start offsets were set with kadm (as the mirror's
// sync sets them): it lists the group, describes its start offsets, resets
// them to the earliest, deletes them by topic, and deletes the group. 3.9
// has no share groups.
func TestKafkaToolsShareGroups(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	k := installJava(t, realkafka.Newest)
	n := startNode(t, shareGroupsOn)
	ctx := testCtx(t, 3*time.Minute)
	adm := newAdmin(t, n.addr())
	const (
		topic = "tools-share"
		group = "tools-share-group"
		parts = 3
	)
	createTopic(t, ctx, adm, topic, parts, nil)
	produceSpread(t, ctx, n.addr(), topic, 30, parts)
	set := kadm.Offsets{}
	for p := range int32(parts) {
		set.Add(kadm.Offset{Topic: topic, Partition: p, At: 4})
	}
	if resp, err := adm.AlterShareGroupOffsets(ctx, group, set); err != nil || resp.Error() != nil {
		t.Fatalf("AlterShareGroupOffsets: %v %v", err, resp.Error())
	}
	bs := []string{"--bootstrap-server", n.addr()}
	tool := func(args ...string) string {
		t.Helper()
		return k.run(t, ctx, "kafka-share-groups", append(bs, args...)...)
	}
	if out := tool("--list"); !hasLine(out, group) {
		t.Fatalf("kafka-share-groups --list: want a line %q, got:\n%s", group, out)
	}
	out := tool("--describe", "--group", group)
	rows := 0
	for _, l := range outputLines(out) {
		f := strings.Fields(l)
		if len(f) >= 4 && f[0] == group && f[1] == topic {
			rows++
			if f[3] != "4" {
				t.Errorf("kafka-share-groups --describe: row %q, want start offset 4", l)
			}
		}
	}
	if rows != parts || t.Failed() {
		t.Fatalf("kafka-share-groups --describe --group %s: want %d rows of %s at start offset 4, got:\n%s", group, parts, topic, out)
	}

	// A Java share consumer reads what is past the start offsets, each
	// record once, and accepts them: the start offsets move to the ends.
	out = k.run(t, ctx, "kafka-console-share-consumer", "--bootstrap-server", n.addr(), "--topic", topic, "--group", group,
		"--max-messages", "18", "--timeout-ms", "30000", "--formatter-property", "print.partition=true",
		"--formatter-property", "print.offset=true")
	read := map[string]bool{}
	for _, l := range outputLines(out) {
		if strings.HasPrefix(l, "Partition:") {
			if read[l] {
				t.Fatalf("kafka-console-share-consumer printed %q twice:\n%s", l, out)
			}
			read[l] = true
		}
	}
	if len(read) != 18 || !hasLine(out, "Processed a total of 18 messages") {
		t.Fatalf("kafka-console-share-consumer: want 18 distinct records (6 past offset 4 of each partition), got %d:\n%s",
			len(read), out)
	}
	testutil.CheckFor(t, 30*time.Second, func() error {
		if got := shareStartOffsets(t, ctx, adm, group, topic); !maps.Equal(got, map[int32]int64{0: 10, 1: 10, 2: 10}) {
			return fmt.Errorf("start offsets %v after the share consumer, want 10 each (every record accepted)", got)
		}
		return nil
	})

	out = tool("--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic)
	if got := shareStartOffsets(t, ctx, adm, group, topic); len(got) != parts || got[0] != 0 || got[1] != 0 || got[2] != 0 {
		t.Fatalf("after kafka-share-groups --reset-offsets --to-earliest --execute: start offsets %v, want 0 each\n%s", got, out)
	}
	// The partitions' leader starts over from the reset: all 30 records.
	out = k.run(t, ctx, "kafka-console-share-consumer", "--bootstrap-server", n.addr(), "--topic", topic, "--group", group,
		"--max-messages", "30", "--timeout-ms", "30000")
	if !hasLine(out, "Processed a total of 30 messages") {
		t.Fatalf("kafka-console-share-consumer after the reset: want all 30 records read again:\n%s", out)
	}
	out = tool("--delete-offsets", "--group", group, "--topic", topic)
	if got := shareStartOffsets(t, ctx, adm, group, topic); len(got) != 0 {
		t.Fatalf("after kafka-share-groups --delete-offsets: start offsets %v, want none\n%s", got, out)
	}
	out = tool("--delete", "--group", group)
	if gs := listedGroups(t, ctx, adm); len(gs) != 0 {
		t.Fatalf("after kafka-share-groups --delete: kadm lists groups %v, want none\n%s", gs, out)
	}
}
