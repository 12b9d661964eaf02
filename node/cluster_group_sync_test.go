package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// A failover whose final sync cannot ask a group's coordinator (the only
// replica of its partition of __consumer_offsets is on a node that is
// down) says so in the stop's answer: FinalSyncFailed, naming each such
// group. The groups coordinated by live nodes are synced all the same,
// within the same bound. The final sync used to count such a group as
// active, skip it, and answer FinalSyncDone: a failover that left a
// group's offsets behind reported that it had brought them all.
func TestClusterFailoverNamesTheGroupsItCouldNotSync(t *testing.T) {
	t.Parallel()
	const topic, partitions, perPartition = "orders", 3, 40
	src := kfaketest.Source(t, kfake.SeedTopics(partitions, topic))
	scl := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var recs []*kgo.Record
	for i := range partitions * perPartition {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "r-%d", i)})
	}
	if err := scl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	c := startCluster(t, 3, logsOnFailure(t), func(cfg *broker.Config) {
		cfg.DefaultReplicationFactor = 3
		cfg.OffsetsTopicReplicationFactor = 1
	})
	ctl := c.controllerIndex()
	c.mirrorFrom(ctl, src, topic, partitions)
	// The final sync clamps offsets to the controller's replicas' high
	// watermarks, which a follower learns a fetch after its leader (the
	// README's limits): waited for, so that this test checks which groups
	// were synced, not that lag.
	ends := sourceEnds(t, src, topic, partitions)
	testutil.CheckFor(t, 20*time.Second, func() error {
		for p, end := range ends {
			if hw := c.partitionOn(ctl, topic, p).HighWatermark(); hw != end {
				return fmt.Errorf("%s-%d on the controller: high watermark %d, the source's end %d", topic, p, hw, end)
			}
		}
		return nil
	})

	var groups []string
	sadm := kadm.NewClient(nodetest.Client(t, src.ListenAddrs()))
	for gi := range 24 {
		g := fmt.Sprintf("g-%02d", gi)
		groups = append(groups, g)
		var offs kadm.Offsets
		for p := range int32(partitions) {
			offs.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(gi + 1), LeaderEpoch: -1})
		}
		if _, err := sadm.CommitOffsets(t.Context(), g, offs); err != nil {
			t.Fatalf("committing %s at the source: %v", g, err)
		}
	}
	// Each group's coordinator, as the controller answers it (asking
	// creates __consumer_offsets, one replica per partition).
	ccl := nodetest.Client(t, []string{c.nodes[ctl].Addr()})
	coordinators := map[string]int32{}
	testutil.CheckFor(t, 20*time.Second, func() error {
		for _, g := range groups {
			id, err := groupCoordinator(t.Context(), ccl.SeedBrokers()[0], g)
			if err != nil {
				return err
			}
			coordinators[g] = id
		}
		return nil
	})
	// The node to lose: not the controller (which runs the final sync),
	// the one coordinating the most groups.
	led := map[int32]int{}
	for _, id := range coordinators {
		led[id]++
	}
	gone := -1
	for i := range c.nodes {
		if i != ctl && (gone < 0 || led[int32(i+1)] > led[int32(gone+1)]) {
			gone = i
		}
	}
	if led[int32(gone+1)] == 0 {
		t.Fatalf("no group is coordinated by a node other than the controller: %v", coordinators)
	}
	c.stop(gone)

	stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName = "dr"
	stop.Topics = []mirrorapi.MirrorTopicsRequestTopic{{TopicName: topic}}
	r := c.mirrorRPC(ctl, stop).(*mirrorapi.StopMirrorTopicsResponse)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("StopMirrorTopics: %d %v %+v", r.ErrorCode, r.ErrorMessage, r.Topics)
	}
	rt := r.Topics[0]
	msg := ""
	if rt.FinalSyncMessage != nil {
		msg = *rt.FinalSyncMessage
	}
	if rt.FinalSync != mirrorapi.FinalSyncFailed {
		t.Fatalf("final sync %d (%q) with node %d, coordinator of %d groups, down: want FinalSyncFailed (%d)",
			rt.FinalSync, msg, gone+1, led[int32(gone+1)], mirrorapi.FinalSyncFailed)
	}
	for _, g := range groups {
		named := strings.Contains(msg, "group "+g+" not synced")
		if down := coordinators[g] == int32(gone+1); named != down {
			t.Errorf("group %s (coordinator %d, node %d down): named in the final sync's message %v\n%s",
				g, coordinators[g], gone+1, named, msg)
		}
	}
	c.allInState(ctl, "dr", "STOPPED", partitions)

	// The groups coordinated by live nodes hold the source's offsets.
	adm := kadm.NewClient(ccl)
	for gi, g := range groups {
		if coordinators[g] == int32(gone+1) {
			continue
		}
		fetched, err := adm.FetchOffsets(t.Context(), g)
		if err != nil {
			t.Fatalf("group %s: %v", g, err)
		}
		for p := range int32(partitions) {
			if o, ok := fetched.Lookup(topic, p); !ok || o.Err != nil || o.At != int64(gi+1) {
				t.Errorf("group %s (coordinator %d), %s-%d: committed %+v, want %d as at the source", g,
					coordinators[g], topic, p, o, gi+1)
			}
		}
	}
}
