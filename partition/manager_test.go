package partition

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
	"github.com/kmirror/kmirror/storage"
)

// testNode is a registry on a state store and one log dir, reopened by
// reopen as a restarted node would.
type testNode struct {
	t       *testing.T
	dir     string
	store   *state.Store
	m       *Manager
	changes int // TopicsChanged calls
	moved   []*Partition
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	n := &testNode{t: t, dir: t.TempDir()}
	n.reopen()
	t.Cleanup(func() { n.close() })
	return n
}

func (n *testNode) reopen() {
	n.t.Helper()
	n.close()
	store, err := state.Open(filepath.Join(n.dir, "state"), state.Options{})
	if err != nil {
		n.t.Fatal(err)
	}
	logs := filepath.Join(n.dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		n.t.Fatal(err)
	}
	m, err := Open(Config{Store: store, LogDirs: []string{logs},
		LogConfig: func(configs map[string]string) (storage.Config, Settings, error) {
			return storage.Config{ExternalHighWatermark: true}, Settings{MaxMessageBytes: 1000, Compact: configs["cleanup.policy"] == "compact"}, nil
		},
		TopicsChanged: func([]*Topic) { n.changes++ },
		EpochMoved:    func(p *Partition) { n.moved = append(n.moved, p); p.SetPublishedEpoch(p.LeaderEpoch()) },
	})
	if err != nil {
		store.Close()
		n.t.Fatal(err)
	}
	n.store, n.m = store, m
}

func (n *testNode) close() {
	if n.m == nil {
		return
	}
	if err := n.m.CheckpointHighWatermarks(); err != nil {
		n.t.Error(err)
	}
	if err := n.m.Close(); err != nil {
		n.t.Error(err)
	}
	n.store.Close()
	n.m, n.store = nil, nil
}

// pidReset is a one-record control batch at offset off in epoch epoch.
func pidReset(off int64, epoch int32) []byte {
	return batch.AppendMirrorPIDReset(nil, batch.PIDReset{BaseOffset: off, PartitionLeaderEpoch: epoch})
}

// A mirror append through the Follower commits at once (high watermark =
// log end), wakes the waiters and reports a moved epoch; the topic, its
// growth, its configs and its raised epoch floor survive a restart, and the
// high watermark restarts from the checkpoint.
func TestManagerFollowerAndRestart(t *testing.T) {
	t.Parallel()
	n := newTestNode(t)
	tp, err := n.m.Create("m", 1, map[string]string{"cleanup.policy": "compact"}, [16]byte{7}, "dr", Placement{RF: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.m.Create("m", 1, nil, [16]byte{}, "", Placement{RF: 1}); err != ErrTopicExists {
		t.Fatalf("second create: %v, want ErrTopicExists", err)
	}
	if err := n.m.Grow(tp, 2, Placement{RF: 1}); err != nil {
		t.Fatal(err)
	}
	if n.changes != 2 || len(tp.Partitions()) != 2 || !tp.ReadOnly() || !tp.Partition(1).Compact() {
		t.Fatalf("changes %d partitions %d read-only %v", n.changes, len(tp.Partitions()), tp.ReadOnly())
	}
	var f Follower = tp.Partition(1)
	ch := make(chan struct{}, 1)
	tp.Partition(1).Wait(ch)
	if _, err := f.AppendMirror(pidReset(0, 3)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("the waiter was not woken")
	}
	if f.HighWatermark() != 1 || f.LogEndOffset() != 1 || len(n.moved) != 1 || f.LeaderEpoch() != 3 {
		t.Fatalf("hw %d end %d moved %d epoch %d", f.HighWatermark(), f.LogEndOffset(), len(n.moved), f.LeaderEpoch())
	}
	if err := f.RaiseLeaderEpoch(13); err != nil || f.LeaderEpoch() != 13 || len(n.moved) != 2 {
		t.Fatalf("raised: %v, epoch %d, moved %d", err, f.LeaderEpoch(), len(n.moved))
	}
	// Several partitions at once; an epoch never goes back.
	if err := n.m.RaiseLeaderEpochs("m", map[int32]int32{0: 5, 1: 9}); err != nil ||
		tp.Partition(0).LeaderEpoch() != 5 || f.LeaderEpoch() != 13 {
		t.Fatalf("raised both: %v, epochs %d and %d", err, tp.Partition(0).LeaderEpoch(), f.LeaderEpoch())
	}
	if err := n.m.RaiseLeaderEpochs("m", map[int32]int32{2: 1}); err == nil {
		t.Fatal("raised the epoch of a partition the topic does not have")
	}

	n.reopen()
	tp = n.m.TopicByID([16]byte{7})
	if tp == nil || tp.Name() != "m" || tp.Mirror() != "dr" || len(tp.Partitions()) != 2 {
		t.Fatalf("after restart: %+v", tp)
	}
	if v, _ := tp.Config("cleanup.policy"); v != "compact" {
		t.Fatalf("cleanup.policy %q after restart", v)
	}
	if e := tp.Partition(0).LeaderEpoch(); e != 5 {
		t.Fatalf("partition 0's raised epoch after restart: %d", e)
	}
	p := tp.Partition(1)
	if p.LeaderEpoch() != 13 || p.HighWatermark() != 1 || p.LogEndOffset() != 1 {
		t.Fatalf("after restart: epoch %d hw %d end %d", p.LeaderEpoch(), p.HighWatermark(), p.LogEndOffset())
	}
	if err := n.m.SetMirror("m", ""); err != nil || tp.ReadOnly() {
		t.Fatalf("released: %v, read-only %v", err, tp.ReadOnly())
	}
}

// A deleted topic's directories are renamed at once, its name is free, its
// waiters are woken, and its logs are removed when the registry closes.
func TestManagerDelete(t *testing.T) {
	t.Parallel()
	n := newTestNode(t)
	tp, err := n.m.Create("gone", 1, nil, [16]byte{}, "", Placement{RF: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := tp.Partition(0).Log().Dir()
	ch := make(chan struct{}, 1)
	tp.Partition(0).Wait(ch)
	if deleted, err := n.m.Delete(tp); err != nil || !deleted {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	if deleted, err := n.m.Delete(tp); err != nil || deleted {
		t.Fatalf("second delete: %v %v", deleted, err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("the waiter was not woken")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s still there: %v", dir, err)
	}
	if n.m.Topic("gone") != nil || len(n.m.Partitions()) != 0 {
		t.Fatal("the topic is still registered")
	}
	if err := n.m.Grow(tp, 2, Placement{RF: 1}); err != ErrTopicGone {
		t.Fatalf("growing a deleted topic: %v", err)
	}
	n.m.Maintain(time.Now()) // within the delay: nothing is removed
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "*"+deletedSuffix))
	if len(left) != 1 {
		t.Fatalf("renamed dirs %v, want one", left)
	}
	n.reopen()
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "*"+deletedSuffix)); len(left) != 0 {
		t.Fatalf("renamed dirs %v left after the restart", left)
	}
}
