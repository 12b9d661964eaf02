package node

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/state"
)

// A broker that is not the controller goes through the whole lifecycle
// over meta's channel to a controller's CONTROLLER listener: it
// registers, is unfenced, gets producer-id blocks and shuts down under
// control.
func TestLifecycleOverTheControllerListener(t *testing.T) {
	t.Parallel()
	cfg := nodetest.Config(t)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	store, err := broker.OpenStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	log, err := meta.OpenLog(meta.LogConfig{NodeID: cfg.NodeID, Dir: t.TempDir(),
		Voters: []meta.Voter{{ID: cfg.NodeID, Addr: "node-1"}}, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := log.WaitController(ctx); err != nil {
		t.Fatal(err)
	}
	store.SetReplicator(log)
	cl, err := meta.ListenController("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	c := meta.NewController(log, store, meta.ControllerConfig{})
	cfg.Store, cfg.MetadataQuorum, cfg.Controller, cfg.ControllerConns = store, log, c, cl.KafkaListener()
	b, err := broker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })

	ch := meta.NewControllerChannel([]meta.Voter{{ID: cfg.NodeID, Addr: cl.Addr().String()}},
		func() (int32, bool) { return cfg.NodeID, true })
	t.Cleanup(func() { ch.Close() })
	other := cfg.NodeID + 1
	// The first registration names another cluster id, as a broker-only
	// node's does before the controller's snapshot gave its store the
	// cluster's: refused, and the next one, reading the id again, is
	// taken.
	var asked atomic.Int32
	clusterID := func() string {
		if asked.Add(1) == 1 {
			return "not-this-cluster-yet"
		}
		return store.ClusterID()
	}
	l := NewLifecycle(LifecycleConfig{NodeID: other, ClusterID: clusterID, HeartbeatInterval: 50 * time.Millisecond,
		RetryBackoff: 5 * time.Millisecond, Applied: log.Applied, Channel: ch}) // caught up: the controller's own index
	l.Start([]state.BrokerEndpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 19092}})
	t.Cleanup(l.Close)
	if err := l.WaitUnfenced(ctx); err != nil {
		t.Fatal(err)
	}
	if asked.Load() < 2 {
		t.Fatalf("the cluster id was read %d times, want a refused registration and a taken one", asked.Load())
	}
	brokers, err := store.Brokers()
	if err != nil || len(brokers) != 1 || brokers[0].ID != other || brokers[0].Fenced || brokers[0].Epoch != l.Epoch() {
		t.Fatalf("registered %+v, %v; want broker %d unfenced at epoch %d", brokers, err, other, l.Epoch())
	}
	first, n, err := l.ProducerIDBlock(ctx, -1)
	if err != nil || n != 1000 {
		t.Fatalf("block %d+%d, %v", first, n, err)
	}
	if next, err := store.NextProducerID(); err != nil || next != first+n {
		t.Fatalf("the controller's allocator at %d (%v) after the block %d+%d", next, err, first, n)
	}
	if err := l.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if brokers, _ := store.Brokers(); !brokers[0].ShuttingDown {
		t.Fatalf("after the controlled shutdown: %+v", brokers[0])
	}
}
