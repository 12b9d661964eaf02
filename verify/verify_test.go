package verify

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// One kfake cluster as both sides: 20 partitions led by 3 brokers, read 2
// at a time (each reader's connection goes back for the next partition),
// with a NOT_LEADER_OR_FOLLOWER answered twice on the way: every
// partition is IDENTICAL, every batch compared once per side.
func TestRunSameCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic, partitions = "t", 20
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 400 {
		cl.Produce(ctx, &kgo.Record{Partition: int32(i % partitions), Value: []byte(fmt.Sprint(i))}, nil)
		if i%100 == 99 {
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: topic, Partitions: []int32{7},
		Err: kerr.NotLeaderForPartition, Count: 2})
	defer h.Remove()
	var parts []Partition
	for p := range int32(partitions) {
		parts = append(parts, Partition{Topic: topic, Partition: p, StoppedAt: -1})
	}
	res, err := Run(ctx, Config{Source: cl, Copy: cl, Partitions: parts, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Status != Identical || r.ComparedBatches < 4 || r.ReadBytes != 2*r.ComparedBytes || r.From != 0 || r.To != 20 {
			t.Errorf("%s-%d: %s, %d batches (%d bytes) compared, %d read, window [%d, %d), notes %q, err %v",
				r.Topic, r.Partition, r.Status, r.ComparedBatches, r.ComparedBytes, r.ReadBytes, r.From, r.To, r.Notes, r.Err)
		}
	}
	if h.Hits() != 2 {
		t.Errorf("the NOT_LEADER_OR_FOLLOWER fault was hit %d times, want 2", h.Hits())
	}
}
