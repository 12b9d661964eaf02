package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// A node alone registers itself with its own controller and is unfenced
// once it has applied its registration; its producer ids come from the
// controller's blocks; and it closes at once (nowhere to move its
// leaderships: no controlled shutdown).
func TestNodeRegistersItself(t *testing.T) {
	t.Parallel()
	cfg := nodetest.Config(t)
	cfg.KafkaSettings = map[string]string{"broker.rack": "rack-a"}
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
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := n.Lifecycle().WaitUnfenced(ctx); err != nil {
		t.Fatal(err)
	}
	brokers, err := n.store.Brokers()
	if err != nil || len(brokers) != 1 {
		t.Fatalf("brokers %+v, %v", brokers, err)
	}
	b := brokers[0]
	if b.ID != cfg.NodeID || b.Fenced || b.ShuttingDown || b.Epoch != n.Lifecycle().Epoch() || b.Rack == nil || *b.Rack != "rack-a" ||
		len(b.Listeners) != 1 || b.Listeners[0].Name != cfg.Listeners[0].Name || int(b.Listeners[0].Port) != n.Broker.Listeners()[0].Port {
		t.Fatalf("registered %+v, want node %d unfenced at epoch %d on %v", b, cfg.NodeID, n.Lifecycle().Epoch(), n.Broker.Listeners())
	}

	cl := nodetest.Client(t, []string{n.Addr()})
	req := kmsg.NewPtrInitProducerIDRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %+v, %v", resp, err)
	}
	if next, err := n.store.NextProducerID(); err != nil || next != resp.ProducerID+1000 {
		t.Fatalf("the controller's allocator at %d (%v) after handing out the block of %d", next, err, resp.ProducerID)
	}
	cl.Close()

	start := time.Now()
	closed = true
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a node alone took %v to close", d)
	}
}

// fakeController is a controller over the channel whose answers a test
// scripts: a registration answers its code, else the next epoch; a
// heartbeat answers hb(request).
type fakeController struct {
	mu         sync.Mutex
	regCodes   []int16 // answered first, one per registration
	epoch      int64
	regs       int
	heartbeats []*kmsg.BrokerHeartbeatRequest
	hb         func(req *kmsg.BrokerHeartbeatRequest) (*kmsg.BrokerHeartbeatResponse, error)
}

func (f *fakeController) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if _, ok := req.(*mirrorapi.WriteMirrorStatesRequest); ok {
		<-ctx.Done() // a channel with no controller to send to
		return nil, fmt.Errorf("no controller is elected: %w", ctx.Err())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch req := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
		if len(f.regCodes) > 0 {
			code := f.regCodes[0]
			f.regCodes = f.regCodes[1:]
			if code < 0 {
				return nil, errors.New("connection refused")
			}
			resp.ErrorCode = code
			return resp, nil
		}
		f.regs++
		f.epoch++
		resp.BrokerEpoch = f.epoch
		return resp, nil
	case *kmsg.BrokerHeartbeatRequest:
		f.heartbeats = append(f.heartbeats, req)
		if req.BrokerEpoch != f.epoch {
			resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
			resp.ErrorCode = kerr.StaleBrokerEpoch.Code
			return resp, nil
		}
		if f.hb != nil {
			return f.hb(req)
		}
		return unfenced(req), nil
	case *kmsg.AllocateProducerIDsRequest:
		resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
		if req.BrokerEpoch != f.epoch {
			resp.ErrorCode = kerr.StaleBrokerEpoch.Code
			return resp, nil
		}
		resp.ProducerIDStart, resp.ProducerIDLen = 5000, 1000
		return resp, nil
	}
	return nil, errors.New("unexpected request")
}

// unfenced is a heartbeat's answer that the broker is unfenced (kmsg's
// default, as Kafka's, is IsFenced).
func unfenced(req *kmsg.BrokerHeartbeatRequest) *kmsg.BrokerHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	resp.IsFenced = false
	return resp
}

func (f *fakeController) state() (regs int, epoch int64, heartbeats []*kmsg.BrokerHeartbeatRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.regs, f.epoch, append([]*kmsg.BrokerHeartbeatRequest(nil), f.heartbeats...)
}

// startRemote starts a lifecycle whose controller is f, over the channel.
func startRemote(t *testing.T, f *fakeController) *Lifecycle {
	t.Helper()
	l := NewLifecycle(LifecycleConfig{NodeID: 3, ClusterID: func() string { return "c" }, HeartbeatInterval: 20 * time.Millisecond,
		RetryBackoff: time.Millisecond, Applied: func() uint64 { return 42 }, Channel: f})
	l.Start([]state.BrokerEndpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}})
	t.Cleanup(l.Close)
	return l
}

// checkFor polls cond until it holds, failing the test after 10 s.
func checkFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.CheckFor(t, 10*time.Second, func() error {
		if cond() {
			return nil
		}
		return errors.New("waiting for " + what)
	})
}

// A broker retries its registration through NOT_CONTROLLER (an
// election) and connection errors, then heartbeats with its applied
// index and epoch.
func TestLifecycleRetriesThroughNotController(t *testing.T) {
	t.Parallel()
	f := &fakeController{regCodes: []int16{kerr.NotController.Code, -1, kerr.NotController.Code}}
	l := startRemote(t, f)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := l.WaitUnfenced(ctx); err != nil {
		t.Fatal(err)
	}
	regs, epoch, hbs := f.state()
	if regs != 1 || l.Epoch() != epoch || len(hbs) == 0 || hbs[0].CurrentMetadataOffset != 42 || hbs[0].BrokerID != 3 || hbs[0].WantShutdown {
		t.Fatalf("%d registrations, epoch %d (controller's %d), heartbeats %+v", regs, l.Epoch(), epoch, hbs)
	}
}

// A call to the controller gives up when the lifecycle closes, whatever
// its own deadline: the last node of a cluster up, with no controller to
// reach, stopped only after its final mirror checkpoint's 30 s
// (helper's kill -9 mirror test, issue 22).
func TestLifecycleCallsEndWithTheLifecycle(t *testing.T) {
	t.Parallel()
	l := startRemote(t, &fakeController{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := l.WriteMirrorStates(ctx, []meta.MirrorStateWrite{{State: state.MirrorPartitionState{Mirror: "m", Topic: "t",
			State: state.StateMirroring, LastMirrorEpoch: -1, LastMirrorOffset: -1}}})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	l.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "the node is stopping") {
			t.Fatalf("a call cut by Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a call to an unreachable controller outlived the lifecycle's Close")
	}
}

// A heartbeat answered STALE_BROKER_EPOCH (the controller lost or
// replaced the registration) registers again.
func TestLifecycleRegistersAgainOnStaleEpoch(t *testing.T) {
	t.Parallel()
	f := &fakeController{}
	l := startRemote(t, f)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := l.WaitUnfenced(ctx); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.epoch = 10 // the registration at epoch 1 is stale now
	f.mu.Unlock()
	checkFor(t, "a new registration", func() bool { return l.Epoch() == 11 })
	if err := l.WaitUnfenced(ctx); err != nil {
		t.Fatal(err)
	}
	// Producer-id blocks go over AllocateProducerIds at the current epoch.
	if first, n, err := l.ProducerIDBlock(ctx, -1); err != nil || first != 5000 || n != 1000 {
		t.Fatalf("block %d+%d, %v", first, n, err)
	}
}

// A fenced broker stays fenced (and says so) until the controller
// unfences it.
func TestLifecycleFencedUntilTheControllerSays(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := &fakeController{hb: func(req *kmsg.BrokerHeartbeatRequest) (*kmsg.BrokerHeartbeatResponse, error) {
		resp := unfenced(req)
		select {
		case <-release:
		default:
			resp.IsFenced = true
		}
		return resp, nil
	}}
	l := startRemote(t, f)
	checkFor(t, "a registration", func() bool { return l.Epoch() == 1 })
	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := l.WaitUnfenced(short); !errors.Is(err, context.DeadlineExceeded) || !l.Fenced() {
		t.Fatalf("WaitUnfenced of a fenced broker: %v, fenced %v", err, l.Fenced())
	}
	close(release)
	ctx, cancel2 := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel2()
	if err := l.WaitUnfenced(ctx); err != nil {
		t.Fatal(err)
	}
}

// Shutdown heartbeats with WantShutDown until the controller answers
// ShouldShutDown, and gives up when its context ends.
func TestLifecycleControlledShutdown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		readyAt   int // the shutdown heartbeat answered ShouldShutDown; 0 never
		wantError bool
	}{
		{"ready at the third", 3, false},
		{"never ready", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			shutdowns := 0
			f := &fakeController{}
			f.hb = func(req *kmsg.BrokerHeartbeatRequest) (*kmsg.BrokerHeartbeatResponse, error) {
				resp := unfenced(req)
				if req.WantShutdown {
					shutdowns++
					resp.ShouldShutdown = tc.readyAt > 0 && shutdowns >= tc.readyAt
				}
				return resp, nil
			}
			l := startRemote(t, f)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := l.WaitUnfenced(ctx); err != nil {
				t.Fatal(err)
			}
			timeout := 10 * time.Second
			if tc.wantError {
				timeout = 100 * time.Millisecond
			}
			sctx, scancel := context.WithTimeout(t.Context(), timeout)
			defer scancel()
			start := time.Now()
			err := l.Shutdown(sctx)
			if (err != nil) != tc.wantError || (tc.wantError && !errors.Is(err, context.DeadlineExceeded)) {
				t.Fatalf("Shutdown: %v", err)
			}
			if tc.wantError && time.Since(start) > 5*time.Second {
				t.Fatalf("Shutdown took %v past its context", time.Since(start))
			}
			f.mu.Lock()
			n := shutdowns
			f.mu.Unlock()
			if !tc.wantError && n < tc.readyAt {
				t.Fatalf("Shutdown returned after %d shutdown heartbeats, want %d", n, tc.readyAt)
			}
		})
	}
}

// A broker not registered has nothing to shut down: Shutdown returns at
// once.
func TestLifecycleShutdownUnregistered(t *testing.T) {
	t.Parallel()
	f := &fakeController{regCodes: make([]int16, 0)}
	for range 1000 {
		f.regCodes = append(f.regCodes, kerr.NotController.Code)
	}
	l := startRemote(t, f)
	if err := l.Shutdown(t.Context()); err != nil || l.Epoch() != -1 {
		t.Fatalf("Shutdown: %v, epoch %d", err, l.Epoch())
	}
}

// On the controller the lifecycle fences a broker whose session expired
// (broker.session.timeout.ms), and a node beside a live broker runs a
// controlled shutdown through its own controller.
func TestNodeFencesExpiredAndShutsDown(t *testing.T) {
	t.Parallel()
	cfg := nodetest.Config(t)
	cfg.Cluster.SessionTimeout, cfg.Cluster.HeartbeatInterval = 300*time.Millisecond, 50*time.Millisecond
	n, err := Start(cfg, control.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := n.Lifecycle().WaitUnfenced(ctx); err != nil {
		t.Fatal(err)
	}
	c := n.Lifecycle().cfg.Controller
	other := state.BrokerRegistration{ID: cfg.NodeID + 1, Incarnation: [16]byte{9},
		Listeners: []state.BrokerEndpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 1}}}
	epoch, err := c.RegisterBroker(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Heartbeat(ctx, other.ID, epoch, n.log.Applied(), false); err != nil || res.Fenced {
		t.Fatalf("the other broker's heartbeat: %+v, %v", res, err)
	}
	broker := func(id int32) state.BrokerRegistration {
		brokers, err := n.store.Brokers()
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range brokers {
			if b.ID == id {
				return b
			}
		}
		t.Fatalf("broker %d not registered: %+v", id, brokers)
		return state.BrokerRegistration{}
	}
	checkFor(t, "the silent broker fenced", func() bool { return broker(other.ID).Fenced })
	if self := broker(cfg.NodeID); self.Fenced {
		t.Fatalf("the node's own heartbeats keep it unfenced: %+v", self)
	}

	// Broker 2 back (a controlled shutdown needs somewhere to move the
	// leaderships to: with every peer fenced it is skipped).
	if res, err := c.Heartbeat(ctx, other.ID, epoch, n.log.Applied(), false); err != nil || res.Fenced {
		t.Fatalf("the other broker's return: %+v, %v", res, err)
	}
	if err := n.Lifecycle().Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if self := broker(cfg.NodeID); !self.ShuttingDown {
		t.Fatalf("after the controlled shutdown: %+v", self)
	}
}

// On the controller a block asked past the ids the logs know (after)
// moves the allocator past them in one entry, a full block beyond.
func TestLifecycleLocalBlockPastKnownIDs(t *testing.T) {
	t.Parallel()
	n, err := Start(nodetest.Config(t), control.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	first, size, err := n.Lifecycle().ProducerIDBlock(ctx, 5000)
	if err != nil || first > 5001 || first+size != 6001 {
		t.Fatalf("block %d+%d, %v; want one ending at 6001", first, size, err)
	}
	again, size2, err := n.Lifecycle().ProducerIDBlock(ctx, 5000)
	if err != nil || again != 6001 || size2 != 1000 {
		t.Fatalf("the next block %d+%d, %v; want 6001+1000", again, size2, err)
	}
	if next, err := n.store.NextProducerID(); err != nil || next != 7001 {
		t.Fatalf("the allocator at %d, %v", next, err)
	}
}
