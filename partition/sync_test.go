package partition

import (
	"fmt"
	"os"
	"testing"

	"github.com/kmirror/kmirror/state"
)

// Sync follows changes another node's controller wrote to the store: a
// topic created, one grown, reconfigured and handed to a mirror, one
// deleted, one re-created under a new id; a second Sync changes nothing.
func TestSyncFollowsTheStore(t *testing.T) {
	t.Parallel()
	n := newTestNode(t)
	grown, err := n.m.Create("grown", 1, nil, [16]byte{}, "", Placement{RF: 1})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := n.m.Create("gone", 1, nil, [16]byte{}, "", Placement{RF: 1})
	if err != nil {
		t.Fatal(err)
	}
	renewed, err := n.m.Create("renewed", 1, nil, [16]byte{}, "", Placement{RF: 1})
	if err != nil {
		t.Fatal(err)
	}
	goneDir := gone.Partition(0).log.Dir()

	put := func(st state.Topic) {
		t.Helper()
		if err := n.store.PutTopic(st); err != nil {
			t.Fatal(err)
		}
	}
	put(state.Topic{Name: "new", ID: [16]byte{9}, Partitions: 2, Configs: map[string]string{}})
	put(state.Topic{Name: "grown", ID: grown.ID(), Partitions: 3, Configs: map[string]string{"cleanup.policy": "compact"}, Mirror: "m"})
	if err := n.store.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	if err := n.store.DeleteTopic("renewed"); err != nil {
		t.Fatal(err)
	}
	put(state.Topic{Name: "renewed", ID: [16]byte{8}, Partitions: 1, Configs: map[string]string{}})

	changes := n.changes
	if err := n.m.Sync(); err != nil {
		t.Fatal(err)
	}
	if n.changes == changes {
		t.Fatal("Sync changed the topics without telling TopicsChanged")
	}
	if tp := n.m.Topic("new"); tp == nil || tp.ID() != ([16]byte{9}) || len(tp.Partitions()) != 2 {
		t.Fatalf("topic created elsewhere: %+v", tp)
	}
	g := n.m.Topic("grown")
	if g != grown || len(g.Partitions()) != 3 || g.Mirror() != "m" || !g.Partition(2).Compact() || !g.Partition(0).Compact() {
		t.Fatalf("grown topic: %d partitions, mirror %q, compact %v", len(g.Partitions()), g.Mirror(), g.Partition(2).Compact())
	}
	if n.m.Topic("gone") != nil || n.m.TopicByID(gone.ID()) != nil {
		t.Fatal("a topic deleted elsewhere is still hosted")
	}
	if _, err := os.Stat(goneDir); !os.IsNotExist(err) {
		t.Fatalf("the deleted topic's directory is still there: %v", err)
	}
	if r := n.m.Topic("renewed"); r == nil || r == renewed || r.ID() != ([16]byte{8}) {
		t.Fatalf("a topic re-created elsewhere under a new id: %+v", r)
	}
	changes = n.changes
	if err := n.m.Sync(); err != nil || n.changes != changes {
		t.Fatalf("a second Sync: %v, %d changes", err, n.changes-changes)
	}
}

// A Sync running while this node's handlers create topics never takes
// off a topic just created: the store it reads and the registry agree.
func TestSyncRacingCreates(t *testing.T) {
	t.Parallel()
	n := newTestNode(t)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := n.m.Sync(); err != nil {
				done <- err
				return
			}
		}
	}()
	for i := range 100 {
		name := fmt.Sprintf("t%d", i)
		if _, err := n.m.Create(name, 1, nil, [16]byte{}, "", Placement{RF: 1}); err != nil {
			t.Fatal(err)
		}
		if n.m.Topic(name) == nil {
			t.Fatalf("topic %s taken off by a concurrent Sync", name)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if n.m.Topic(fmt.Sprintf("t%d", i)) == nil {
			t.Fatalf("topic t%d taken off by a concurrent Sync", i)
		}
	}
}
