package node

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// A stop in a cluster (issue 22's failover time): the partitions other
// nodes lead are failed over by their leaders while the controller's
// final sync reads the source, not after it. Held here in the sync's
// ListGroups, the final sync cannot end until every partition led away
// from the controller is STOPPED; the topic becomes writable only once
// the final sync is done.
func TestClusterLeadersFailOverWhileTheFinalSyncRuns(t *testing.T) {
	t.Parallel()
	const topic, partitions = "payments", 6
	src := kfaketest.Source(t, kfake.SeedTopics(partitions, topic))
	scl := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := range 60 {
		if err := scl.ProduceSync(t.Context(), &kgo.Record{Value: fmt.Appendf(nil, "r-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c := startCluster(t, 3, logsOnFailure(t), func(cfg *broker.Config) { cfg.DefaultReplicationFactor = 3 })
	ctl := c.controllerIndex()
	c.mirrorFrom(ctl, src, topic, partitions)
	var remote []string
	for p := range int32(partitions) {
		if c.leaderOf(ctl, topic, p) != int32(ctl+1) {
			remote = append(remote, fmt.Sprintf("%s-%d", topic, p))
		}
	}
	if len(remote) == 0 {
		t.Fatalf("the controller, node %d, leads every partition: nothing to fail over elsewhere", ctl+1)
	}

	// The final sync's group step waits at the source until released.
	var holding atomic.Bool
	release := make(chan struct{})
	released := func() {
		if holding.CompareAndSwap(true, false) {
			close(release)
		}
	}
	t.Cleanup(released) // before the source closes
	src.ControlKey(int16(kmsg.ListGroups), func(kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		if holding.Load() {
			src.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	holding.Store(true)
	stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName = "dr"
	stop.Topics = []mirrorapi.MirrorTopicsRequestTopic{{TopicName: topic}}
	answered := make(chan *mirrorapi.StopMirrorTopicsResponse, 1)
	go func() {
		r, err := c.tryMirrorRPC(ctl, stop)
		if err != nil {
			t.Error(err)
			answered <- nil
			return
		}
		answered <- r.(*mirrorapi.StopMirrorTopicsResponse)
	}()
	// Within the final sync's bound (10 s), while it is held.
	testutil.CheckFor(t, 6*time.Second, func() error {
		states, err := c.mirrorStates(ctl, "dr")
		if err != nil {
			return err
		}
		var not []string
		for _, p := range remote {
			if states[p] != "STOPPED" {
				not = append(not, p+" "+states[p])
			}
		}
		if len(not) > 0 {
			return fmt.Errorf("while the final sync is held, partitions led elsewhere are not STOPPED: %s",
				strings.Join(not, ", "))
		}
		return nil
	})
	select {
	case r := <-answered:
		t.Fatalf("the stop answered before its final sync ended: %+v", r)
	default:
	}
	released()
	r := <-answered
	if r == nil {
		t.FailNow()
	}
	if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 || r.Topics[0].FinalSync != mirrorapi.FinalSyncDone {
		t.Fatalf("StopMirrorTopics: %d %v %+v", r.ErrorCode, r.ErrorMessage, r.Topics)
	}
	c.allInState(ctl, "dr", "STOPPED", partitions)
	cl := nodetest.Client(t, []string{c.nodes[ctl].Addr()}, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Partition: 0, Value: []byte("written here")}).FirstErr(); err != nil {
		t.Fatalf("producing to the failed-over topic: %v", err)
	}
}
