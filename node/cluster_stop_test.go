package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// holdFinalSync makes src hold every ListGroups, the final sync's group
// step, until released is called (at the test's cleanup too, before src
// closes); held receives once one is held.
func holdFinalSync(t *testing.T, src *kfake.Cluster) (held <-chan struct{}, released func()) {
	var holding atomic.Bool
	release := make(chan struct{})
	released = func() {
		if holding.CompareAndSwap(true, false) {
			close(release)
		}
	}
	t.Cleanup(released)
	heldCh := make(chan struct{}, 1)
	src.ControlKey(int16(kmsg.ListGroups), func(kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		if holding.Load() {
			select {
			case heldCh <- struct{}{}:
			default:
			}
			src.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	holding.Store(true)
	return heldCh, released
}

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

	_, released := holdFinalSync(t, src)
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

// teeHandler sends every record to two handlers.
type teeHandler struct{ a, b slog.Handler }

func (h teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.a.Enabled(ctx, l) || h.b.Enabled(ctx, l)
}

func (h teeHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.a.Enabled(ctx, r.Level) {
		_ = h.a.Handle(ctx, r.Clone())
	}
	if h.b.Enabled(ctx, r.Level) {
		return h.b.Handle(ctx, r)
	}
	return nil
}

func (h teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{h.a.WithAttrs(as), h.b.WithAttrs(as)}
}

func (h teeHandler) WithGroup(name string) slog.Handler {
	return teeHandler{h.a.WithGroup(name), h.b.WithGroup(name)}
}

// A stop's report says where each partition's copy ended as its leader
// failed it over (what Describe shows from then on), also for partitions
// led by other nodes while the source was still being written to. It used
// to note the controller's own replica of those partitions, a follower a
// fetch behind a leader whose fetcher ran on until the stop reached it:
// the report said the copy was further behind than it was, and the next
// Describe disagreed with it.
func TestClusterStopReportsWhereEachLeaderStopped(t *testing.T) {
	t.Parallel()
	const topic, partitions = "ledger", 6
	src := kfaketest.Source(t, kfake.SeedTopics(partitions, topic))
	scl := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	// The nodes' warnings, read below for the stop's log line.
	var warnings testutil.SyncBuffer
	c := startCluster(t, 3, logsOnFailure(t), func(cfg *broker.Config) {
		cfg.DefaultReplicationFactor = 3
		cfg.Logger = slog.New(teeHandler{cfg.Logger.Handler(),
			slog.NewTextHandler(&warnings, &slog.HandlerOptions{Level: slog.LevelWarn})})
	})
	ctl := c.controllerIndex()
	c.mirrorFrom(ctl, src, topic, partitions)

	// The source is written to throughout the stop.
	var producing atomic.Bool
	producing.Store(true)
	produced := make(chan error, 1)
	go func() {
		var err error
		for i := 0; producing.Load() && err == nil; i++ {
			err = scl.ProduceSync(t.Context(), &kgo.Record{Value: fmt.Appendf(nil, "r-%d", i)}).FirstErr()
		}
		produced <- err
	}()
	time.Sleep(300 * time.Millisecond) // the leaders are mirroring new records
	stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName = "dr"
	stop.Topics = []mirrorapi.MirrorTopicsRequestTopic{{TopicName: topic}}
	r := c.mirrorRPC(ctl, stop).(*mirrorapi.StopMirrorTopicsResponse)
	producing.Store(false)
	if err := <-produced; err != nil {
		t.Fatalf("producing at the source: %v", err)
	}
	if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("StopMirrorTopics: %d %v %+v", r.ErrorCode, r.ErrorMessage, r.Topics)
	}
	reported := map[int32]int64{}
	var behind int64
	for _, p := range r.Topics[0].Partitions {
		reported[p.PartitionIndex] = p.DestinationOffset
		behind += max(p.Lag, 0)
	}
	// The controller's log line says what the report says.
	if want := fmt.Sprintf("records_behind=%d ", behind); behind > 0 && !strings.Contains(warnings.String(), want) {
		t.Errorf("the report has %d records behind; the nodes' warnings do not say %q:\n%s", behind, want, warnings.String())
	}
	c.allInState(ctl, "dr", "STOPPED", partitions)
	d := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
	d.MirrorNames = []string{"dr"}
	dr := c.mirrorRPC(ctl, d).(*mirrorapi.DescribeClusterMirrorsResponse)
	if len(dr.Mirrors) != 1 || len(dr.Mirrors[0].Topics) != 1 {
		t.Fatalf("describe: %+v", dr.Mirrors)
	}
	for _, p := range dr.Mirrors[0].Topics[0].Partitions {
		leader := c.leaderOf(ctl, topic, p.PartitionIndex)
		if got := reported[p.PartitionIndex]; got != p.DestinationOffset || got < 0 {
			t.Errorf("%s-%d (led by node %d, the controller is node %d): the stop reported the copy ending at %d, "+
				"Describe at %d", topic, p.PartitionIndex, leader, ctl+1, got, p.DestinationOffset)
		}
	}
}

// A failover forwarded by a node that is not the controller does not hold
// up that node's other forwarded requests: a topic created through it
// while the stop's final sync waits at the source is created at once. The
// mirror RPCs used to share the node's one connection to the controller,
// which serves a connection's requests in order, so the creation waited
// for the whole stop (up to 25 s).
func TestClusterForwardedStopDoesNotHoldUpTopicAdmin(t *testing.T) {
	t.Parallel()
	const topic, partitions = "transfers", 3
	src := kfaketest.Source(t, kfake.SeedTopics(partitions, topic))
	c := startCluster(t, 3, logsOnFailure(t), func(cfg *broker.Config) { cfg.DefaultReplicationFactor = 3 })
	ctl := c.controllerIndex()
	via := (ctl + 1) % 3
	c.mirrorFrom(via, src, topic, partitions)

	held, released := holdFinalSync(t, src)
	stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName = "dr"
	stop.Topics = []mirrorapi.MirrorTopicsRequestTopic{{TopicName: topic}}
	answered := make(chan error, 1)
	go func() {
		_, err := c.tryMirrorRPC(via, stop)
		answered <- err
	}()
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the stop's final sync never asked the source for its groups")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // the held final sync lasts up to 10 s
	defer cancel()
	// Sent to node via itself (kgo would send it to the controller).
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "created-during-the-failover", 1, 3
	create.Topics, create.TimeoutMillis = append(create.Topics, ct), 5000
	resp, err := create.RequestWith(ctx, nodetest.Client(t, []string{c.nodes[via].Addr()}).SeedBrokers()[0])
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("creating a topic through node %d while its forwarded stop is held: %v", via+1, err)
	}
	released()
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
}
