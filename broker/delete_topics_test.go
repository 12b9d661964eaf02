package broker

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDeleteTopicsUnderLoadLogsNoError deletes topics while a producer
// writes to them and maintenance (flush.ms=1, compaction) runs every
// millisecond, re-creating the same names. A deleted partition must never
// be written again: before the fix the close of each deleted log (at the
// end of deletedLogDelay, here forced by the broker's Close) flushed into
// the renamed-away directory and logged "partition log offline ...
// partition.meta.tmp: no such file or directory" once per partition.
func TestDeleteTopicsUnderLoadLogsNoError(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	dir := t.TempDir()
	b := newTestBroker(t, func(c *Config) {
		c.LogDirs = []string{dir}
		c.LogRetentionCheckInterval = time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	adm := kadm.NewClient(newTestClient(t, b))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	names := []string{"del-a", "del-b", "del-c"}
	configs := map[string]*string{"flush.ms": new("1"), "cleanup.policy": new("compact,delete")}
	for round := range 8 {
		// A client per round: one that saw the previous round's topic
		// IDs would need a metadata refresh to produce to the new ones.
		cl := newTestClient(t, b, kgo.ProducerLinger(0))
		if _, err := adm.CreateTopics(ctx, 2, 1, configs, names...); err != nil {
			t.Fatalf("round %d: creating: %v", round, err)
		}
		// Some records in every partition first, so each deleted log
		// has unflushed data and segments to compact.
		for _, name := range names {
			for p := range int32(2) {
				rs := cl.ProduceSync(ctx, &kgo.Record{Topic: name, Partition: p, Key: []byte("k"), Value: []byte("v")})
				if err := rs.FirstErr(); err != nil {
					t.Fatalf("round %d: producing to %s: %v", round, name, err)
				}
			}
		}
		// Then keep producing while the topics are deleted; errors after
		// the deletion are expected and ignored.
		pctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, name := range names {
			wg.Go(func() {
				for pctx.Err() == nil {
					cl.ProduceSync(pctx, &kgo.Record{Topic: name, Key: []byte("k"), Value: []byte("v")})
				}
			})
		}
		resps, err := adm.DeleteTopics(ctx, names...)
		if err == nil {
			err = resps.Error()
		}
		stop()
		cl.Close() // fails the records waiting for the deleted topics now
		wg.Wait()
		if err != nil {
			t.Fatalf("round %d: deleting: %v", round, err)
		}
	}
	if err := b.Close(); err != nil { // closes the deleted logs now
		t.Fatalf("closing the broker: %v", err)
	}
	if n := logs.count("level=ERROR"); n > 0 {
		t.Errorf("%d ERROR lines:\n%s", n, logs.lines("level=ERROR"))
	}
	if n := logs.count(`msg="log maintenance failed"`); n > 0 {
		t.Errorf("%d maintenance failures:\n%s", n, logs.lines("log maintenance failed"))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "del-") {
			t.Errorf("deleted partition directory left behind: %s", e.Name())
		}
	}
}

// lines returns the logged lines holding substr.
func (l *logBuffer) lines(substr string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.Lines(l.buf.String()) {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
