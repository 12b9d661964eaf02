package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/state"
)

// logNode is one voter of a test quorum: its store and log survive a
// restart, its controller listener (and so its port) stays.
type logNode struct {
	cfg   LogConfig
	store *state.Store
	log   *MetadataLog
}

// startQuorum starts n voters with empty dirs and the same voter list,
// each on a controller listener bound on 127.0.0.1 port 0.
func startQuorum(t *testing.T, n int, tune func(*LogConfig)) []*logNode {
	t.Helper()
	return startQuorumOn(t, n, "127.0.0.1", tune)
}

// startQuorumOn is startQuorum with the listeners bound on host (a
// wildcard, say); the voters' addresses are on 127.0.0.1. The listeners
// are bound first: each voter's address is its listener's port.
func startQuorumOn(t *testing.T, n int, host string, tune func(*LogConfig)) []*logNode {
	t.Helper()
	var voters []Voter
	var lns []*ControllerListener
	t.Cleanup(func() { // after the nodes' cleanup: the logs close first
		for _, cl := range lns {
			if err := cl.Close(); err != nil {
				t.Errorf("closing a controller listener: %v", err)
			}
		}
	})
	for i := range n {
		cl, err := ListenController(net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, cl)
		port := cl.Addr().(*net.TCPAddr).Port
		voters = append(voters, Voter{ID: int32(i + 1), Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	}
	nodes := make([]*logNode, n)
	for i := range nodes {
		dir := t.TempDir()
		// 700 ms: short enough for quick elections, long enough that a
		// loaded machine (the -race run beside other tests) does not lose
		// the leader in the middle of a test that needs a stable one.
		cfg := LogConfig{NodeID: voters[i].ID, Listener: lns[i], Dir: filepath.Join(dir, "metadata"), Voters: voters,
			HeartbeatTimeout: 700 * time.Millisecond, ElectionTimeout: 700 * time.Millisecond}
		if tune != nil {
			tune(&cfg)
		}
		nodes[i] = &logNode{cfg: cfg}
		nodes[i].open(t, filepath.Join(dir, "state"))
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.close(t)
		}
	})
	return nodes
}

func (nd *logNode) open(t *testing.T, stateDir string) {
	t.Helper()
	s, err := state.Open(stateDir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nd.cfg.Store = s
	l, err := OpenLog(nd.cfg)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	nd.store, nd.log = s, l
}

func (nd *logNode) close(t *testing.T) {
	t.Helper()
	if nd.log == nil {
		return
	}
	if err := nd.log.Close(); err != nil {
		t.Errorf("node %d: closing the log: %v", nd.cfg.NodeID, err)
	}
	if err := nd.store.Close(); err != nil {
		t.Errorf("node %d: closing the store: %v", nd.cfg.NodeID, err)
	}
	nd.log, nd.store = nil, nil
}

// controller waits until the running nodes agree on a controller among
// them and returns it.
func controller(t *testing.T, nodes []*logNode) *logNode {
	t.Helper()
	var c *logNode
	testutil.CheckFor(t, 10*time.Second, func() error {
		c = nil
		for _, nd := range nodes {
			if nd.log != nil && nd.log.IsController() {
				c = nd
			}
		}
		if c == nil {
			return errors.New("no controller elected")
		}
		for _, nd := range nodes {
			if nd.log == nil {
				continue
			}
			if id, ok := nd.log.Controller(); !ok || id != c.cfg.NodeID {
				return fmt.Errorf("node %d sees controller %d, %v; want %d", nd.cfg.NodeID, id, ok, c.cfg.NodeID)
			}
		}
		return nil
	})
	return c
}

// topicOps are the ops that create topic name, as state/ encodes it.
func topicOps(t *testing.T, name string, id byte) []state.Op {
	t.Helper()
	s, err := state.Open("", state.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutTopic(state.Topic{Name: name, ID: [16]byte{id, 1}, Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.WriteMetadataSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	_, ops, err := state.ReadMetadataSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func topicNames(t *testing.T, s *state.Store) []string {
	t.Helper()
	ts, err := s.Topics()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range ts {
		names = append(names, tp.Name)
	}
	slices.Sort(names)
	return names
}

// applyTopic creates a topic through the controller and waits until every
// running node's store holds it.
func applyTopic(t *testing.T, nodes []*logNode, name string, id byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A loaded machine may see an election meanwhile: the ops are
	// idempotent, so the change is applied again on the next controller.
	var index uint64
	testutil.CheckFor(t, 10*time.Second, func() (err error) {
		index, err = controller(t, nodes).log.Apply(ctx, topicOps(t, name, id))
		if err != nil && !errors.Is(err, ErrNotController) {
			t.Fatalf("applying topic %s: %v", name, err)
		}
		return err
	})
	for _, nd := range nodes {
		if nd.log == nil {
			continue
		}
		if err := nd.log.WaitApplied(ctx, index); err != nil {
			t.Fatalf("node %d: %v", nd.cfg.NodeID, err)
		}
	}
}

// Three voters with empty dirs form one quorum by themselves; a change
// applied by the controller reaches every store; the others refuse to
// append, naming the controller.
func TestMetadataLogForms(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	applyTopic(t, nodes, "orders", 1)
	for _, nd := range nodes {
		if got := topicNames(t, nd.store); !slices.Equal(got, []string{"orders"}) {
			t.Fatalf("node %d holds topics %v", nd.cfg.NodeID, got)
		}
	}
	c := controller(t, nodes)
	for _, nd := range nodes {
		if nd == c {
			continue
		}
		_, err := nd.log.Apply(context.Background(), topicOps(t, "elsewhere", 2))
		if !errors.Is(err, ErrNotController) || !bytes.Contains([]byte(err.Error()), fmt.Appendf(nil, "node %d", c.cfg.NodeID)) {
			t.Fatalf("node %d (not the controller) applied: %v", nd.cfg.NodeID, err)
		}
	}
}

// Losing the controller elects another among the survivors, which keeps
// taking changes; the old controller, restarted on its dirs, catches up.
func TestMetadataLogControllerLoss(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	applyTopic(t, nodes, "before", 1)
	old := controller(t, nodes)
	stateDir := filepath.Join(filepath.Dir(old.cfg.Dir), "state")
	old.close(t)
	applyTopic(t, nodes, "after", 2)
	if c := controller(t, nodes); c == old {
		t.Fatal("the closed node is still the controller")
	}
	old.open(t, stateDir)
	testutil.CheckFor(t, 10*time.Second, func() error {
		if got := topicNames(t, old.store); !slices.Equal(got, []string{"after", "before"}) {
			return fmt.Errorf("restarted node holds %v", got)
		}
		return nil
	})
}

// A node so far behind that the entries it misses are compacted away
// receives the controller's snapshot, and its store ends equal to the
// others'; its own families are not touched.
func TestMetadataLogSnapshotCatchUp(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, func(c *LogConfig) { c.SnapshotThreshold, c.TrailingLogs = 4, 2 })
	applyTopic(t, nodes, "t00", 1)
	c := controller(t, nodes)
	var lag *logNode
	for _, nd := range nodes {
		if nd != c {
			lag = nd
			break
		}
	}
	stateDir := filepath.Join(filepath.Dir(lag.cfg.Dir), "state")
	own := []state.GroupOffset{{Topic: "t00", Partition: 0, Offset: 5, LeaderEpoch: -1}}
	if err := lag.store.CommitOffsets("g", own); err != nil {
		t.Fatal(err)
	}
	lag.close(t)
	for i := 1; i <= 12; i++ {
		applyTopic(t, nodes, fmt.Sprintf("t%02d", i), byte(i+1))
	}
	for _, nd := range nodes { // whichever leads next has compacted its log
		if nd.log != nil {
			if err := nd.log.raft.Snapshot().Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	lag.open(t, stateDir)
	want := topicNames(t, controller(t, nodes).store)
	// It catches up by the snapshot (raft's own snapshots run every two
	// minutes or more: the lagging node takes none itself).
	testutil.CheckFor(t, 10*time.Second, func() error {
		if got := topicNames(t, lag.store); !slices.Equal(got, want) {
			return fmt.Errorf("lagging node holds %v, want %v", got, want)
		}
		if idx := lag.log.raft.Stats()["last_snapshot_index"]; idx == "0" || idx == "" {
			return fmt.Errorf("the lagging node was not sent the snapshot (last_snapshot_index %q)", idx)
		}
		return nil
	})
	if got, err := lag.store.GroupOffsets("g"); err != nil || len(got) != 1 || got[0].Offset != 5 {
		t.Fatalf("the node's own group offsets after the snapshot: %+v, %v", got, err)
	}
}

func TestParseVoters(t *testing.T) {
	t.Parallel()
	vs, err := ParseVoters("1@10.0.0.1:9093, 2@n2:9093,3@[::1]:9093")
	if err != nil || !slices.Equal(vs, []Voter{{1, "10.0.0.1:9093"}, {2, "n2:9093"}, {3, "[::1]:9093"}}) {
		t.Fatalf("%+v, %v", vs, err)
	}
	for _, bad := range []string{"", "1@", "x@h:1", "1@h", "-1@h:1", "1@h:1,1@g:2", "1:h:1"} {
		if _, err := ParseVoters(bad); err == nil {
			t.Errorf("ParseVoters(%q) accepted", bad)
		}
	}
}

// Ops a store would refuse are refused before the entry is appended: no
// node ever fails on them.
func TestMetadataLogRefusesBadOps(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	applyTopic(t, nodes, "orders", 1)
	c := controller(t, nodes)
	before := c.log.raft.LastIndex()
	bad := []state.Op{{Key: []byte("v1/group-offset/x"), Value: []byte{1}}}
	if _, err := c.log.Apply(t.Context(), bad); !errors.Is(err, state.ErrNotReplicated) {
		t.Fatalf("a group offset op: %v", err)
	}
	if after := c.log.raft.LastIndex(); after != before {
		t.Fatalf("the refused entry was appended: last index %d, was %d", after, before)
	}
	applyTopic(t, nodes, "after", 2)
	for _, nd := range nodes {
		if err := nd.log.Err(); err != nil {
			t.Fatalf("node %d stopped applying: %v", nd.cfg.NodeID, err)
		}
	}
}

// A node whose store fails to apply an entry applies nothing more and
// takes no snapshot (one would claim the entries it missed); restarted,
// it applies every entry from the one that failed.
func TestMetadataLogStoreFailure(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	applyTopic(t, nodes, "t1", 1)
	var f *logNode
	for _, nd := range nodes {
		if !nd.log.IsController() {
			f = nd
			break
		}
	}
	stateDir := filepath.Join(filepath.Dir(f.cfg.Dir), "state")
	if err := f.store.Close(); err != nil { // its next apply fails
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, name := range []string{"t2", "t3"} {
		if _, err := controller(t, nodes).log.Apply(ctx, topicOps(t, name, byte(i+2))); err != nil {
			t.Fatal(err)
		}
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		if f.log.Err() == nil {
			return errors.New("the closed store's node still reports no failure")
		}
		return nil
	})
	if err := f.log.raft.Snapshot().Error(); err == nil {
		t.Fatal("a node whose store failed took a snapshot")
	}
	if _, err := f.log.Apply(ctx, topicOps(t, "x", 9)); err == nil {
		t.Fatal("a node whose store failed appended")
	}
	if err := f.log.Close(); err != nil {
		t.Fatal(err)
	}
	f.log, f.store = nil, nil
	f.open(t, stateDir)
	testutil.CheckFor(t, 10*time.Second, func() error {
		if got := topicNames(t, f.store); !slices.Equal(got, []string{"t1", "t2", "t3"}) {
			return fmt.Errorf("restarted node holds %v", got)
		}
		return nil
	})
}

// A restarted node whose store holds everything its latest snapshot holds
// does not restore it (raft's snapshot index counts entries the store
// never sees: barriers, no-ops).
func TestMetadataLogRestartWithoutRestore(t *testing.T) {
	t.Parallel()
	var logged strings.Builder
	var mu sync.Mutex
	nodes := startQuorum(t, 1, func(c *LogConfig) {
		c.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))
	})
	applyTopic(t, nodes, "orders", 1)
	nd := nodes[0]
	if err := nd.log.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if err := nd.log.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(filepath.Dir(nd.cfg.Dir), "state")
	for range 2 {
		nd.close(t)
		nd.open(t, stateDir)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logged.String(), "restoring") {
		t.Fatalf("a store up to date was restored:\n%s", logged.String())
	}
	if got := topicNames(t, nd.store); !slices.Equal(got, []string{"orders"}) {
		t.Fatalf("after the restarts: %v", got)
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A voter may bind its controller listener on a wildcard address: it
// advertises its controller.quorum.voters address.
func TestMetadataLogWildcardBind(t *testing.T) {
	t.Parallel()
	nodes := startQuorumOn(t, 3, "0.0.0.0", nil)
	applyTopic(t, nodes, "orders", 1)
}

// The controller's store writes through the log (state.Replicator): a
// topic put on it reaches every node's store; on another node the write
// is refused, naming the controller.
func TestMetadataLogReplicatesStoreWrites(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	c := controller(t, nodes)
	c.store.SetReplicator(c.log)
	if err := c.store.PutTopic(state.Topic{Name: "orders", ID: [16]byte{9, 9}, Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	if err := c.store.CommitOffsets("g", []state.GroupOffset{{Topic: "orders", Partition: 0, Offset: 1, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes {
		if err := nd.log.WaitApplied(t.Context(), c.log.raft.LastIndex()); err != nil {
			t.Fatal(err)
		}
		if got := topicNames(t, nd.store); !slices.Equal(got, []string{"orders"}) {
			t.Fatalf("node %d holds %v", nd.cfg.NodeID, got)
		}
		offs, err := nd.store.GroupOffsets("g")
		if own := nd == c; err != nil || own != (len(offs) == 1) {
			t.Fatalf("node %d's group offsets %+v, %v: a node's own records stay its own", nd.cfg.NodeID, offs, err)
		}
	}
	for _, nd := range nodes {
		if nd == c {
			continue
		}
		nd.store.SetReplicator(nd.log)
		err := nd.store.PutTopic(state.Topic{Name: "elsewhere", ID: [16]byte{8}, Partitions: 1})
		if !errors.Is(err, ErrNotController) {
			t.Fatalf("node %d, not the controller, wrote a topic: %v", nd.cfg.NodeID, err)
		}
		break
	}
}
