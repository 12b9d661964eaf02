package node

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// A full disk under a node whose metadata goes through its log: a topic
// change is refused before anything reaches the log (the store's space
// check comes first), the log never fails to apply an entry, and once
// space is back deletions and creations go through it again and survive
// a restart.
func TestFullDiskThroughTheMetadataLog(t *testing.T) {
	t.Parallel()
	dir := testutil.Tmpfs(t, 160<<20)
	cfg := nodetest.Config(t)
	cfg.LogDirs = []string{dir}
	cfg.Log.SegmentBytes = 8 << 20
	n, err := Start(cfg, control.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { n.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := nodetest.Client(t, []string{n.Addr()}, kgo.RecordRetries(0), kgo.RequestRetries(0),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.DisableIdempotentWrite())
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "fill"); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 512<<10)
	rand.Read(value) // incompressible
	refused := false
	for i := 0; i < 400 && !refused; i++ {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "fill", Value: value}).FirstErr()
		switch {
		case errors.Is(err, kerr.KafkaStorageError):
			refused = true
		case err != nil:
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	if !refused {
		t.Fatal("the disk never filled")
	}
	filler := testutil.FillDisk(t, dir, 0) // another program takes the rest
	defer os.Remove(filler)
	resp, err := adm.CreateTopics(ctx, 1, 1, nil, "new")
	if err != nil {
		t.Fatal(err)
	}
	if r := resp["new"]; !errors.Is(r.Err, kerr.KafkaStorageError) {
		t.Fatalf("CreateTopics on a full disk: %v %q", r.Err, r.ErrMessage)
	}
	if err := n.log.Err(); err != nil {
		t.Fatalf("the metadata log stopped applying on a full disk: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if d, err := adm.DeleteTopics(ctx, "fill"); err != nil || d["fill"].Err != nil {
		t.Fatalf("deleting a topic: %v %v", err, d["fill"].Err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "after"); err != nil {
		t.Fatalf("CreateTopics once space is back: %v", err)
	}
	if err := n.log.Err(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err = Start(cfg, control.Config{}); err != nil {
		t.Fatalf("restarting: %v", err)
	}
	topics, err := kadm.NewClient(nodetest.Client(t, []string{n.Addr()})).ListTopics(ctx)
	if err != nil || !topics.Has("after") || topics.Has("fill") || topics.Has("new") {
		t.Fatalf("topics after the restart: %v, %v", topics.Names(), err)
	}
}
