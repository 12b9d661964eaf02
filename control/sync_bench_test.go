package control

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// Sync cycle cost at the size issue 8 names: 1,000 mirrored partitions
// (100 topics of 10) and 100 consumer groups, each with offsets on 10
// topics (100 partitions, 10,000 offsets in all). One op is one full
// SyncOnce: cluster-id guard, topic metadata and configs, group offsets.
//
//	go test ./control -run NONE -bench SyncCycle -benchtime 20x
func BenchmarkSyncCycle(b *testing.B) {
	const topics, partitions, groups, topicsPerGroup, recordsPerPartition = 100, 10, 100, 10, 5
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src := kfaketest.Source(b)
	scl := nodetest.Client(b, src.ListenAddrs(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	sadm := kadm.NewClient(scl)
	names := make([]string, topics)
	retention := "604800000"
	for i := range names {
		names[i] = fmt.Sprintf("bench-%03d", i)
	}
	if _, err := sadm.CreateTopics(ctx, partitions, 1, map[string]*string{"retention.ms": &retention}, names...); err != nil {
		b.Fatal(err)
	}
	var recs []*kgo.Record
	for _, t := range names {
		for p := range int32(partitions) {
			for range recordsPerPartition {
				recs = append(recs, &kgo.Record{Topic: t, Partition: p, Value: []byte("v")})
			}
		}
	}
	if err := scl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	for g := range groups {
		offs := kadm.Offsets{}
		for i := range topicsPerGroup {
			t := names[(g+i)%topics]
			for p := range int32(partitions) {
				offs.Add(kadm.Offset{Topic: t, Partition: p, At: int64(g % recordsPerPartition), LeaderEpoch: 0})
			}
		}
		if _, err := sadm.CommitOffsets(ctx, fmt.Sprintf("group-%03d", g), offs); err != nil {
			b.Fatal(err)
		}
	}

	cfg := nodetest.Config(b)
	n := openTestNode(b, cfg, nil)
	defer n.close()
	n.createMirror(b, ctx, src.ListenAddrs()[0])
	n.startTopics(b, ctx, names...)
	for _, t := range names {
		for p := range int32(partitions) {
			testutil.CheckFor(b, testutil.Timeout, testutil.True("mirrored up to the end", func() bool {
				local, err := n.b.Partitions().MirrorPartition(t, p)
				return err == nil && local.HighWatermark() == recordsPerPartition
			}))
		}
	}
	n.ctl.SyncOnce() // the first cycle copies; the measured ones keep in step
	b.ResetTimer()
	for range b.N {
		n.ctl.SyncOnce()
	}
	b.StopTimer()
	st := n.ctl.SyncStats()
	if len(st) != 1 || len(st[0].Errors) != 0 && sum(st[0].Errors) != 0 {
		b.Fatalf("sync errors during the benchmark: %+v", st)
	}
	got, err := kadm.NewClient(n.cl).FetchOffsets(ctx, "group-003")
	if err != nil {
		b.Fatal(err)
	}
	if o, ok := got.Lookup(names[3], 0); !ok || o.At != 3 {
		b.Fatalf("group-003 offset on %s-0 after the sync: %+v %v, want 3", names[3], o, ok)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/cycle")
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}
