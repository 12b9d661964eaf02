package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/state"
)

// SyncStater is what SyncCollector reads: the control plane's metadata
// sync records and partition states (control.Plane implements it).
type SyncStater interface {
	SyncStats() []control.SyncStat
	PartitionStateCounts() []control.PartitionStates
	FetcherStateCounts() []control.PartitionStates
}

// SyncCollector exposes each mirror's metadata sync (SPEC.md section 8's
// TopicConfigSyncError, ConsumerGroupOffsetSyncError, AclSyncError and
// TopicMetadataRefreshError, as one counter with a kind label):
//
//	kmirror_mirror_sync_cycles_total{mirror}          cycles run
//	kmirror_mirror_sync_errors_total{mirror,kind}     failed cycle parts: cluster_id, topic_metadata,
//	                                                  topic_configs, group_offsets,
//	                                                  share_group_offsets, acls, client_quotas
//	kmirror_mirror_sync_last_cycle_seconds{mirror}    duration of the last cycle
//	kmirror_mirror_partition_states{mirror,state}     partitions by KIP-1279 state (MIRRORING,
//	                                                  PAUSED, FAILED, ...), as persisted
//	kmirror_mirror_partitions{mirror,state}           the partitions the fetchers hold (aligning,
//	                                                  mirroring, or FAILED), by KIP-1279 state
//
// Every kind is exported from the first cycle on, at 0 until it fails, so
// rate() and alerts see a series before the first error; likewise every
// partition state of every mirror, at 0 when no partition is in it.
// kmirror_mirror_partitions has a series for the states that hold
// partitions only.
type SyncCollector struct {
	s                                   SyncStater
	cycles, errs, lastDu, states, parts *prometheus.Desc
}

// NewSyncCollector returns a collector for s.
func NewSyncCollector(s SyncStater) *SyncCollector {
	return &SyncCollector{
		s:      s,
		cycles: prometheus.NewDesc("kmirror_mirror_sync_cycles_total", "Metadata sync cycles run.", []string{"mirror"}, nil),
		errs: prometheus.NewDesc("kmirror_mirror_sync_errors_total", "Failed metadata sync cycle parts, by kind.",
			[]string{"mirror", "kind"}, nil),
		lastDu: prometheus.NewDesc("kmirror_mirror_sync_last_cycle_seconds", "Duration of the last metadata sync cycle.",
			[]string{"mirror"}, nil),
		states: prometheus.NewDesc("kmirror_mirror_partition_states", "Mirror partitions by KIP-1279 state, as persisted.",
			[]string{"mirror", "state"}, nil),
		parts: prometheus.NewDesc("kmirror_mirror_partitions", "Partitions the mirror fetchers hold, by KIP-1279 state.",
			[]string{"mirror", "state"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *SyncCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.cycles
	ch <- c.errs
	ch <- c.lastDu
	ch <- c.states
	ch <- c.parts
}

// Collect implements prometheus.Collector.
func (c *SyncCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.s.SyncStats() {
		ch <- prometheus.MustNewConstMetric(c.cycles, prometheus.CounterValue, float64(st.Cycles), st.Mirror)
		ch <- prometheus.MustNewConstMetric(c.lastDu, prometheus.GaugeValue, st.LastCycle.Seconds(), st.Mirror)
		for _, kind := range control.SyncKinds {
			ch <- prometheus.MustNewConstMetric(c.errs, prometheus.CounterValue, float64(st.Errors[kind]), st.Mirror, kind)
		}
	}
	for _, ps := range c.s.PartitionStateCounts() {
		for s, n := range ps.Counts {
			ch <- prometheus.MustNewConstMetric(c.states, prometheus.GaugeValue, float64(n), ps.Mirror, state.PartitionState(s).String())
		}
	}
	for _, ps := range c.s.FetcherStateCounts() {
		for s, n := range ps.Counts {
			if n > 0 {
				ch <- prometheus.MustNewConstMetric(c.parts, prometheus.GaugeValue, float64(n), ps.Mirror, state.PartitionState(s).String())
			}
		}
	}
}
