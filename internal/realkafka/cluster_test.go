package realkafka

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Each required version starts a 3-node cluster, takes records on an RF 3
// topic, survives a kill -9 of a partition leader (a new leader is
// elected and serves every acknowledged record, and takes more with
// acks=all) and takes the node back (it rejoins every ISR); then a
// controlled shutdown (Stop) of a leader moves its leaders away at once.
// The versions run one after the other, not in parallel: two clusters are
// six JVMs, and on a 2-core machine a JVM starved of CPU for longer than
// the broker session timeout is fenced though alive.
func TestRealKafkaClusterKillRestart(t *testing.T) {
	eachVersion(t, false, 3*time.Minute, func(t *testing.T, ctx context.Context, v string) {
		began := time.Now()
		c, err := StartCluster(3, Config{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if t.Failed() {
				for _, n := range c.Nodes() {
					t.Logf("node %d broker.log, the end:\n%s", n.ID(), n.LogTail(3000))
				}
			}
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		}()
		t.Logf("Kafka %s: 3 nodes up in %v", v, time.Since(began).Round(time.Millisecond))
		if got := c.Bootstrap(); len(got) != 3 || c.Node(2).Addr() != got[1] || c.Node(2).ID() != 2 || c.Node(4) != nil {
			t.Fatalf("Bootstrap %v, node 2 at %s", got, c.Node(2).Addr())
		}

		const topic, parts = "rf3", 3
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		// min.insync.replicas 2: an acknowledged record is on two
		// replicas, so the kill below cannot lose it.
		minISR := "2"
		if _, err := adm.CreateTopic(ctx, parts, 3, map[string]*string{"min.insync.replicas": &minISR}, topic); err != nil {
			t.Fatalf("creating %s: %v", topic, err)
		}
		var want []string
		produce := func(tag string) {
			t.Helper()
			var rs []*kgo.Record
			for p := range int32(parts) {
				for i := range 20 {
					rs = append(rs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%d-%s-%d", p, tag, i)})
				}
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatalf("producing %s: %v", tag, err)
			}
			for _, r := range rs {
				want = append(want, string(r.Value))
			}
		}
		produce("before")

		// The first partition's leader, waiting while the partitions of
		// a new topic still have none or a short ISR.
		var dead int32
		waitTopic(t, ctx, 30*time.Second, adm, topic, "every partition led, ISR of 3", func(ps kadm.PartitionDetails) error {
			for _, p := range ps {
				if p.Leader < 1 || len(p.ISR) != 3 {
					return fmt.Errorf("partition %d: leader %d, ISR %v", p.Partition, p.Leader, p.ISR)
				}
			}
			dead = ps[0].Leader
			return nil
		})
		if err := c.Node(dead).Kill(); err != nil {
			t.Fatal(err)
		}
		if err := c.Node(dead).Kill(); err == nil {
			t.Fatal("a second Kill of a dead node answered no error")
		}
		killed := time.Now()
		waitTopic(t, ctx, 30*time.Second, adm, topic, fmt.Sprintf("new leaders without node %d", dead), func(ps kadm.PartitionDetails) error {
			for _, p := range ps {
				if p.Leader < 1 || p.Leader == dead || slices.Contains(p.ISR, dead) {
					return fmt.Errorf("partition %d: leader %d, ISR %v", p.Partition, p.Leader, p.ISR)
				}
			}
			return nil
		})
		t.Logf("Kafka %s: node %d killed, new leaders elected in %v", v, dead, time.Since(killed).Round(time.Millisecond))
		produce("while-dead") // acks=all on the two replicas left
		checkRecords(t, ctx, c.Bootstrap(), topic, want)

		restarted := time.Now()
		if err := c.Node(dead).Restart(); err != nil {
			t.Fatal(err)
		}
		waitTopic(t, ctx, 30*time.Second, adm, topic, fmt.Sprintf("node %d back in every ISR", dead), func(ps kadm.PartitionDetails) error {
			for _, p := range ps {
				if p.Leader < 1 || !slices.Contains(p.ISR, dead) || len(p.ISR) != 3 {
					return fmt.Errorf("partition %d: leader %d, ISR %v", p.Partition, p.Leader, p.ISR)
				}
			}
			return nil
		})
		t.Logf("Kafka %s: node %d restarted and back in every ISR in %v", v, dead, time.Since(restarted).Round(time.Millisecond))
		// Back in the ISR, the node acknowledges acks=all writes too.
		produce("after-restart")
		checkRecords(t, ctx, c.Bootstrap(), topic, want)

		// A controlled shutdown moves the node's leaders away before it
		// exits: once Stop returns they are elsewhere, well within the 6 s
		// a killed node's session takes to expire.
		var stopped int32
		waitTopic(t, ctx, 5*time.Second, adm, topic, "partition 0's leader", func(ps kadm.PartitionDetails) error {
			stopped = ps[0].Leader
			return nil
		})
		stopAt := time.Now()
		if err := c.Node(stopped).Stop(); err != nil {
			t.Fatal(err)
		}
		t.Logf("Kafka %s: node %d stopped (SIGTERM) in %v", v, stopped, time.Since(stopAt).Round(time.Millisecond))
		waitTopic(t, ctx, 5*time.Second, adm, topic, fmt.Sprintf("no leader on node %d after its controlled shutdown", stopped), func(ps kadm.PartitionDetails) error {
			for _, p := range ps {
				if p.Leader < 1 || p.Leader == stopped {
					return fmt.Errorf("partition %d: leader %d, ISR %v", p.Partition, p.Leader, p.ISR)
				}
			}
			return nil
		})
		produce("after-stop")
		checkRecords(t, ctx, c.Bootstrap(), topic, want)
		t.Logf("Kafka %s: whole test %v", v, time.Since(began).Round(time.Millisecond))
	})
}

// waitTopic polls topic's metadata every 200 ms until cond accepts its
// partitions, failing t with cond's last error when d passes. A leader
// change reaches the brokers' metadata caches within a heartbeat or two.
func waitTopic(t *testing.T, ctx context.Context, d time.Duration, adm *kadm.Client, topic, what string, cond func(kadm.PartitionDetails) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		tds, err := adm.ListTopics(ctx, topic)
		if err == nil {
			err = tds[topic].Err
		}
		if err == nil {
			err = cond(tds[topic].Partitions)
		}
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %v: %v", what, d, err)
		case <-tick.C:
		}
	}
}

// checkRecords consumes topic from seeds from the start until it holds as
// many records as want, and checks they are want (in any order across
// partitions).
func checkRecords(t *testing.T, ctx context.Context, seeds []string, topic string, want []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	for len(got) < len(want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %s from %v: %d of %d records", topic, seeds, len(got), len(want))
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	sorted := slices.Sorted(slices.Values(want))
	if !slices.Equal(got, sorted) {
		t.Fatalf("consumed from %v: %d records, want %d; first %s",
			seeds, len(got), len(want), strconv.Quote(fmt.Sprint(got[:min(5, len(got))])))
	}
}
