package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/fetch"
)

// The fetch collector reports what a real mirror did: bytes and batches,
// a fetch summary, partition states and lag, under linted names.
func TestFetchCollector(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.DefaultProduceTopic("s"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.ProduceSync(ctx, kgo.StringRecord("a"), kgo.StringRecord("b"), kgo.StringRecord("c")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	cfg := broker.DefaultConfig()
	cfg.Listeners = []broker.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 0}}
	cfg.LogDirs = []string{t.TempDir()}
	cfg.MetricsListener = ""
	b, err := broker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The mirror topic has the source topic's id, as the control plane
	// creates it (the fetchers refuse another id).
	tds, err := kadm.NewClient(p).ListTopics(ctx, "s")
	if err != nil || tds["s"].Err != nil {
		t.Fatalf("source topic s: %v %v", err, tds["s"].Err)
	}
	if err := b.CreateMirrorTopic("s", tds["s"].ID, 1, "m"); err != nil {
		t.Fatal(err)
	}
	m := fetch.NewManager(fetch.Config{})
	defer m.Close()
	if err := m.AddMirror(fetch.MirrorConfig{Name: "m", Bootstrap: src.ListenAddrs(), FetchWaitMax: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	local, err := b.MirrorPartition("s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.StartPartition("m", "s", 0, local, fetch.StartAlign); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); local.Log().LogEndOffset() < 3; {
		if time.Now().After(deadline) {
			t.Fatal("mirror did not catch up")
		}
		<-time.After(5 * time.Millisecond)
	}

	c := NewFetchCollector(m, true)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	if n := counterValue(t, reg, "kmirror_mirror_batches_total"); n < 1 {
		t.Errorf("batches mirrored %v", n)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kmirror_mirror_partitions Mirrored partitions by fetch state.
# TYPE kmirror_mirror_partitions gauge
kmirror_mirror_partitions{mirror="m",state="fetching"} 1
`), "kmirror_mirror_partitions"); err != nil {
		t.Error(err)
	}
	if testutil.CollectAndCount(c, "kmirror_mirror_lag_records") != 1 {
		t.Error("want one lag series")
	}
}

// counterValue returns the value of the unlabelled counter name.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
