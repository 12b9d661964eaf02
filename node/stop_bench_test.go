package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// The failover of 1,000 mirrored partitions (100 topics of 10) on a node
// built as kmirror serve builds one: one op is a StopMirrorTopics of every
// topic, from the request until every partition is STOPPED (each
// partition's transitions are writes of the replicated records, through
// the metadata log).
//
//	go test ./node -run NONE -bench Stop1000 -benchtime 3x
func BenchmarkStop1000Partitions(b *testing.B) {
	const topics, partitions = 100, 10
	src := kfaketest.Source(b)
	scl := nodetest.Client(b, src.ListenAddrs(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("stop-%03d", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(scl).CreateTopics(ctx, partitions, 1, nil, names...); err != nil {
		b.Fatal(err)
	}
	var recs []*kgo.Record
	for _, t := range names {
		for p := range int32(partitions) {
			recs = append(recs, &kgo.Record{Topic: t, Partition: p, Value: []byte("v")})
		}
	}
	if err := scl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	rpc := func(n *Node, req kmsg.Request) kmsg.Response {
		resp, err := n.Mirrors.Handle(req)
		if err != nil {
			b.Fatal(err)
		}
		return resp
	}
	states := func(n *Node, mirror, want string) error {
		req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
		req.MirrorNames = []string{mirror}
		resp := rpc(n, req).(*mirrorapi.DescribeClusterMirrorsResponse)
		count := 0
		for _, t := range resp.Mirrors[0].Topics {
			for _, p := range t.Partitions {
				if p.StateValue != want {
					return fmt.Errorf("%s-%d is %s, want %s", t.TopicName, p.PartitionIndex, p.StateValue, want)
				}
				count++
			}
		}
		if count != topics*partitions {
			return fmt.Errorf("%d partitions described", count)
		}
		return nil
	}
	for i := range b.N {
		b.StopTimer()
		n, err := Start(nodetest.Config(b), control.Config{RefreshInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		mirror := fmt.Sprintf("dr%d", i)
		create := mirrorapi.NewPtrCreateClusterMirrorRequest()
		create.MirrorName = mirror
		create.Configs = []mirrorapi.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: kmsg.StringPtr(src.ListenAddrs()[0])},
			{Name: "mirror.fetch.wait.max.ms", Value: kmsg.StringPtr("100")}}
		rpc(n, create)
		start := mirrorapi.NewPtrStartMirrorTopicsRequest()
		start.MirrorName = mirror
		for _, t := range names {
			start.Topics = append(start.Topics, mirrorapi.StartMirrorTopicsRequestTopic{TopicName: t})
		}
		rpc(n, start)
		testutil.CheckFor(b, 5*time.Minute, func() error { return states(n, mirror, "MIRRORING") })
		stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
		stop.MirrorName = mirror
		for _, t := range names {
			stop.Topics = append(stop.Topics, mirrorapi.MirrorTopicsRequestTopic{TopicName: t})
		}
		b.StartTimer()
		rpc(n, stop)
		for states(n, mirror, "STOPPED") != nil {
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		n.Close()
	}
}
