package state

import (
	"strings"
	"testing"
)

// TestRestoreClusterID: a store that names no topic takes the cluster id
// it is given, which survives a reopen; one that names topics keeps its
// own; an id that is not Kafka's form is refused.
func TestRestoreClusterID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openDir(t, dir)
	const id = "yVq3nrJ6Sx2y9Q5IF0Ht5A"
	if err := s.RestoreClusterID("not-an-id"); err == nil {
		t.Fatal("a malformed cluster id was taken")
	}
	if err := s.RestoreClusterID(id); err != nil || s.ClusterID() != id {
		t.Fatalf("restore: %v, cluster id %s", err, s.ClusterID())
	}
	if err := s.PutTopic(Topic{Name: "t", ID: [16]byte{1}, Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.RestoreClusterID("AQIDAAAAAAAAAAAAAAAAAA"); err == nil || !strings.Contains(err.Error(), "names topics") {
		t.Fatalf("a store with topics changed its cluster id: %v", err)
	}
	s.Close()
	if s = openDir(t, dir); s.ClusterID() != id {
		t.Fatalf("after a reopen the cluster id is %s, want %s", s.ClusterID(), id)
	}
	s.Close()
}
