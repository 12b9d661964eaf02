package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/realkafka"
)

// TestKafkaToolsClientQuotas sets client quotas with Apache Kafka's
// kafka-configs (a user, a user's client id, the default client id),
// describes them back by entity and by entity type, and removes one, the
// way an operator would (DescribeClientQuotas, AlterClientQuotas).
func TestKafkaToolsClientQuotas(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	forEachJava(t, func(t *testing.T, k javaKafka) {
		n := startNode(t)
		ctx := testCtx(t, 3*time.Minute)
		tool := func(args ...string) string {
			t.Helper()
			return k.run(t, ctx, "kafka-configs", append([]string{"--bootstrap-server", n.addr()}, args...)...)
		}
		wantLine := func(out, line string) {
			t.Helper()
			if !hasLine(out, line) {
				t.Fatalf("want the line %q, got:\n%s", line, out)
			}
		}

		wantLine(tool("--alter", "--add-config", "producer_byte_rate=1024", "--entity-type", "users", "--entity-name", "alice"),
			"Completed updating config for user alice.")
		out := tool("--describe", "--entity-type", "users", "--entity-name", "alice")
		wantLine(out, "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0")

		tool("--alter", "--add-config", "consumer_byte_rate=2048,request_percentage=25.5", "--entity-type", "users",
			"--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app")
		tool("--alter", "--add-config", "producer_byte_rate=4096", "--entity-type", "clients", "--entity-default")

		out = tool("--describe", "--entity-type", "users")
		wantLine(out, "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0")
		if strings.Contains(out, "client-id 'app'") {
			t.Fatalf("--describe --entity-type users shows a user+client-id entity:\n%s", out)
		}
		out = tool("--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app")
		wantLine(out, "Quota configs for user-principal 'alice', client-id 'app' are consumer_byte_rate=2048.0, request_percentage=25.5")
		out = tool("--describe", "--entity-type", "clients")
		wantLine(out, "Quota configs for the default client-id are producer_byte_rate=4096.0")

		tool("--alter", "--delete-config", "producer_byte_rate", "--entity-type", "users", "--entity-name", "alice")
		if out = tool("--describe", "--entity-type", "users", "--entity-name", "alice"); strings.Contains(out, "producer_byte_rate") {
			t.Fatalf("after --delete-config:\n%s", out)
		}
		// A refusal: the tool exits non-zero with the broker's message.
		tctx, cancel := context.WithTimeout(ctx, javaToolTimeout)
		defer cancel()
		out, err := realkafka.ToolWithInput(tctx, k.libs, "", "kafka-configs", "--bootstrap-server", n.addr(), "--alter",
			"--add-config", "producer_byte_rate=1.5", "--entity-type", "users", "--entity-name", "bob")
		if err == nil || !strings.Contains(out+err.Error(), "producer_byte_rate must be a Long value") {
			t.Fatalf("a fractional producer_byte_rate: err %v, output:\n%s", err, out)
		}
	})
}
