// Package metrics is the only package besides cmd/ that imports Prometheus
// (DESIGN.md, STYLE.md item 4). The core keeps plain atomic counters; a
// Collector here reads them at scrape time, so the hot path pays one atomic
// add per event and never touches a label map.
//
// Metric names (STYLE.md item 36: kmirror_<subsystem>_<name>_<unit>):
//
//	kmirror_net_connections_opened_total     connections accepted
//	kmirror_net_connections_closed_total     connections closed
//	kmirror_net_received_bytes_total         request bytes read
//	kmirror_net_sent_bytes_total             response bytes written
//	kmirror_net_framing_errors_total         connections closed for a bad frame
//	kmirror_broker_requests_total{api}       requests served, by API name
//	kmirror_broker_produce_batches_total     batches appended by Produce
//	kmirror_broker_produce_bytes_total       bytes appended by Produce
//	kmirror_broker_fetch_bytes_total         record bytes served by Fetch
//	kmirror_broker_produce_errors_total      partitions answered with an error by Produce
//	kmirror_broker_throttled_responses_total{quota}
//	                                         responses throttled by a client quota
//	                                         (produce, fetch, request)
//	kmirror_broker_throttle_seconds_total{quota}
//	                                         their throttle times
//	kmirror_replication_leader_partitions    partitions this node leads
//	kmirror_replication_under_replicated_partitions
//	                                         of those, with an ISR smaller than their replicas
//	                                         (Kafka's UnderReplicatedPartitions)
//	kmirror_replication_under_min_isr_partitions
//	                                         of those, with an ISR below min.insync.replicas:
//	                                         acks=all is refused
//	kmirror_replication_follower_partitions  partitions this node follows
//	kmirror_replication_isr_shrinks_total    ISR shrinks of partitions this node leads
//	kmirror_replication_isr_expands_total    ISR expansions of partitions this node leads
//	kmirror_broker_topics                    topics on the node
//	kmirror_broker_partitions                partitions on the node
//	kmirror_log_size_bytes{topic}            bytes on disk of a topic's logs
//	kmirror_log_start_offset{topic,partition}
//	                                         a partition's log start offset (Kafka's LogStartOffset)
//	kmirror_log_end_offset{topic,partition}  a partition's log end offset (Kafka's LogEndOffset)
//	kmirror_disk_free_bytes{dir,kind}        bytes still usable on the filesystem of a log dir
//	                                         (kind="log") or of the state store (kind="state")
//	kmirror_disk_total_bytes{dir,kind}       size of that filesystem
//
// The mirror fetchers' metrics are listed on FetchCollector: among them
// kmirror_mirror_lag_records, and beside it
// kmirror_mirror_source_offset_age_seconds (how old the source offset
// behind the lag is) and kmirror_mirror_stalled_partitions (partitions
// whose lag is no longer measured).
package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kmirror/kmirror/broker"
)

// Collector exposes a broker's counters.
type Collector struct {
	b *broker.Broker

	connOpened, connClosed, bytesIn, bytesOut, framingErrors *prometheus.Desc
	requests                                                 *prometheus.Desc
	produceBatches, produceBytes, fetchBytes, errorResponses *prometheus.Desc
	throttled, throttleTime                                  *prometheus.Desc
	topics, partitions, logSize, logStart, logEnd            *prometheus.Desc
	diskFree, diskTotal                                      *prometheus.Desc
	leading, underReplicated, underMinISR, following         *prometheus.Desc
	isrShrinks, isrExpands                                   *prometheus.Desc
}

// NewCollector returns a collector for b; register it with a registry.
func NewCollector(b *broker.Broker) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &Collector{
		b:              b,
		connOpened:     d("kmirror_net_connections_opened_total", "Client connections accepted."),
		connClosed:     d("kmirror_net_connections_closed_total", "Client connections closed."),
		bytesIn:        d("kmirror_net_received_bytes_total", "Request bytes read from clients."),
		bytesOut:       d("kmirror_net_sent_bytes_total", "Response bytes written to clients."),
		framingErrors:  d("kmirror_net_framing_errors_total", "Connections closed for an oversized or malformed frame."),
		requests:       d("kmirror_broker_requests_total", "Requests served, by Kafka API.", "api"),
		produceBatches: d("kmirror_broker_produce_batches_total", "Record batches appended by Produce."),
		produceBytes:   d("kmirror_broker_produce_bytes_total", "Record batch bytes appended by Produce."),
		fetchBytes:     d("kmirror_broker_fetch_bytes_total", "Record batch bytes served by Fetch."),
		errorResponses: d("kmirror_broker_produce_errors_total", "Produce partitions answered with an error code."),
		throttled:      d("kmirror_broker_throttled_responses_total", "Responses throttled by a client quota, by quota type.", "quota"),
		throttleTime:   d("kmirror_broker_throttle_seconds_total", "Throttle time of the throttled responses, by quota type.", "quota"),
		topics:         d("kmirror_broker_topics", "Topics on this node."),
		partitions:     d("kmirror_broker_partitions", "Partitions on this node."),
		logSize:        d("kmirror_log_size_bytes", "Bytes on disk of a topic's partition logs.", "topic"),
		logStart:       d("kmirror_log_start_offset", "A partition's log start offset.", "topic", "partition"),
		logEnd:         d("kmirror_log_end_offset", "A partition's log end offset: the offset of its next record.", "topic", "partition"),
		diskFree:       d("kmirror_disk_free_bytes", "Bytes still usable on the filesystem of a log dir or of the state store.", "dir", "kind"),
		diskTotal:      d("kmirror_disk_total_bytes", "Size of the filesystem of a log dir or of the state store.", "dir", "kind"),
		leading:        d("kmirror_replication_leader_partitions", "Partitions this node leads."),
		underReplicated: d("kmirror_replication_under_replicated_partitions",
			"Partitions this node leads whose ISR is smaller than their replicas."),
		underMinISR: d("kmirror_replication_under_min_isr_partitions",
			"Partitions this node leads whose ISR is below min.insync.replicas (acks=all is refused)."),
		following:  d("kmirror_replication_follower_partitions", "Partitions this node follows."),
		isrShrinks: d("kmirror_replication_isr_shrinks_total", "ISR shrinks of partitions this node leads."),
		isrExpands: d("kmirror_replication_isr_expands_total", "ISR expansions of partitions this node leads."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connOpened, c.connClosed, c.bytesIn, c.bytesOut, c.framingErrors,
		c.requests, c.produceBatches, c.produceBytes, c.fetchBytes, c.errorResponses, c.throttled, c.throttleTime,
		c.topics, c.partitions, c.logSize, c.logStart, c.logEnd, c.diskFree, c.diskTotal,
		c.leading, c.underReplicated, c.underMinISR, c.following, c.isrShrinks, c.isrExpands} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	ns := c.b.NetStats()
	counter(c.connOpened, ns.ConnectionsOpened.Load())
	counter(c.connClosed, ns.ConnectionsClosed.Load())
	counter(c.bytesIn, ns.BytesIn.Load())
	counter(c.bytesOut, ns.BytesOut.Load())
	counter(c.framingErrors, ns.FramingErrors.Load())
	bs := c.b.Stats()
	for key := range bs.Requests {
		if n := bs.Requests[key].Load(); n > 0 {
			counter(c.requests, n, broker.APIName(int16(key)))
		}
	}
	counter(c.produceBatches, bs.ProduceBatches.Load())
	counter(c.produceBytes, bs.ProduceBytes.Load())
	counter(c.fetchBytes, bs.FetchBytes.Load())
	counter(c.errorResponses, bs.ProduceErrors.Load())
	for i, name := range broker.QuotaNames {
		counter(c.throttled, bs.Throttled[i].Load(), name)
		ch <- prometheus.MustNewConstMetric(c.throttleTime, prometheus.CounterValue,
			float64(bs.ThrottleMillis[i].Load())/1000, name)
	}
	topics := c.b.TopicStats()
	parts := 0
	for _, t := range topics {
		parts += len(t.Partitions)
		gauge(c.logSize, t.SizeBytes, t.Name)
		for _, p := range t.Partitions {
			index := strconv.Itoa(int(p.Index))
			gauge(c.logStart, p.LogStartOffset, t.Name, index)
			gauge(c.logEnd, p.LogEndOffset, t.Name, index)
		}
	}
	rs := c.b.ReplicationStat()
	gauge(c.leading, int64(rs.Leading))
	gauge(c.underReplicated, int64(rs.UnderReplicated))
	gauge(c.underMinISR, int64(rs.UnderMinISR))
	gauge(c.following, int64(rs.Following))
	counter(c.isrShrinks, bs.ISRShrinks.Load())
	counter(c.isrExpands, bs.ISRExpands.Load())
	gauge(c.topics, int64(len(topics)))
	gauge(c.partitions, int64(parts))
	// Measured at the scrape (one statfs per dir), so an alert sees the
	// space as it is, whatever the node writes.
	for _, ds := range c.b.DiskUsage() {
		kind := "log"
		if ds.State {
			kind = "state"
		}
		gauge(c.diskFree, ds.FreeBytes, ds.Dir, kind)
		gauge(c.diskTotal, ds.TotalBytes, ds.Dir, kind)
	}
}
