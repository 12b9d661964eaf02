package control

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// syncFixture is a kfake source, a node mirroring it as mirror "m", and
// an admin client on the source.
type syncFixture struct {
	ctx  context.Context
	src  *kfake.Cluster
	sadm *kadm.Client
	scl  *kgo.Client
	n    *testNode
}

func newSyncFixture(t *testing.T, seedTopics ...string) *syncFixture {
	t.Helper()
	return newSyncFixtureWith(t, Config{}, seedTopics...)
}

// newSyncFixtureWith is newSyncFixture with a control plane config.
func newSyncFixtureWith(t *testing.T, ctlCfg Config, seedTopics ...string) *syncFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	var opts []kfake.Opt
	if len(seedTopics) > 0 {
		opts = append(opts, kfake.SeedTopics(1, seedTopics...))
	}
	src := kfaketest.Source(t, opts...)
	scl := nodetest.Client(t, src.ListenAddrs(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	n := openTestNodeWith(t, nodetest.Config(t), nil, ctlCfg)
	t.Cleanup(n.close)
	n.createMirror(t, ctx, src.ListenAddrs()[0])
	return &syncFixture{ctx: ctx, src: src, sadm: kadm.NewClient(scl), scl: scl, n: n}
}

// setMirrorConfigs replaces mirror m's configs (bootstrap.servers kept).
func (f *syncFixture) setMirrorConfigs(t *testing.T, kv ...string) {
	t.Helper()
	configs := map[string]string{"bootstrap.servers": f.src.ListenAddrs()[0]}
	for i := 0; i+1 < len(kv); i += 2 {
		configs[kv[i]] = kv[i+1]
	}
	if err := f.n.ctl.SetMirrorConfigs("m", configs); err != nil {
		t.Fatal(err)
	}
}

func (f *syncFixture) createSourceTopic(t *testing.T, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	if _, err := f.sadm.CreateTopic(f.ctx, partitions, 1, configs, name); err != nil {
		t.Fatalf("creating source topic %s: %v", name, err)
	}
}

func (f *syncFixture) produce(t *testing.T, topic string, partition int32, n int) {
	t.Helper()
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte{byte(i)}}
		if err := f.scl.ProduceSync(f.ctx, r).FirstErr(); err != nil {
			t.Fatalf("producing to %s-%d: %v", topic, partition, err)
		}
	}
}

func (f *syncFixture) state(t *testing.T, topic string, p int32) state.MirrorPartitionState {
	t.Helper()
	ps, err := f.n.b.Store().MirrorPartitionState("m", topic, p)
	if err != nil {
		t.Fatalf("state of %s-%d: %v", topic, p, err)
	}
	return ps
}

func (f *syncFixture) waitMirrored(t *testing.T, topic string, p int32, end int64) {
	t.Helper()
	testutil.CheckFor(t, testutil.Timeout, testutil.True("mirrored up to the end", func() bool {
		local, err := f.n.b.Partitions().MirrorPartition(topic, p)
		return err == nil && local.HighWatermark() == end
	}))
}

// New source topics that the mirror's rules match start mirroring at the
// next cycle; internal topics and excluded ones do not, and exclude wins.
func TestSyncDiscoversTopics(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t)
	f.setMirrorConfigs(t, "topics.include", "orders.*,__orders", "topics.exclude", "orders\\.tmp.*,__.*")
	f.createSourceTopic(t, "orders.eu", 2, nil)
	f.createSourceTopic(t, "orders.tmp1", 1, nil)
	f.createSourceTopic(t, "__orders", 1, nil)
	f.createSourceTopic(t, "payments", 1, nil)
	f.produce(t, "orders.eu", 1, 3)

	f.n.ctl.SyncOnce()
	info, ok := f.n.b.Partitions().Info("orders.eu")
	if !ok || info.Mirror != "m" || info.Partitions != 2 {
		t.Fatalf("discovered topic: %+v %v", info, ok)
	}
	f.waitMirrored(t, "orders.eu", 1, 3)
	for _, name := range []string{"orders.tmp1", "__orders", "payments"} {
		if _, ok := f.n.b.Partitions().Info(name); ok {
			t.Errorf("%s was mirrored", name)
		}
	}
	m, _ := f.n.b.Store().GetMirror("m")
	if m.Topics["orders.eu"] != state.StateMirroring {
		t.Fatalf("mirror topics after discovery: %v", m.Topics)
	}
	if st := f.syncErrors(t)[SyncTopicMetadata]; st != 0 {
		t.Fatalf("%d topic metadata errors", st)
	}
}

func (f *syncFixture) syncErrors(t *testing.T) map[string]int64 {
	t.Helper()
	for _, s := range f.n.ctl.SyncStats() {
		if s.Mirror == "m" {
			return s.Errors
		}
	}
	t.Fatal("no sync stats for mirror m")
	return nil
}

// Partitions added at the source appear here and are mirrored from 0.
func TestSyncGrowsPartitions(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t, "t")
	f.n.startTopics(t, f.ctx, "t")
	if _, err := f.sadm.CreatePartitions(f.ctx, 2, "t"); err != nil {
		t.Fatal(err)
	}
	f.produce(t, "t", 2, 4)
	f.n.ctl.SyncOnce()
	if info, _ := f.n.b.Partitions().Info("t"); info.Partitions != 3 {
		t.Fatalf("partitions after the sync: %d, want 3", info.Partitions)
	}
	f.waitMirrored(t, "t", 2, 4)
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-2 MIRRORING", func() bool { return f.state(t, "t", 2).State == state.StateMirroring }))
}

// The source's dynamic topic configs are copied (at start, before any
// record, and at each cycle over local edits); excluded ones are not.
func TestSyncTopicConfigs(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t)
	compact, minISR := "compact", "2"
	f.createSourceTopic(t, "t", 1, map[string]*string{"cleanup.policy": &compact, "min.insync.replicas": &minISR})
	f.n.startTopics(t, f.ctx, "t")
	got := f.n.b.Partitions().Topic("t").Configs()
	if got["cleanup.policy"] != "compact" {
		t.Fatalf("configs right after start: %v", got)
	}
	if _, ok := got["min.insync.replicas"]; ok {
		t.Fatalf("an excluded config was copied: %v", got)
	}

	day := "86400000"
	if _, err := f.sadm.AlterTopicConfigs(f.ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &day}}, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.n.b.MergeTopicConfigs("t", map[string]string{"cleanup.policy": "delete"}); err != nil {
		t.Fatal(err)
	}
	f.n.ctl.SyncOnce()
	got = f.n.b.Partitions().Topic("t").Configs()
	if got["retention.ms"] != day || got["cleanup.policy"] != "compact" {
		t.Fatalf("configs after a cycle: %v", got)
	}
	if e := f.syncErrors(t)[SyncTopicConfigs]; e != 0 {
		t.Fatalf("%d config sync errors", e)
	}

	// topic.properties.exclude replaces the default list.
	f.setMirrorConfigs(t, "topic.properties.exclude", "retention\\..*")
	five, second := "5", "1000"
	if _, err := f.sadm.AlterTopicConfigs(f.ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: &five},
		{Name: "retention.ms", Value: &second}}, "t"); err != nil {
		t.Fatal(err)
	}
	f.n.ctl.SyncOnce()
	got = f.n.b.Partitions().Topic("t").Configs()
	if got["min.insync.replicas"] != "5" || got["retention.ms"] != day {
		t.Fatalf("configs with a custom exclude list: %v", got)
	}
}

// A mirrored topic deleted at the source fails, non-retryable, with a
// message that says so; the local copy and its records stay.
func TestSyncSourceTopicDeleted(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t, "t")
	f.n.startTopics(t, f.ctx, "t")
	f.produce(t, "t", 0, 3)
	f.waitMirrored(t, "t", 0, 3)
	if _, err := f.sadm.DeleteTopics(f.ctx, "t"); err != nil {
		t.Fatal(err)
	}
	f.n.ctl.SyncOnce()
	ps := f.state(t, "t", 0)
	if ps.State != state.StateFailed || ps.RetryAttempt != -1 || !strings.Contains(ps.ErrorMessage, "deleted at the source") {
		t.Fatalf("after the source deleted the topic: %+v", ps)
	}
	local, err := f.n.b.Partitions().MirrorPartition("t", 0)
	if err != nil || local.LogEndOffset() != 3 {
		t.Fatalf("local copy after the source deleted the topic: %v", err)
	}

	// Recreated at the source: another topic id, other records at the same
	// offsets. Still failed, with the reason.
	f.createSourceTopic(t, "t", 1, nil)
	f.n.ctl.SyncOnce()
	if ps := f.state(t, "t", 0); ps.State != state.StateFailed || ps.RetryAttempt != -1 {
		t.Fatalf("after the source recreated the topic: %+v", ps)
	}
}

// A mirrored topic recreated at the source between two cycles (never seen
// missing) is caught by its new topic id.
func TestSyncSourceTopicRecreated(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t, "t")
	f.n.startTopics(t, f.ctx, "t")
	if _, err := f.sadm.DeleteTopics(f.ctx, "t"); err != nil {
		t.Fatal(err)
	}
	f.createSourceTopic(t, "t", 1, nil)
	f.n.ctl.SyncOnce()
	ps := f.state(t, "t", 0)
	if ps.State != state.StateFailed || ps.RetryAttempt != -1 || !strings.Contains(ps.ErrorMessage, "recreated") {
		t.Fatalf("after the source recreated the topic: %+v", ps)
	}
}

// A local topic with a source topic's name but another id is reported,
// never taken over: it stays writable with its own records.
func TestSyncSameNameOtherID(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t, "dup")
	if _, err := kadm.NewClient(f.n.cl).CreateTopic(f.ctx, 1, 1, nil, "dup"); err != nil {
		t.Fatal(err)
	}
	f.setMirrorConfigs(t, "topics.include", "dup")
	f.n.ctl.SyncOnce()
	if info, _ := f.n.b.Partitions().Info("dup"); info.Mirror != "" {
		t.Fatalf("the local topic was taken over: %+v", info)
	}
	if e := f.syncErrors(t)[SyncTopicMetadata]; e != 1 {
		t.Fatalf("topic metadata errors %d, want 1", e)
	}
}

// An active topic the rules now exclude is stopped (made writable), as the
// prototype's exclude enforcement does.
func TestSyncStopsExcludedTopics(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t, "keep", "drop")
	f.n.startTopics(t, f.ctx, "keep", "drop")
	f.setMirrorConfigs(t, "topics.exclude", "drop")
	f.n.ctl.SyncOnce()
	if info, _ := f.n.b.Partitions().Info("drop"); info.Mirror != "" {
		t.Fatalf("excluded topic still mirrored: %+v", info)
	}
	if info, _ := f.n.b.Partitions().Info("keep"); info.Mirror != "m" {
		t.Fatalf("kept topic: %+v", info)
	}
	if ps := f.state(t, "drop", 0); ps.State != state.StateStopped {
		t.Fatalf("excluded topic state %v", ps.State)
	}
}

// An unreachable source is counted at every cycle and logged once, and
// its recovery is logged once.
func TestSyncErrorsCountedAndLoggedOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src := kfaketest.Source(t)
	var logs testutil.SyncBuffer
	n := openTestNodeWith(t, nodetest.Config(t), nil, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		SourceTimeout: 500 * time.Millisecond})
	defer n.close()
	n.createMirror(t, ctx, src.ListenAddrs()[0])
	if err := n.ctl.SetMirrorConfigs("m", map[string]string{"bootstrap.servers": "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		n.ctl.SyncOnce()
	}
	stats := n.ctl.SyncStats()
	if len(stats) != 1 || stats[0].Errors[SyncClusterID] != 3 || stats[0].Cycles != 3 {
		t.Fatalf("stats after 3 failed cycles: %+v", stats)
	}
	if c := strings.Count(logs.String(), "metadata sync failed"); c != 1 {
		t.Fatalf("the failure was logged %d times, want once:\n%s", c, logs.String())
	}
	if err := n.ctl.SetMirrorConfigs("m", map[string]string{"bootstrap.servers": src.ListenAddrs()[0]}); err != nil {
		t.Fatal(err)
	}
	n.ctl.SyncOnce()
	if c := strings.Count(logs.String(), "metadata sync recovered"); c != 1 {
		t.Fatalf("the recovery was logged %d times, want once:\n%s", c, logs.String())
	}
}

// The loop runs the sync by itself every RefreshInterval: a topic created
// at the source is discovered without any call; a negative interval
// turns the loop off.
func TestSyncLoopRunsByItself(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.SeedTopics(1, "auto.a"))
	boot := src.ListenAddrs()[0]
	on := openTestNodeWith(t, nodetest.Config(t), nil, Config{RefreshInterval: 50 * time.Millisecond})
	defer on.close()
	off := openTestNodeWith(t, nodetest.Config(t), nil, Config{RefreshInterval: -1})
	defer off.close()
	for _, n := range []*testNode{on, off} {
		n.createMirror(t, ctx, boot)
		if err := n.ctl.SetMirrorConfigs("m", map[string]string{"bootstrap.servers": boot, "topics.include": "auto\\..*"}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.CheckFor(t, testutil.Timeout, testutil.True("auto.a mirrored by m", func() bool {
		info, ok := on.b.Partitions().Info("auto.a")
		return ok && info.Mirror == "m"
	}))
	if st := off.ctl.SyncStats(); len(st) != 0 {
		t.Fatalf("the loop ran with the interval off: %+v", st)
	}
	if _, ok := off.b.Partitions().Info("auto.a"); ok {
		t.Fatal("a topic was discovered with the loop off")
	}
}

// A Start that names a topic the source created a moment ago (not yet in
// every broker's metadata) looks for it again before answering unknown.
func TestStartFindsAJustCreatedTopic(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t)
	created := make(chan error, 1)
	go func() {
		time.Sleep(400 * time.Millisecond) // the Start's first listing misses it
		_, err := f.sadm.CreateTopic(f.ctx, 2, 1, nil, "late")
		created <- err
	}()
	f.n.startTopics(t, f.ctx, "late")
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	if info, ok := f.n.b.Partitions().Info("late"); !ok || info.Mirror != "m" || info.Partitions != 2 {
		t.Fatalf("the late topic after Start: %+v %v", info, ok)
	}
}

// An internal topic asked for by name is refused: a mirror topic named
// __consumer_offsets would hold this cluster's group state.
func TestStartRefusesInternalTopics(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t)
	req := mirrorapi.NewPtrStartMirrorTopicsRequest()
	req.MirrorName = "m"
	req.Topics = []mirrorapi.StartMirrorTopicsRequestTopic{{TopicName: "__consumer_offsets"}, {TopicName: "__transaction_state"}}
	r, err := f.n.cl.Request(f.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := r.(*mirrorapi.StartMirrorTopicsResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("answered %+v", resp)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != kerr.InvalidTopicException.Code || rt.ErrorMessage == nil || !strings.Contains(*rt.ErrorMessage, "internal") {
			t.Errorf("%s: %d %v, want INVALID_TOPIC_EXCEPTION naming it internal", rt.Name, rt.ErrorCode, rt.ErrorMessage)
		}
	}
	if info, ok := f.n.b.Partitions().Info("__transaction_state"); ok && info.Mirror != "" {
		t.Fatalf("a mirror topic __transaction_state was created: %+v", info)
	}
}
