package tests

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// compactedNode starts a node holding topic: one partition,
// cleanup.policy=compact.
func compactedNode(t *testing.T, ctx context.Context, topic string) (*brokerNode, *kadm.Client) {
	t.Helper()
	n := startNode(t)
	adm := newAdmin(t, n.addr())
	policy := "compact"
	createTopic(t, ctx, adm, topic, 1, map[string]*string{"cleanup.policy": &policy})
	return n, adm
}

// TestKcatKeylessToCompactedTopic: librdkafka (kcat), producing records
// with and without a key in one zstd batch to a compacted topic, is
// refused with INVALID_RECORD as by Kafka ("Broker failed to validate
// record" for every record of the batch; librdkafka fails the batch) and
// nothing is stored; keyed records alone are stored.
func TestKcatKeylessToCompactedTopic(t *testing.T) {
	t.Parallel()
	kcatPath(t)
	ctx := testCtx(t, 45*time.Second)
	const topic = "kcat-compact"
	n, adm := compactedNode(t, ctx, topic)
	produce := func(stdin string) (string, error) {
		// -K: on a line without the delimiter sends it with a null key;
		// linger.ms keeps the lines in one batch.
		_, stderr, err := kcatRun(t, n.addr(), stdin, "-P", "-t", topic, "-K:", "-z", "zstd", "-X", "linger.ms=100")
		return stderr, err
	}
	stderr, err := produce("a:1\nno-key\nb:2\n")
	if err == nil || strings.Count(stderr, "Delivery failed for message: Broker: Broker failed to validate record") != 3 {
		t.Fatalf("kcat with a keyless record: %v, want 3 INVALID_RECORD delivery failures; stderr:\n%s", err, stderr)
	}
	if end := endOffsets(t, ctx, adm, topic)[0]; end != 0 {
		t.Fatalf("log end %d after the refused batch, want 0", end)
	}
	if stderr, err := produce("a:1\nb:2\n"); err != nil {
		t.Fatalf("kcat with keys only: %v\n%s", err, stderr)
	}
	if got, want := kcatConsume(t, n.addr(), topic), []string{"a:1:0", "b:2:1"}; !slices.Equal(got, want) {
		t.Fatalf("consumed %q, want %q", got, want)
	}
}

// TestJavaKeylessToCompactedTopic: the Java producer
// (kafka-verifiable-producer, keyless records) fails each record with
// InvalidRecordException carrying the record's own message from
// RecordErrors (without it the client would show the partition's summary
// message), and nothing is stored.
func TestJavaKeylessToCompactedTopic(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	forEachJava(t, func(t *testing.T, k javaKafka) {
		ctx := testCtx(t, 3*time.Minute)
		const topic = "java-compact"
		n, adm := compactedNode(t, ctx, topic)
		out := k.run(t, ctx, "kafka-verifiable-producer", "--bootstrap-server", n.addr(), "--topic", topic,
			"--max-messages", "5", "--acks", "-1")
		want := "Compacted topic cannot accept message without key in topic partition " + topic + "-0"
		errs := 0
		for _, l := range outputLines(out) {
			var ev struct {
				Name, Exception, Message string
				Acked                    *int
			}
			if json.Unmarshal([]byte(l), &ev) != nil {
				continue // the JVM's own lines
			}
			switch ev.Name {
			case "producer_send_error":
				errs++
				if ev.Exception != "class org.apache.kafka.common.InvalidRecordException" || ev.Message != want {
					t.Errorf("Kafka %s: send error %s %q, want InvalidRecordException %q", k.version, ev.Exception, ev.Message, want)
				}
			case "producer_send_success":
				t.Errorf("Kafka %s: a keyless record was acknowledged: %s", k.version, l)
			}
		}
		if errs != 5 {
			t.Fatalf("Kafka %s: %d send errors, want 5:\n%s", k.version, errs, out)
		}
		if end := endOffsets(t, ctx, adm, topic)[0]; end != 0 {
			t.Fatalf("Kafka %s: log end %d, want 0", k.version, end)
		}
	})
}
