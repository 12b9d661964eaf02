package main

import "github.com/kmirror/kmirror/perf/internal/benchcluster"

// The cluster launcher is perf/internal/benchcluster's, shared with perf/replication.
type cluster = benchcluster.Cluster

const (
	systemKmirror = benchcluster.Kmirror
	systemKafka   = benchcluster.Kafka
)

var allSystems = benchcluster.AllSystems

// sessionProps are what both systems are given beyond their defaults:
// internal/realkafka's Cluster sets them for Kafka (a dead broker is
// fenced after 6 s rather than 9 s), so kmirror gets the same. Neither
// touches the quorum's own timeouts, which stay each system's default:
// hashicorp/raft's 1 s heartbeat and election timeouts for kmirror,
// controller.quorum.election.timeout.ms=1000 and
// controller.quorum.fetch.timeout.ms=2000 for Kafka.
var sessionProps = map[string]string{
	"broker.session.timeout.ms":    "6000",
	"broker.heartbeat.interval.ms": "1000",
}
