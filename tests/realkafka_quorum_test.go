package tests

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/control"
)

// kafka-metadata-quorum.sh describes a kmirror node as Kafka's KRaft: a
// one-voter quorum it leads, its log end offset at the high watermark.
func TestKafkaToolsMetadataQuorum(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	forEachJava(t, func(t *testing.T, k javaKafka) {
		n := startCtlNode(t, "quorum-"+k.version, control.Config{})
		ctx := testCtx(t, 3*time.Minute)
		createTopic(t, ctx, n.adm, "quorum-orders", 1, nil) // an entry in the log
		bs := []string{"--bootstrap-server", n.addr()}
		self := strconv.Itoa(int(n.cfg.NodeID))

		status := k.run(t, ctx, "kafka-metadata-quorum", append(bs, "describe", "--status")...)
		field := func(name string) string {
			m := regexp.MustCompile(`(?m)^` + name + `:\s+(.*)$`).FindStringSubmatch(status)
			if m == nil {
				t.Fatalf("describe --status has no %s:\n%s", name, status)
			}
			return strings.TrimSpace(m[1])
		}
		if got := field("ClusterId"); got != n.b.ClusterID() {
			t.Errorf("ClusterId %s, want %s", got, n.b.ClusterID())
		}
		if got := field("LeaderId"); got != self {
			t.Errorf("LeaderId %s, want %s", got, self)
		}
		if hw, err := strconv.Atoi(field("HighWatermark")); err != nil || hw < 1 {
			t.Errorf("HighWatermark %q", field("HighWatermark"))
		}
		if got := field("MaxFollowerLag"); got != "0" {
			t.Errorf("MaxFollowerLag %s, want 0", got)
		}
		if got := field("CurrentVoters"); !strings.Contains(got, `"id": `+self) {
			t.Errorf("CurrentVoters %s, want node %s", got, self)
		}

		repl := k.run(t, ctx, "kafka-metadata-quorum", append(bs, "describe", "--replication")...)
		// The leader's own fetch and caught-up times are now, as Kafka shows
		// them: "<n> ms ago" in 4.x, epoch milliseconds in 3.9.
		if !regexp.MustCompile(`(?m)^` + self + `\s+\S+\s+[1-9][0-9]*\s+0\s+\d+(\s+ms ago)?\s+\d+(\s+ms ago)?\s+Leader\s*$`).MatchString(repl) {
			t.Errorf("describe --replication: want node %s as the leader, lag 0, fetched now:\n%s", self, repl)
		}
	})
}
