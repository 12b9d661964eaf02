package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// replicasSeen waits until every running node's Metadata gives topic
// these replicas by partition, each partition led by its first replica
// with all of them in the ISR (a new partition's assignment).
func (c *testCluster) replicasSeen(ctx context.Context, topic string, want ...[]int32) {
	c.t.Helper()
	for i := range c.nodes {
		if c.nodes[i] == nil {
			continue
		}
		testutil.CheckFor(c.t, 10*time.Second, func() error {
			td, err := c.client(i).ListTopics(ctx, topic)
			if err != nil {
				return err
			}
			ps := td[topic].Partitions
			if len(ps) != len(want) {
				return fmt.Errorf("node %d: %s has %d partitions, want %d", i+1, topic, len(ps), len(want))
			}
			for p, w := range want {
				got := ps[int32(p)]
				if !slices.Equal(got.Replicas, w) || !slices.Equal(got.ISR, w) || got.Leader != w[0] {
					return fmt.Errorf("node %d: %s-%d replicas %v ISR %v leader %d, want replicas and ISR %v", i+1, topic, p,
						got.Replicas, got.ISR, got.Leader, w)
				}
			}
			return nil
		})
	}
}

// createTopicsRaw sends one CreateTopics of one topic through node i and
// returns its answer.
func (c *testCluster) createTopicsRaw(ctx context.Context, i int, rt kmsg.CreateTopicsRequestTopic) kmsg.CreateTopicsResponseTopic {
	c.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, nodetest.Client(c.t, []string{c.nodes[i].Addr()}))
	if err != nil || len(resp.Topics) != 1 {
		c.t.Fatalf("CreateTopics %s: %v %+v", rt.Topic, err, resp)
	}
	return resp.Topics[0]
}

// createPartitionsRaw grows topic to count through node i, with assign
// as its manual assignment when given, and returns the answer.
func (c *testCluster) createPartitionsRaw(ctx context.Context, i int, topic string, count int32, assign ...[]int32) kmsg.CreatePartitionsResponseTopic {
	c.t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	for _, rs := range assign {
		a := kmsg.NewCreatePartitionsRequestTopicAssignment()
		a.Replicas = rs
		rt.Assignment = append(rt.Assignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, nodetest.Client(c.t, []string{c.nodes[i].Addr()}))
	if err != nil || len(resp.Topics) != 1 {
		c.t.Fatalf("CreatePartitions %s: %v %+v", topic, err, resp)
	}
	return resp.Topics[0]
}

func wantAnswer(t *testing.T, what string, code int16, msg *string, wantCode int16, wantMsg string) {
	t.Helper()
	var got string
	if msg != nil {
		got = *msg
	}
	if code != wantCode || got != wantMsg {
		t.Errorf("%s: code %d %q, want %d %q", what, code, got, wantCode, wantMsg)
	}
}

// Topics of several replicas on three nodes, created through a node that
// is not the controller: each partition's leader is the broker leading
// the fewest partitions so far and its other replicas follow it
// round-robin, every node's Metadata says so, and the answer carries the
// real replication factor. A factor above the usable brokers, or a manual
// assignment with lists of different lengths, is refused with Kafka's
// messages; a manual assignment is placed as given. New partitions keep
// the topic's replication factor, and the usable brokers bound it when a
// node leaves.
func TestClusterReplicationFactor(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := t.Context()
	ctl := c.controllerIndex()
	for i := range c.nodes {
		c.brokersSeen(ctx, i, 1, 2, 3)
	}
	via := (ctl + 1) % 3

	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "rf3", 3, 3
	if st := c.createTopicsRaw(ctx, via, rt); st.ErrorCode != 0 || st.ReplicationFactor != 3 || st.NumPartitions != 3 {
		t.Fatalf("rf3: code %d, rf %d, %d partitions", st.ErrorCode, st.ReplicationFactor, st.NumPartitions)
	}
	c.replicasSeen(ctx, "rf3", []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2})
	rt.Topic, rt.ReplicationFactor = "rf2", 2
	if st := c.createTopicsRaw(ctx, via, rt); st.ErrorCode != 0 || st.ReplicationFactor != 2 {
		t.Fatalf("rf2: code %d, rf %d", st.ErrorCode, st.ReplicationFactor)
	}
	c.replicasSeen(ctx, "rf2", []int32{1, 2}, []int32{2, 3}, []int32{3, 1})

	rt.Topic, rt.ReplicationFactor = "rf4", 4
	st := c.createTopicsRaw(ctx, via, rt)
	wantAnswer(t, "rf4", st.ErrorCode, st.ErrorMessage, kerr.InvalidReplicationFactor.Code,
		"Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached because only 3 broker(s) are registered.")

	manual := func(name string, replicas ...[]int32) kmsg.CreateTopicsRequestTopic {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
		for p, rs := range replicas {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = int32(p), rs
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		return rt
	}
	if st := c.createTopicsRaw(ctx, via, manual("manual", []int32{3, 1}, []int32{2, 3})); st.ErrorCode != 0 || st.ReplicationFactor != 2 {
		t.Fatalf("manual: code %d %v, rf %d", st.ErrorCode, st.ErrorMessage, st.ReplicationFactor)
	}
	c.replicasSeen(ctx, "manual", []int32{3, 1}, []int32{2, 3})
	st = c.createTopicsRaw(ctx, via, manual("uneven", []int32{1, 2}, []int32{3}))
	wantAnswer(t, "uneven", st.ErrorCode, st.ErrorMessage, kerr.InvalidReplicaAssignment.Code,
		"The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s).")
	st = c.createTopicsRaw(ctx, via, manual("twice", []int32{1, 2, 1}))
	wantAnswer(t, "twice", st.ErrorCode, st.ErrorMessage, kerr.InvalidReplicaAssignment.Code,
		"The manual partition assignment includes the broker 1 more than once.")

	// New partitions: the topic's replication factor, leaders still
	// spread (brokers 1, 2 and 3 lead 2, 3 and 3 partitions by now: node 1
	// takes two, the lowest id winning the tie), or as assigned, with as
	// many replicas as the topic's.
	if cp := c.createPartitionsRaw(ctx, via, "rf2", 6); cp.ErrorCode != 0 {
		t.Fatalf("growing rf2: %d %v", cp.ErrorCode, cp.ErrorMessage)
	}
	c.replicasSeen(ctx, "rf2", []int32{1, 2}, []int32{2, 3}, []int32{3, 1}, []int32{1, 2}, []int32{1, 2}, []int32{2, 3})
	if cp := c.createPartitionsRaw(ctx, via, "rf2", 7, []int32{3, 2}); cp.ErrorCode != 0 {
		t.Fatalf("growing rf2 by assignment: %d %v", cp.ErrorCode, cp.ErrorMessage)
	}
	c.replicasSeen(ctx, "rf2", []int32{1, 2}, []int32{2, 3}, []int32{3, 1}, []int32{1, 2}, []int32{1, 2}, []int32{2, 3}, []int32{3, 2})
	cp := c.createPartitionsRaw(ctx, via, "rf2", 8, []int32{1})
	wantAnswer(t, "growing rf2 by one replica", cp.ErrorCode, cp.ErrorMessage, kerr.InvalidReplicaAssignment.Code,
		"The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s).")

	// With a node gone, three replicas no longer fit.
	gone := 3 - ctl - via // neither the controller nor the node asked
	c.stop(gone)
	testutil.CheckFor(t, 20*time.Second, func() error {
		cp := c.createPartitionsRaw(ctx, via, "rf3", 4)
		const msg = "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached because only 2 broker(s) are registered."
		if cp.ErrorCode != kerr.InvalidReplicationFactor.Code || cp.ErrorMessage == nil || *cp.ErrorMessage != msg {
			return fmt.Errorf("growing rf3 with node %d stopped: %d %v", gone+1, cp.ErrorCode, cp.ErrorMessage)
		}
		return nil
	})
}
