package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/state"
)

type fixedSyncStats struct {
	sync    []control.SyncStat
	states  []control.PartitionStates
	fetched []control.PartitionStates
}

func (f fixedSyncStats) SyncStats() []control.SyncStat                   { return f.sync }
func (f fixedSyncStats) PartitionStateCounts() []control.PartitionStates { return f.states }
func (f fixedSyncStats) FetcherStateCounts() []control.PartitionStates   { return f.fetched }

// Each mirror's sync counters are exported with every kind present, the
// failing one counted, and its partitions with every state present,
// under linted names.
func TestSyncCollector(t *testing.T) {
	t.Parallel()
	states := control.PartitionStates{Mirror: "m"}
	states.Counts[state.StateMirroring], states.Counts[state.StateFailed] = 5, 2
	// The fetchers hold one, mirroring (moved here from
	// TestFetchCollector, where the fetch state said "fetching").
	fetched := control.PartitionStates{Mirror: "m"}
	fetched.Counts[state.StateMirroring] = 1
	stats := fixedSyncStats{sync: []control.SyncStat{{Mirror: "m", Cycles: 7, LastCycle: 1500 * time.Millisecond,
		Errors: map[string]int64{control.SyncGroupOffsets: 2}}}, states: []control.PartitionStates{states},
		fetched: []control.PartitionStates{fetched}}
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
kmirror_mirror_sync_errors_total{kind="share_group_offsets",mirror="m"} 0
kmirror_mirror_sync_errors_total{kind="topic_configs",mirror="m"} 0
kmirror_mirror_sync_errors_total{kind="topic_metadata",mirror="m"} 0
# HELP kmirror_mirror_sync_last_cycle_seconds Duration of the last metadata sync cycle.
# TYPE kmirror_mirror_sync_last_cycle_seconds gauge
kmirror_mirror_sync_last_cycle_seconds{mirror="m"} 1.5
# HELP kmirror_mirror_partition_states Mirror partitions by KIP-1279 state, as persisted.
# TYPE kmirror_mirror_partition_states gauge
kmirror_mirror_partition_states{mirror="m",state="EPOCH_FENCING"} 0
kmirror_mirror_partition_states{mirror="m",state="FAILED"} 2
kmirror_mirror_partition_states{mirror="m",state="LOG_ALIGNMENT"} 0
kmirror_mirror_partition_states{mirror="m",state="MIRRORING"} 5
kmirror_mirror_partition_states{mirror="m",state="PAUSED"} 0
kmirror_mirror_partition_states{mirror="m",state="PAUSING"} 0
kmirror_mirror_partition_states{mirror="m",state="STOPPED"} 0
kmirror_mirror_partition_states{mirror="m",state="STOPPING"} 0
kmirror_mirror_partition_states{mirror="m",state="ULE_RECOVERY"} 0
# HELP kmirror_mirror_partitions Partitions the mirror fetchers hold, by KIP-1279 state.
# TYPE kmirror_mirror_partitions gauge
kmirror_mirror_partitions{mirror="m",state="MIRRORING"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
