package tests

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/realkafka"
	"github.com/kmirror/kmirror/internal/testutil"
)

// Mirroring from a 3-broker Apache Kafka cluster through the source
// events of issue 16 that a single broker cannot show: a source broker
// killed (its partitions move to new leaders, which the mirror must find
// through the brokers left), and a topic deleted and recreated under the
// same name (another topic id at the same offsets, which the mirror must
// refuse without touching its copy). Each test runs per version, one
// version after the other: a cluster is three JVMs, and two clusters at
// once on a 2-core machine starve a broker past its session timeout.

// realCluster is a running 3-node Kafka cluster with a client for raw
// reads (Fetch pinned to v11) and admin requests.
type realCluster struct {
	c   *realkafka.Cluster
	cl  *kgo.Client
	adm *kadm.Client
}

// startRealCluster starts a 3-node Kafka of version, closed when t ends;
// if t failed, the end of every node's log goes to the test log first.
func startRealCluster(t *testing.T, version string) *realCluster {
	t.Helper()
	began := time.Now()
	c, err := realkafka.StartCluster(3, realkafka.Config{Version: version})
	if err != nil {
		t.Fatalf("starting a 3-node Kafka %s: %v", version, err)
	}
	t.Logf("Kafka %s: 3 nodes up in %v", version, time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes() {
				t.Logf("Kafka %s node %d broker.log, the end:\n%s", version, n.ID(), n.LogTail(3000))
			}
		}
		if err := c.Close(); err != nil {
			t.Errorf("closing Kafka %s: %v", version, err)
		}
	})
	seeds := c.Bootstrap()
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.MaxVersions(rawFetchVersions()))
	return &realCluster{c: c, cl: cl, adm: kadm.NewClient(cl)}
}

// bootstrap is the mirror's bootstrap.servers: every broker.
func (s *realCluster) bootstrap() string { return strings.Join(s.c.Bootstrap(), ",") }

// createTopic creates topic with RF 3 and min.insync.replicas 2 (an
// acknowledged acks=all write survives the loss of any one broker) and
// waits until every partition has a leader and all three replicas in
// sync; it returns the leaders.
func (s *realCluster) createTopic(t *testing.T, ctx context.Context, topic string, parts int32) map[int32]int32 {
	t.Helper()
	resp, err := s.adm.CreateTopic(ctx, parts, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, topic)
	if err != nil {
		t.Fatalf("source: creating %s: %v (%s)", topic, err, resp.ErrMessage)
	}
	return s.leaders(t, ctx, topic, "every partition of "+topic+" led, 3 replicas in sync", func(p kadm.PartitionDetail) bool {
		return len(p.ISR) == 3
	})
}

// leaders waits until every partition of topic has a leader and passes
// ok, and returns the leaders.
func (s *realCluster) leaders(t *testing.T, ctx context.Context, topic, what string, ok func(kadm.PartitionDetail) bool) map[int32]int32 {
	t.Helper()
	out := map[int32]int32{}
	realWait(t, ctx, time.Minute, "source: "+what, func() error {
		s.cl.ForceMetadataRefresh()
		tds, err := s.adm.ListTopics(ctx, topic)
		if err == nil {
			err = tds.Error()
		}
		if err != nil {
			return err
		}
		ps := tds[topic].Partitions
		if len(ps) == 0 {
			return fmt.Errorf("%s has no partitions", topic)
		}
		for _, p := range ps.Sorted() {
			if p.Leader < 0 || p.Err != nil || !ok(p) {
				return fmt.Errorf("partition %d: leader %d, replicas %v, ISR %v, %v", p.Partition, p.Leader, p.Replicas, p.ISR, p.Err)
			}
			out[p.Partition] = p.Leader
		}
		return nil
	})
	return out
}

// produceRound writes batches rounds of 20 records to every partition of
// topic with acks=all (the idempotent producer's default), one ProduceSync
// per round (a batch per partition, the partitions in parallel), and
// returns the source's log ends.
func (s *realCluster) produceRound(t *testing.T, ctx context.Context, pr *kgo.Client, topic string, parts int32, batches int, tag string) map[int32]int64 {
	t.Helper()
	ends := map[int32]int64{}
	for i := range batches {
		var rs []*kgo.Record
		for p := range parts {
			for j := range 20 {
				key := fmt.Sprintf("%s-%d-%d", tag, i, j)
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte(strings.Repeat(key, 4))})
			}
		}
		res := pr.ProduceSync(ctx, rs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("source: producing round %s-%d to %s: %v", tag, i, topic, err)
		}
		for _, r := range res {
			ends[r.Record.Partition] = max(ends[r.Record.Partition], r.Record.Offset+1)
		}
	}
	if got := listOffsets(t, ctx, s.adm, topic, false); !maps.Equal(got, ends) {
		t.Fatalf("source %s: log ends %v after producing, want %v", topic, got, ends)
	}
	return ends
}

// mirrorBrokerDead bounds how long the mirror may take to reach records
// written after a source broker died: Kafka's new leaders take about 8-14
// s (realkafka's 6 s broker session timeout and, when the dead broker was
// the active controller, a quorum election), the fetchers of the dead
// broker's partitions give up on it and ask the brokers left for the new
// leaders.
const mirrorBrokerDead = time.Minute

// TestRealKafkaClusterBrokerKilled: a mirror of a 6-partition RF 3 topic
// spread over a 3-broker source; one broker is killed (kill -9): every
// partition, the dead broker's too, is mirrored up to the new leaders'
// ends; the kmirror node restarts while the broker is still dead and
// resumes every partition (issue 16 item 2: a restart left 12 of 18
// partitions at -1 until the broker came back); the broker comes back and
// mirroring goes on. The copy stays byte-identical to the source.
func TestRealKafkaClusterBrokerKilled(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	for _, version := range realkafka.Versions {
		t.Run(version, func(t *testing.T) {
			ctx := testCtx(t, 4*time.Minute)
			src := startRealCluster(t, version)
			const topic, parts = "killed", 6
			led := src.createTopic(t, ctx, topic, parts)
			perBroker := map[int32]int{}
			for _, l := range led {
				perBroker[l]++
			}
			if len(perBroker) != 3 {
				t.Fatalf("source: leaders %v; want the partitions led by all 3 brokers", led)
			}
			pr := manualProducer(t, src.c.Bootstrap())
			ends := src.produceRound(t, ctx, pr, topic, parts, 5, "a")

			n := startCtlNode(t, "killed-"+version, control.Config{})
			n.ok(ctx, createReq("rk", src.bootstrap()))
			n.ok(ctx, startReq("rk", topic))
			n.waitMirrored(ctx, "rk", topic, ends)
			checkSameLogLed(t, ctx, src.cl, led, n.cl, topic)

			dead := led[0]
			if err := src.c.Node(dead).Kill(); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			led = src.leaders(t, ctx, topic, fmt.Sprintf("new leaders without broker %d", dead), func(p kadm.PartitionDetail) bool {
				return p.Leader != dead
			})
			t.Logf("Kafka %s: broker %d killed; new leaders %v after %v", version, dead, led, time.Since(killed).Round(time.Millisecond))
			ends = src.produceRound(t, ctx, pr, topic, parts, 3, "b")
			n.waitMirroredWithin(ctx, mirrorBrokerDead, "rk", topic, ends)
			t.Logf("Kafka %s: mirrored past the dead broker %v after the kill", version, time.Since(killed).Round(time.Millisecond))
			checkSameLogLed(t, ctx, src.cl, led, n.cl, topic)

			// A kmirror restart with the broker still dead: its address is
			// still in bootstrap.servers, the metadata it served is gone.
			restarted := time.Now()
			n.restart()
			ends = src.produceRound(t, ctx, pr, topic, parts, 2, "c")
			n.waitMirroredWithin(ctx, mirrorBrokerDead, "rk", topic, ends)
			t.Logf("Kafka %s: kmirror restarted with broker %d dead, mirrored in %v", version, dead, time.Since(restarted).Round(time.Millisecond))
			checkSameLogLed(t, ctx, src.cl, led, n.cl, topic)

			back := time.Now()
			if err := src.c.Node(dead).Restart(); err != nil {
				t.Fatal(err)
			}
			led = src.leaders(t, ctx, topic, fmt.Sprintf("broker %d back in every ISR", dead), func(p kadm.PartitionDetail) bool {
				return slices.Contains(p.ISR, dead) && len(p.ISR) == 3
			})
			ends = src.produceRound(t, ctx, pr, topic, parts, 2, "d")
			n.waitMirroredWithin(ctx, mirrorBrokerDead, "rk", topic, ends)
			t.Logf("Kafka %s: broker %d back, mirrored in %v", version, dead, time.Since(back).Round(time.Millisecond))
			checkSameLogLed(t, ctx, src.cl, led, n.cl, topic)
			checkReadOnly(t, ctx, n.addr(), topic)
		})
	}
}

// kafkaTopicID prints a topic id as Kafka does (Uuid.toString): URL-safe
// base64 without padding.
func kafkaTopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// namesID reports whether msg names id as a word of its own. Words run
// over both base64 alphabets and the padding, so the same id printed in
// standard base64 ("ab+c==" for Kafka's "ab-c") does not count.
func namesID(msg, id string) bool {
	words := strings.FieldsFunc(msg, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("-_+/=", r))
	})
	return slices.Contains(words, id)
}

// TestRealKafkaClusterTopicRecreated: a mirrored topic deleted at the
// source and recreated under the same name (a new topic id) with fewer
// records: the local copy keeps every record, byte for byte, and every
// partition ends FAILED with a message naming both topic ids; once while
// the kmirror node runs, once while it is down (issue 16 item 1:
// recreated within the sync interval, the copy went to 0 records and
// showed MIRRORING; recreated while kmirror was down, 2,950 of 3,000
// records were lost at the restart).
func TestRealKafkaClusterTopicRecreated(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	for _, version := range realkafka.Versions {
		t.Run(version, func(t *testing.T) {
			ctx := testCtx(t, 4*time.Minute)
			src := startRealCluster(t, version)
			const parts = 3
			topics := []string{"recreated-live", "recreated-down"}
			pr := manualProducer(t, src.c.Bootstrap())
			ends := map[string]map[int32]int64{}
			for _, topic := range topics {
				src.createTopic(t, ctx, topic, parts)
				ends[topic] = src.produceRound(t, ctx, pr, topic, parts, 50, "old") // 3,000 records
			}
			n := startCtlNode(t, "recreated-"+version, control.Config{})
			n.ok(ctx, createReq("rk", src.bootstrap()))
			n.ok(ctx, startReq("rk", topics...))
			copies := map[string]localCopy{}
			for _, topic := range topics {
				n.waitMirrored(ctx, "rk", topic, ends[topic])
				checkSameLogLed(t, ctx, src.cl, src.leaders(t, ctx, topic, topic+" led", func(kadm.PartitionDetail) bool { return true }), n.cl, topic)
				copies[topic] = readCopy(t, ctx, n, topic)
			}

			t.Run("node-up", func(t *testing.T) {
				const topic = "recreated-live"
				oldID, newID := src.recreate(t, ctx, topic, parts)
				n.waitRecreatedFailed(ctx, "rk", topic, oldID, newID)
				copies[topic].check(t, ctx, n)
			})
			t.Run("node-down", func(t *testing.T) {
				const topic = "recreated-down"
				n.close()
				oldID, newID := src.recreate(t, ctx, topic, parts)
				n.open()
				n.waitRecreatedFailed(ctx, "rk", topic, oldID, newID)
				copies[topic].check(t, ctx, n)
			})
		})
	}
}

// recreate deletes topic at the source, creates it again with as many
// partitions and writes 20 records to each (fewer than before); it
// returns the old and the new topic ids, as Kafka prints them.
func (s *realCluster) recreate(t *testing.T, ctx context.Context, topic string, parts int32) (oldID, newID string) {
	t.Helper()
	old := sourceTopicID(t, ctx, s.adm, topic)
	resp, err := s.adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("source: deleting %s: %v", topic, err)
	}
	// Kafka may still be removing the old topic's partitions: CreateTopics
	// answers TOPIC_ALREADY_EXISTS until it is gone.
	realWait(t, ctx, 30*time.Second, "source: creating "+topic+" again", func() error {
		resp, err := s.adm.CreateTopic(ctx, parts, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, topic)
		if err == nil {
			err = resp.Err
		}
		return err
	})
	cur := s.waitNewTopicID(t, ctx, topic, old)
	s.leaders(t, ctx, topic, "every partition of the new "+topic+" led, 3 replicas in sync", func(p kadm.PartitionDetail) bool {
		return len(p.ISR) == 3
	})
	// A producer of its own: one that wrote to the old topic keeps its id
	// and is refused with UNKNOWN_TOPIC_ID.
	s.produceRound(t, ctx, manualProducer(t, s.c.Bootstrap()), topic, parts, 1, "new")
	return kafkaTopicID(old), kafkaTopicID(cur)
}

// waitNewTopicID waits until every broker's metadata names topic with one
// id other than old, and returns it. Each broker applies the controller's
// metadata log on its own: right after CreateTopics one may still show the
// old topic, and a client asking it would write to or mirror the old one.
func (s *realCluster) waitNewTopicID(t *testing.T, ctx context.Context, topic string, old [16]byte) [16]byte {
	t.Helper()
	var id [16]byte
	realWait(t, ctx, 30*time.Second, "source: every broker knowing the new "+topic, func() error {
		id = [16]byte{}
		for _, node := range s.c.Nodes() {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := s.cl.Broker(int(node.ID())).Request(ctx, req)
			if err != nil {
				return fmt.Errorf("broker %d: %w", node.ID(), err)
			}
			mt := resp.(*kmsg.MetadataResponse).Topics
			switch {
			case len(mt) != 1 || mt[0].ErrorCode != 0:
				return fmt.Errorf("broker %d: metadata of %s: %+v", node.ID(), topic, mt)
			case mt[0].TopicID == old:
				return fmt.Errorf("broker %d still shows the old topic id %s", node.ID(), kafkaTopicID(old))
			case id != [16]byte{} && mt[0].TopicID != id:
				return fmt.Errorf("broker %d shows topic id %s, another %s", node.ID(), kafkaTopicID(mt[0].TopicID), kafkaTopicID(id))
			}
			id = mt[0].TopicID
		}
		return nil
	})
	return id
}

func sourceTopicID(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) [16]byte {
	t.Helper()
	tds, err := adm.ListTopics(ctx, topic)
	if err == nil {
		err = tds.Error()
	}
	if err != nil {
		t.Fatalf("source: metadata of %s: %v", topic, err)
	}
	return tds[topic].ID
}

// waitRecreatedFailed waits until every partition of topic is FAILED with
// a message naming the old and the new source topic ids, then checks that
// it stays FAILED: a recreated topic is not retried (a retry would flap
// through MIRRORING, issue 16 item 6).
func (n *ctlNode) waitRecreatedFailed(ctx context.Context, mirror, topic, oldID, newID string) {
	n.t.Helper()
	failed := func() error {
		ps := n.describe(ctx, mirror)[topic]
		if len(ps) == 0 {
			return errors.New("no partitions described")
		}
		for _, p := range ps {
			if p.StateValue != "FAILED" || p.ErrorMessage == nil || !namesID(*p.ErrorMessage, oldID) || !namesID(*p.ErrorMessage, newID) {
				return fmt.Errorf("want every partition FAILED naming topic ids %s (copied) and %s (new): %s", oldID, newID, describePartitions(ps))
			}
		}
		return nil
	}
	testutil.CheckFor(n.t, mirrorBrokerDead, testutil.Named(fmt.Sprintf("node %s: %s FAILED for the recreated source topic", n.name, topic), failed))
	// Past the first automatic retry (RetryInitial, 1 s, jittered).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until); {
		if err := failed(); err != nil {
			n.t.Fatalf("node %s: %s left FAILED: %v", n.name, topic, err)
		}
		select {
		case <-ctx.Done():
			n.t.Fatalf("node %s: %s: %v", n.name, topic, ctx.Err())
		case <-tick.C:
		}
	}
}

// localCopy is what a node holds of a topic: log starts and ends, and the
// raw batches in between, by partition.
type localCopy struct {
	topic       string
	starts, end map[int32]int64
	raw         map[int32][]byte
}

func readCopy(t *testing.T, ctx context.Context, n *ctlNode, topic string) localCopy {
	t.Helper()
	c := localCopy{topic: topic, starts: listOffsets(t, ctx, n.adm, topic, true), end: listOffsets(t, ctx, n.adm, topic, false), raw: map[int32][]byte{}}
	for p, end := range c.end {
		c.raw[p] = readRaw(t, ctx, n.cl, -1, topic, p, c.starts[p], end)
	}
	return c
}

// check fails t unless the node still holds exactly c.
func (c localCopy) check(t *testing.T, ctx context.Context, n *ctlNode) {
	t.Helper()
	now := readCopy(t, ctx, n, c.topic)
	for p, raw := range c.raw {
		if now.starts[p] != c.starts[p] || now.end[p] != c.end[p] {
			t.Fatalf("node: %s-%d log [%d, %d), was [%d, %d) before the source recreated the topic", c.topic, p, now.starts[p], now.end[p], c.starts[p], c.end[p])
		}
		if string(now.raw[p]) != string(raw) {
			t.Fatalf("node: %s-%d batches changed since the source recreated the topic: %s", c.topic, p, diffRaw(raw, now.raw[p]))
		}
	}
	checkReadOnly(t, ctx, n.addr(), c.topic)
}
