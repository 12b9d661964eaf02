package control

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// corruptPartitionStates overwrites every stored mirror partition state
// of the node's stopped store with bytes no decoder takes.
func corruptPartitionStates(t *testing.T, stateDir string) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(stateDir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	prefix := []byte("v1/mirror-partition/")
	n := 0
	err = db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		var keys [][]byte
		for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
			keys = append(keys, bytes.Clone(it.Item().Key()))
		}
		it.Close()
		for _, k := range keys {
			if err := txn.Set(k, []byte{0xff, 0xff}); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("corrupting %d partition states: %v", n, err)
	}
}

// A partition whose state record cannot be read is not "never mirrored":
// the restarted node used to take it for UNKNOWN and start it in
// LOG_ALIGNMENT, which may cut the copy. Now it stays FAILED with the
// error, its log untouched, until --recover resumes it from its log end.
func TestUnreadableStateRecordFails(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	scl := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic("t"))
	if err := scl.ProduceSync(ctx, kgo.StringRecord("a"), kgo.StringRecord("b")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := nodetest.Config(t)
	n := openTestNode(t, cfg, nil)
	n.createMirror(t, ctx, src.ListenAddrs()[0])
	n.startTopics(t, ctx, "t")
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 MIRRORING, caught up with the source at 2", func() bool {
		ps, _ := n.b.Store().MirrorPartitionState("m", "t", 0)
		st, err := n.ctl.fm.Status("m", "t", 0)
		return ps.State == state.StateMirroring && err == nil && st.Lag == 0 && st.SourceHighWatermark == 2
	}))
	n.close()
	corruptPartitionStates(t, filepath.Join(cfg.LogDirs[0], "__kmirror_state")) // the default metadata.log.dir

	n = openTestNode(t, cfg, nil)
	defer n.close()
	ps, err := n.b.Store().MirrorPartitionState("m", "t", 0)
	if err != nil || ps.State != state.StateFailed || ps.RetryAttempt != -1 || !strings.Contains(ps.ErrorMessage, "cannot be read") {
		t.Fatalf("after a restart over an unreadable state record: %+v %v, want FAILED, not retried, saying why", ps, err)
	}
	if _, err := n.ctl.fm.Status("m", "t", 0); err == nil {
		t.Fatal("a partition with an unreadable state record has a fetcher")
	}
	local, err := n.b.Partitions().MirrorPartition("t", 0)
	if err != nil || local.LogEndOffset() != 2 {
		t.Fatalf("the copy after the restart: %v", err)
	}

	recover := mirrorapi.NewPtrRecoverMirrorTopicsRequest()
	recover.MirrorName, recover.Topics = "m", []mirrorapi.MirrorTopicsRequestTopic{{TopicName: "t"}}
	if _, err := n.cl.Request(ctx, recover); err != nil {
		t.Fatal(err)
	}
	if err := scl.ProduceSync(ctx, kgo.StringRecord("c")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 readable and MIRRORING again, caught up with the source at 3", func() bool {
		ps, err := n.b.Store().MirrorPartitionState("m", "t", 0)
		if errors.Is(err, state.ErrCorrupt) {
			return false
		}
		st, serr := n.ctl.fm.Status("m", "t", 0)
		return ps.State == state.StateMirroring && serr == nil && st.Lag == 0 && st.SourceHighWatermark == 3
	}))
}
