package storage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetTopicID: partition.metadata is written in Kafka's format; an
// empty log under another id (a topic creation that did not complete) is
// taken over, a log with records under another id is refused and its
// file kept.
func TestSetTopicID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openTestLog(t, dir, Config{})
	defer l.Close()
	a, b := [16]byte{1, 2, 3}, [16]byte{4, 5, 6}
	if err := l.SetTopicID(a); err != nil {
		t.Fatal(err)
	}
	body, _ := os.ReadFile(filepath.Join(dir, PartitionMetadataFile))
	if string(body) != "version: 0\ntopic_id: AQIDAAAAAAAAAAAAAAAAAA\n" {
		t.Fatalf("partition.metadata %q", body)
	}
	if err := l.SetTopicID(b); err != nil {
		t.Fatalf("an empty log under another id: %v", err)
	}
	if id, found, err := ReadPartitionMetadata(dir); err != nil || !found || id != b {
		t.Fatalf("after the take-over: %x %v %v", id, found, err)
	}
	if _, err := l.AppendProduce(dataBatch(0, 2, 10, -1, -1, -1, 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.SetTopicID(a); err == nil || !strings.Contains(err.Error(), "another topic's data") {
		t.Fatalf("a log with records under another id: %v", err)
	}
	if id, _, _ := ReadPartitionMetadata(dir); id != b {
		t.Fatalf("the refused change rewrote the file: %x", id)
	}
}
