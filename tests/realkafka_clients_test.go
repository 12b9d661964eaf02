package tests

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/control"
)

// The Java clients of Apache Kafka reading mirrored transactional data: a
// mirror topic holds the source's transactional batches and markers as
// they are, and the Java
// consumer must see exactly the committed records under read_committed
// (Fetch's last stable offset and aborted transaction lists) and all of
// them under read_uncommitted. The consumer is kafka-console-consumer's,
// from each version the tool tests use (realkafka_tools_test.go).

// TestJavaReadCommittedMirrored mirrors committed and aborted transactions
// (lz4, interleaved with idempotent batches) from kfake into a kmirror node
// with its control plane, then reads the mirror topic with the Java
// consumer at both isolation levels.
func TestJavaReadCommittedMirrored(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	ctx := testCtx(t, 3*time.Minute)
	src, srcCl := startSource(t)
	srcAdm := kadm.NewClient(srcCl)
	const (
		topic  = "java-txns"
		mirror = "java"
	)
	createTopic(t, ctx, srcAdm, topic, 3, nil)
	mix := produceTxnMix(t, ctx, src.ListenAddrs(), topic, kgo.Lz4Compression(), 3, false)
	if len(mix.committed) == len(mix.all) {
		t.Fatalf("want aborted records at the source, got none of %d: the test would prove nothing", len(mix.all))
	}

	n := startCtlNode(t, "java", control.Config{})
	n.ok(ctx, createReq(mirror, src.ListenAddrs()[0]))
	n.ok(ctx, startReq(mirror, topic))
	n.waitMirrored(ctx, mirror, topic, listOffsets(t, ctx, srcAdm, topic, false))
	checkSameLog(t, ctx, srcCl, n.cl, topic)
	addr := n.addr()

	forEachJava(t, func(t *testing.T, k javaKafka) {
		// Its own bound: parallel subtests wait for a free slot.
		ctx := testCtx(t, 3*time.Minute)
		for _, c := range []struct {
			isolation string
			want      []string
		}{
			{"read_committed", mix.committed},
			{"read_uncommitted", mix.all},
		} {
			t.Run(c.isolation, func(t *testing.T) {
				got := k.consoleConsume(t, ctx, addr, topic, len(c.want), "--from-beginning", "--isolation-level", c.isolation)
				checkSameRecords(t, "kafka-console-consumer --isolation-level "+c.isolation+" on the mirror topic", got, c.want)
			})
		}
	})
}
