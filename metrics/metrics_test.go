package metrics

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// The collector reports the broker's counters under the documented names,
// and they move with traffic.
func TestCollectorReportsBrokerCounters(t *testing.T) {
	t.Parallel()
	b := nodetest.Start(t, nodetest.Config(t))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(b))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("m"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("a"), kgo.StringRecord("b")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	want := `
# HELP kmirror_broker_partitions Partitions on this node.
# TYPE kmirror_broker_partitions gauge
kmirror_broker_partitions 1
# HELP kmirror_broker_topics Topics on this node.
# TYPE kmirror_broker_topics gauge
kmirror_broker_topics 1
# HELP kmirror_log_end_offset A partition's log end offset: the offset of its next record.
# TYPE kmirror_log_end_offset gauge
kmirror_log_end_offset{partition="0",topic="m"} 2
# HELP kmirror_log_start_offset A partition's log start offset.
# TYPE kmirror_log_start_offset gauge
kmirror_log_start_offset{partition="0",topic="m"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"kmirror_broker_partitions", "kmirror_broker_topics", "kmirror_log_end_offset", "kmirror_log_start_offset"); err != nil {
		t.Fatal(err)
	}
	got := gathered(t, reg)
	for _, name := range []string{
		"kmirror_broker_requests_total{api=Produce}", "kmirror_broker_requests_total{api=Metadata}",
		"kmirror_broker_produce_batches_total", "kmirror_broker_produce_bytes_total",
		"kmirror_net_connections_opened_total", "kmirror_net_received_bytes_total", "kmirror_net_sent_bytes_total",
		"kmirror_log_size_bytes{topic=m}",
	} {
		if got[name] <= 0 {
			t.Errorf("%s = %v, want > 0", name, got[name])
		}
	}
	problems, err := testutil.CollectAndLint(NewCollector(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if got["kmirror_net_framing_errors_total"] != 0 {
		t.Errorf("framing errors %v", got["kmirror_net_framing_errors_total"])
	}
}

// gathered returns the counters and gauges of reg by name and labels:
// "name{label=value}{label=value}", labels in Prometheus' order.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			if c := m.GetCounter(); c != nil {
				got[key] = c.GetValue()
			} else if g := m.GetGauge(); g != nil {
				got[key] = g.GetValue()
			}
		}
	}
	return got
}

// The free and total bytes of each log dir's filesystem and of the state
// store's, measured at the scrape.
func TestCollectorDiskSpace(t *testing.T) {
	t.Parallel()
	b := nodetest.Start(t, nodetest.Config(t))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(b))
	got := gathered(t, reg)
	kinds := map[string]int{}
	for _, ds := range b.DiskUsage() {
		kind := "log"
		if ds.State {
			kind = "state"
		}
		kinds[kind]++
		var fs syscall.Statfs_t
		if err := syscall.Statfs(ds.Dir, &fs); err != nil {
			t.Fatal(err)
		}
		labels := "{dir=" + ds.Dir + "}{kind=" + kind + "}"
		free, total := got["kmirror_disk_free_bytes"+labels], got["kmirror_disk_total_bytes"+labels]
		if total != float64(int64(fs.Blocks)*int64(fs.Bsize)) || free <= 0 || free > total {
			t.Errorf("%s: free %v of %v bytes; statfs says %d blocks of %d", ds.Dir, free, total, fs.Blocks, fs.Bsize)
		}
	}
	if kinds["log"] != 1 || kinds["state"] != 1 {
		t.Fatalf("dirs by kind %v, want one log dir and the state dir", kinds)
	}
}
