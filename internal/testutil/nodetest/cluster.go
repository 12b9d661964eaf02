package nodetest

import (
	"net"
	"testing"
	"time"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/meta"
)

// Cluster session settings: a stopped node is fenced within seconds.
const (
	ClusterSessionTimeout    = 2 * time.Second
	ClusterHeartbeatInterval = 200 * time.Millisecond
)

// ClusterConfigs are the configs of n nodes of one cluster, node ids 1
// to n, each a voter (process.roles=broker,controller) on a CONTROLLER
// listener at a free loopback port, with Config's PLAINTEXT listener on
// port 0 and temp dir, and short sessions. The nodes must start at once
// (node.Start waits for a majority of the voters). Only the node tests
// and tests/ start them: node.Start is the node package, which this
// package cannot import (node's own tests import this one).
func ClusterConfigs(t testing.TB, n int) []broker.Config {
	t.Helper()
	voters := make([]meta.Voter, n)
	for i := range voters {
		voters[i] = meta.Voter{ID: int32(i + 1), Addr: testutil.FreeAddr(t)}
	}
	cfgs := make([]broker.Config, n)
	for i := range cfgs {
		cfg := Config(t)
		cfg.NodeID = voters[i].ID
		host, port, _ := net.SplitHostPort(voters[i].Addr)
		p, _ := net.LookupPort("tcp", port)
		cfg.Cluster = broker.ClusterConfig{Voters: voters,
			ControllerListener: &broker.Listener{Name: "CONTROLLER", Host: host, Port: p, Protocol: "PLAINTEXT"},
			SessionTimeout:     ClusterSessionTimeout, HeartbeatInterval: ClusterHeartbeatInterval}
		cfgs[i] = cfg
	}
	return cfgs
}

// BrokerOnlyConfig is the config of a broker-only node (process.roles=
// broker) with node id id joining the cluster of voter, one of
// ClusterConfigs: the same voters and sessions, no CONTROLLER listener,
// its own temp dir.
func BrokerOnlyConfig(t testing.TB, voter broker.Config, id int32) broker.Config {
	t.Helper()
	cfg := Config(t)
	cfg.NodeID = id
	cfg.Cluster = voter.Cluster
	cfg.Cluster.ControllerListener, cfg.Cluster.BrokerOnly = nil, true
	return cfg
}
