package node

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// The node's mirror settings reach the control plane, 0 meaning "off"
// where the control plane's 0 would mean "default".
func TestMirrorConfig(t *testing.T) {
	t.Parallel()
	cfg := broker.DefaultConfig()
	cc := MirrorConfig(cfg)
	if cc.RefreshInterval != time.Minute || cc.RetryInitial != time.Second || cc.RetryMax != time.Minute || cc.RetryMaxAttempts != 20 {
		t.Fatalf("defaults: %+v", cc)
	}
	cfg.Mirror.MetadataRefresh, cfg.Mirror.RetryMaxAttempts = 0, 0
	cc = MirrorConfig(cfg)
	if cc.RefreshInterval >= 0 || cc.RetryMaxAttempts >= 0 {
		t.Fatalf("off: %+v", cc)
	}
}

// A started node serves the Kafka API with its control plane wired (the
// mirror RPCs answer) and its metrics on metrics.listener; Close stops
// both.
func TestStartWiresTheNode(t *testing.T) {
	t.Parallel()
	cfg := nodetest.Config(t)
	cfg.MetricsListener = "127.0.0.1:0"
	n, err := Start(cfg, control.Config{})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			n.Close()
		}
	})
	cl := nodetest.Client(t, []string{n.Addr()}, kgo.MaxVersions(mirrorapi.WithMirrorKeys(nil)))
	ctx := t.Context()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	// The topic was written through the node's metadata log.
	if n.log.Applied() == 0 {
		t.Fatal("creating a topic wrote no metadata log entry")
	}
	resp, err := cl.Request(ctx, mirrorapi.NewPtrListClusterMirrorsRequest())
	if err != nil {
		t.Fatalf("ListClusterMirrors: %v", err)
	}
	if l := resp.(*mirrorapi.ListClusterMirrorsResponse); l.ErrorCode != 0 || len(l.Mirrors) != 0 {
		t.Fatalf("a new node's mirrors: %+v", l)
	}
	hresp, err := http.Get("http://" + n.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(hresp.Body)
	hresp.Body.Close()
	if err != nil || !strings.Contains(string(body), "kmirror_") {
		t.Fatalf("metrics: %v\n%.300s", err, body)
	}
	addr := n.MetricsAddr()
	closed = true
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Fatal("metrics still served after Close")
	}
	if err := n.Close(); err != nil { // kmirror demo closes twice on an error path
		t.Fatalf("a second Close: %v", err)
	}
}

// A metrics listener that cannot bind fails Start with the setting's name,
// and leaves nothing open: the same log dir starts again at once.
func TestStartMetricsListenerTaken(t *testing.T) {
	t.Parallel()
	first := nodetest.Config(t)
	first.MetricsListener = "127.0.0.1:0"
	n, err := Start(first, control.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cfg := nodetest.Config(t)
	cfg.MetricsListener = n.MetricsAddr()
	if _, err := Start(cfg, control.Config{}); err == nil || !strings.Contains(err.Error(), "metrics.listener="+n.MetricsAddr()) {
		t.Fatalf("want a metrics.listener error, got %v", err)
	}
	cfg.MetricsListener = ""
	again, err := Start(cfg, control.Config{})
	if err != nil {
		t.Fatalf("the log dir stayed locked after a failed start: %v", err)
	}
	again.Close()
}

// A node restarted on its dirs keeps what its metadata log wrote and goes
// on writing through it: the store's records and the log agree.
func TestRestartKeepsTheMetadataLog(t *testing.T) {
	t.Parallel()
	cfg := nodetest.Config(t)
	n, err := Start(cfg, control.Config{})
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(nodetest.Client(t, []string{n.Addr()}))
	if _, err := adm.CreateTopic(t.Context(), 2, 1, nil, "before"); err != nil {
		t.Fatal(err)
	}
	applied := n.log.Applied()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n, err = Start(cfg, control.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	adm = kadm.NewClient(nodetest.Client(t, []string{n.Addr()}))
	if _, err := adm.CreateTopic(t.Context(), 1, 1, nil, "after"); err != nil {
		t.Fatal(err)
	}
	if n.log.Applied() <= applied {
		t.Fatalf("applied index %d after the restart, %d before", n.log.Applied(), applied)
	}
	topics, err := adm.ListTopics(t.Context())
	if err != nil || !topics.Has("before") || !topics.Has("after") {
		t.Fatalf("topics after the restart: %v, %v", topics.Names(), err)
	}
}

// DescribeQuorum shows a node alone as a one-voter quorum it leads; a
// partition other than the metadata log's is unknown.
func TestDescribeQuorum(t *testing.T) {
	t.Parallel()
	cfg := nodetest.Config(t)
	n, err := Start(cfg, control.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cl := nodetest.Client(t, []string{n.Addr()})
	if _, err := kadm.NewClient(cl).CreateTopic(t.Context(), 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}, {Partition: 1}}}}
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	ps := resp.Topics[0].Partitions
	p := ps[0]
	if resp.ErrorCode != 0 || p.ErrorCode != 0 || p.LeaderID != cfg.NodeID || p.LeaderEpoch < 1 || p.HighWatermark < 1 ||
		len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != cfg.NodeID || p.CurrentVoters[0].LogEndOffset < p.HighWatermark {
		t.Fatalf("DescribeQuorum: %+v", resp)
	}
	if ps[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("partition 1 of the metadata log: %+v", ps[1])
	}
}
