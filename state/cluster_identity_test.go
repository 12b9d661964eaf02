package state

import (
	"bytes"
	"errors"
	"testing"
)

// A fresh store applying the first controller's identity entry joins its
// cluster, salt included; one formatted with another id, or holding
// topics, refuses the entry whole and names both ids.
func TestJoinTheLogsCluster(t *testing.T) {
	t.Parallel()
	first, err := Open("", Options{InMemory: true, Secret: "s3cret", IsSecret: func(string) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	ops, err := first.ClusterIdentityOps()
	if err != nil || len(ops) != 2 {
		t.Fatalf("identity ops %v, %v: want the id and the salt", ops, err)
	}
	topic := Op{Key: topicKey("t"), Value: appendTopic(nil, Topic{Name: "t", ID: tid(3), Partitions: 1})}
	entry := append(append([]Op{}, ops...), topic)

	joiner, err := Open("", Options{InMemory: true, Secret: "s3cret", IsSecret: func(string) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	defer joiner.Close()
	if err := joiner.ApplyOps(1, entry); err != nil {
		t.Fatal(err)
	}
	if id, ok, err := joiner.LogClusterID(); joiner.ClusterID() != first.ClusterID() || !ok || id != first.ClusterID() || err != nil {
		t.Fatalf("joiner: cluster %s, log's %s %v %v; want %s", joiner.ClusterID(), id, ok, err, first.ClusterID())
	}
	if got, _ := joiner.ClusterIdentityOps(); len(got) != 2 || !bytes.Equal(got[1].Value, ops[1].Value) {
		t.Fatal("the joiner did not take the cluster's secret salt")
	}
	sealed, err := first.sealConfigs("m", map[string]string{"sasl.jaas.config": "x"})
	if err != nil || sealed["sasl.jaas.config"] == "x" {
		t.Fatalf("sealing: %v %v", sealed, err)
	}
	if err := joiner.openConfigs("m", sealed); err != nil || sealed["sasl.jaas.config"] != "x" {
		t.Fatalf("a credential sealed by the first node does not open on the joiner: %v", err)
	}

	formatted := openMem(t)
	other := formatted.ClusterID()
	if err := formatted.RestoreClusterID(other); err != nil {
		t.Fatal(err)
	}
	// RestoreClusterID of its own id keeps the generated mark: format
	// with a fresh id as `storage format` does.
	if err := formatted.RestoreClusterID("AAAAAAAAAAAAAAAAAAAAAg"); err != nil {
		t.Fatal(err)
	}
	err = formatted.ApplyOps(1, entry)
	if !errors.Is(err, ErrOtherCluster) || !bytes.Contains([]byte(err.Error()), []byte(first.ClusterID())) ||
		!bytes.Contains([]byte(err.Error()), []byte("AAAAAAAAAAAAAAAAAAAAAg")) {
		t.Fatalf("a formatted store applying another cluster's entry: %v", err)
	}
	if ts, _ := formatted.Topics(); len(ts) != 0 {
		t.Fatal("the refused entry's topic was written")
	}

	busy := openMem(t)
	if err := busy.PutTopic(Topic{Name: "mine", ID: tid(4), Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if err := busy.ApplyOps(1, entry); !errors.Is(err, ErrOtherCluster) {
		t.Fatalf("a store with topics of its own applying another cluster's entry: %v", err)
	}

	// A snapshot is checked the same way before it replaces anything.
	if err := busy.RestoreMetadata(5, entry); !errors.Is(err, ErrOtherCluster) {
		t.Fatalf("restoring another cluster's snapshot: %v", err)
	}
	if ts, _ := busy.Topics(); len(ts) != 1 || ts[0].Name != "mine" {
		t.Fatalf("the refused snapshot replaced the topics: %+v", ts)
	}
	fresh := openMem(t)
	if err := fresh.RestoreMetadata(5, entry); err != nil || fresh.ClusterID() != first.ClusterID() {
		t.Fatalf("a fresh store restoring the cluster's snapshot: %v, cluster %s", err, fresh.ClusterID())
	}
}

// A reader that finds the log's cluster id in the store finds the store's
// own cluster id already changed to it: a node waiting for the log's id
// (node.joinCluster) and then reading ClusterID must never see the id it
// generated, or it writes that id into its log dirs' meta.properties and
// is refused at its next start. Found as a rare CI failure of node's
// TestClusterBrokerOnlyNodeCatchesUpFromASnapshot.
func TestClusterIDIsAdoptedBeforeTheLogsIDIsVisible(t *testing.T) {
	t.Parallel()
	first := openMem(t)
	entry, err := first.ClusterIdentityOps()
	if err != nil {
		t.Fatal(err)
	}
	for round := range 40 {
		joiner := openMem(t)
		stop := make(chan struct{})
		seen := make(chan string, 1)
		go func() {
			defer close(seen)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if id, ok, err := joiner.LogClusterID(); err == nil && ok {
					if own := joiner.ClusterID(); own != id {
						seen <- own
					}
					return
				}
			}
		}()
		if round%2 == 0 {
			err = joiner.ApplyOps(1, entry)
		} else {
			err = joiner.RestoreMetadata(1, entry)
		}
		close(stop)
		if err != nil {
			t.Fatal(err)
		}
		if own, stale := <-seen; stale {
			t.Fatalf("round %d: the log's cluster id %s was visible while the store's was still %s", round,
				first.ClusterID(), own)
		}
	}
}
