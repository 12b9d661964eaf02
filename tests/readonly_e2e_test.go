package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/realkafka"
)

// Writes to a mirror topic are refused with a code every released client
// knows and does not retry, POLICY_VIOLATION (broker's errReadOnlyTopic),
// and a message naming the mirror. The prototype's READ_ONLY_TOPIC (134)
// is GROUP_DELETION_FAILED to Kafka 4.4 clients and to franz-go,
// UnknownServerException to Java 3.9 and "Err-134?" to librdkafka. Each
// client is checked to give up after one Produce request: a retried
// refusal would show up as a producer stuck until its delivery timeout.

const (
	roTopic  = "ro"
	roMirror = "dr"
	roMsg    = "topic ro is mirrored by cluster mirror dr and read-only until failover"
)

// startReadOnlyNode starts a node holding mirror topic ro (two
// partitions) of mirror dr. No source is needed: the broker refuses
// writes by the topic's owner, whatever the mirror's state.
func startReadOnlyNode(t *testing.T) *brokerNode {
	t.Helper()
	n := startNode(t)
	if err := n.b.CreateMirrorTopic(roTopic, [16]byte{7, 7, 7}, 2, roMirror); err != nil {
		t.Fatal(err)
	}
	return n
}

// produceAttempts counts the node's Produce requests while fn runs.
func produceAttempts(n *brokerNode, fn func()) int64 {
	before := n.b.Stats().ProduceRequests.Load()
	fn()
	return n.b.Stats().ProduceRequests.Load() - before
}

func TestReadOnlyTopicKgo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"idempotent", nil},
		{"not idempotent", []kgo.Opt{kgo.DisableIdempotentWrite()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n := startReadOnlyNode(t)
			// No delivery timeout: a retried refusal would hang until
			// the context ends.
			ctx := testCtx(t, 30*time.Second)
			cl := newClient(t, n.addr(), append(c.opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
			var err error
			tries := produceAttempts(n, func() {
				err = cl.ProduceSync(ctx, &kgo.Record{Topic: roTopic, Partition: 1, Value: []byte("refused")}).FirstErr()
			})
			if !errors.Is(err, kerr.PolicyViolation) {
				t.Fatalf("producing to a mirror topic: %v, want POLICY_VIOLATION", err)
			}
			if tries != 1 {
				t.Fatalf("the producer sent %d Produce requests, want 1 (POLICY_VIOLATION is not retriable)", tries)
			}
		})
	}

	// kgo drops a Produce error message; the wire carries it.
	t.Run("message", func(t *testing.T) {
		t.Parallel()
		n := startReadOnlyNode(t)
		ctx := testCtx(t, 30*time.Second)
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = roTopic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = encodeBatch("refused")
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		sp := rawRequest(t, ctx, n.addr(), req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if sp.ErrorCode != kerr.PolicyViolation.Code || sp.ErrorMessage == nil || *sp.ErrorMessage != roMsg {
			t.Fatalf("produce answer: code %d message %v, want %d %q", sp.ErrorCode, sp.ErrorMessage, kerr.PolicyViolation.Code, roMsg)
		}

		// CreatePartitions is refused the same way, naming the mirror.
		rs, err := kadm.NewClient(newClient(t, n.addr())).CreatePartitions(ctx, 1, roTopic)
		if err != nil {
			t.Fatal(err)
		}
		if r := rs[roTopic]; !errors.Is(r.Err, kerr.PolicyViolation) || !strings.Contains(r.ErrMessage, "cluster mirror dr") {
			t.Fatalf("growing a mirror topic: %v %q, want POLICY_VIOLATION naming mirror dr", r.Err, r.ErrMessage)
		}
	})
}

// librdkafka (kcat): the refusal is a permanent delivery failure named
// "Broker: Policy violation", reported at once; kcat's default
// message.timeout.ms is 300 s, so a retry loop would outlast kcatTimeout.
func TestKcatReadOnlyTopic(t *testing.T) {
	t.Parallel()
	kcatPath(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"default", nil},
		{"idempotent", []string{"-X", "enable.idempotence=true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n := startReadOnlyNode(t)
			var stdout, stderr string
			var err error
			tries := produceAttempts(n, func() {
				stdout, stderr, err = kcatRun(t, n.addr(), "refused\n", append(c.args, "-P", "-t", roTopic, "-p", "0")...)
			})
			var exit interface{ ExitCode() int }
			if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
				t.Fatalf("kcat -P to a mirror topic: %v, want a failed delivery (a non-zero exit)\nstderr:\n%s\nstdout:\n%s", err, stderr, stdout)
			}
			if !strings.Contains(stderr, "Broker: Policy violation") {
				t.Fatalf("kcat's report does not name the refusal:\n%s", stderr)
			}
			if tries != 1 {
				t.Fatalf("librdkafka sent %d Produce requests, want 1 (a permanent error)\nstderr:\n%s", tries, stderr)
			}
		})
	}
}

// The Java producer of each Kafka version (kafka-console-producer --sync,
// which waits for each send and prints the exception it failed with; the
// asynchronous mode reports to a logger the tools run without):
// PolicyViolationException with the broker's message, after one Produce
// request. Its delivery.timeout.ms is 120 s and its retries unbounded, so
// a retried refusal would outlast javaToolTimeout.
func TestJavaReadOnlyTopic(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	forEachJava(t, func(t *testing.T, k javaKafka) {
		n := startReadOnlyNode(t)
		ctx, cancel := context.WithTimeout(testCtx(t, 3*time.Minute), javaToolTimeout)
		defer cancel()
		var out string
		var err error
		tries := produceAttempts(n, func() {
			out, err = realkafka.ToolWithInput(ctx, k.libs, "refused\n", "kafka-console-producer",
				"--bootstrap-server", n.addr(), "--topic", roTopic, "--sync")
		})
		if err == nil {
			t.Fatalf("Kafka %s: the console producer exited 0, want a failed send:\n%s", k.version, out)
		}
		if ctx.Err() != nil {
			t.Fatalf("Kafka %s: the console producer did not give up within %v (a retried refusal?):\n%s", k.version, javaToolTimeout, out)
		}
		if !strings.Contains(out, "org.apache.kafka.common.errors.PolicyViolationException: "+roMsg) {
			t.Fatalf("Kafka %s: want PolicyViolationException with the broker's message, got:\n%s", k.version, out)
		}
		if tries != 1 {
			t.Fatalf("Kafka %s: the producer sent %d Produce requests, want 1:\n%s", k.version, tries, out)
		}
	})
}
