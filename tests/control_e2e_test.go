package tests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/node"
)

// The mirror control plane end to end: whole kmirror nodes (broker, control
// plane and fetchers, wired as `kmirror serve` and the demo wire them)
// administered with the mirror RPCs over the Kafka protocol, mirroring from
// kfake or from another kmirror node. This file holds the harness and the
// tests of the mirror RPCs on a running mirror (migration by pattern,
// pause/resume, errors, recovery); control_failover_test.go holds the
// failover tests (disaster recovery, failback between two kmirror nodes,
// restarts).

// ctlNode is an in-process kmirror node with its control plane. Its
// configuration (and so its log and state directories) survives restarts.
// Only the test goroutine uses it.
type ctlNode struct {
	t    *testing.T
	name string
	cfg  broker.Config
	ccfg control.Config

	node *node.Node
	// b and ctl are node's broker and control plane, for brevity.
	b   *broker.Broker
	ctl *control.Plane
	// cl sends the mirror RPCs, kadm requests and raw reads (Fetch v11):
	// it is rebuilt at every restart, which changes the node's port.
	cl  *kgo.Client
	adm *kadm.Client
}

// startCtlNode starts a node on 127.0.0.1, port 0, in a fresh temp dir,
// closed when the test ends. Zero fields of ccfg are the control plane's
// defaults.
func startCtlNode(t *testing.T, name string, ccfg control.Config) *ctlNode {
	t.Helper()
	n := newCtlNode(t, name, nodetest.Config(t), ccfg)
	n.open()
	t.Cleanup(n.close)
	return n
}

// startCtlCluster starts size nodes of one cluster (nodetest.ClusterConfigs,
// node ids 1 to size at index 0 to size-1) at once: each waits for a
// majority of the voters. They are closed when the test ends.
func startCtlCluster(t *testing.T, name string, size int) []*ctlNode {
	t.Helper()
	nodes := make([]*ctlNode, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for i, cfg := range nodetest.ClusterConfigs(t, size) {
		nodes[i] = newCtlNode(t, fmt.Sprintf("%s-%d", name, i+1), cfg, control.Config{})
		wg.Go(func() { errs[i] = nodes[i].start() })
	}
	wg.Wait()
	for _, n := range nodes {
		t.Cleanup(n.close)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("starting cluster %s: %v", name, err)
	}
	return nodes
}

// newCtlNode is a node on cfg, not started yet.
func newCtlNode(t *testing.T, name string, cfg broker.Config, ccfg control.Config) *ctlNode {
	cfg.GroupInitialRebalanceDelay = 0
	// Warnings (fetch errors, truncations, failed partitions) go to the
	// test log, shown when a test fails.
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", name)
	ccfg.Logger = cfg.Logger
	return &ctlNode{t: t, name: name, cfg: cfg, ccfg: ccfg}
}

func (n *ctlNode) open() {
	n.t.Helper()
	if err := n.start(); err != nil {
		n.t.Fatal(err)
	}
}

// start is open's work, on any goroutine: the nodes of a cluster start
// at once.
func (n *ctlNode) start() error {
	nd, err := node.Start(n.cfg, n.ccfg)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(nd.Addr()), kgo.MaxVersions(mirrorapi.WithMirrorKeys(rawFetchVersions())))
	if err != nil {
		nd.Close()
		return fmt.Errorf("node %s: creating a client: %w", n.name, err)
	}
	n.node, n.b, n.ctl, n.cl, n.adm = nd, nd.Broker, nd.Mirrors, cl, kadm.NewClient(cl)
	return nil
}

// close stops the node: client, control plane (fetchers first), broker.
func (n *ctlNode) close() {
	if n.b == nil {
		return
	}
	n.cl.Close()
	if err := n.node.Close(); err != nil {
		n.t.Errorf("node %s: closing: %v", n.name, err)
	}
	n.node, n.b, n.ctl, n.cl, n.adm = nil, nil, nil, nil, nil
}

// restart closes the node and opens it again on the same directories.
// REQUIRES: the test's other clients of the node are closed or unused
// from now on (the node listens on a new port).
func (n *ctlNode) restart() {
	n.t.Helper()
	n.close()
	n.open()
}

func (n *ctlNode) addr() string { return n.b.Addr() }

// rpc sends a mirror request; a transport error fails the test.
func (n *ctlNode) rpc(ctx context.Context, req kmsg.Request) kmsg.Response {
	n.t.Helper()
	resp, err := n.cl.Request(ctx, req)
	if err != nil {
		n.t.Fatalf("node %s: %s: %v", n.name, mirrorapi.NameForKey(req.Key()), err)
	}
	return resp
}

// mirrorAnswer is a mirror RPC's answer: the top-level error and the
// per-topic ones.
type mirrorAnswer struct {
	code   int16
	msg    string
	topics map[string]int16
	msgs   map[string]string
}

func (a mirrorAnswer) String() string {
	s := mirrorapi.ErrorName(a.code)
	if a.code == 0 {
		s = "ok"
	}
	if a.msg != "" {
		s += " (" + a.msg + ")"
	}
	for _, t := range slices.Sorted(maps.Keys(a.topics)) {
		s += fmt.Sprintf("; %s: %s %s", t, mirrorapi.ErrorName(a.topics[t]), a.msgs[t])
	}
	return s
}

func answerOf(resp kmsg.Response) mirrorAnswer {
	a := mirrorAnswer{topics: map[string]int16{}, msgs: map[string]string{}}
	str := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	topics := func(code int16, msg *string, ts []mirrorapi.MirrorTopicsResponseTopic) {
		a.code, a.msg = code, str(msg)
		for _, t := range ts {
			a.topics[t.Name], a.msgs[t.Name] = t.ErrorCode, str(t.ErrorMessage)
		}
	}
	switch r := resp.(type) {
	case *mirrorapi.CreateClusterMirrorResponse:
		a.code, a.msg = r.ErrorCode, str(r.ErrorMessage)
	case *mirrorapi.DeleteClusterMirrorResponse:
		a.code, a.msg = r.ErrorCode, str(r.ErrorMessage)
	case *mirrorapi.StartMirrorTopicsResponse:
		topics(r.ErrorCode, r.ErrorMessage, r.Topics)
	case *mirrorapi.StopMirrorTopicsResponse:
		topics(r.ErrorCode, r.ErrorMessage, r.Topics)
	case *mirrorapi.PauseMirrorTopicsResponse:
		topics(r.ErrorCode, r.ErrorMessage, r.Topics)
	case *mirrorapi.ResumeMirrorTopicsResponse:
		topics(r.ErrorCode, r.ErrorMessage, r.Topics)
	case *mirrorapi.RecoverMirrorTopicsResponse:
		topics(r.ErrorCode, r.ErrorMessage, r.Topics)
	default:
		panic(fmt.Sprintf("BUG: answerOf(%T)", resp))
	}
	return a
}

// ok sends req and fails the test on any error code, top-level or per
// topic; it returns the answer.
func (n *ctlNode) ok(ctx context.Context, req kmsg.Request) mirrorAnswer {
	n.t.Helper()
	a := answerOf(n.rpc(ctx, req))
	bad := a.code != 0
	for _, c := range a.topics {
		bad = bad || c != 0
	}
	if bad {
		n.t.Fatalf("node %s: %s: %v", n.name, mirrorapi.NameForKey(req.Key()), a)
	}
	return a
}

// expect sends req and checks the error code of topic ("" for the
// top-level code); it returns that code's message.
func (n *ctlNode) expect(ctx context.Context, req kmsg.Request, topic string, code int16) string {
	n.t.Helper()
	a := answerOf(n.rpc(ctx, req))
	got, msg, ok := a.code, a.msg, true
	if topic != "" {
		got, ok = a.topics[topic]
		msg = a.msgs[topic]
	}
	if !ok || got != code {
		n.t.Fatalf("node %s: %s: %v; want %s for %q", n.name, mirrorapi.NameForKey(req.Key()), a, mirrorapi.ErrorName(code), topic)
	}
	return msg
}

// createReq is CreateClusterMirror of name from bootstrap with short fetch
// waits and backoffs, and the mirrorFetchMaxBytes marker; kv are extra
// config name/value pairs.
func createReq(name, bootstrap string, kv ...string) *mirrorapi.CreateClusterMirrorRequest {
	req := mirrorapi.NewPtrCreateClusterMirrorRequest()
	req.MirrorName = name
	configs := []string{"bootstrap.servers", bootstrap, "mirror.fetch.wait.max.ms", "100",
		"mirror.fetch.backoff.ms", "100", "mirror.fetch.response.max.bytes", fmt.Sprint(mirrorFetchMaxBytes)}
	if bootstrap == "" {
		configs = configs[2:]
	}
	configs = append(configs, kv...)
	for i := 0; i+1 < len(configs); i += 2 {
		req.Configs = append(req.Configs, mirrorapi.CreateClusterMirrorRequestConfig{Name: configs[i], Value: kmsg.StringPtr(configs[i+1])})
	}
	return req
}

func reqTopics(names []string) []mirrorapi.MirrorTopicsRequestTopic {
	out := make([]mirrorapi.MirrorTopicsRequestTopic, len(names))
	for i, n := range names {
		out[i].TopicName = n
	}
	return out
}

// startReq starts topics by name (the node fills ids and partition counts
// from the source).
func startReq(mirror string, topics ...string) *mirrorapi.StartMirrorTopicsRequest {
	req := mirrorapi.NewPtrStartMirrorTopicsRequest()
	req.MirrorName = mirror
	for _, t := range topics {
		req.Topics = append(req.Topics, mirrorapi.StartMirrorTopicsRequestTopic{TopicName: t})
	}
	return req
}

func stopReq(mirror string, topics ...string) *mirrorapi.StopMirrorTopicsRequest {
	req := mirrorapi.NewPtrStopMirrorTopicsRequest()
	req.MirrorName, req.Topics = mirror, reqTopics(topics)
	return req
}

func pauseReq(mirror string, topics ...string) *mirrorapi.PauseMirrorTopicsRequest {
	req := mirrorapi.NewPtrPauseMirrorTopicsRequest()
	req.MirrorName, req.Topics = mirror, reqTopics(topics)
	return req
}

func resumeReq(mirror string, topics ...string) *mirrorapi.ResumeMirrorTopicsRequest {
	req := mirrorapi.NewPtrResumeMirrorTopicsRequest()
	req.MirrorName, req.Topics = mirror, reqTopics(topics)
	return req
}

func recoverReq(mirror string, topics ...string) *mirrorapi.RecoverMirrorTopicsRequest {
	req := mirrorapi.NewPtrRecoverMirrorTopicsRequest()
	req.MirrorName, req.Topics = mirror, reqTopics(topics)
	return req
}

func deleteReq(mirror string) *mirrorapi.DeleteClusterMirrorRequest {
	req := mirrorapi.NewPtrDeleteClusterMirrorRequest()
	req.MirrorName = mirror
	return req
}

// describe returns the partitions of mirror's topics, by topic.
func (n *ctlNode) describe(ctx context.Context, mirror string) map[string][]mirrorapi.DescribeClusterMirrorsResponsePartition {
	n.t.Helper()
	req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
	req.MirrorNames = []string{mirror}
	resp := n.rpc(ctx, req).(*mirrorapi.DescribeClusterMirrorsResponse)
	if resp.ErrorCode != 0 || len(resp.Mirrors) != 1 || resp.Mirrors[0].ErrorCode != 0 {
		n.t.Fatalf("node %s: DescribeClusterMirrors %s: %+v", n.name, mirror, resp)
	}
	out := map[string][]mirrorapi.DescribeClusterMirrorsResponsePartition{}
	for _, t := range resp.Mirrors[0].Topics {
		out[t.TopicName] = t.Partitions
	}
	return out
}

// list returns ListClusterMirrors (topic names included) by mirror name.
func (n *ctlNode) list(ctx context.Context) map[string]mirrorapi.ListClusterMirrorsResponseMirror {
	n.t.Helper()
	req := mirrorapi.NewPtrListClusterMirrorsRequest()
	req.IncludeTopicNames = true
	resp := n.rpc(ctx, req).(*mirrorapi.ListClusterMirrorsResponse)
	if resp.ErrorCode != 0 {
		n.t.Fatalf("node %s: ListClusterMirrors: %s", n.name, mirrorapi.ErrorName(resp.ErrorCode))
	}
	out := map[string]mirrorapi.ListClusterMirrorsResponseMirror{}
	for _, m := range resp.Mirrors {
		out[m.MirrorName] = m
	}
	return out
}

func describePartitions(ps []mirrorapi.DescribeClusterMirrorsResponsePartition) string {
	var sb strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&sb, "[%d %s src %d (%d ms old) dst %d lag %d (%d ms) retry %d", p.PartitionIndex, p.StateValue, p.SourceOffset,
			p.SourceOffsetAgeMillis, p.DestinationOffset, p.Lag, p.LagMillis, p.RetryAttempt)
		if p.Stalled {
			sb.WriteString(" stalled")
		}
		if p.ErrorMessage != nil {
			fmt.Fprintf(&sb, " %q", *p.ErrorMessage)
		}
		sb.WriteString("] ")
	}
	return sb.String()
}

// waitMirrored waits until Describe shows every partition of topic
// MIRRORING with lag 0 at the source end offsets ends. Lag alone is not
// enough: it is as of the last fetch response, which may predate the
// latest writes at the source.
func (n *ctlNode) waitMirrored(ctx context.Context, mirror, topic string, ends map[int32]int64) {
	n.t.Helper()
	n.waitMirroredWithin(ctx, mirrorCatchUp, mirror, topic, ends)
}

// waitMirroredWithin is waitMirrored, failing the test after d.
func (n *ctlNode) waitMirroredWithin(ctx context.Context, d time.Duration, mirror, topic string, ends map[int32]int64) {
	n.t.Helper()
	testutil.CheckFor(n.t, d, testutil.Named(fmt.Sprintf("node %s: mirror %s catching up on %s to %v", n.name, mirror, topic, ends), func() error {
		ps := n.describe(ctx, mirror)[topic]
		if len(ps) != len(ends) {
			return fmt.Errorf("%d partitions described, want %d: %s", len(ps), len(ends), describePartitions(ps))
		}
		for _, p := range ps {
			end := ends[p.PartitionIndex]
			if p.StateValue != "MIRRORING" || p.Lag != 0 || p.SourceOffset != end || p.DestinationOffset != end {
				return errors.New(describePartitions(ps))
			}
		}
		return nil
	}))
}

// checkStates checks that Describe shows parts partitions of topic, all
// in state want, with offsets that agree (checkDescribed).
func (n *ctlNode) checkStates(ctx context.Context, mirror, topic string, parts int, want string) {
	n.t.Helper()
	ps := n.describe(ctx, mirror)[topic]
	if len(ps) != parts {
		n.t.Fatalf("node %s: %s: %d partitions described, want %d: %s", n.name, topic, len(ps), parts, describePartitions(ps))
	}
	for _, p := range ps {
		if p.StateValue != want {
			n.t.Fatalf("node %s: %s: want every partition %s: %s", n.name, topic, want, describePartitions(ps))
		}
		if err := checkDescribed(p); err != nil {
			n.t.Fatalf("node %s: %s: %v: %s", n.name, topic, err, describePartitions(ps))
		}
	}
}

// checkDescribed checks a described partition's offsets against each
// other: the destination offset is known in every state (the local high
// watermark, or where a stop left it), and the lag and the source
// offset's age are known exactly when the source offset is, the lag being
// source minus destination, never negative.
func checkDescribed(p mirrorapi.DescribeClusterMirrorsResponsePartition) error {
	switch {
	case p.DestinationOffset < 0:
		return fmt.Errorf("partition %d: destination offset %d unknown", p.PartitionIndex, p.DestinationOffset)
	case p.SourceOffset < 0 && (p.SourceOffset != -1 || p.Lag != -1 || p.SourceOffsetAgeMillis != -1):
		return fmt.Errorf("partition %d: source offset unknown but lag %d, age %d ms", p.PartitionIndex, p.Lag, p.SourceOffsetAgeMillis)
	case p.SourceOffset >= 0 && (p.Lag != max(p.SourceOffset-p.DestinationOffset, 0) || p.SourceOffsetAgeMillis < 0):
		return fmt.Errorf("partition %d: source %d, destination %d: lag %d, age %d ms", p.PartitionIndex,
			p.SourceOffset, p.DestinationOffset, p.Lag, p.SourceOffsetAgeMillis)
	}
	return nil
}

// checkNoFetcher checks that no fetcher runs for topic's partitions (a
// paused or stopped topic): nothing can be appended to them.
func (n *ctlNode) checkNoFetcher(mirror, topic string, parts int32) {
	n.t.Helper()
	for p := range parts {
		if st, err := n.ctl.Fetchers().Status(mirror, topic, p); err == nil {
			n.t.Fatalf("node %s: %s-%d still has a fetcher: %+v", n.name, topic, p, st)
		}
	}
}

// startSource starts a one-broker kfake cluster, closed at test end.
func startSource(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	src := kfaketest.Source(t, opts...)
	cl := newClient(t, src.ListenAddrs()[0], kgo.MaxVersions(rawFetchVersions()))
	return src, cl
}

// checkSameLog checks that every partition of topic has the same log
// start and end on both sides and the same raw batches in between; it
// returns the batches by partition.
func checkSameLog(t *testing.T, ctx context.Context, srcCl, dstCl *kgo.Client, topic string) map[int32][]byte {
	t.Helper()
	return checkSameLogLed(t, ctx, srcCl, nil, dstCl, topic)
}

// checkSameLogLed is checkSameLog reading each source partition from its
// leader in leaders (a source of several brokers answers a Fetch only on
// the leader; a missing partition is read from any broker).
func checkSameLogLed(t *testing.T, ctx context.Context, srcCl *kgo.Client, leaders map[int32]int32, dstCl *kgo.Client, topic string) map[int32][]byte {
	t.Helper()
	srcAdm, dstAdm := kadm.NewClient(srcCl), kadm.NewClient(dstCl)
	starts, ends := listOffsets(t, ctx, srcAdm, topic, true), listOffsets(t, ctx, srcAdm, topic, false)
	lstarts, lends := listOffsets(t, ctx, dstAdm, topic, true), listOffsets(t, ctx, dstAdm, topic, false)
	if len(lends) != len(ends) {
		t.Fatalf("%s: %d partitions here, %d at the source", topic, len(lends), len(ends))
	}
	out := map[int32][]byte{}
	for p, end := range ends {
		if lstarts[p] != starts[p] || lends[p] != end {
			t.Fatalf("%s-%d: log [%d, %d), source [%d, %d)", topic, p, lstarts[p], lends[p], starts[p], end)
		}
		leader, ok := leaders[p]
		if !ok {
			leader = -1
		}
		want := readRaw(t, ctx, srcCl, leader, topic, p, starts[p], end)
		got := readRaw(t, ctx, dstCl, -1, topic, p, starts[p], end)
		if string(want) != string(got) {
			t.Fatalf("%s-%d: batches differ from the source's: %s", topic, p, diffRaw(want, got))
		}
		out[p] = want
	}
	return out
}

// checkReadOnly checks that a produce to topic at addr is refused as a
// write to a mirror topic: POLICY_VIOLATION (see readonly_e2e_test.go).
func checkReadOnly(t *testing.T, ctx context.Context, addr, topic string) {
	t.Helper()
	cl := newClient(t, addr, kgo.DisableIdempotentWrite())
	defer cl.Close()
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("refused")}).FirstErr()
	if !errors.Is(err, kerr.PolicyViolation) {
		t.Fatalf("producing to mirror topic %s: %v, want POLICY_VIOLATION", topic, err)
	}
}

// produceTo writes n records to each partition of topic with cl, one
// batch per partition, and returns them as sorted mirrorRecord strings
// (offsets as assigned).
func produceTo(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, parts int32, n int, tag string) []string {
	t.Helper()
	var out []string
	for p := range parts {
		out = append(out, produceToPartition(t, ctx, cl, topic, p, n, tag)...)
	}
	slices.Sort(out)
	return out
}

// produceToPartition writes n records to topic/p with one ProduceSync and
// returns them as sorted mirrorRecord strings.
func produceToPartition(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, p int32, n int, tag string) []string {
	t.Helper()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		key := fmt.Sprintf("%s-p%d-%d", tag, p, i)
		rs[i] = &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte(strings.Repeat(key+";", 4))}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("producing %s to %s-%d: %v", tag, topic, p, err)
	}
	return asMirrorRecords(rs) // ProduceSync filled in the offsets
}

func sortedUnion(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return out
}

// TestControlE2EMigrationPatterns starts a mirror by pattern
// (IncludePatterns with an ExcludePatterns exception): the matched topics
// are mirrored with the source's topic ids and partition counts, the
// others are not; then all are stopped by pattern once caught up.
func TestControlE2EMigrationPatterns(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	src, srcCl := startSource(t)
	srcAdm := kadm.NewClient(srcCl)
	parts := map[string]int32{"app.orders": 3, "app.users": 2, "app.orders.tmp": 1, "billing": 2}
	pr := manualProducer(t, src.ListenAddrs())
	for topic, np := range parts {
		createTopic(t, ctx, srcAdm, topic, np, nil)
		produceTo(t, ctx, pr, topic, np, 7, topic)
	}
	matched := []string{"app.orders", "app.users"}

	n := startCtlNode(t, "mig", control.Config{})
	n.ok(ctx, createReq("mig", src.ListenAddrs()[0]))
	start := startReq("mig")
	start.IncludePatterns = []string{`app\..*`}
	start.ExcludePatterns = []string{`.*\.tmp`}
	a := n.ok(ctx, start)
	if got := slices.Sorted(maps.Keys(a.topics)); !slices.Equal(got, matched) {
		t.Fatalf("StartMirrorTopics by pattern answered for %v, want %v", got, matched)
	}

	srcTopics, err := srcAdm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dstTopics, err := n.adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for topic := range parts {
		d, here := dstTopics[topic]
		if !slices.Contains(matched, topic) {
			if here {
				t.Fatalf("%s is mirrored though the patterns leave it out", topic)
			}
			continue
		}
		s := srcTopics[topic]
		if !here || d.Err != nil || d.ID != s.ID || len(d.Partitions) != len(s.Partitions) {
			t.Fatalf("%s here: %+v (id %v, %d partitions); at the source id %v, %d partitions", topic, d.Err, d.ID,
				len(d.Partitions), s.ID, len(s.Partitions))
		}
	}
	if ds := n.describe(ctx, "mig"); len(ds) != len(matched) {
		t.Fatalf("Describe shows topics %v, want %v", slices.Sorted(maps.Keys(ds)), matched)
	}
	l := n.list(ctx)["mig"]
	if l.TopicCount != 2 || !slices.Equal(l.TopicNames, matched) || l.SourceClusterID == nil || *l.SourceClusterID != "kfake" {
		t.Fatalf("ListClusterMirrors: %+v", l)
	}
	for _, topic := range matched {
		n.waitMirrored(ctx, "mig", topic, listOffsets(t, ctx, srcAdm, topic, false))
		checkSameLog(t, ctx, srcCl, n.cl, topic)
		checkReadOnly(t, ctx, n.addr(), topic)
	}

	stop := stopReq("mig")
	stop.Patterns = []string{`app\..*`}
	if a := n.ok(ctx, stop); len(a.topics) != len(matched) {
		t.Fatalf("StopMirrorTopics by pattern: %v, want %v", a, matched)
	}
	dpr := manualProducer(t, []string{n.addr()})
	for _, topic := range matched {
		n.checkStates(ctx, "mig", topic, int(parts[topic]), "STOPPED")
		produceTo(t, ctx, dpr, topic, parts[topic], 2, "migrated")
	}
	if l := n.list(ctx)["mig"]; l.TopicCount != 0 || len(l.TopicNames) != 0 {
		t.Fatalf("ListClusterMirrors after the stop: %+v", l)
	}
}

// TestControlE2EPauseResume pauses a mirrored topic (no fetcher, the local
// log stays while the source grows, still read-only), resumes it (caught
// up with no gap: identical bytes), and checks the Pause and Resume rules.
func TestControlE2EPauseResume(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	src, srcCl := startSource(t)
	srcAdm := kadm.NewClient(srcCl)
	const topic = "paused"
	createTopic(t, ctx, srcAdm, topic, 2, nil)
	pr := manualProducer(t, src.ListenAddrs())
	produceTo(t, ctx, pr, topic, 2, 10, "a")

	n := startCtlNode(t, "pr", control.Config{})
	n.ok(ctx, createReq("pr", src.ListenAddrs()[0]))
	n.ok(ctx, startReq("pr", topic))
	ends := listOffsets(t, ctx, srcAdm, topic, false)
	n.waitMirrored(ctx, "pr", topic, ends)

	n.ok(ctx, pauseReq("pr", topic))
	n.checkStates(ctx, "pr", topic, 2, "PAUSED")
	n.checkNoFetcher("pr", topic, 2)
	produceTo(t, ctx, pr, topic, 2, 10, "b")
	if got := listOffsets(t, ctx, n.adm, topic, false); !maps.Equal(got, ends) {
		t.Fatalf("paused: log ends %v, want %v (the source is at %v)", got, ends, listOffsets(t, ctx, srcAdm, topic, false))
	}
	checkReadOnly(t, ctx, n.addr(), topic)
	n.ok(ctx, pauseReq("pr", topic)) // PAUSED -> ok
	if l := n.list(ctx)["pr"]; l.TopicCount != 0 || !slices.Equal(l.TopicNames, []string{topic}) {
		t.Fatalf("ListClusterMirrors while paused: %+v (a paused topic is listed, not counted)", l)
	}

	n.ok(ctx, resumeReq("pr", topic))
	produceTo(t, ctx, pr, topic, 2, 10, "c")
	n.waitMirrored(ctx, "pr", topic, listOffsets(t, ctx, srcAdm, topic, false))
	checkSameLog(t, ctx, srcCl, n.cl, topic)
	n.ok(ctx, resumeReq("pr", topic)) // MIRRORING -> ok

	n.ok(ctx, stopReq("pr", topic))
	n.expect(ctx, pauseReq("pr", topic), topic, mirrorapi.ErrMirrorTopicBeingStopped)
	n.expect(ctx, resumeReq("pr", topic), topic, mirrorapi.ErrMirrorTopicNotPaused)
	n.expect(ctx, pauseReq("pr", "nope"), "nope", mirrorapi.ErrTopicNotInClusterMirror)
	n.expect(ctx, resumeReq("pr", "nope"), "nope", mirrorapi.ErrTopicNotInClusterMirror)
	n.expect(ctx, pauseReq("nope", topic), "", mirrorapi.ErrUnknownClusterMirror)
	n.checkStates(ctx, "pr", topic, 2, "STOPPED")
}

// unusedAddr is a loopback address nothing listens on.
func unusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestControlE2EErrors checks the control plane's refusals: mirror configs,
// unknown mirrors and topics, deleting a mirror still in use, a mirror
// loop between two kmirror nodes, and writes to a mirror topic.
func TestControlE2EErrors(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	src, srcCl := startSource(t)
	const topic = "errs"
	createTopic(t, ctx, kadm.NewClient(srcCl), topic, 2, nil)
	produceTo(t, ctx, manualProducer(t, src.ListenAddrs()), topic, 2, 3, "a")
	// A short source timeout: the unreachable source is given up on fast.
	n := startCtlNode(t, "errs", control.Config{SourceTimeout: 2 * time.Second})

	n.ok(ctx, createReq("m1", src.ListenAddrs()[0]))
	n.expect(ctx, createReq("m1", src.ListenAddrs()[0]), "", mirrorapi.ErrClusterMirrorAlreadyExists)
	if msg := n.expect(ctx, createReq("m2", ""), "", kerr.InvalidConfig.Code); !strings.Contains(msg, "bootstrap.servers") {
		t.Fatalf("a mirror without bootstrap.servers: message %q does not name it", msg)
	}
	msg := n.expect(ctx, createReq("m2", src.ListenAddrs()[0], "security.protocol", "KERBEROS"), "", kerr.InvalidConfig.Code)
	if !strings.Contains(msg, "security.protocol") || !strings.Contains(msg, "KERBEROS") || !strings.Contains(msg, "SASL_SSL") {
		t.Fatalf("security.protocol=KERBEROS: message %q should name the config, the value and what is supported", msg)
	}
	if msg := n.expect(ctx, createReq("m2", unusedAddr(t)), "", kerr.InvalidConfig.Code); !strings.Contains(msg, "unreachable") {
		t.Fatalf("an unreachable source: message %q", msg)
	}
	n.expect(ctx, createReq("bad/name", src.ListenAddrs()[0]), "", kerr.InvalidRequest.Code)
	if _, ok := n.list(ctx)["m2"]; ok {
		t.Fatal("a refused CreateClusterMirror left mirror m2 behind")
	}

	n.expect(ctx, startReq("nope", topic), "", mirrorapi.ErrUnknownClusterMirror)
	n.expect(ctx, stopReq("nope", topic), "", mirrorapi.ErrUnknownClusterMirror)
	n.expect(ctx, deleteReq("nope"), "", mirrorapi.ErrUnknownClusterMirror)
	n.expect(ctx, startReq("m1", "not-at-source"), "not-at-source", kerr.UnknownTopicOrPartition.Code)

	n.ok(ctx, startReq("m1", topic))
	n.ok(ctx, startReq("m1", topic)) // already MIRRORING: ok
	checkReadOnly(t, ctx, n.addr(), topic)
	createTopic(t, ctx, n.adm, "local", 1, nil)
	n.expect(ctx, stopReq("m1", "local"), "local", mirrorapi.ErrTopicNotInClusterMirror)
	n.expect(ctx, stopReq("m1", "missing"), "missing", kerr.UnknownTopicOrPartition.Code)

	// Delete while a topic is MIRRORING, then PAUSED: refused. Stopped:
	// deleted, gone from the list, and the topic stays, writable.
	n.expect(ctx, deleteReq("m1"), "", mirrorapi.ErrClusterMirrorNotEmpty)
	n.ok(ctx, pauseReq("m1", topic))
	n.expect(ctx, deleteReq("m1"), "", mirrorapi.ErrClusterMirrorNotEmpty)
	n.ok(ctx, stopReq("m1", topic))
	n.ok(ctx, stopReq("m1", topic)) // STOPPED: ok
	n.ok(ctx, deleteReq("m1"))
	if _, ok := n.list(ctx)["m1"]; ok {
		t.Fatal("ListClusterMirrors still lists the deleted mirror")
	}
	n.expect(ctx, startReq("m1", topic), "", mirrorapi.ErrUnknownClusterMirror)
	produceTo(t, ctx, manualProducer(t, []string{n.addr()}), topic, 2, 2, "after-delete")

	// A loop: B mirrors "loop" from A; A may not mirror it back from B
	// while B does.
	a, b := startCtlNode(t, "A", control.Config{}), startCtlNode(t, "B", control.Config{})
	createTopic(t, ctx, a.adm, "loop", 1, nil)
	produceTo(t, ctx, manualProducer(t, []string{a.addr()}), "loop", 1, 3, "a")
	b.ok(ctx, createReq("fromA", a.addr()))
	b.ok(ctx, startReq("fromA", "loop"))
	a.ok(ctx, createReq("fromB", b.addr()))
	if msg := a.expect(ctx, startReq("fromB", "loop"), "loop", kerr.InvalidRequest.Code); !strings.Contains(msg, "loop") {
		t.Fatalf("a mirror loop refused with message %q", msg)
	}
	if l := a.list(ctx)["fromB"]; l.TopicCount != 0 || len(l.TopicNames) != 0 {
		t.Fatalf("A after the refused loop: %+v", l)
	}
	produceTo(t, ctx, manualProducer(t, []string{a.addr()}), "loop", 1, 1, "still-writable")
	checkReadOnly(t, ctx, b.addr(), "loop")
	// A node may not mirror itself.
	a.expect(ctx, createReq("self", a.addr()), "", kerr.InvalidConfig.Code)
}

// corruptFirstFetch answers the first mirror fetch of topic's partition 0
// from offset 0 with its batches up to end, the second one damaged in its
// records (its CRC fails), and returns that batch's base offset and
// whether the answer was served. Later fetches are answered as usual.
func corruptFirstFetch(t *testing.T, ctx context.Context, src *kfake.Cluster, srcCl *kgo.Client, topic string, end int64) (int64, *atomic.Bool) {
	t.Helper()
	raw := readRaw(t, ctx, srcCl, -1, topic, 0, 0, end)
	bs := splitBatches(t, raw)
	corrupt := []byte(string(raw))
	corrupt[len(bs[0])+len(bs[1])-3] ^= 0x5a // in the second batch's records
	return bs[1].BaseOffset(), serveFirstFetch(src, sourceTopic(t, ctx, kadm.NewClient(srcCl), topic), end, corrupt)
}

// TestControlE2ERecover fails a partition (the source answers a corrupt
// batch): Describe shows it FAILED with the error, the other partition
// keeps mirroring; once the source is sound again, RecoverMirrorTopics
// brings it back to MIRRORING and it catches up. Automatic retries are
// pushed past the test so that only Recover can bring it back.
func TestControlE2ERecover(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	src, srcCl := startSource(t)
	const topic = "recover"
	createTopic(t, ctx, kadm.NewClient(srcCl), topic, 2, nil)
	pr := manualProducer(t, src.ListenAddrs())
	ends := map[int32]int64{}
	for p := range int32(2) {
		ends[p] = produceBatchesTo(t, ctx, pr, topic, p, 5, 10, "a")
	}
	badAt, served := corruptFirstFetch(t, ctx, src, srcCl, topic, ends[0])

	n := startCtlNode(t, "rec", control.Config{RetryInitial: time.Hour, RetryMax: time.Hour})
	n.ok(ctx, createReq("rec", src.ListenAddrs()[0]))
	n.ok(ctx, startReq("rec", topic))
	var failed mirrorapi.DescribeClusterMirrorsResponsePartition
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named("partition 0 FAILED in Describe", func() error {
		ps := n.describe(ctx, "rec")[topic]
		for _, p := range ps {
			if p.PartitionIndex == 0 && p.StateValue == "FAILED" {
				failed = p
				return nil
			}
		}
		return errors.New(describePartitions(ps))
	}))
	if !served.Load() {
		t.Fatal("partition 0 failed without the corrupt response")
	}
	if failed.ErrorMessage == nil || !strings.Contains(*failed.ErrorMessage, fmt.Sprintf("offset %d", badAt)) || failed.RetryAttempt != 1 {
		t.Fatalf("FAILED partition: %s, want retry attempt 1 and an error naming offset %d", describePartitions([]mirrorapi.DescribeClusterMirrorsResponsePartition{failed}), badAt)
	}
	if st, err := n.ctl.Fetchers().Status("rec", topic, 1); err != nil || st.State == fetch.StateFailed {
		t.Fatalf("partition 1: %+v, %v", st, err)
	}
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named("partition 1 mirroring on", func() error {
		for _, p := range n.describe(ctx, "rec")[topic] {
			if p.PartitionIndex == 1 && (p.StateValue != "MIRRORING" || p.DestinationOffset != ends[1] || p.Lag != 0) {
				return errors.New(describePartitions([]mirrorapi.DescribeClusterMirrorsResponsePartition{p}))
			}
		}
		return nil
	}))
	if got := listOffsets(t, ctx, n.adm, topic, false)[0]; got != badAt {
		t.Fatalf("partition 0 log end %d, want %d (the corrupt batch's base offset)", got, badAt)
	}

	n.expect(ctx, recoverReq("rec", "nope"), "nope", mirrorapi.ErrTopicNotInClusterMirror)
	n.expect(ctx, recoverReq("nope", topic), "", mirrorapi.ErrUnknownClusterMirror)
	// The source is sound again (the corrupt answer was a one-off).
	n.ok(ctx, recoverReq("rec", topic))
	for p := range int32(2) {
		ends[p] = produceBatchesTo(t, ctx, pr, topic, p, 2, 10, "b")
	}
	n.waitMirrored(ctx, "rec", topic, ends)
	checkSameLog(t, ctx, srcCl, n.cl, topic)
	for _, p := range n.describe(ctx, "rec")[topic] {
		if p.RetryAttempt != 0 || p.ErrorMessage != nil {
			t.Fatalf("recovered partition keeps its failure: %s", describePartitions([]mirrorapi.DescribeClusterMirrorsResponsePartition{p}))
		}
	}
	n.ok(ctx, recoverReq("rec", topic)) // nothing FAILED: ok
}
