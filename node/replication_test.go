package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testcerts"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// createReplicated creates topic with partitions partitions of rf
// replicas through the controller, and waits until every running node
// hosts it and every replica's image shows the full ISR.
func (c *testCluster) createReplicated(topic string, partitions int32, rf int) {
	c.t.Helper()
	ctl := c.controllerIndex()
	id := [16]byte{15: byte(len(topic)), 14: topic[0], 13: byte(partitions)}
	if err := c.nodes[ctl].controller.CreateTopic(c.t.Context(), state.Topic{Name: topic, ID: id, Partitions: partitions}, rf); err != nil {
		c.t.Fatal(err)
	}
	c.inSync(topic, rf)
}

// inSync waits until every running node hosts topic and every replica's
// image shows rf replicas, all in the ISR.
func (c *testCluster) inSync(topic string, rf int) {
	c.t.Helper()
	testutil.CheckFor(c.t, 20*time.Second, func() error {
		for i, n := range c.nodes {
			if n == nil {
				continue
			}
			t := n.Broker.Partitions().Topic(topic)
			if t == nil {
				return fmt.Errorf("node %d does not host %s", i+1, topic)
			}
			for _, p := range t.Partitions() {
				if a, ok := p.Assignment(); !ok || len(a.Replicas) != rf || len(a.ISR) != rf {
					return fmt.Errorf("node %d: %s-%d assignment %+v %v", i+1, topic, p.Index(), a, ok)
				}
			}
		}
		return nil
	})
}

// partitionOn is node i's partition p of topic.
func (c *testCluster) partitionOn(i int, topic string, p int32) *partition.Partition {
	return c.nodes[i].Broker.Partitions().Topic(topic).Partition(p)
}

// replicasIdentical waits until every running replica of every
// partition of topic holds the same bytes at the same offsets as its
// leader, up to its log end, and the leader's high watermark is there.
// The nodes that are not replicas (they host the partition, empty) are
// not compared.
func (c *testCluster) replicasIdentical(topic string, partitions int32) {
	c.t.Helper()
	testutil.CheckFor(c.t, 30*time.Second, func() error {
		for p := range partitions {
			var leader *partition.Partition
			for i, n := range c.nodes {
				if n == nil {
					continue
				}
				if a, ok := c.partitionOn(i, topic, p).Assignment(); ok && a.Leader == int32(i+1) {
					leader = c.partitionOn(i, topic, p)
				}
			}
			if leader == nil {
				return fmt.Errorf("%s-%d has no running leader", topic, p)
			}
			end := leader.LogEndOffset()
			if leader.HighWatermark() != end {
				return fmt.Errorf("%s-%d: leader's high watermark %d, log end %d", topic, p, leader.HighWatermark(), end)
			}
			want, _, err := leader.Read(leader.LogStartOffset(), 64<<20, end, nil)
			if err != nil {
				return err
			}
			la, _ := leader.Assignment()
			for i, n := range c.nodes {
				if n == nil || !slices.Contains(la.Replicas, int32(i+1)) {
					continue
				}
				r := c.partitionOn(i, topic, p)
				if r.LogEndOffset() != end {
					return fmt.Errorf("%s-%d on node %d: log end %d, leader's %d", topic, p, i+1, r.LogEndOffset(), end)
				}
				got, _, err := r.Read(leader.LogStartOffset(), 64<<20, end, nil)
				if err != nil {
					return err
				}
				if !bytes.Equal(got, want) {
					return fmt.Errorf("%s-%d on node %d: %d bytes differ from the leader's %d", topic, p, i+1, len(got), len(want))
				}
			}
		}
		return nil
	})
}

// produceAll produces n records of prefix to topic through node i with
// an idempotent acks=all producer, and returns their values.
func (c *testCluster) produceAll(i int, topic, prefix string, n int) []string {
	c.t.Helper()
	cl := nodetest.Client(c.t, []string{c.nodes[i].Addr()}, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	var vals []string
	ctx, cancel := context.WithTimeout(c.t.Context(), 60*time.Second)
	defer cancel()
	for j := range n {
		v := fmt.Sprintf("%s-%d", prefix, j)
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			c.t.Fatalf("producing %s: %v", v, err)
		}
		vals = append(vals, v)
	}
	return vals
}

// consumeAll reads topic from the start through node i until it has
// want values, and fails on a duplicate or a missing one.
func (c *testCluster) consumeAll(i int, topic string, want []string) {
	c.t.Helper()
	cl := nodetest.Client(c.t, []string{c.nodes[i].Addr()}, kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	testutil.CheckFor(c.t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(c.t.Context(), time.Second)
		defer cancel()
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
		if len(seen) < len(want) {
			return fmt.Errorf("read %d of %d records", len(seen), len(want))
		}
		return nil
	})
	for _, v := range want {
		if seen[v] != 1 {
			c.t.Fatalf("record %s read %d times", v, seen[v])
		}
	}
	if len(seen) != len(want) {
		c.t.Fatalf("read %d distinct records, produced %d", len(seen), len(want))
	}
}

// Followers fetch on inter.broker.listener.name, here an SSL listener
// beside the clients' PLAINTEXT one: they check the leader's certificate
// against the node's truststore, and replicate as over PLAINTEXT.
func TestClusterReplicatesOverSSL(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t)
	cert := ca.Server()
	c := startCluster(t, 3, func(cfg *broker.Config) {
		cfg.Listeners = append(cfg.Listeners, broker.Listener{Name: "SSL", Host: "127.0.0.1", Protocol: "SSL"})
		cfg.InterBrokerListenerName = "SSL"
		cfg.Security.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}, ClientCAs: ca.Pool}
	})
	c.createReplicated("tls", 1, 3)
	acked := c.produceAll(0, "tls", "a", 30)
	c.replicasIdentical("tls", 1)
	c.consumeAll(0, "tls", acked)
}

// Three nodes replicate an RF-3 topic: acks=all produces are on every
// replica, byte for byte at the same offsets, when they are answered.
// The leader of a partition stops: another ISR member leads with every
// acknowledged record, takes new ones, and the stopped node, restarted,
// truncates what it must, catches up and rejoins the ISR. While it is
// down, min.insync.replicas=3 refuses acks=all.
func TestClusterReplicates(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	c.createReplicated("r", 3, 3)
	c.createReplicated("strict", 1, 3)
	set := kadm.AlterConfig{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kmsg.StringPtr("3")}
	if _, err := c.client(0).AlterTopicConfigs(t.Context(), []kadm.AlterConfig{set}, "strict"); err != nil {
		t.Fatal(err)
	}
	acked := c.produceAll(0, "r", "a", 60)
	c.produceAll(0, "strict", "s", 1)
	c.replicasIdentical("r", 3)

	var leader int
	if a, _ := c.partitionOn(0, "r", 0).Assignment(); a.Leader > 0 {
		leader = int(a.Leader) - 1
	}
	c.stop(leader)
	survivor := (leader + 1) % 3
	testutil.CheckFor(t, 20*time.Second, func() error {
		a, _ := c.partitionOn(survivor, "r", 0).Assignment()
		if a.Leader < 0 || a.Leader == int32(leader+1) || slices.Contains(a.ISR, int32(leader+1)) {
			return fmt.Errorf("r-0 after node %d stopped: %+v", leader+1, a)
		}
		return nil
	})
	acked = append(acked, c.produceAll(survivor, "r", "b", 60)...)
	c.consumeAll(survivor, "r", acked)

	// Two in-sync replicas of three: acks=all to a topic that wants three
	// is refused, acks=1 is not.
	testutil.CheckFor(t, 20*time.Second, func() error {
		if a, _ := c.partitionOn(survivor, "strict", 0).Assignment(); len(a.ISR) != 2 {
			return fmt.Errorf("strict-0's ISR %v", a.ISR)
		}
		return nil
	})
	strict := nodetest.Client(t, []string{c.nodes[survivor].Addr()}, kgo.DefaultProduceTopic("strict"),
		kgo.RecordRetries(0))
	if err := strict.ProduceSync(t.Context(), &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with 2 in-sync replicas of min.insync.replicas=3: %v, want NOT_ENOUGH_REPLICAS", err)
	}
	if got := metricValue(t, c.nodes[survivor], "kmirror_replication_under_replicated_partitions"); got < 1 {
		t.Fatalf("under-replicated partitions led by node %d: %v, want at least 1", survivor+1, got)
	}
	one := nodetest.Client(t, []string{c.nodes[survivor].Addr()}, kgo.DefaultProduceTopic("strict"),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err := one.ProduceSync(t.Context(), &kgo.Record{Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatalf("acks=1 with 2 in-sync replicas: %v", err)
	}

	c.restart(leader)
	c.replicasIdentical("r", 3)
	testutil.CheckFor(t, 30*time.Second, func() error {
		for p := range int32(3) {
			if a, _ := c.partitionOn(survivor, "r", p).Assignment(); len(a.ISR) != 3 {
				return fmt.Errorf("r-%d's ISR %v: the restarted node has not rejoined", p, a.ISR)
			}
		}
		return nil
	})
	c.consumeAll(leader, "r", acked)
	c.produceAll(leader, "strict", "t", 1) // three in sync again
	var expands, under float64
	for _, n := range c.nodes {
		expands += metricValue(t, n, "kmirror_replication_isr_expands_total")
		under += metricValue(t, n, "kmirror_replication_under_replicated_partitions")
	}
	if expands < 4 || under != 0 {
		t.Fatalf("after the rejoin: %v ISR expansions (want one per partition, 4), %v under-replicated partitions", expands, under)
	}
}

// metricValue is the value of the unlabelled metric name on n's /metrics.
func metricValue(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	n.MetricsHandler(false).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no %s on /metrics", name)
	return 0
}
