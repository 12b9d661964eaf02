package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/realkafka"
)

// TestKafkaToolsBrokerConfigs sets dynamic broker configs with Apache
// Kafka's kafka-configs, as the cluster default (--entity-default) and on
// the node, for configs kmirror stores without applying them
// (sasl.kerberos.min.time.before.relogin, num.io.threads), reads them back
// with --describe --all and sees the tool print Kafka's refusal of a
// read-only config.
func TestKafkaToolsBrokerConfigs(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	forEachJava(t, func(t *testing.T, k javaKafka) {
		n := startNode(t)
		ctx := testCtx(t, 3*time.Minute)
		tool := func(args ...string) string {
			t.Helper()
			return k.run(t, ctx, "kafka-configs", append([]string{"--bootstrap-server", n.addr(), "--entity-type", "brokers"}, args...)...)
		}

		out := tool("--alter", "--entity-default", "--add-config", "sasl.kerberos.min.time.before.relogin=30000,num.io.threads=4")
		if !hasLine(out, "Completed updating default config for brokers in the cluster.") {
			t.Fatalf("kafka-configs --alter --entity-default: got:\n%s", out)
		}
		out = tool("--alter", "--entity-name", "1", "--add-config", "sasl.kerberos.min.time.before.relogin=45000")
		if !hasLine(out, "Completed updating config for broker 1.") {
			t.Fatalf("kafka-configs --alter --entity-name 1: got:\n%s", out)
		}

		out = tool("--describe")
		def := describedConfigs(t, out, "Default configs for brokers in the cluster are:")
		if def["sasl.kerberos.min.time.before.relogin"] != "30000" || def["num.io.threads"] != "4" || len(def) != 2 {
			t.Errorf("cluster defaults %v\n%s", def, out)
		}
		if got := describedConfigs(t, out, "Dynamic configs for broker 1 are:"); got["sasl.kerberos.min.time.before.relogin"] != "45000" {
			t.Errorf("broker 1's dynamic configs %v\n%s", got, out)
		}
		out = tool("--describe", "--entity-name", "1", "--all")
		all := describedConfigs(t, out, "All configs for broker 1 are:")
		for name, want := range map[string]string{
			"sasl.kerberos.min.time.before.relogin": "45000", // this node's beats the default
			"num.io.threads":                        "4",     // the default beats Kafka's 8
			"num.network.threads":                   "3",     // Kafka's default
			"node.id":                               "1",
			"log.retention.ms":                      "604800000",
		} {
			if all[name] != want {
				t.Errorf("--describe --all: %s=%q, want %q\n%s", name, all[name], want, out)
			}
		}
		if !strings.Contains(out, "num.io.threads=4 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:num.io.threads=4, DEFAULT_CONFIG:num.io.threads=8}") {
			t.Errorf("--describe --all: want num.io.threads with its synonyms\n%s", out)
		}

		tctx, cancel := context.WithTimeout(ctx, javaToolTimeout)
		defer cancel()
		out, err := realkafka.Tool(tctx, k.libs, "kafka-configs", "--bootstrap-server", n.addr(), "--entity-type", "brokers",
			"--entity-name", "1", "--alter", "--add-config", "broker.id=5")
		if err == nil || !strings.Contains(out+err.Error(), "Cannot update these configs dynamically: [broker.id]") {
			t.Errorf("kafka-configs --add-config broker.id=5: want Kafka's refusal, got %v:\n%s", err, out)
		}
	})
}
