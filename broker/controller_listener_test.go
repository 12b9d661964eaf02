package broker

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// newControllerTestBroker starts a broker with a CONTROLLER listener on
// a meta.ControllerListener of its own, and returns the listener's
// address.
func newControllerTestBroker(t *testing.T) (*Broker, string) {
	t.Helper()
	cl, err := meta.ListenController("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() }) // after the broker's Close
	q := meta.QuorumState{LeaderID: 1, LeaderEpoch: 4, HighWatermark: 9,
		Voters: []meta.QuorumReplica{{ID: 1, LogEndOffset: 9}}}
	b := newTestBroker(t, func(c *Config) {
		c.ControllerConns = cl.KafkaListener()
		c.MetadataQuorum = &fakeQuorum{controller: true, state: &q}
	})
	return b, cl.Addr().String()
}

func dialRawAt(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dialing %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, conn: c, fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))}
}

func apiKeys(resp *kmsg.ApiVersionsResponse) []int16 {
	var keys []int16
	for _, k := range resp.ApiKeys {
		keys = append(keys, k.ApiKey)
	}
	return keys
}

// The CONTROLLER listener serves and advertises only the controller's
// APIs: ApiVersions lists those registered, DescribeQuorum and
// DescribeCluster are answered, Produce closes the connection. It is not
// advertised to clients.
func TestControllerListenerScope(t *testing.T) {
	t.Parallel()
	b, addr := newControllerTestBroker(t)
	if ls := b.Listeners(); len(ls) != 1 || ls[0].Name != "PLAINTEXT" {
		t.Fatalf("advertised listeners %v, want the PLAINTEXT one only", ls)
	}

	rc := dialRawAt(t, addr)
	for _, v := range []int16{0, 3, 4} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
		keys := apiKeys(resp)
		if resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions v%d: error %d", v, resp.ErrorCode)
		}
		for _, k := range keys {
			if !slices.Contains(controllerListenerAPIs, k) {
				t.Fatalf("ApiVersions v%d on the controller listener lists key %d (%s): %v", v, k, nameForKey(k), keys)
			}
		}
		for _, k := range []int16{apiVersionsKey, 55, 60} {
			if !slices.Contains(keys, k) {
				t.Fatalf("ApiVersions v%d on the controller listener lacks key %d: %v", v, k, keys)
			}
		}
	}
	// A version newer than ours: the v0 fallback, with the same keys.
	newer := kmsg.NewPtrApiVersionsRequest()
	newer.Version = 127
	corr := rc.send(newer)
	newer.Version = 0
	fb := rc.recv(newer, corr).(*kmsg.ApiVersionsResponse)
	if fb.ErrorCode != kerr.UnsupportedVersion.Code || slices.Contains(apiKeys(fb), 0) {
		t.Fatalf("fallback: error %d, keys %v", fb.ErrorCode, apiKeys(fb))
	}

	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.Version = 1
	dt := kmsg.NewDescribeQuorumRequestTopic()
	dt.Topic = metadataTopic
	dp := kmsg.NewDescribeQuorumRequestTopicPartition()
	dt.Partitions = append(dt.Partitions, dp)
	dq.Topics = append(dq.Topics, dt)
	qr := rc.roundTrip(dq).(*kmsg.DescribeQuorumResponse)
	if qr.ErrorCode != 0 || len(qr.Topics) != 1 || len(qr.Topics[0].Partitions) != 1 ||
		qr.Topics[0].Partitions[0].LeaderID != 1 || qr.Topics[0].Partitions[0].LeaderEpoch != 4 {
		t.Fatalf("DescribeQuorum on the controller listener: %+v", qr)
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	if r := rc.roundTrip(dc).(*kmsg.DescribeClusterResponse); r.ErrorCode != 0 || len(r.Brokers) == 0 {
		t.Fatalf("DescribeCluster on the controller listener: %+v", r)
	}

	produce := kmsg.NewPtrProduceRequest()
	produce.Version = 9
	produce.Acks = 1
	produce.TimeoutMillis = 1000
	rc.send(produce)
	rc.expectClosed()

	// Kafka clients on the broker listener are unaffected.
	if keys := apiKeys(dialRaw(t, b).roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)); !slices.Contains(keys, 0) {
		t.Fatalf("ApiVersions on the broker listener lacks Produce: %v", keys)
	}
}

// The inter-node keys are refused on the broker listeners, registered
// or not, and never advertised there.
func TestBrokerListenerRefusesControllerAPIs(t *testing.T) {
	t.Parallel()
	b, _ := newControllerTestBroker(t)
	keys := apiKeys(dialRaw(t, b).roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse))
	for _, k := range controllerOnlyAPIs {
		if slices.Contains(keys, k) {
			t.Fatalf("ApiVersions on the broker listener lists key %d (%s)", k, nameForKey(k))
		}
	}
	for _, req := range []kmsg.Request{
		kmsg.NewPtrEnvelopeRequest(),
		kmsg.NewPtrBrokerRegistrationRequest(),
		kmsg.NewPtrBrokerHeartbeatRequest(),
		kmsg.NewPtrAllocateProducerIDsRequest(),
		kmsg.NewPtrAlterPartitionRequest(),
	} {
		t.Run(nameForKey(req.Key()), func(t *testing.T) {
			rc := dialRaw(t, b)
			rc.send(req)
			rc.expectClosed()
		})
	}
}

// A controller listener named in listeners is refused.
func TestControllerListenerNameClash(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.Listeners = []Listener{{Name: "CONTROLLER", Host: "127.0.0.1", Protocol: "PLAINTEXT"}}
	cfg.LogDirs = []string{t.TempDir()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg.ControllerConns = ln
	if err := cfg.Validate(); err == nil {
		t.Fatal("a controller listener also in listeners was accepted")
	}
	cfg.ControllerListenerName = "CONTROLLER2"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// describeQuorumReq asks for the metadata log's partition.
func describeQuorumReq() *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = metadataTopic
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	return req
}

// meta.ControllerChannel reaches the controller's CONTROLLER listener:
// it waits while no controller is known, moves on from a voter that
// cannot be reached when the leader changes, and gives up when ctx ends.
func TestControllerChannel(t *testing.T) {
	t.Parallel()
	_, addr := newControllerTestBroker(t)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // connections to it are refused
	voters := []meta.Voter{{ID: 1, Addr: addr}, {ID: 2, Addr: deadAddr}}

	var mu sync.Mutex
	calls := 0
	// No controller for two calls, then node 2 (unreachable) for two,
	// then node 1.
	leader := func() (int32, bool) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		switch {
		case calls <= 2:
			return -1, false
		case calls <= 4:
			return 2, true
		}
		return 1, true
	}
	ch := meta.NewControllerChannel(voters, leader)
	defer ch.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, err := ch.Request(ctx, describeQuorumReq())
	if err != nil {
		t.Fatal(err)
	}
	qr := resp.(*kmsg.DescribeQuorumResponse)
	if len(qr.Topics) != 1 || qr.Topics[0].Partitions[0].LeaderID != 1 {
		t.Fatalf("DescribeQuorum through the channel: %+v", qr)
	}
	mu.Lock()
	if calls != 5 {
		t.Errorf("leader asked %d times, want 5", calls)
	}
	mu.Unlock()
	// A key the controller listener does not serve fails at once, unsent.
	if _, err := ch.Request(ctx, kmsg.NewPtrMetadataRequest()); !errors.Is(err, meta.ErrControllerUnsupported) {
		t.Fatalf("Metadata through the controller channel: %v", err)
	}
	if _, err := ch.Request(ctx, describeQuorumReq()); err != nil {
		t.Fatalf("DescribeQuorum after the refused Metadata: %v", err)
	}

	none := meta.NewControllerChannel(voters, func() (int32, bool) { return -1, false })
	defer none.Close()
	short, cancelShort := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancelShort()
	if _, err := none.Request(short, describeQuorumReq()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no controller: %v, want the deadline", err)
	}
	ch.Close()
	if _, err := ch.Request(ctx, describeQuorumReq()); !errors.Is(err, meta.ErrChannelClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
