package node

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// Mirror throughput into one node and into a cluster of three with the
// topic replicated three times (issue 22), as a lagging mirror catching
// up: the mirror runs and has copied a first record per partition; it is
// paused, the source takes 6 partitions of 1 KiB random records (lz4
// batches), and one op is a ResumeMirrorTopics until every partition's
// leader has committed the source's end (in the cluster: its two
// followers hold it too). Starting the mirror is left out of the time.
//
//	go test ./node -run NONE -bench MirrorInto -benchtime 3x
func BenchmarkMirrorInto(b *testing.B) {
	const topic, partitions, perPartition, valueSize = "thru", 6, 20000, 1024
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			b.SetBytes(int64(partitions * perPartition * valueSize))
			for i := range b.N {
				b.StopTimer()
				src := kfaketest.Source(b)
				scl := nodetest.Client(b, src.ListenAddrs(), kgo.DefaultProduceTopic(topic),
					kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
				ctx := b.Context()
				if _, err := kadm.NewClient(scl).CreateTopics(ctx, partitions, 1, nil, topic); err != nil {
					b.Fatal(err)
				}
				produceRandom(b, scl, partitions, 1, valueSize)
				var all []*Node
				var ctl *Node
				if nodes == 1 {
					n, err := Start(nodetest.Config(b), control.Config{RefreshInterval: -1})
					if err != nil {
						b.Fatal(err)
					}
					all, ctl = []*Node{n}, n
				} else {
					all, ctl = startBenchCluster(b, nodes)
				}
				rpc := func(req kmsg.Request) {
					if _, err := ctl.Mirrors.Handle(req); err != nil {
						b.Fatal(err)
					}
				}
				mirror := fmt.Sprintf("thru%d", i)
				create := mirrorapi.NewPtrCreateClusterMirrorRequest()
				create.MirrorName = mirror
				create.Configs = []mirrorapi.CreateClusterMirrorRequestConfig{
					{Name: "bootstrap.servers", Value: kmsg.StringPtr(src.ListenAddrs()[0])},
					{Name: "mirror.fetch.wait.max.ms", Value: kmsg.StringPtr("100")}}
				rpc(create)
				start := mirrorapi.NewPtrStartMirrorTopicsRequest()
				start.MirrorName = mirror
				start.Topics = []mirrorapi.StartMirrorTopicsRequestTopic{{TopicName: topic}}
				rpc(start)
				caughtUp(b, src, all, topic, partitions)
				pause := mirrorapi.NewPtrPauseMirrorTopicsRequest()
				pause.MirrorName = mirror
				pause.Topics = []mirrorapi.MirrorTopicsRequestTopic{{TopicName: topic}}
				rpc(pause)
				produceRandom(b, scl, partitions, perPartition, valueSize)
				resume := mirrorapi.NewPtrResumeMirrorTopicsRequest()
				resume.MirrorName = mirror
				resume.Topics = pause.Topics
				b.StartTimer()
				rpc(resume)
				caughtUp(b, src, all, topic, partitions)
				b.StopTimer()
				for _, n := range all {
					n.Close()
				}
				src.Close()
			}
		})
	}
}

// produceRandom writes perPartition records of size random bytes to each
// of the partitions of cl's default topic.
func produceRandom(b *testing.B, cl *kgo.Client, partitions, perPartition, size int) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range partitions * perPartition {
		value := make([]byte, size)
		for i := range value {
			value[i] = byte(rng.Uint32())
		}
		cl.Produce(b.Context(), &kgo.Record{Value: value}, nil)
	}
	if err := cl.Flush(b.Context()); err != nil {
		b.Fatal(err)
	}
}

// caughtUp waits until every partition of topic is committed on its
// leader up to the source's end.
func caughtUp(b *testing.B, src *kfake.Cluster, nodes []*Node, topic string, partitions int32) {
	ends, err := kadm.NewClient(nodetest.Client(b, src.ListenAddrs())).ListEndOffsets(b.Context(), topic)
	if err != nil {
		b.Fatal(err)
	}
	testutil.CheckFor(b, 5*time.Minute, func() error {
		for p := range partitions {
			end, _ := ends.Lookup(topic, p)
			if hw := committedOnLeader(nodes, topic, p); hw != end.Offset {
				return fmt.Errorf("%s-%d: committed %d of %d", topic, p, hw, end.Offset)
			}
		}
		return nil
	})
}

// committedOnLeader is the high watermark of partition p of topic on
// the node that leads it (a node alone leads all), -1 without one.
func committedOnLeader(nodes []*Node, topic string, p int32) int64 {
	for i, n := range nodes {
		t := n.Broker.Partitions().Topic(topic)
		if t == nil {
			continue
		}
		part := t.Partition(p)
		if a, ok := part.Assignment(); !ok || a.Leader == int32(i+1) {
			return part.HighWatermark()
		}
	}
	return -1
}
