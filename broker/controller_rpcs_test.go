package broker

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/state"
)

// The controller RPCs are served on the CONTROLLER listener only (the
// other listeners close the connection), so the tests send them there.

// controllerListener binds a CONTROLLER listener for a test broker:
// mutate sets it in the broker's config, addr is where to dial it.
func controllerListener(t *testing.T) (mutate func(*Config), addr string) {
	t.Helper()
	cl, err := meta.ListenController("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() }) // after the broker's Close
	return func(c *Config) { c.ControllerConns = cl.KafkaListener() }, cl.Addr().String()
}

// rawAtAs dials addr from ip: a raw connection of that test principal
// (newAuthzBroker) to that listener.
func rawAtAs(t *testing.T, addr, ip string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dialing %s from %s: %v", addr, ip, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, conn: c, fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID("authz-test"))}
}

// newControllerBroker is a broker whose node is the controller of a
// one-voter metadata log (in memory; it elects itself in milliseconds),
// as node.Start builds a node alone. rc is a connection to its
// CONTROLLER listener.
func newControllerBroker(t *testing.T) (b *Broker, rc *rawConn, l *meta.MetadataLog) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.StateDir = t.TempDir()
	store, err := OpenStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	l, err = meta.OpenLog(meta.LogConfig{NodeID: cfg.NodeID, Dir: t.TempDir(),
		Voters: []meta.Voter{{ID: cfg.NodeID, Addr: "node-1"}}, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := l.WaitController(ctx); err != nil {
		t.Fatal(err)
	}
	store.SetReplicator(l)
	c := meta.NewController(l, store, meta.ControllerConfig{})
	withListener, addr := controllerListener(t)
	b = newTestBroker(t, withListener, func(cfg *Config) {
		cfg.StateDir, cfg.Store, cfg.MetadataQuorum, cfg.Controller = "", store, l, c
	})
	return b, dialRawAt(t, addr), l
}

func registrationRequest(b *Broker, id int32, incarnation byte) *kmsg.BrokerRegistrationRequest {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.ClusterID, req.IncarnationID = id, b.ClusterID(), [16]byte{incarnation}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", 9092
	req.Listeners = append(req.Listeners, l)
	rack := "r1"
	req.Rack = &rack
	return req
}

func heartbeatRequest(id int32, epoch, offset int64, shutdown bool) *kmsg.BrokerHeartbeatRequest {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset, req.WantShutdown = id, epoch, offset, shutdown
	return req
}

func TestBrokerRegistrationAndHeartbeat(t *testing.T) {
	t.Parallel()
	b, rc, l := newControllerBroker(t)
	reg := rc.roundTrip(registrationRequest(b, 2, 1)).(*kmsg.BrokerRegistrationResponse)
	if reg.ErrorCode != 0 || reg.BrokerEpoch <= 0 {
		t.Fatalf("registration: error %d epoch %d", reg.ErrorCode, reg.BrokerEpoch)
	}
	brokers, err := b.store.Brokers()
	if err != nil || len(brokers) != 1 || brokers[0].ID != 2 || !brokers[0].Fenced || brokers[0].Rack == nil ||
		*brokers[0].Rack != "r1" || len(brokers[0].Listeners) != 1 || brokers[0].Listeners[0].Port != 9092 {
		t.Fatalf("registered brokers %+v, %v", brokers, err)
	}
	if again := rc.roundTrip(registrationRequest(b, 2, 1)).(*kmsg.BrokerRegistrationResponse); again.ErrorCode != 0 || again.BrokerEpoch != reg.BrokerEpoch {
		t.Fatalf("the same incarnation again: %+v, want epoch %d", again, reg.BrokerEpoch)
	}

	behind := rc.roundTrip(heartbeatRequest(2, reg.BrokerEpoch, 0, false)).(*kmsg.BrokerHeartbeatResponse)
	if behind.ErrorCode != 0 || !behind.IsFenced || behind.IsCaughtUp {
		t.Fatalf("a heartbeat from behind the registration: %+v", behind)
	}
	hb := rc.roundTrip(heartbeatRequest(2, reg.BrokerEpoch, int64(l.Applied()), false)).(*kmsg.BrokerHeartbeatResponse)
	if hb.ErrorCode != 0 || hb.IsFenced || !hb.IsCaughtUp || hb.ShouldShutdown {
		t.Fatalf("a caught-up heartbeat: %+v", hb)
	}
	fence := heartbeatRequest(2, reg.BrokerEpoch, int64(l.Applied()), false)
	fence.WantFence = true
	if r := rc.roundTrip(fence).(*kmsg.BrokerHeartbeatResponse); r.ErrorCode != 0 || !r.IsFenced || r.ShouldShutdown {
		t.Fatalf("WantFence: %+v", r)
	}
	if brokers, err := b.store.Brokers(); err != nil || !brokers[0].Fenced {
		t.Fatalf("after WantFence: %+v, %v", brokers, err)
	}
	if r := rc.roundTrip(heartbeatRequest(2, reg.BrokerEpoch, int64(l.Applied()), false)).(*kmsg.BrokerHeartbeatResponse); r.ErrorCode != 0 || r.IsFenced {
		t.Fatalf("a heartbeat after WantFence: %+v", r)
	}
	// Broker 2 leads nothing: its controlled shutdown is ready at once.
	down := rc.roundTrip(heartbeatRequest(2, reg.BrokerEpoch, int64(l.Applied()), true)).(*kmsg.BrokerHeartbeatResponse)
	if down.ErrorCode != 0 || !down.ShouldShutdown {
		t.Fatalf("a shutdown heartbeat: %+v", down)
	}
}

func TestControllerRPCErrors(t *testing.T) {
	t.Parallel()
	b, rc, _ := newControllerBroker(t)
	old := rc.roundTrip(registrationRequest(b, 2, 1)).(*kmsg.BrokerRegistrationResponse)
	cur := rc.roundTrip(registrationRequest(b, 2, 2)).(*kmsg.BrokerRegistrationResponse)
	if old.ErrorCode != 0 || cur.ErrorCode != 0 || cur.BrokerEpoch <= old.BrokerEpoch {
		t.Fatalf("registrations: %+v then %+v", old, cur)
	}
	wrongCluster := registrationRequest(b, 3, 1)
	wrongCluster.ClusterID = "another-cluster-id-xx"
	noListener := registrationRequest(b, 3, 1)
	noListener.Listeners = nil
	allocate := func(id int32, epoch int64) *kmsg.AllocateProducerIDsRequest {
		req := kmsg.NewPtrAllocateProducerIDsRequest()
		req.BrokerID, req.BrokerEpoch = id, epoch
		return req
	}
	code := func(resp kmsg.Response) int16 {
		switch r := resp.(type) {
		case *kmsg.BrokerRegistrationResponse:
			return r.ErrorCode
		case *kmsg.BrokerHeartbeatResponse:
			return r.ErrorCode
		case *kmsg.AllocateProducerIDsResponse:
			return r.ErrorCode
		}
		t.Fatalf("a %T", resp)
		return 0
	}
	for _, tc := range []struct {
		name string
		req  kmsg.Request
		want *kerr.Error
	}{
		{"registration from another cluster", wrongCluster, kerr.InconsistentClusterID},
		{"registration without a listener", noListener, kerr.InvalidRegistration},
		{"heartbeat at the previous epoch", heartbeatRequest(2, old.BrokerEpoch, 0, false), kerr.StaleBrokerEpoch},
		{"heartbeat of a broker not registered", heartbeatRequest(7, 1, 0, false), kerr.StaleBrokerEpoch},
		{"allocation at the previous epoch", allocate(2, old.BrokerEpoch), kerr.StaleBrokerEpoch},
		{"allocation of a broker not registered", allocate(7, 1), kerr.StaleBrokerEpoch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := code(rc.roundTrip(tc.req)); got != tc.want.Code {
				t.Fatalf("error %d, want %s", got, tc.want.Message)
			}
		})
	}
}

func TestAllocateProducerIDsBlocks(t *testing.T) {
	t.Parallel()
	b, rc, _ := newControllerBroker(t)
	reg := rc.roundTrip(registrationRequest(b, 2, 1)).(*kmsg.BrokerRegistrationResponse)
	var last int64 = -1
	for range 2 {
		req := kmsg.NewPtrAllocateProducerIDsRequest()
		req.BrokerID, req.BrokerEpoch = 2, reg.BrokerEpoch
		resp := rc.roundTrip(req).(*kmsg.AllocateProducerIDsResponse)
		if resp.ErrorCode != 0 || resp.ProducerIDLen != 1000 || resp.ProducerIDStart <= last {
			t.Fatalf("block %+v after id %d", resp, last)
		}
		last = resp.ProducerIDStart + int64(resp.ProducerIDLen) - 1
	}
	next, err := b.store.NextProducerID()
	if err != nil || next != last+1 {
		t.Fatalf("the allocator record: next %d, %v; want %d", next, err, last+1)
	}
}

// TestControllerRPCsNotController: a node without the controller role
// answers NOT_CONTROLLER to each, so the sender tries the controller.
func TestControllerRPCsNotController(t *testing.T) {
	t.Parallel()
	withListener, addr := controllerListener(t)
	b := newTestBroker(t, withListener)
	rc := dialRawAt(t, addr)
	if r := rc.roundTrip(registrationRequest(b, 2, 1)).(*kmsg.BrokerRegistrationResponse); r.ErrorCode != kerr.NotController.Code {
		t.Fatalf("registration: %+v", r)
	}
	if r := rc.roundTrip(heartbeatRequest(2, 1, 0, false)).(*kmsg.BrokerHeartbeatResponse); r.ErrorCode != kerr.NotController.Code || !r.IsFenced {
		t.Fatalf("heartbeat: %+v", r)
	}
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = 2, 1
	if r := rc.roundTrip(req).(*kmsg.AllocateProducerIDsResponse); r.ErrorCode != kerr.NotController.Code {
		t.Fatalf("allocation: %+v", r)
	}
	alter := alterPartitionRequest(3, 2, 1, state.Topic{ID: [16]byte{1}}, 0, 0, 0, []int32{2}, nil)
	if r := rc.roundTrip(alter).(*kmsg.AlterPartitionResponse); r.ErrorCode != kerr.NotController.Code || len(r.Topics) != 0 {
		t.Fatalf("AlterPartition: %+v", r)
	}
}

// The controller RPCs need CLUSTER_ACTION on the cluster: ops (ALL on
// the cluster) is let through (to NOT_CONTROLLER: this broker runs no
// controller), bob and alice are refused.
func TestAuthzControllerRPCs(t *testing.T) {
	t.Parallel()
	withListener, addr := controllerListener(t)
	b := authzFixture(t, withListener)
	alice, bob, ops := rawAtAs(t, addr, aliceIP), rawAtAs(t, addr, bobIP), rawAtAs(t, addr, opsIP)
	codes := func(rc *rawConn) []int16 {
		alloc := kmsg.NewPtrAllocateProducerIDsRequest()
		alloc.BrokerID, alloc.BrokerEpoch = 2, 1
		return []int16{
			rc.roundTrip(registrationRequest(b, 2, 1)).(*kmsg.BrokerRegistrationResponse).ErrorCode,
			rc.roundTrip(heartbeatRequest(2, 1, 0, false)).(*kmsg.BrokerHeartbeatResponse).ErrorCode,
			rc.roundTrip(alloc).(*kmsg.AllocateProducerIDsResponse).ErrorCode,
			rc.roundTrip(alterPartitionRequest(3, 2, 1, state.Topic{ID: [16]byte{1}}, 0, 0, 0, []int32{2}, nil)).(*kmsg.AlterPartitionResponse).ErrorCode,
		}
	}
	for _, tc := range []struct {
		name string
		rc   *rawConn
		want int16
	}{
		{"alice", alice, codeClusterAuth},
		{"bob", bob, codeClusterAuth},
		{"ops", ops, kerr.NotController.Code},
	} {
		for i, got := range codes(tc.rc) {
			wantCode(t, fmt.Sprintf("%s, request %d", tc.name, i), got, tc.want)
		}
	}
}

// blocksFrom is a ProducerIDBlocks that answers the blocks given, in
// order, whatever after is (as the AllocateProducerIds RPC does).
type blocksFrom struct{ firsts []int64 }

func (s *blocksFrom) ProducerIDBlock(_ context.Context, _ int64) (int64, int64, error) {
	first := s.firsts[0]
	s.firsts = s.firsts[1:]
	return first, producerIDBlock, nil
}

// The allocator hands out no id at or below the highest the logs know
// (after), from a source that answers blocks below it too: they are
// skipped, and a block that reaches past it is used from there on.
func TestProducerIDsSkipKnown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		after  int64
		firsts []int64
		want   []int64 // the ids handed out, in order
	}{
		{"none known", -1, []int64{0}, []int64{0, 1}},
		{"inside the first block", 10, []int64{0}, []int64{11, 12}},
		{"past a block", 1500, []int64{0, 1000, 2000}, []int64{1501, 1502}},
		{"below the blocks", 5, []int64{3000}, []int64{3000, 3001}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := producerIDs{src: &blocksFrom{firsts: tc.firsts}, after: tc.after}
			for _, want := range tc.want {
				if got, err := p.allocate(); err != nil || got != want {
					t.Fatalf("allocated %d, %v; want %d", got, err, want)
				}
			}
		})
	}
}
