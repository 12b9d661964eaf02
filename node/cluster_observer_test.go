package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/state"
)

// A broker-only node (process.roles=broker) joins three voters: it
// binds no CONTROLLER listener and is no voter, yet it is registered,
// listed by every node, leads its share of a topic's partitions, takes
// admin requests (forwarded) and reads its own writes, and the
// controller lists it among DescribeQuorum's observers. It follows the
// log across a change of controller, and a restart on its data.
func TestClusterBrokerOnlyNodeJoins(t *testing.T) {
	t.Parallel()
	c := startMixedCluster(t, 3, 1)
	ctx := t.Context()
	const observer = 3 // index of node 4
	if c.nodes[observer].ctlLn != nil || c.nodes[observer].log.IsController() {
		t.Fatal("the broker-only node binds a CONTROLLER listener or leads the log")
	}
	for i := range c.nodes {
		c.brokersSeen(ctx, i, 1, 2, 3, 4)
	}
	ctl := c.controllerIndex()

	// Created through the broker-only node (clients send CreateTopics to
	// the controller Metadata names; this one is sent to node 4):
	// forwarded, and open there when CreateTopics answers.
	createOn(t, c.nodes[observer], "spread", 8)
	if c.nodes[observer].Broker.Partitions().Topic("spread") == nil {
		t.Fatal("the topic is not open on the broker-only node that created it")
	}
	adm := c.client(observer)
	td, err := adm.ListTopics(ctx, "spread")
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	for _, p := range td["spread"].Partitions {
		leaders[p.Leader]++
	}
	if leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 || leaders[4] != 2 {
		t.Fatalf("leaders %v: want two partitions on each of the four nodes", leaders)
	}
	cl := nodetest.Client(t, []string{c.nodes[0].Addr()}, kgo.DefaultProduceTopic("spread"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(8) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "v%d", p)}).FirstErr(); err != nil {
			t.Fatalf("producing to partition %d: %v", p, err)
		}
	}

	// DescribeQuorum, asked of the broker-only node, is the controller's:
	// three voters and node 4 as an observer, caught up.
	testutil.CheckFor(t, 10*time.Second, func() error {
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, nodetest.Client(t, []string{c.nodes[observer].Addr()}))
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("answer %+v", resp)
		}
		p := resp.Topics[0].Partitions[0]
		if p.LeaderID != int32(ctl+1) || len(p.CurrentVoters) != 3 || len(p.Observers) != 1 {
			return fmt.Errorf("leader %d, voters %+v, observers %+v", p.LeaderID, p.CurrentVoters, p.Observers)
		}
		if o := p.Observers[0]; o.ReplicaID != 4 || o.LogEndOffset < p.HighWatermark-2 || o.LastFetchTimestamp <= 0 {
			return fmt.Errorf("observer %+v, high watermark %d", o, p.HighWatermark)
		}
		return nil
	})

	// The controller stops: the observer finds the new one, and a topic
	// created through it is there.
	c.stop(ctl)
	createOn(t, c.nodes[observer], "after-failover", 1)
	if c.nodes[observer].Broker.Partitions().Topic("after-failover") == nil {
		t.Fatal("the topic created after the failover is not open on the broker-only node")
	}
	newCtl := c.controllerIndex()
	if id, ok := c.nodes[observer].log.Controller(); !ok || id != int32(newCtl+1) {
		t.Fatalf("the broker-only node names controller %d %v, want %d", id, ok, newCtl+1)
	}
	c.restart(ctl)

	// Restarted on its data, it resumes from its store and catches up.
	c.stop(observer)
	if _, err := c.client(newCtl).CreateTopic(ctx, 1, 1, nil, "while-down"); err != nil {
		t.Fatal(err)
	}
	c.restart(observer)
	testutil.CheckFor(t, 20*time.Second, func() error {
		if c.nodes[observer].Broker.Partitions().Topic("while-down") == nil {
			return errors.New("the restarted broker-only node misses the topic created while it was down")
		}
		return nil
	})
	c.brokersSeen(ctx, newCtl, 1, 2, 3, 4)
	consumer := nodetest.Client(t, []string{c.nodes[observer].Addr()}, kgo.ConsumeTopics("spread"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[int32]string{}
	testutil.CheckFor(t, 20*time.Second, func() error {
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		consumer.PollFetches(fctx).EachRecord(func(r *kgo.Record) { got[r.Partition] = string(r.Value) })
		if len(got) != 8 {
			return fmt.Errorf("read %v", got)
		}
		return nil
	})
}

// A broker-only node that was down while the controller compacted its
// log away restores the controller's snapshot, fetched over the
// CONTROLLER listener, and then follows the log.
func TestClusterBrokerOnlyNodeCatchesUpFromASnapshot(t *testing.T) {
	t.Parallel()
	// A snapshot every 8 entries keeping 8 behind it: the 30 topics below
	// are compacted away while the observer is down. Every node's log is
	// printed if the test fails (it found why the observer's start once
	// timed out: it restored a snapshot during its start, and registered
	// with the cluster id its store had before).
	var logs testutil.SyncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the nodes' logs:\n%s", logs.String())
		}
	})
	c := startMixedCluster(t, 3, 1, func(cfg *broker.Config) {
		cfg.Cluster.SnapshotEntries, cfg.Cluster.TrailingEntries, cfg.Cluster.SnapshotInterval = 8, 8, 50*time.Millisecond
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil)).With("node", cfg.NodeID)
	})
	ctx := t.Context()
	const observer = 3
	ctl := c.controllerIndex()
	c.stop(observer)
	const topics = 30
	for i := range topics {
		if _, err := c.client(ctl).CreateTopic(ctx, 1, 1, nil, fmt.Sprintf("snap-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var restarted testutil.SyncBuffer // the observer's own log from its restart on
	c.cfgs[observer].Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&restarted, &logs), nil)).With("node", observer+1)
	c.restart(observer)
	testutil.CheckFor(t, 20*time.Second, func() error {
		for i := range topics {
			if c.nodes[observer].Broker.Partitions().Topic(fmt.Sprintf("snap-%d", i)) == nil {
				return fmt.Errorf("snap-%d is not open on the restarted broker-only node", i)
			}
		}
		return nil
	})
	if !strings.Contains(restarted.String(), "restoring the controller's snapshot") {
		t.Fatalf("the broker-only node caught up without the snapshot: the test proves nothing; its log:\n%s", restarted.String())
	}
	createOn(t, c.nodes[observer], "after-snapshot", 1)
	if c.nodes[observer].Broker.Partitions().Topic("after-snapshot") == nil {
		t.Fatal("after the snapshot, the broker-only node does not follow the log")
	}
}

// createOn sends CreateTopics for topic to node n itself, retrying while
// the cluster has no controller; its answer means the topic is open on n.
func createOn(t *testing.T, n *Node, topic string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics, req.TimeoutMillis = append(req.Topics, rt), 10000
	cl := nodetest.Client(t, []string{n.Addr()})
	tried := false
	testutil.CheckFor(t, 20*time.Second, func() error {
		resp, err := req.RequestWith(t.Context(), cl.SeedBrokers()[0])
		if err == nil {
			err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		}
		if errors.Is(err, kerr.TopicAlreadyExists) && tried {
			return nil // an attempt that failed had created it
		}
		tried = true
		return err
	})
}

// A broker-only node started on another cluster's data refuses to start,
// naming both ids: data a node alone wrote (its store holds entries of
// another log, which fetching on from its index would mix with this
// one's), and an empty dir formatted with another id.
func TestClusterBrokerOnlyNodeRefusesAnotherClustersData(t *testing.T) {
	t.Parallel()
	c := startMixedCluster(t, 3, 1)
	const observer = 3
	clusterID := c.nodes[0].store.ClusterID()
	c.stop(observer)
	wipe := func() {
		t.Helper()
		for _, d := range c.cfgs[observer].LogDirs {
			if err := os.RemoveAll(d); err != nil {
				t.Fatal(err)
			}
		}
	}
	refused := func(other string) {
		t.Helper()
		n, err := Start(c.cfgs[observer], control.Config{})
		if err == nil {
			n.Close()
			t.Fatalf("a broker-only node on cluster %s's data joined cluster %s", other, clusterID)
		}
		if !errors.Is(err, state.ErrOtherCluster) || !strings.Contains(err.Error(), clusterID) || !strings.Contains(err.Error(), other) {
			t.Fatalf("on cluster %s's data: %v; want ErrOtherCluster naming it and %s", other, err, clusterID)
		}
	}

	wipe()
	alone := c.cfgs[observer]
	alone.Cluster = broker.ClusterConfig{}
	n, err := Start(alone, control.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(nodetest.Client(t, []string{n.Addr()})).CreateTopic(t.Context(), 1, 1, nil, "mine"); err != nil {
		t.Fatal(err)
	}
	other := n.store.ClusterID()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	refused(other)

	wipe()
	if _, err := broker.FormatStorage(c.cfgs[observer], "AAAAAAAAAAAAAAAAAAAAAg", false); err != nil {
		t.Fatal(err)
	}
	refused("AAAAAAAAAAAAAAAAAAAAAg")
}
