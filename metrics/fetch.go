package metrics

import (
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/fetch"
)

// FetchCollector exposes the mirror fetchers' counters:
//
//	kmirror_mirror_bytes_total                      record batch bytes mirrored
//	kmirror_mirror_batches_total                    record batches mirrored
//	kmirror_mirror_fetch_duration_seconds           summary of source Fetch round trips
//	kmirror_mirror_errors_total{error}              partition errors answered by sources, by Kafka error name
//	kmirror_mirror_connection_errors_total          failed dials and broken source connections
//	kmirror_mirror_lag_records{mirror,topic[,partition]}
//	                                                source high watermark minus local log end
//	kmirror_mirror_source_offset_age_seconds{mirror,topic[,partition]}
//	                                                age of the source high watermark behind the
//	                                                lag, the oldest of the topic's partitions;
//	                                                +Inf while one has never been read
//	kmirror_mirror_stalled_partitions{mirror,topic[,partition]}
//	                                                partitions without a good fetch answer for
//	                                                longer than request.timeout.ms + mirror.fetch.wait.max.ms
//	kmirror_mirror_lag_seconds{mirror,topic[,partition]}
//	                                                the RPO: age of the oldest source record not
//	                                                copied yet, an upper bound (fetch.Status.LagSince),
//	                                                the topic's worst partition; +Inf while unknown
//	kmirror_mirror_lag_bytes{mirror,topic[,partition]}
//	                                                the lag in records times the bytes per offset
//	                                                copied (fetch.Status.LagBytes): Kafka's Fetch
//	                                                tells offsets, not the bytes between them
//
// Partition labels are opt-in (STYLE.md item 36): per-topic sums (the age:
// maximum) by default. A lag is only as current as its age: a dead source
// broker leaves the lag where it was, so alert on the age or the stalled
// count, not on the lag alone (issue 16 item 2).
type FetchCollector struct {
	m              *fetch.Manager
	partitionLabel bool

	bytes, batches, duration, errs, connErrs, lag, age, stalled, lagSeconds, lagBytes *prometheus.Desc
}

// NewFetchCollector returns a collector for m; partitionLabels adds a
// partition label to the per-topic series (metrics.mirror.partition.labels).
func NewFetchCollector(m *fetch.Manager, partitionLabels bool) *FetchCollector {
	lagLabels := []string{"mirror", "topic"}
	if partitionLabels {
		lagLabels = append(lagLabels, "partition")
	}
	return &FetchCollector{
		m: m, partitionLabel: partitionLabels,
		bytes:    prometheus.NewDesc("kmirror_mirror_bytes_total", "Record batch bytes mirrored from sources.", nil, nil),
		batches:  prometheus.NewDesc("kmirror_mirror_batches_total", "Record batches mirrored from sources.", nil, nil),
		duration: prometheus.NewDesc("kmirror_mirror_fetch_duration_seconds", "Source Fetch round trips.", nil, nil),
		errs:     prometheus.NewDesc("kmirror_mirror_errors_total", "Partition errors answered by sources, by Kafka error.", []string{"error"}, nil),
		connErrs: prometheus.NewDesc("kmirror_mirror_connection_errors_total", "Failed dials and broken source connections.", nil, nil),
		lag:      prometheus.NewDesc("kmirror_mirror_lag_records", "Source high watermark minus the local log end.", lagLabels, nil),
		age: prometheus.NewDesc("kmirror_mirror_source_offset_age_seconds",
			"Age of the source high watermark the lag is measured against (oldest partition; +Inf: never read).", lagLabels, nil),
		stalled: prometheus.NewDesc("kmirror_mirror_stalled_partitions",
			"Mirrored partitions without a fetch answered without error for longer than request.timeout.ms plus mirror.fetch.wait.max.ms.", lagLabels, nil),
		lagSeconds: prometheus.NewDesc("kmirror_mirror_lag_seconds",
			"Age of the oldest source record not copied yet, an upper bound (worst partition; +Inf: unknown).", lagLabels, nil),
		lagBytes: prometheus.NewDesc("kmirror_mirror_lag_bytes",
			"Estimated lag in bytes: the lag in records times the bytes per offset copied.", lagLabels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *FetchCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.bytes, c.batches, c.duration, c.errs, c.connErrs, c.lag, c.age, c.stalled,
		c.lagSeconds, c.lagBytes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *FetchCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.Stats()
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(s.BytesMirrored.Load()))
	ch <- prometheus.MustNewConstMetric(c.batches, prometheus.CounterValue, float64(s.BatchesMirrored.Load()))
	ch <- prometheus.MustNewConstMetric(c.connErrs, prometheus.CounterValue, float64(s.ConnectionErrors.Load()))
	ch <- prometheus.MustNewConstSummary(c.duration, uint64(s.FetchRequests.Load()),
		float64(s.FetchNanos.Load())/1e9, nil)
	for code := range s.ErrorsByCode {
		if n := s.ErrorsByCode[code].Load(); n > 0 {
			name := "UNKNOWN_SERVER_ERROR"
			if e, ok := kerr.ErrorForCode(int16(code)).(*kerr.Error); ok {
				name = e.Message
			}
			ch <- prometheus.MustNewConstMetric(c.errs, prometheus.CounterValue, float64(n), name)
		}
	}
	type lagKey struct{ mirror, topic, partition string }
	type lagValue struct {
		lag, stalled, bytes int64
		age, seconds        float64 // the maximum
	}
	lags := map[lagKey]*lagValue{}
	now := time.Now()
	for _, st := range c.m.Statuses() {
		k := lagKey{st.Mirror, st.Topic, ""}
		if c.partitionLabel {
			k.partition = strconv.Itoa(int(st.Partition))
		}
		v := lags[k]
		if v == nil {
			v = &lagValue{}
			lags[k] = v
		}
		v.lag += st.Lag
		if st.Stalled {
			v.stalled++
		}
		// Never read (a fetcher that has not been answered since it
		// started): its lag of 0 measures nothing.
		age := math.Inf(1)
		if !st.SourceUpdated.IsZero() {
			age = max(now.Sub(st.SourceUpdated).Seconds(), 0)
		}
		v.age = max(v.age, age)
		seconds := math.Inf(1)
		if !st.LagSince.IsZero() {
			seconds = max(now.Sub(st.LagSince).Seconds(), 0)
		}
		v.seconds = max(v.seconds, seconds)
		v.bytes += st.LagBytes
	}
	for k, v := range lags {
		labels := []string{k.mirror, k.topic}
		if c.partitionLabel {
			labels = append(labels, k.partition)
		}
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(v.lag), labels...)
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, v.age, labels...)
		ch <- prometheus.MustNewConstMetric(c.stalled, prometheus.GaugeValue, float64(v.stalled), labels...)
		ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, v.seconds, labels...)
		ch <- prometheus.MustNewConstMetric(c.lagBytes, prometheus.GaugeValue, float64(v.bytes), labels...)
	}
}
