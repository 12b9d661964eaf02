package node

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/partition"
)

// addrs are the client addresses of c's running nodes.
func (c *testCluster) addrs() []string {
	var out []string
	for _, n := range c.nodes {
		if n != nil {
			out = append(out, n.Addr())
		}
	}
	return out
}

// leaderPartition is the running leader's copy of partition p of topic.
func (c *testCluster) leaderPartition(topic string, p int32) (*partition.Partition, error) {
	for i, n := range c.nodes {
		if n != nil && c.leaderOf(i, topic, p) == int32(i+1) {
			return c.partitionOn(i, topic, p), nil
		}
	}
	return nil, fmt.Errorf("%s-%d has no running leader", topic, p)
}

// createMirror creates mirror on c from the nodes at bootstrap and starts
// topic, through node i.
func (c *testCluster) createMirror(i int, mirror, topic string, bootstrap []string) {
	c.t.Helper()
	create := mirrorapi.NewPtrCreateClusterMirrorRequest()
	create.MirrorName = mirror
	create.Configs = []mirrorapi.CreateClusterMirrorRequestConfig{
		{Name: "bootstrap.servers", Value: kmsg.StringPtr(fmt.Sprint(bootstrap[0], ",", bootstrap[len(bootstrap)-1]))},
		{Name: "mirror.fetch.wait.max.ms", Value: kmsg.StringPtr("100")}}
	if r := c.mirrorRPC(i, create).(*mirrorapi.CreateClusterMirrorResponse); r.ErrorCode != 0 {
		c.t.Fatalf("CreateClusterMirror %s: %d %v", mirror, r.ErrorCode, r.ErrorMessage)
	}
	start := mirrorapi.NewPtrStartMirrorTopicsRequest()
	start.MirrorName = mirror
	start.Topics = []mirrorapi.StartMirrorTopicsRequestTopic{{TopicName: topic}}
	if r := c.mirrorRPC(i, start).(*mirrorapi.StartMirrorTopicsResponse); r.ErrorCode != 0 || r.Topics[0].ErrorCode != 0 {
		c.t.Fatalf("StartMirrorTopics %s: %+v", mirror, r)
	}
}

// stopMirror fails topic over from mirror through node i and waits until
// every partition is STOPPED.
func (c *testCluster) stopMirror(i int, mirror, topic string, partitions int) {
	c.t.Helper()
	stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName = mirror
	stop.Topics = []mirrorapi.MirrorTopicsRequestTopic{{TopicName: topic}}
	if r := c.mirrorRPC(i, stop).(*mirrorapi.StopMirrorTopicsResponse); r.ErrorCode != 0 || r.Topics[0].ErrorCode != 0 {
		c.t.Fatalf("StopMirrorTopics %s: %d %v %+v", mirror, r.ErrorCode, r.ErrorMessage, r.Topics)
	}
	c.allInState(i, mirror, "STOPPED", partitions)
}

// sameLogAs waits until each partition of topic on c's leaders holds the
// bytes of the same partition on other's leaders, byte for byte from
// offset 0, with c's replicas identical.
func (c *testCluster) sameLogAs(other *testCluster, topic string, partitions int32) {
	c.t.Helper()
	testutil.CheckFor(c.t, 45*time.Second, func() error {
		for p := range partitions {
			mine, err := c.leaderPartition(topic, p)
			if err != nil {
				return err
			}
			theirs, err := other.leaderPartition(topic, p)
			if err != nil {
				return err
			}
			end := theirs.LogEndOffset()
			if mine.LogEndOffset() != end || mine.HighWatermark() != end {
				return fmt.Errorf("%s-%d: log end %d (high watermark %d), the other cluster's %d", topic, p,
					mine.LogEndOffset(), mine.HighWatermark(), end)
			}
			want, _, err := theirs.Read(0, 64<<20, end, nil)
			if err != nil {
				return err
			}
			got, _, err := mine.Read(0, 64<<20, end, nil)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, want) {
				return fmt.Errorf("%s-%d: %d bytes differ from the other cluster's %d", topic, p, len(got), len(want))
			}
		}
		return nil
	})
	c.replicasIdentical(topic, partitions)
}

// Failover and failback between two kmirror clusters of three nodes
// (issue 22), as between two nodes (TestControlE2EFailback): B mirrors A
// and fails over; A writes on meanwhile (a tail B never gets), B writes
// its own; then A mirrors the topic back from B: every partition's leader
// on A cuts the tail written after the failover point (its alignment's
// OffsetForLeaderEpoch against B), its followers follow the cut, and A
// ends byte for byte B's log.
func TestClusterFailoverAndFailbackBetweenTwoClusters(t *testing.T) {
	t.Parallel()
	const topic, partitions = "fb", 3
	rf3 := func(cfg *broker.Config) { cfg.DefaultReplicationFactor = 3 }
	a := startCluster(t, 3, logsOnFailure(t), rf3)
	b := startCluster(t, 3, logsOnFailure(t), rf3)
	ctx := t.Context()
	a.createReplicated(topic, partitions, 3)
	produce := func(c *testCluster, prefix string, n int) {
		t.Helper()
		cl := nodetest.Client(t, c.addrs(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()))
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("producing %s: %v", prefix, err)
		}
	}
	produce(a, "common", 60)

	b.createMirror((b.controllerIndex()+1)%3, "dr", topic, a.addrs())
	b.allInState(0, "dr", "MIRRORING", partitions)
	b.sameLogAs(a, topic, partitions)

	// Failover to B; both sides write on.
	b.stopMirror(1, "dr", topic, partitions)
	produce(a, "a-divergent", 30)
	produce(b, "b-own", 45)

	// Failback: A mirrors from B, cutting its own tail.
	a.createMirror((a.controllerIndex()+1)%3, "back", topic, b.addrs())
	a.allInState(2, "back", "MIRRORING", partitions)
	a.sameLogAs(b, topic, partitions)

	// A is the primary again.
	a.stopMirror(0, "back", topic, partitions)
	produce(a, "a-again", 6)
}
