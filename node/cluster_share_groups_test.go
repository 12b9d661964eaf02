package node

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// A share group keeps its members across the loss of its coordinator
// (KIP-932): their epochs and assignments are in __consumer_offsets, so
// the partition's new leader serves them as they were and their next
// heartbeat goes on, with no rejoin.
func TestClusterShareGroupKeepsItsMembersAcrossTheCoordinator(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, logsOnFailure(t), func(cfg *broker.Config) {
		cfg.GroupRebalanceProtocols = []string{"classic", "consumer", "share"}
	})
	ctx := t.Context()
	if _, err := c.client(0).CreateTopic(ctx, 3, 3, nil, "work"); err != nil {
		t.Fatal(err)
	}
	epochs := map[string]int32{}
	heartbeat := func(member string, join bool) *kmsg.ShareGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.Version, req.GroupID, req.MemberID, req.MemberEpoch = 1, "workers", member, epochs[member]
		if join {
			req.MemberEpoch, req.SubscribedTopicNames = 0, []string{"work"}
		}
		// Retried as a client retries: while __consumer_offsets is
		// created, and while its partition moves and loads.
		var resp *kmsg.ShareGroupHeartbeatResponse
		testutil.CheckFor(t, 30*time.Second, func() (err error) {
			if resp, err = req.RequestWith(ctx, nodetest.Client(t, c.addrs())); err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			if err != nil && !kerr.IsRetriable(err) {
				t.Fatalf("%s's heartbeat at epoch %d: %v", member, req.MemberEpoch, err)
			}
			return err
		})
		epochs[member] = resp.MemberEpoch
		return resp
	}
	describe := func() string {
		t.Helper()
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.Version, req.GroupIDs = 1, []string{"workers"}
		var resp *kmsg.ShareGroupDescribeResponse
		testutil.CheckFor(t, 30*time.Second, func() (err error) {
			if resp, err = req.RequestWith(ctx, nodetest.Client(t, c.addrs())); err == nil {
				err = kerr.ErrorForCode(resp.Groups[0].ErrorCode)
			}
			if err != nil && !kerr.IsRetriable(err) {
				t.Fatalf("ShareGroupDescribe: %v", err)
			}
			return err
		})
		js, _ := json.Marshal(resp.Groups[0])
		return string(js)
	}
	heartbeat("m1", true)
	heartbeat("m2", true)
	heartbeat("m1", false) // takes its share of the epoch m2 joined at
	before := describe()
	coordinator, err := groupCoordinator(ctx, nodetest.Client(t, []string{c.nodes[0].Addr()}).SeedBrokers()[0], "workers")
	if err != nil {
		t.Fatal(err)
	}
	c.stop(int(coordinator - 1))
	if after := describe(); after != before {
		t.Fatalf("after node %d (the coordinator) stopped:\n%s\nbefore:\n%s", coordinator, after, before)
	}
	for _, m := range []string{"m1", "m2"} {
		was := epochs[m]
		if resp := heartbeat(m, false); resp.MemberEpoch != was {
			t.Fatalf("%s at epoch %d after the move, was %d", m, resp.MemberEpoch, was)
		}
	}
	if fmt.Sprint(epochs) != "map[m1:2 m2:2]" {
		t.Fatalf("epochs %v, want both members at the group's epoch 2", epochs)
	}
}

// A share partition's start offset survives the loss of its leader: the
// records acknowledged under the old leader are not delivered again by
// the new one, which starts where the group's coordinator (another node)
// says the old one had settled everything before.
func TestClusterSharePartitionResumesAfterItsLeader(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, logsOnFailure(t), func(cfg *broker.Config) {
		cfg.GroupRebalanceProtocols = []string{"classic", "consumer", "share"}
	})
	ctx := t.Context()
	adm := c.client(0)
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	pr := nodetest.Client(t, c.addrs(), kgo.DefaultProduceTopic("jobs"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 20 {
		if err := pr.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	topics, err := adm.ListTopics(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	leader, id := topics["jobs"].Partitions[0].Leader, topics["jobs"].ID
	// A group whose coordinator is not the partition's leader: the leader
	// reads and writes the start offset over ReadShareGroupState and
	// WriteShareGroupState.
	var group string
	testutil.CheckFor(t, 30*time.Second, func() error {
		for i := range 20 {
			g := fmt.Sprint("q", i)
			co, err := groupCoordinator(ctx, nodetest.Client(t, []string{c.nodes[0].Addr()}).SeedBrokers()[0], g)
			if err != nil {
				return err
			}
			if co != leader {
				group = g
				return nil
			}
		}
		return fmt.Errorf("no group of 20 is coordinated away from node %d", leader)
	})
	start := kadm.Offsets{}
	start.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 0})
	testutil.CheckFor(t, 30*time.Second, func() error {
		resp, err := adm.AlterShareGroupOffsets(ctx, group, start)
		if err == nil {
			err = resp.Error()
		}
		return err
	})
	// At the leader: the first 10 records acquired and accepted.
	lb := nodetest.Client(t, c.addrs()).Broker(int(leader))
	fetch := kmsg.NewPtrShareFetchRequest()
	fetch.Version, fetch.GroupID, fetch.MemberID, fetch.MaxRecords, fetch.BatchSize = 2, kmsg.StringPtr(group), kmsg.StringPtr("m"), 10, 10
	fetch.MaxWaitMillis, fetch.MaxBytes = 1000, 1<<20
	fetch.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0,
		PartitionMaxBytes: 1 << 20}}}}
	fr, err := fetch.RequestWith(ctx, lb)
	if err != nil || fr.ErrorCode != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions[0].AcquiredRecords) == 0 {
		t.Fatalf("ShareFetch at the leader: %v %+v", err, fr)
	}
	last := fr.Topics[0].Partitions[0].AcquiredRecords[len(fr.Topics[0].Partitions[0].AcquiredRecords)-1].LastOffset
	// Offset 0 released, the rest accepted: the start offset stays at 0,
	// and what was accepted past it is in the in-flight state the
	// coordinator keeps.
	types := make([]int8, last+1)
	for i := range types {
		types[i] = 1
	}
	types[0] = 2
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.Version, ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = 2, kmsg.StringPtr(group), kmsg.StringPtr("m"), -1
	ack.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: id, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: 0,
		AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: last,
			AcknowledgeTypes: types}}}}}}
	if ar, err := ack.RequestWith(ctx, lb); err != nil || ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ShareAcknowledge at the leader: %v %+v", err, ar)
	}
	c.stop(int(leader - 1))
	// A share consumer on the new leader reads the released record and
	// the rest, once each, and none of those accepted before the move.
	sc := nodetest.Client(t, c.addrs(), kgo.ShareGroup(group), kgo.ConsumeTopics("jobs"), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[int64]int{}
	want := int(19-last) + 1
	for len(seen) < want && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		sc.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[r.Offset]++ })
		pcancel()
	}
	for o, k := range seen {
		if (o > 0 && o <= last) || k != 1 {
			t.Fatalf("after the leader moved, offset %d was delivered %d times (1-%d were accepted before)", o, k, last)
		}
	}
	if len(seen) != want || seen[0] != 1 {
		t.Fatalf("read %v after the move, want offset 0 and %d-19", seen, last+1)
	}
}
