package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// The failover of 1,000 mirrored partitions (100 topics of 10) on a node
// built as kmirror serve builds one: one op is a StopMirrorTopics of every
// topic, from the request until every partition is STOPPED (each
// partition's transitions are writes of the replicated records, through
// the metadata log).
//
//	go test ./node -run NONE -bench Stop1000 -benchtime 3x
func BenchmarkStop1000Partitions(b *testing.B) {
	src, names := stopBenchSource(b)
	for i := range b.N {
		b.StopTimer()
		n, err := Start(nodetest.Config(b), control.Config{RefreshInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		stopBenchRound(b, n, fmt.Sprintf("dr%d", i), src.ListenAddrs()[0], names)
		n.Close()
	}
}

// The same failover into a cluster of three nodes, the topics replicated
// three times (issue 22's goal: under 1 s): the controller answers the
// Stop and each partition's leader fails it over.
//
//	go test ./node -run NONE -bench ClusterStop1000 -benchtime 1x
func BenchmarkClusterStop1000Partitions(b *testing.B) {
	src, names := stopBenchSource(b)
	for i := range b.N {
		b.StopTimer()
		nodes, ctl := startBenchCluster(b, 3)
		stopBenchRound(b, ctl, fmt.Sprintf("dr%d", i), src.ListenAddrs()[0], names)
		for _, n := range nodes {
			n.Close()
		}
	}
}

// startBenchCluster starts n voters of one cluster at once, topics
// replicated n times by default, and returns them and the controller.
func startBenchCluster(b *testing.B, n int) (nodes []*Node, ctl *Node) {
	cfgs := nodetest.ClusterConfigs(b, n)
	nodes = make([]*Node, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for j := range cfgs {
		cfgs[j].DefaultReplicationFactor = int32(n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[j], errs[j] = Start(cfgs[j], control.Config{RefreshInterval: -1})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	testutil.CheckFor(b, 20*time.Second, func() error {
		for _, n := range nodes {
			if n.log.IsController() {
				ctl = n
				return nil
			}
		}
		return errors.New("no controller")
	})
	return nodes, ctl
}

// stopBenchSource is a kfake source with 100 topics of 10 partitions, one
// record in each partition.
func stopBenchSource(b *testing.B) (*kfake.Cluster, []string) {
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
	return src, names
}

// stopBenchRound mirrors every topic of names into n's cluster through
// n's control plane (a node alone, or the controller) and times their
// failover: from the Stop until every partition is STOPPED.
func stopBenchRound(b *testing.B, n *Node, mirror, bootstrap string, names []string) {
	rpc := func(req kmsg.Request) kmsg.Response {
		resp, err := n.Mirrors.Handle(req)
		if err != nil {
			b.Fatal(err)
		}
		return resp
	}
	states := func(want string) error {
		req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
		req.MirrorNames = []string{mirror}
		resp := rpc(req).(*mirrorapi.DescribeClusterMirrorsResponse)
		count := 0
		for _, t := range resp.Mirrors[0].Topics {
			for _, p := range t.Partitions {
				if p.StateValue != want {
					return fmt.Errorf("%s-%d is %s, want %s", t.TopicName, p.PartitionIndex, p.StateValue, want)
				}
				count++
			}
		}
		if count != 10*len(names) {
			return fmt.Errorf("%d partitions described", count)
		}
		return nil
	}
	create := mirrorapi.NewPtrCreateClusterMirrorRequest()
	create.MirrorName = mirror
	create.Configs = []mirrorapi.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: kmsg.StringPtr(bootstrap)},
		{Name: "mirror.fetch.wait.max.ms", Value: kmsg.StringPtr("100")}}
	rpc(create)
	start := mirrorapi.NewPtrStartMirrorTopicsRequest()
	start.MirrorName = mirror
	for _, t := range names {
		start.Topics = append(start.Topics, mirrorapi.StartMirrorTopicsRequestTopic{TopicName: t})
	}
	rpc(start)
	testutil.CheckFor(b, 5*time.Minute, func() error { return states("MIRRORING") })
	stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName = mirror
	for _, t := range names {
		stop.Topics = append(stop.Topics, mirrorapi.MirrorTopicsRequestTopic{TopicName: t})
	}
	b.StartTimer()
	rpc(stop)
	for states("STOPPED") != nil {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
}
