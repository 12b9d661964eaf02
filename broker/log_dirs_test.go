package broker

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/storage"
)

// TestLogDirsBelongToTheirNode: every log dir gets a meta.properties
// naming the cluster and node; a node refuses log dirs of another node or
// cluster, and partition data its (new) state store does not name,
// saying what to do, instead of starting empty over them. An existing
// data dir without the file (an upgrade) gets it, and each partition
// without a partition.metadata gets one naming its topic id. A partition
// dir no topic names is warned about at start.
func TestLogDirsBelongToTheirNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Listeners = []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 0}}
	cfg.LogDirs = []string{dir}
	cfg.MetricsListener = ""
	start := func(mutate func(*Config)) (*Broker, error) {
		c := cfg
		if mutate != nil {
			mutate(&c)
		}
		return New(c)
	}
	b, err := start(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newTestClient(t, b)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "ledger"); err != nil {
		t.Fatal(err)
	}
	clusterID := b.ClusterID()
	topicID := b.partitions.Topic("ledger").ID()
	cl.Close()
	b.Close()
	meta, err := readMetaProperties(dir)
	if err != nil || meta["cluster.id"] != clusterID || meta["node.id"] != "1" || meta["version"] != "1" {
		t.Fatalf("meta.properties: %v %v, want cluster %s node 1", meta, err, clusterID)
	}

	refused := func(what string, mutate func(*Config), want ...string) {
		t.Helper()
		b, err := start(mutate)
		if err == nil {
			b.Close()
			t.Fatalf("%s: the node started", what)
		}
		if !errors.Is(err, errForeignLogDir) {
			t.Fatalf("%s: %v, want a log.dirs refusal", what, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: %q lacks %q", what, err, w)
			}
		}
	}
	refused("another node.id", func(c *Config) { c.NodeID = 2 }, "belongs to node 1", "node.id=1")

	// A partition directory no topic names (a topic a rebuild refused):
	// the node starts, and says it does not serve it.
	if err := os.Mkdir(filepath.Join(dir, "ghost-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	if b, err = start(func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if logs.count("partition directories that no topic names are not served") != 1 || logs.count("ghost-0") != 1 {
		t.Fatalf("no warning about ghost-0:\n%s", logs.buf.String())
	}
	if err := os.Remove(filepath.Join(dir, "ghost-0")); err != nil {
		t.Fatal(err)
	}

	// An upgrade: no meta.properties nor partition.metadata yet, the store
	// intact.
	if err := os.Remove(filepath.Join(dir, metaPropertiesFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "ledger-1", storage.PartitionMetadataFile)); err != nil {
		t.Fatal(err)
	}
	if b, err = start(nil); err != nil {
		t.Fatalf("a data dir without meta.properties: %v", err)
	}
	b.Close()
	if meta, err := readMetaProperties(dir); err != nil || meta["cluster.id"] != clusterID {
		t.Fatalf("meta.properties after the upgrade: %v %v", meta, err)
	}
	if id, found, err := storage.ReadPartitionMetadata(filepath.Join(dir, "ledger-1")); err != nil || !found || id != topicID {
		t.Fatalf("partition.metadata after the upgrade: %x %v %v, want %x", id, found, err, topicID)
	}

	// The state store lost: its new cluster id is not the log dir's.
	if err := os.RemoveAll(filepath.Join(dir, stateDirName)); err != nil {
		t.Fatal(err)
	}
	refused("the state store deleted", nil, "belongs to cluster "+clusterID, "Restore the state store")
	// Lost as well, and no meta.properties (a dir from before it existed):
	// the partitions nobody names are found.
	if err := os.Remove(filepath.Join(dir, metaPropertiesFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, stateDirName)); err != nil {
		t.Fatal(err)
	}
	refused("the state store deleted, no meta.properties", nil, "2 partition directories", "ledger-0", "move those partition directories aside")
	// The refused start made a new store: the next start refuses as well.
	refused("started again", nil, "2 partition directories")
}
