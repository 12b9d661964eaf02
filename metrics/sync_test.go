package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kmirror/kmirror/control"
)

type fixedSyncStats []control.SyncStat

func (f fixedSyncStats) SyncStats() []control.SyncStat { return f }

// Each mirror's sync counters are exported with every kind present, the
// failing one counted, under linted names.
func TestSyncCollector(t *testing.T) {
	t.Parallel()
	stats := fixedSyncStats{{Mirror: "m", Cycles: 7, LastCycle: 1500 * time.Millisecond,
		Errors: map[string]int64{control.SyncGroupOffsets: 2}}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewSyncCollector(stats))
	want := `
# HELP kmirror_mirror_sync_cycles_total Metadata sync cycles run.
# TYPE kmirror_mirror_sync_cycles_total counter
kmirror_mirror_sync_cycles_total{mirror="m"} 7
# HELP kmirror_mirror_sync_errors_total Failed metadata sync cycle parts, by kind.
# TYPE kmirror_mirror_sync_errors_total counter
kmirror_mirror_sync_errors_total{kind="acls",mirror="m"} 0
kmirror_mirror_sync_errors_total{kind="client_quotas",mirror="m"} 0
kmirror_mirror_sync_errors_total{kind="cluster_id",mirror="m"} 0
kmirror_mirror_sync_errors_total{kind="group_offsets",mirror="m"} 2
kmirror_mirror_sync_errors_total{kind="topic_configs",mirror="m"} 0
kmirror_mirror_sync_errors_total{kind="topic_metadata",mirror="m"} 0
# HELP kmirror_mirror_sync_last_cycle_seconds Duration of the last metadata sync cycle.
# TYPE kmirror_mirror_sync_last_cycle_seconds gauge
kmirror_mirror_sync_last_cycle_seconds{mirror="m"} 1.5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
