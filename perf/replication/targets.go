package main

import (
	"strings"

	"github.com/kmirror/kmirror/perf/internal/benchcluster"
)

// The cluster launcher is perf/internal/benchcluster's, shared with perf/cluster.
type cluster = benchcluster.Cluster

const (
	systemKmirror = benchcluster.Kmirror
	systemKafka   = benchcluster.Kafka
)

var allSystems = benchcluster.AllSystems

// bootstrap is every node's client listener, comma separated, as
// bootstrap.servers takes them.
func bootstrap(c cluster) string {
	var out []string
	for _, id := range c.IDs() {
		out = append(out, c.Addr(id))
	}
	return strings.Join(out, ",")
}

// sharedProps are what both systems are given beyond their defaults:
// internal/realkafka's Cluster sets the session timeouts for Kafka (a
// dead broker is fenced after 6 s rather than 9 s), so kmirror gets the
// same, and internal/realkafka's group.initial.rebalance.delay.ms=0 (the
// consumer tool's group would wait 3 s before its first fetch otherwise).
// Replication keeps each system's defaults (replica.fetch.*,
// replica.lag.time.max.ms=30000, num.replica.fetchers=1); the topics set
// min.insync.replicas=2 themselves.
var sharedProps = map[string]string{
	"broker.session.timeout.ms":        "6000",
	"broker.heartbeat.interval.ms":     "1000",
	"group.initial.rebalance.delay.ms": "0",
}
