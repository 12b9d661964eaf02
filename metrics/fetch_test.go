package metrics

import (
	"context"
	"math"
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
	ktestutil "github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/partition"
)

// The fetch collector reports what a real mirror did: bytes and batches,
// a fetch summary and lag, under linted names (the partitions by state
// are the control plane's: TestSyncCollector).
func TestFetchCollector(t *testing.T) {
	t.Parallel()
	ctx, src, p, b, m := newFetchFixture(t, 3)
	if err := m.AddMirror(fetch.MirrorConfig{Name: "m", Bootstrap: src.ListenAddrs(), FetchWaitMax: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	local := startMirrored(t, b, m, "m", "s", sourceID(t, ctx, p, "s"))
	ktestutil.CheckFor(t, ktestutil.Timeout, ktestutil.True("mirror caught up", func() bool { return local.LogEndOffset() == 3 }))

	c := NewFetchCollector(m, true)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	if n := counterValue(t, reg, "kmirror_mirror_batches_total"); n < 1 {
		t.Errorf("batches mirrored %v", n)
	}
	if testutil.CollectAndCount(c, "kmirror_mirror_lag_records") != 1 {
		t.Error("want one lag series")
	}
}

// The lag comes with the age of the source offset it is measured against
// and a count of stalled partitions: fresh and 0 while the source answers;
// growing and counted once it stops answering for longer than
// request.timeout.ms; +Inf for a partition never answered.
func TestFetchCollectorStalled(t *testing.T) {
	t.Parallel()
	ctx, src, p, b, m := newFetchFixture(t, 1)
	const timeout = 300 * time.Millisecond
	if err := m.AddMirror(fetch.MirrorConfig{Name: "m", Bootstrap: src.ListenAddrs(), FetchWaitMax: 50 * time.Millisecond,
		FetchBackoff: 50 * time.Millisecond, RequestTimeout: timeout}); err != nil {
		t.Fatal(err)
	}
	// "never" is on a mirror whose source nobody serves.
	if err := m.AddMirror(fetch.MirrorConfig{Name: "gone", Bootstrap: []string{"127.0.0.1:1"}, RequestTimeout: timeout}); err != nil {
		t.Fatal(err)
	}
	local := startMirrored(t, b, m, "m", "s", sourceID(t, ctx, p, "s"))
	startMirrored(t, b, m, "gone", "never", [16]byte{1})
	c := NewFetchCollector(m, false)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	// gauges returns the age and stalled gauges of mirror/topic (-1: none).
	gauges := func(mirror, topic string) (age, stalled float64) {
		t.Helper()
		got := gathered(t, reg)
		labels := "{mirror=" + mirror + "}{topic=" + topic + "}"
		age, ok := got["kmirror_mirror_source_offset_age_seconds"+labels]
		if !ok {
			age = -1
		}
		stalled, ok = got["kmirror_mirror_stalled_partitions"+labels]
		if !ok {
			stalled = -1
		}
		return age, stalled
	}
	ktestutil.CheckFor(t, ktestutil.Timeout, ktestutil.True("mirror caught up", func() bool { return local.LogEndOffset() == 1 }))
	// Answered (the source keeps answering, with new records so that
	// even an incremental fetch session names the partition).
	ktestutil.CheckFor(t, ktestutil.Timeout, ktestutil.True("fresh while answered", func() bool {
		if err := p.ProduceSync(ctx, kgo.StringRecord("more")).FirstErr(); err != nil {
			t.Fatal(err)
		}
		age, stalled := gauges("m", "s")
		return age >= 0 && age < timeout.Seconds() && stalled == 0
	}))
	if age, stalled := gauges("gone", "never"); !math.IsInf(age, 1) {
		t.Errorf("never answered: age %v, stalled %v; want +Inf", age, stalled)
	}
	ktestutil.CheckFor(t, ktestutil.Timeout, ktestutil.True("never answered: stalled", func() bool { _, stalled := gauges("gone", "never"); return stalled == 1 }))

	src.Close()
	ktestutil.CheckFor(t, ktestutil.Timeout, ktestutil.True("stalled once the source is gone", func() bool {
		age, stalled := gauges("m", "s")
		return stalled == 1 && age >= timeout.Seconds() && !math.IsInf(age, 1)
	}))
}

// The RPO gauges, per partition (partition labels on): about 0 while the
// copy keeps up; while it is behind (a throttled mirror copying a burst)
// the lag in seconds grows and the estimated bytes are those of the
// records missing; once caught up it drops back; and once the source is
// gone it keeps growing with the clock, never frozen like the record lag.
func TestFetchCollectorLagSeconds(t *testing.T) {
	t.Parallel()
	ctx, src, p, b, m := newFetchFixture(t, 1)
	const round = 50 * time.Millisecond
	if err := m.AddMirror(fetch.MirrorConfig{Name: "m", Bootstrap: src.ListenAddrs(), FetchWaitMax: round,
		FetchBackoff: round, RequestTimeout: 500 * time.Millisecond, ThrottleBytesPerSecond: 2000}); err != nil {
		t.Fatal(err)
	}
	local := startMirrored(t, b, m, "m", "s", sourceID(t, ctx, p, "s"))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewFetchCollector(m, true))
	const labels = "{mirror=m}{partition=0}{topic=s}"
	lag := func() (seconds, bytes, records float64) {
		got := gathered(t, reg)
		return got["kmirror_mirror_lag_seconds"+labels], got["kmirror_mirror_lag_bytes"+labels],
			got["kmirror_mirror_lag_records"+labels]
	}
	ktestutil.CheckFor(t, ktestutil.Timeout, ktestutil.True("caught up: lag about 0", func() bool {
		s, bytes, recs := lag()
		return local.LogEndOffset() == 1 && s < 1 && bytes == 0 && recs == 0
	}))

	// A burst of 100 batches of about 80 bytes (snappy): seconds of
	// copying at 2000 bytes per second.
	value := strings.Repeat("v", 100)
	for range 100 {
		if err := p.ProduceSync(ctx, kgo.StringRecord(value)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var behind float64
	ktestutil.CheckFor(t, ktestutil.Timeout, ktestutil.True("behind: lag in seconds grows past a second, bytes estimated", func() bool {
		s, bytes, recs := lag()
		if recs > 0 && (bytes < recs*50 || bytes > recs*200) {
			t.Fatalf("%v records behind estimated at %v bytes; want about 80 each", recs, bytes)
		}
		behind = s
		return recs > 0 && s > 1.5 && !math.IsInf(s, 1)
	}))
	ktestutil.CheckFor(t, ktestutil.Timeout, ktestutil.True("caught up again", func() bool {
		s, _, recs := lag()
		return local.LogEndOffset() == 101 && recs == 0 && s < 1
	}))
	if behind <= 1.5 {
		t.Fatalf("behind: %vs", behind)
	}

	src.Close()
	var first float64
	ktestutil.CheckFor(t, ktestutil.Timeout, ktestutil.True("stalled: past a second", func() bool { first, _, _ = lag(); return first > 1 && !math.IsInf(first, 1) }))
	ktestutil.CheckFor(t, ktestutil.Timeout, ktestutil.True("stalled: still growing", func() bool { s, _, _ := lag(); return s >= first+0.5 }))
}

// newFetchFixture returns a test context, a one-broker kfake cluster with
// topic "s" holding records records, a producer to it, a broker and a
// fetch manager, all closed at the end of the test.
func newFetchFixture(t *testing.T, records int) (context.Context, *kfake.Cluster, *kgo.Client, *broker.Broker, *fetch.Manager) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	src := kfaketest.Source(t, kfake.SeedTopics(1, "s"))
	p := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic("s"))
	for range records {
		if err := p.ProduceSync(ctx, kgo.StringRecord("r")).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	b := nodetest.Start(t, nodetest.Config(t))
	m := fetch.NewManager(fetch.Config{})
	t.Cleanup(m.Close) // before b closes: cleanups run last first
	return ctx, src, p, b, m
}

// startMirrored creates one-partition mirror topic topic on b, with the
// source's topic id (the fetchers refuse another), and mirrors it with m's
// mirror.
func startMirrored(t *testing.T, b *broker.Broker, m *fetch.Manager, mirror, topic string, id [16]byte) partition.Follower {
	t.Helper()
	if err := b.CreateMirrorTopic(topic, id, 1, mirror); err != nil {
		t.Fatal(err)
	}
	local, err := b.Partitions().MirrorPartition(topic, 0)
	if err == nil {
		err = m.StartPartition(mirror, topic, 0, local, fetch.StartAlign)
	}
	if err != nil {
		t.Fatal(err)
	}
	return local
}

// sourceID is topic's id at the source cl talks to.
func sourceID(t *testing.T, ctx context.Context, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	tds, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil || tds[topic].Err != nil {
		t.Fatalf("source topic %s: %v %v", topic, err, tds[topic].Err)
	}
	return tds[topic].ID
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
