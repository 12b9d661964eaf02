package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// describeLive checks that node i describes every partition of mirror
// "dr"'s topic live: reported by its leader (in node i's view), with a
// lag in time, a source offset read within the last few seconds and
// equal to ends (the source's end offsets, all copied), and the
// controller's last group sync.
func (c *testCluster) describeLive(i int, topic string, ends map[int32]int64) error {
	req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
	req.MirrorNames = []string{"dr"}
	r, err := c.tryMirrorRPC(i, req)
	if err != nil {
		return err
	}
	resp := r.(*mirrorapi.DescribeClusterMirrorsResponse)
	if len(resp.Mirrors) != 1 || len(resp.Mirrors[0].Topics) != 1 || len(resp.Mirrors[0].Topics[0].Partitions) != len(ends) {
		return fmt.Errorf("node %d describes %+v", i+1, resp.Mirrors)
	}
	if resp.Mirrors[0].LastGroupSyncMillis <= 0 {
		return fmt.Errorf("node %d: LastGroupSyncMillis %d after the controller's sync", i+1, resp.Mirrors[0].LastGroupSyncMillis)
	}
	for _, p := range resp.Mirrors[0].Topics[0].Partitions {
		leader := c.leaderOf(i, topic, p.PartitionIndex)
		switch {
		case p.ReportedBy != leader:
			return fmt.Errorf("node %d: %s-%d reported by %d, its leader is %d: %+v", i+1, topic, p.PartitionIndex, p.ReportedBy, leader, p)
		case p.LagMillis < 0 || p.SourceOffsetAgeMillis < 0 || p.SourceOffsetAgeMillis > 5000:
			return fmt.Errorf("node %d: %s-%d is not live: %+v", i+1, topic, p.PartitionIndex, p)
		case p.SourceOffset != ends[p.PartitionIndex] || p.DestinationOffset != ends[p.PartitionIndex] || p.Lag != 0:
			return fmt.Errorf("node %d: %s-%d source %d destination %d lag %d, the source's end is %d", i+1, topic, p.PartitionIndex,
				p.SourceOffset, p.DestinationOffset, p.Lag, ends[p.PartitionIndex])
		}
	}
	return nil
}

// Describe in a cluster (issue 22): any node answers for every partition
// with the row of the partition's leader, which runs its fetcher, so the
// source offsets, the lag in time and the stalled flag are live wherever
// an operator asks, not the metadata log's checkpoint of up to 10 s ago;
// and the mirror's last group sync is the controller's, which runs it.
// When a node leaves, the partitions' new leaders report them.
func TestClusterDescribeIsLiveOnEveryNode(t *testing.T) {
	t.Parallel()
	const topic, partitions = "clicks", 6
	src := kfaketest.Source(t, kfake.SeedTopics(partitions, topic))
	scl := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(prefix string) {
		t.Helper()
		for i := range 60 {
			if err := scl.ProduceSync(t.Context(), &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("before")
	c := startCluster(t, 3, logsOnFailure(t), func(cfg *broker.Config) { cfg.DefaultReplicationFactor = 3 })
	ctl := c.controllerIndex()
	c.mirrorFrom(ctl, src, topic, partitions)
	c.nodes[ctl].Mirrors.SyncOnce()

	// New source records, read by the leaders' fetchers: every node's
	// answer has them within the checkpoint's interval (10 s).
	produce("after")
	ends := sourceEnds(t, src, topic, partitions)
	for i := range c.nodes {
		testutil.CheckFor(t, 8*time.Second, func() error { return c.describeLive(i, topic, ends) })
	}

	// A node that is not the controller leaves; the partitions it led
	// are reported by their new leaders.
	gone := (ctl + 1) % 3
	c.stop(gone)
	produce("later")
	ends = sourceEnds(t, src, topic, partitions)
	for _, i := range []int{ctl, (ctl + 2) % 3} {
		testutil.CheckFor(t, 20*time.Second, func() error { return c.describeLive(i, topic, ends) })
	}
}
