package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// testCluster is nodes of one cluster in this process, voters
// (process.roles=broker,controller) first, then any broker-only nodes,
// each with its own data dirs, which survive a stop so the node can
// start again on them. Node i (an index) has id i+1.
type testCluster struct {
	t     *testing.T
	cfgs  []broker.Config
	nodes []*Node // nil while stopped
}

// startCluster starts n voters of one cluster (nodetest.ClusterConfigs)
// at once, each config passed through tune first: each waits for a
// majority of the voters.
func startCluster(t *testing.T, n int, tune ...func(*broker.Config)) *testCluster {
	t.Helper()
	return startMixedCluster(t, n, 0, tune...)
}

// startMixedCluster starts voters voters and brokers broker-only nodes
// of one cluster at once.
func startMixedCluster(t *testing.T, voters, brokers int, tune ...func(*broker.Config)) *testCluster {
	t.Helper()
	cfgs := nodetest.ClusterConfigs(t, voters)
	for i := range brokers {
		cfgs = append(cfgs, nodetest.BrokerOnlyConfig(t, cfgs[0], int32(voters+i+1)))
	}
	n := len(cfgs)
	c := &testCluster{t: t, cfgs: cfgs, nodes: make([]*Node, n)}
	for i := range c.cfgs {
		for _, f := range tune {
			f(&c.cfgs[i])
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range c.cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.nodes[i], errs[i] = Start(c.cfgs[i], control.Config{})
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return c
}

// logsOnFailure is a tune of startCluster that gives every node a logger
// whose lines (info and above) the test prints if it fails.
func logsOnFailure(t *testing.T) func(*broker.Config) {
	logs := testutil.LogOnFailure(t, slog.LevelInfo)
	return func(cfg *broker.Config) { cfg.Logger = logs.With("node", cfg.NodeID) }
}

// stop closes node i (index, not id), keeping its data.
func (c *testCluster) stop(i int) {
	if c.nodes[i] != nil {
		if err := c.nodes[i].Close(); err != nil {
			c.t.Errorf("closing node %d: %v", i+1, err)
		}
		c.nodes[i] = nil
	}
}

// restart starts node i again on its data.
func (c *testCluster) restart(i int) {
	c.t.Helper()
	n, err := Start(c.cfgs[i], control.Config{})
	if err != nil {
		c.t.Fatalf("restarting node %d: %v", i+1, err)
	}
	c.nodes[i] = n
}

// client is a client bootstrapped from node i alone.
func (c *testCluster) client(i int, opts ...kgo.Opt) *kadm.Client {
	return kadm.NewClient(nodetest.Client(c.t, []string{c.nodes[i].Addr()}, opts...))
}

// controllerIndex waits until the running nodes agree on a controller and
// returns its index.
func (c *testCluster) controllerIndex() int {
	c.t.Helper()
	idx := -1
	testutil.CheckFor(c.t, 20*time.Second, func() error {
		idx = -1
		for i, n := range c.nodes {
			if n != nil && n.log.IsController() {
				idx = i
			}
		}
		if idx < 0 {
			return errors.New("no controller")
		}
		for i, n := range c.nodes {
			if n == nil {
				continue
			}
			if id, ok := n.log.Controller(); !ok || id != int32(idx+1) {
				return fmt.Errorf("node %d sees controller %d %v, want %d", i+1, id, ok, idx+1)
			}
		}
		return nil
	})
	return idx
}

// brokersSeen waits until node i's Metadata lists exactly want, asking
// with a new client each time (a client answers BrokerMetadata from what
// it saw first for a while).
func (c *testCluster) brokersSeen(ctx context.Context, i int, want ...int32) {
	c.t.Helper()
	testutil.CheckFor(c.t, 20*time.Second, func() error {
		md, err := c.client(i).BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		ids := md.Brokers.NodeIDs()
		slices.Sort(ids)
		if !slices.Equal(ids, want) {
			return fmt.Errorf("node %d lists brokers %v, want %v", i+1, ids, want)
		}
		return nil
	})
}

// Three voters started on empty data dirs form one cluster: one
// controller, one cluster id, every node listed by every node. A topic
// created through one node exists on all, its partitions' leaders spread
// over the three; records produced to each leader read back through a
// client that knows one node only.
func TestClusterForms(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := t.Context()
	c.controllerIndex()
	id := c.nodes[0].store.ClusterID()
	for i, n := range c.nodes {
		if got := n.store.ClusterID(); got != id {
			t.Fatalf("node %d: cluster id %s, node 1's %s", i+1, got, id)
		}
		c.brokersSeen(ctx, i, 1, 2, 3)
	}

	// The controller shows every voter's position, from its heartbeats.
	ctl := c.controllerIndex()
	testutil.CheckFor(t, 10*time.Second, func() error {
		q := c.nodes[ctl].quorum(int32(ctl + 1)).Quorum()
		if q.LeaderID != int32(ctl+1) || len(q.Voters) != 3 {
			return fmt.Errorf("quorum %+v", q)
		}
		for _, v := range q.Voters {
			if v.LogEndOffset < 1 || time.Since(v.LastFetch) > 5*time.Second {
				return fmt.Errorf("voter %d: log end %d, last fetch %v", v.ID, v.LogEndOffset, v.LastFetch)
			}
		}
		return nil
	})

	adm := c.client(1)
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "spread"); err != nil {
		t.Fatal(err)
	}
	for i := range c.nodes {
		testutil.CheckFor(t, 10*time.Second, func() error {
			td, err := c.client(i).ListTopics(ctx, "spread")
			if err != nil {
				return err
			}
			leaders := map[int32]int{}
			for _, p := range td["spread"].Partitions {
				leaders[p.Leader]++
			}
			if len(td["spread"].Partitions) != 6 || leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
				return fmt.Errorf("node %d: partitions %v, leaders %v; want two on each node", i+1, td["spread"].Partitions, leaders)
			}
			return nil
		})
	}

	cl := nodetest.Client(t, []string{c.nodes[2].Addr()}, kgo.DefaultProduceTopic("spread"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(6) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "v%d", p)}).FirstErr(); err != nil {
			t.Fatalf("producing to partition %d: %v", p, err)
		}
	}
	consumer := nodetest.Client(t, []string{c.nodes[0].Addr()}, kgo.ConsumeTopics("spread"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[int32]string{}
	testutil.CheckFor(t, 20*time.Second, func() error {
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		consumer.PollFetches(fctx).EachRecord(func(r *kgo.Record) { got[r.Partition] = string(r.Value) })
		if len(got) != 6 {
			return fmt.Errorf("read %v", got)
		}
		return nil
	})
	for p := range int32(6) {
		if got[p] != fmt.Sprintf("v%d", p) {
			t.Fatalf("partition %d: %q", p, got[p])
		}
	}

	// A producer to a topic nobody created, through a node that is not
	// the controller: the node has the controller create it.
	notCtl := (ctl + 1) % 3
	auto := nodetest.Client(t, []string{c.nodes[notCtl].Addr()}, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("auto"))
	if err := auto.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("producing to an auto-created topic through node %d: %v", notCtl+1, err)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		for i := range c.nodes {
			if c.nodes[i].Broker.Partitions().Topic("auto") == nil {
				return fmt.Errorf("node %d does not host the auto-created topic", i+1)
			}
		}
		return nil
	})

	// So is a transactional producer's, whose records spread over the
	// partitions the three nodes lead: its commit writes the markers
	// at every leader (TestClusterExactlyOnceAcrossNodes goes further).
	txnCl := nodetest.Client(t, []string{c.nodes[0].Addr()}, kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("spread"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err := txnCl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if err := txnCl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint("t", i))}).FirstErr(); err != nil {
			t.Fatalf("a transactional producer on a cluster of three: %v", err)
		}
	}
	if err := txnCl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("committing on a cluster of three: %v", err)
	}
}

// Stopping the controller elects another; admin requests sent to any
// survivor keep working, and the stopped node, restarted on its data,
// catches up with what changed while it was down.
func TestClusterLosesItsController(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := t.Context()
	old := c.controllerIndex()
	c.stop(old)
	next := c.controllerIndex()
	if next == old {
		t.Fatalf("node %d still the controller after it stopped", old+1)
	}
	survivor := (old + 1) % 3
	if survivor == next {
		survivor = (old + 2) % 3
	}
	testutil.CheckFor(t, 20*time.Second, func() error {
		_, err := c.client(survivor).CreateTopic(ctx, 2, 1, nil, "after")
		return err
	})
	c.restart(old)
	testutil.CheckFor(t, 20*time.Second, func() error {
		td, err := c.client(old).ListTopics(ctx, "after")
		if err != nil {
			return err
		}
		if len(td["after"].Partitions) != 2 {
			return fmt.Errorf("the restarted node knows %v", td)
		}
		return nil
	})
}

// A node that lost its disk rejoins once formatted with the cluster's id,
// and gets every topic back from the log; formatted with another id, it
// refuses to start, naming both.
func TestClusterNodeLosesItsDisk(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := t.Context()
	c.controllerIndex()
	if _, err := c.client(0).CreateTopic(ctx, 3, 1, nil, "kept"); err != nil {
		t.Fatal(err)
	}
	id := c.nodes[0].store.ClusterID()
	lost := 2
	c.stop(lost)
	wipe := func() {
		t.Helper()
		for _, d := range c.cfgs[lost].LogDirs {
			if err := os.RemoveAll(d); err != nil {
				t.Fatal(err)
			}
		}
	}
	wipe()
	if _, err := broker.FormatStorage(c.cfgs[lost], "AAAAAAAAAAAAAAAAAAAAAg", false); err != nil {
		t.Fatal(err)
	}
	if n, err := Start(c.cfgs[lost], control.Config{}); err == nil {
		n.Close()
		t.Fatal("a node formatted with another cluster's id started")
	} else if !errors.Is(err, state.ErrOtherCluster) || !strings.Contains(err.Error(), id) {
		t.Fatalf("formatted with another id: %v; want ErrOtherCluster naming %s", err, id)
	}
	wipe()
	if _, err := broker.FormatStorage(c.cfgs[lost], id, false); err != nil {
		t.Fatal(err)
	}
	c.restart(lost)
	testutil.CheckFor(t, 20*time.Second, func() error {
		td, err := c.client(lost).ListTopics(ctx, "kept")
		if err != nil {
			return err
		}
		if len(td["kept"].Partitions) != 3 {
			return fmt.Errorf("the rejoined node knows %v", td)
		}
		return nil
	})
	c.brokersSeen(ctx, 0, 1, 2, 3)
}

// A random sequence of admin operations, each sent to a random node,
// leaves every node with the same metadata: the same replicated records
// (byte for byte), the same topics open, the same Metadata answer.
func TestClusterSameImageEverywhere(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := t.Context()
	c.controllerIndex()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	adms := []*kadm.Client{c.client(0), c.client(1), c.client(2)}
	names := []string{"a", "b", "c", "d"}
	applied := 0
	for range 40 {
		adm := adms[rng.IntN(3)]
		name := names[rng.IntN(len(names))]
		var err error
		switch rng.IntN(5) {
		case 0, 1:
			_, err = adm.CreateTopic(ctx, int32(1+rng.IntN(3)), 1, nil, name)
		case 2:
			_, err = adm.DeleteTopics(ctx, name)
		case 3:
			_, err = adm.CreatePartitions(ctx, 1, name)
		case 4:
			_, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr(fmt.Sprint(1000 + rng.IntN(1000)))}}, name)
		}
		// Refusals (a topic that exists, or does not) are part of the
		// sequence; most operations must be real changes.
		var ke *kerr.Error
		if err == nil || !errors.As(err, &ke) {
			applied++
		}
	}
	if applied < 15 {
		t.Fatalf("only %d of 40 operations changed anything", applied)
	}
	snapshot := func(n *Node) []byte {
		var buf bytes.Buffer
		if err := n.store.WriteMetadataSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	testutil.CheckFor(t, 20*time.Second, func() error {
		want := snapshot(c.nodes[0])
		for i, n := range c.nodes[1:] {
			if !bytes.Equal(snapshot(n), want) {
				return fmt.Errorf("node %d's replicated records differ from node 1's", i+2)
			}
		}
		var first map[string]int
		for i := range c.nodes {
			td, err := c.client(i).ListTopics(ctx)
			if err != nil {
				return err
			}
			got := map[string]int{}
			for name, d := range td {
				got[name] = len(d.Partitions)
			}
			open := map[string]int{}
			for _, tp := range c.nodes[i].Broker.Partitions().Topics() {
				open[tp.Name()] = len(tp.Partitions())
			}
			if !maps.Equal(got, open) {
				return fmt.Errorf("node %d: Metadata says %v, its open topics are %v", i+1, got, open)
			}
			if first == nil {
				first = got
			} else if !maps.Equal(got, first) {
				return fmt.Errorf("node %d: topics %v, node 1's %v", i+1, got, first)
			}
		}
		return nil
	})
}

// A node that was down while the log moved past what the others keep
// catches up from the controller's snapshot, and opens what it holds.
func TestClusterNodeCatchesUpFromASnapshot(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, func(cfg *broker.Config) {
		cfg.Cluster.SnapshotEntries, cfg.Cluster.TrailingEntries, cfg.Cluster.SnapshotInterval = 8, 2, 50*time.Millisecond
	})
	ctx := t.Context()
	ctl := c.controllerIndex()
	behind := (ctl + 1) % 3
	c.stop(behind)
	adm := c.client(ctl)
	const topics = 30
	for i := range topics {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, fmt.Sprintf("snap-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	snapshots := func(i int) int {
		cfg := c.cfgs[i]
		if err := cfg.Validate(); err != nil { // derives StateDir
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(filepath.Join(cfg.StateDir, metadataLogDir, "snapshots"))
		return len(entries)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		if snapshots(ctl) == 0 {
			return errors.New("the controller took no snapshot")
		}
		return nil
	})
	before := snapshots(behind)
	c.restart(behind)
	testutil.CheckFor(t, 20*time.Second, func() error {
		td, err := c.client(behind).ListTopics(ctx)
		if err != nil {
			return err
		}
		if len(td) != topics {
			return fmt.Errorf("the restarted node knows %d topics, want %d", len(td), topics)
		}
		for i := range topics {
			if c.nodes[behind].Broker.Partitions().Topic(fmt.Sprintf("snap-%d", i)) == nil {
				return fmt.Errorf("snap-%d is not open on the restarted node", i)
			}
		}
		return nil
	})
	if snapshots(behind) <= before {
		t.Fatalf("the restarted node caught up without a snapshot (%d before, %d after): the test proves nothing", before, snapshots(behind))
	}
}

// A cluster-wide broker default and a client quota set through one node
// are in force on every node, and a node's own broker config set through
// it (forwarded to the controller) on that node.
func TestClusterBrokerDefaultsAndQuotasEverywhere(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := t.Context()
	c.controllerIndex()
	if _, err := c.client(1).AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kmsg.StringPtr("123456")}}); err != nil {
		t.Fatal(err)
	}
	q := kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsg.StringPtr("slow")}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}}
	if _, err := c.client(2).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{q}); err != nil {
		t.Fatal(err)
	}
	// A node's own config, sent to that node (kafka-configs --entity-type
	// brokers --entity-name N does so), goes through the controller.
	ctl := c.controllerIndex()
	other := (ctl + 1) % 3
	otherID := int32(other + 1)
	if resp, err := c.client(other).AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.bytes", Value: kmsg.StringPtr("777777")}}, otherID); err != nil {
		t.Fatal(err)
	} else if err := resp[0].Err; err != nil {
		t.Fatalf("altering broker %d's own config through it: %v (%s)", otherID, err, resp[0].ErrMessage)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		rcs, err := c.client(other).DescribeBrokerConfigs(ctx, otherID)
		if err != nil {
			return err
		}
		rc, err := rcs.On(strconv.Itoa(int(otherID)), nil)
		if err != nil {
			return err
		}
		for _, cfg := range rc.Configs {
			if cfg.Key == "log.retention.bytes" && cfg.Value != nil && *cfg.Value == "777777" && cfg.Source == kmsg.ConfigSourceDynamicBrokerConfig {
				return nil
			}
		}
		return fmt.Errorf("broker %d does not apply its own log.retention.bytes", otherID)
	})
	for i := range c.nodes {
		testutil.CheckFor(t, 10*time.Second, func() error {
			rcs, err := c.client(i).DescribeBrokerConfigs(ctx, int32(i+1))
			if err != nil {
				return err
			}
			rc, err := rcs.On(strconv.Itoa(i+1), nil)
			if err != nil {
				return err
			}
			found := false
			for _, cfg := range rc.Configs {
				if cfg.Key == "log.retention.ms" && cfg.Value != nil && *cfg.Value == "123456" {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("node %d does not apply the cluster default log.retention.ms", i+1)
			}
			qs, err := c.client(i).DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: kmsg.StringPtr("slow")}})
			if err != nil {
				return err
			}
			if len(qs) != 1 || len(qs[0].Values) != 1 || qs[0].Values[0].Value != 1024 {
				return fmt.Errorf("node %d's quotas for client slow: %+v", i+1, qs)
			}
			return nil
		})
	}
}

// A topic deleted through the controller takes its committed offsets with
// it on every node, also on the group's coordinator elsewhere: the
// topic re-created under the same name starts with none.
func TestClusterDeletedTopicTakesItsOffsets(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := t.Context()
	ctl := c.controllerIndex()
	adm := c.client((ctl + 1) % 3)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "gone"); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		for i := range c.nodes {
			if c.nodes[i].Broker.Partitions().Topic("gone") == nil {
				return fmt.Errorf("node %d does not host the topic yet", i+1)
			}
		}
		return nil
	})
	// Groups hashed to every node: some are coordinated off the controller.
	var groups []string
	for i := range 6 {
		g := fmt.Sprintf("g%d", i)
		groups = append(groups, g)
		commit := make(kadm.Offsets)
		commit.Add(kadm.Offset{Topic: "gone", Partition: 0, At: 42, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, g, commit)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("committing for group %s: %v", g, err)
		}
	}
	if _, err := adm.DeleteTopics(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 20*time.Second, func() error {
		_, err := adm.CreateTopic(ctx, 1, 1, nil, "gone")
		return err
	})
	for _, g := range groups {
		testutil.CheckFor(t, 10*time.Second, func() error {
			offs, err := adm.FetchOffsets(ctx, g)
			if err != nil {
				return err
			}
			if o, ok := offs.Lookup("gone", 0); ok && o.At >= 0 {
				return fmt.Errorf("group %s: offset %d of the deleted topic survived", g, o.At)
			}
			return nil
		})
	}
}

// The controller, once its quorum lost its majority, answers a topic
// creation NOT_CONTROLLER (or REQUEST_TIMED_OUT when it has already
// stepped down and forwards to no one), which clients retry, never
// KAFKA_STORAGE_ERROR: CI saw "Disk error when trying to access log file
// on the disk" for a CreateTopics during a controller election on a
// loaded machine.
func TestClusterWithoutQuorumAnswersNotController(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, logsOnFailure(t))
	ctl := c.controllerIndex()
	cl := nodetest.Client(t, []string{c.nodes[ctl].Addr()})
	for i := range 3 {
		if i != ctl {
			c.stop(i)
		}
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "no-quorum", 1, 1
	req.Topics, req.TimeoutMillis = append(req.Topics, rt), 2000
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second) // a forward waits up to 30 s
	defer cancel()
	resp, err := req.RequestWith(ctx, cl.Broker(ctl+1))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != kerr.NotController.Code && code != kerr.RequestTimedOut.Code {
		t.Fatalf("CreateTopics without a quorum: %v (%v), want NOT_CONTROLLER or REQUEST_TIMED_OUT",
			kerr.ErrorForCode(code), resp.Topics[0].ErrorMessage)
	}
}
