package node

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/meta"
)

// freePort is a loopback port nothing listens on (it may be taken again
// before the test binds it: the test then fails, it does not hang).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Three nodes of one quorum each register with the controller, the
// two that are not it over their channels, and are unfenced; each
// closes after its controlled shutdown (the one after the controller's
// waits for the next election), the last at once: its peers are gone.
func TestClusterNodesRegister(t *testing.T) {
	t.Parallel()
	const nodes = 3
	var voters []meta.Voter
	ports := make([]int, nodes)
	for i := range nodes {
		ports[i] = freePort(t)
		voters = append(voters, meta.Voter{ID: int32(i + 1), Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i]))})
	}
	started := make([]*Node, nodes)
	errs := make([]error, nodes)
	began := time.Now()
	var wg sync.WaitGroup
	for i := range nodes {
		cfg := nodetest.Config(t)
		cfg.NodeID = int32(i + 1)
		cfg.Cluster.Voters = voters
		cfg.Cluster.ControllerListener = &broker.Listener{Name: "CONTROLLER", Host: "127.0.0.1", Port: ports[i], Protocol: "PLAINTEXT"}
		cfg.Cluster.HeartbeatInterval, cfg.Cluster.SessionTimeout = 100*time.Millisecond, 6*time.Second
		wg.Add(1)
		go func() {
			defer wg.Done()
			started[i], errs[i] = Start(cfg, control.Config{})
		}()
	}
	wg.Wait()
	t.Logf("the nodes started in %v", time.Since(began))
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
	}
	defer func() {
		for _, n := range started {
			n.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, n := range started {
		if err := n.Lifecycle().WaitUnfenced(ctx); err != nil {
			t.Fatalf("node %d: %v", n.life.cfg.NodeID, err)
		}
	}
	// Every store (the log replicates the registrations) lists the three,
	// unfenced, at the epochs their lifecycles hold.
	for _, n := range started {
		checkFor(t, "three registrations everywhere", func() bool {
			brokers, err := n.store.Brokers()
			if err != nil || len(brokers) != nodes {
				return false
			}
			for _, b := range brokers {
				if b.Fenced || b.Epoch != started[b.ID-1].Lifecycle().Epoch() {
					return false
				}
			}
			return true
		})
	}
	// The nodes close one by one, each after its controlled shutdown.
	for i, n := range started {
		start := time.Now()
		if err := n.Close(); err != nil {
			t.Fatalf("closing node %d: %v", i+1, err)
		}
		t.Logf("node %d closed in %v", i+1, time.Since(start))
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("node %d took %v to close", i+1, d)
		}
	}
	started = nil
}
