package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// mirrorRPC sends a mirror RPC through node i (forwarded to the
// controller when node i is not it) and returns the answer.
func (c *testCluster) mirrorRPC(i int, req kmsg.Request) kmsg.Response {
	c.t.Helper()
	resp, err := c.tryMirrorRPC(i, req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// tryMirrorRPC is mirrorRPC that returns its error. The request goes to
// node i itself (kgo would send an admin request to the controller its
// metadata names, which may be a node just stopped).
func (c *testCluster) tryMirrorRPC(i int, req kmsg.Request) (kmsg.Response, error) {
	// A client per call, closed at once: the callers poll. A stop may
	// take up to 25 s to answer (control's stopWait): kgo's default read
	// timeout, 10 s, would cut it off.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.nodes[i].Addr()), kgo.MaxVersions(mirrorapi.WithMirrorKeys(nil)),
		kgo.RequestTimeoutOverhead(30*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	resp, err := cl.SeedBrokers()[0].Request(c.t.Context(), req)
	if err != nil {
		return nil, fmt.Errorf("%s through node %d: %w", mirrorapi.NameForKey(req.Key()), i+1, err)
	}
	return resp, nil
}

// mirrorStates returns each partition's state of mirror's topic as node i
// describes it ("topic-p": state), failing on an error in the answer.
func (c *testCluster) mirrorStates(i int, mirror string) (map[string]string, error) {
	req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
	req.MirrorNames = []string{mirror}
	r, err := c.tryMirrorRPC(i, req)
	if err != nil {
		return nil, err
	}
	resp := r.(*mirrorapi.DescribeClusterMirrorsResponse)
	if len(resp.Mirrors) != 1 || resp.Mirrors[0].ErrorCode != 0 {
		return nil, fmt.Errorf("describe through node %d: %+v", i+1, resp.Mirrors)
	}
	out := map[string]string{}
	for _, t := range resp.Mirrors[0].Topics {
		for _, p := range t.Partitions {
			out[fmt.Sprintf("%s-%d", t.TopicName, p.PartitionIndex)] = p.StateValue
		}
	}
	return out, nil
}

// allInState waits until node i describes every one of want partitions
// of mirror in state.
func (c *testCluster) allInState(i int, mirror, state string, want int) {
	c.t.Helper()
	testutil.CheckFor(c.t, 45*time.Second, func() error {
		states, err := c.mirrorStates(i, mirror)
		if err != nil {
			return err
		}
		if len(states) != want {
			return fmt.Errorf("%d partitions described, want %d: %v", len(states), want, states)
		}
		for p, s := range states {
			if s != state {
				return fmt.Errorf("%s is %s, want %s (all: %v)", p, s, state, states)
			}
		}
		return nil
	})
}

// copiedUpTo waits until every partition of topic has a running leader
// whose log ends at the source's end offset, every replica identical.
func (c *testCluster) copiedUpTo(topic string, ends map[int32]int64) {
	c.t.Helper()
	testutil.CheckFor(c.t, 45*time.Second, func() error {
		for p, end := range ends {
			for i, n := range c.nodes {
				if n == nil || c.leaderOf(i, topic, p) != int32(i+1) {
					continue
				}
				if got := c.partitionOn(i, topic, p).LogEndOffset(); got != end {
					return fmt.Errorf("%s-%d on its leader, node %d: log end %d, the source's %d", topic, p, i+1, got, end)
				}
			}
		}
		return nil
	})
	c.replicasIdentical(topic, int32(len(ends)))
}

// mirrorFrom creates mirror "dr" of src through node via, starts its
// topic there, and waits until every partition is MIRRORING, fully
// replicated (RF 3) and copied up to the source's end.
func (c *testCluster) mirrorFrom(via int, src *kfake.Cluster, topic string, partitions int32) {
	c.t.Helper()
	create := mirrorapi.NewPtrCreateClusterMirrorRequest()
	create.MirrorName = "dr"
	create.Configs = []mirrorapi.CreateClusterMirrorRequestConfig{
		{Name: "bootstrap.servers", Value: kmsg.StringPtr(src.ListenAddrs()[0])},
		{Name: "mirror.fetch.wait.max.ms", Value: kmsg.StringPtr("100")}}
	if r := c.mirrorRPC(via, create).(*mirrorapi.CreateClusterMirrorResponse); r.ErrorCode != 0 {
		c.t.Fatalf("CreateClusterMirror: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	start := mirrorapi.NewPtrStartMirrorTopicsRequest()
	start.MirrorName = "dr"
	start.Topics = []mirrorapi.StartMirrorTopicsRequestTopic{{TopicName: topic}}
	if r := c.mirrorRPC(via, start).(*mirrorapi.StartMirrorTopicsResponse); r.ErrorCode != 0 || r.Topics[0].ErrorCode != 0 {
		c.t.Fatalf("StartMirrorTopics: %+v", r)
	}
	c.allInState(via, "dr", "MIRRORING", int(partitions))
	c.waitFullISR(via, topic, partitions, 3)
	c.copiedUpTo(topic, sourceEnds(c.t, src, topic, partitions))
}

// sourceEnds are the end offsets of topic's partitions at the source.
func sourceEnds(t *testing.T, src *kfake.Cluster, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	ends := map[int32]int64{}
	offs, err := kadm.NewClient(nodetest.Client(t, src.ListenAddrs())).ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		o, ok := offs.Lookup(topic, p)
		if !ok || o.Err != nil {
			t.Fatalf("source end of %s-%d: %+v", topic, p, o)
		}
		ends[p] = o.Offset
	}
	return ends
}

// Mirroring into a cluster of three (issue 22): a mirror created and
// started through a node that is not the controller runs each
// partition's fetcher on that partition's leader, the followers replicate
// the mirrored batches byte for byte; when a node leaves, the partitions
// it led are mirrored on by their new leaders from their own log ends,
// nothing copied twice; and a failover (--stop) with that node still down
// fails every partition over on its current leader and makes the topic
// writable.
func TestClusterMirrorsOnLeadersAndFailsOverWithANodeDown(t *testing.T) {
	t.Parallel()
	const topic, partitions = "orders", 6
	src := kfaketest.Source(t, kfake.SeedTopics(partitions, topic))
	scl := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produce := func(prefix string, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
		}
		if err := scl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce("before", 120)

	c := startCluster(t, 3, logsOnFailure(t), func(cfg *broker.Config) { cfg.DefaultReplicationFactor = 3 })
	ctl := c.controllerIndex()
	via := (ctl + 1) % 3 // not the controller: the mirror RPCs are forwarded

	c.mirrorFrom(via, src, topic, partitions)
	// Every fetcher runs on its partition's leader, and there only.
	for i, n := range c.nodes {
		for p := range int32(partitions) {
			_, err := n.Mirrors.Fetchers().Status("dr", topic, p)
			if leads := c.leaderOf(i, topic, p) == int32(i+1); leads != (err == nil) {
				t.Fatalf("node %d: leads %s-%d %v, runs its fetcher %v", i+1, topic, p, leads, err == nil)
			}
		}
	}

	// The node leading the most partitions leaves; their new leaders
	// mirror on from their own log ends.
	gone, most := 0, 0
	for i := range c.nodes {
		led := 0
		for p := range int32(partitions) {
			if c.leaderOf(i, topic, p) == int32(i+1) {
				led++
			}
		}
		if led > most {
			gone, most = i, led
		}
	}
	c.stop(gone)
	alive := (gone + 1) % 3
	produce("after", 120)
	c.copiedUpTo(topic, sourceEnds(t, src, topic, partitions))
	c.allInState(alive, "dr", "MIRRORING", partitions)

	// Consumer groups committed at the source: their offsets are synced
	// by the failover's final sync into each group's coordinator, which
	// for most of them is not the controller that runs the sync.
	groups := []string{"g-a", "g-b", "g-c", "g-d", "g-e", "g-f", "g-g", "g-h", "g-i", "g-j", "g-k", "g-l"}
	sadm := kadm.NewClient(nodetest.Client(t, src.ListenAddrs()))
	for gi, g := range groups {
		var offs kadm.Offsets
		for p := range int32(partitions) {
			offs.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(gi + 3), LeaderEpoch: -1})
		}
		if _, err := sadm.CommitOffsets(t.Context(), g, offs); err != nil {
			t.Fatalf("committing %s at the source: %v", g, err)
		}
	}

	// Failover with the node still down.
	stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName = "dr"
	stop.Topics = []mirrorapi.MirrorTopicsRequestTopic{{TopicName: topic}}
	if r := c.mirrorRPC(alive, stop).(*mirrorapi.StopMirrorTopicsResponse); r.ErrorCode != 0 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("StopMirrorTopics: %d %v %+v", r.ErrorCode, r.ErrorMessage, r.Topics)
	} else if rt := r.Topics[0]; rt.FinalSync != mirrorapi.FinalSyncDone {
		// Every group's coordinator has a live replica to move to: the
		// final sync must have reached them all.
		msg := "(no message)"
		if rt.FinalSyncMessage != nil {
			msg = *rt.FinalSyncMessage
		}
		t.Fatalf("final sync %d with node %d down: %s", rt.FinalSync, gone+1, msg)
	}
	c.allInState(alive, "dr", "STOPPED", partitions)
	ends := sourceEnds(t, src, topic, partitions)
	cl := nodetest.Client(t, []string{c.nodes[alive].Addr()}, kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Partition: 0, Value: []byte("written here")}).FirstErr(); err != nil {
		t.Fatalf("producing to the failed-over topic: %v", err)
	}
	// Each partition ends with the failover's MIRROR_PID_RESET after
	// the mirrored records, on every running replica alike.
	for p, end := range ends {
		for i, n := range c.nodes {
			if n == nil || c.leaderOf(i, topic, p) != int32(i+1) {
				continue
			}
			if got := c.partitionOn(i, topic, p).LogEndOffset(); got <= end {
				t.Fatalf("%s-%d: log end %d after the failover, the source's %d: no marker", topic, p, got, end)
			}
		}
	}
	// Every group holds the source's offsets, coordinated by the live
	// leader of its partition of __consumer_offsets (which the final sync
	// created, with the node down), and at least one of them away from the
	// controller: the other live node kept its leaderships through the
	// failover (its heartbeats once queued behind its forwarded requests
	// on one connection, and it was fenced).
	ctlID := int32(c.controllerIndex() + 1)
	remote := 0
	acl := nodetest.Client(t, []string{c.nodes[alive].Addr()})
	coordinators := map[string]int32{}
	testutil.CheckFor(t, 20*time.Second, func() error {
		remote = 0
		for gi, g := range groups {
			coordinator, err := groupCoordinator(t.Context(), acl.SeedBrokers()[0], g)
			switch {
			case err != nil:
				return fmt.Errorf("at node %d (%s), node %d down: %w", alive+1, c.nodes[alive].Addr(), gone+1, err)
			case coordinator == int32(gone+1):
				return fmt.Errorf("FindCoordinator of %s names node %d, which is down", g, coordinator)
			}
			if coordinator != ctlID {
				remote++
			}
			coordinators[g] = coordinator
			fetched, err := kadm.NewClient(acl).FetchOffsets(t.Context(), g)
			if err != nil {
				return fmt.Errorf("group %s: %w", g, err)
			}
			for p := range int32(partitions) {
				if o, ok := fetched.Lookup(topic, p); !ok || o.Err != nil || o.At != int64(gi+3) {
					return fmt.Errorf("group %s (coordinator %d), %s-%d: committed %+v, want %d as at the source", g,
						coordinator, topic, p, o, gi+3)
				}
			}
		}
		return nil
	})
	if remote == 0 {
		t.Fatalf("no group is coordinated by a running node other than the controller %d (%v): the sync's routing is not tested",
			ctlID, coordinators)
	}
	c.restart(gone)
	c.replicasIdentical(topic, partitions)
	if states, err := c.mirrorStates(gone, "dr"); err != nil || strings.Count(fmt.Sprint(states), "STOPPED") != partitions {
		t.Fatalf("the restarted node describes %v %v", states, err)
	}
}
