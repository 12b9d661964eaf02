package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/storage"
)

// fetchPart0 fetches partition 0 of tp from offset with Fetch version v,
// read_committed or not.
func fetchPart0(t *testing.T, rc *rawConn, tp *partition.Topic, v int16, committed bool, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := newFetchReq(v)
	if committed {
		req.IsolationLevel = 1
	}
	addPart(req, tp, 0, offset)
	return mustPart(t, rc.roundTrip(req).(*kmsg.FetchResponse), tp, 0)
}

// listLatestOffset answers ListOffsets latest for partition 0 of tp.
func listLatestOffset(t *testing.T, rc *rawConn, tp *partition.Topic, committed bool) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 7
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = tp.Name()
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, listLatest
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	sp := rc.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("ListOffsets: error %d", sp.ErrorCode)
	}
	return sp.Offset
}

// With the high watermark below the log end (records appended, not yet
// committed: what a replicated leader holds until its followers catch
// up), consumers see only what lies below it: Fetch in both isolation
// levels, the offsets it reports, and ListOffsets latest. The node's
// commit step after the append then shows the rest.
func TestReadsStopAtHighWatermark(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "hw-bound", 1)
	p := tp.Partitions()[0]
	mustAppend(t, p, plainBatch(3, 10), 0)                                 // 0-2, committed
	if _, err := p.Log().AppendProduce(plainBatch(2, 10), 0); err != nil { // 3-4, not committed
		t.Fatal(err)
	}
	if p.Log().HighWatermark() != 3 || p.Log().LogEndOffset() != 5 {
		t.Fatalf("hw %d leo %d, want 3 and 5", p.Log().HighWatermark(), p.Log().LogEndOffset())
	}
	rc := dialRaw(t, b)
	fetch := func(committed bool, offset int64) kmsg.FetchResponseTopicPartition {
		t.Helper()
		return fetchPart0(t, rc, tp, 12, committed, offset)
	}
	for _, committed := range []bool{false, true} {
		got := fetch(committed, 0)
		if got.ErrorCode != 0 || got.HighWatermark != 3 || got.LastStableOffset != 3 ||
			!reflect.DeepEqual(offsetsIn(t, got.RecordBatches), span(0, 3)) {
			t.Fatalf("committed=%v: error %d hw %d lso %d offsets %v, want hw 3 lso 3 offsets 0-2", committed,
				got.ErrorCode, got.HighWatermark, got.LastStableOffset, offsetsIn(t, got.RecordBatches))
		}
		if got = fetch(committed, 3); got.ErrorCode != 0 || len(got.RecordBatches) != 0 {
			t.Fatalf("committed=%v: fetch at the high watermark: error %d, %d bytes", committed, got.ErrorCode, len(got.RecordBatches))
		}
		if off := listLatestOffset(t, rc, tp, committed); off != 3 {
			t.Fatalf("committed=%v: ListOffsets latest %d, want the high watermark 3", committed, off)
		}
	}
	p.Appended()
	if got := fetch(false, 0); got.HighWatermark != 5 || !reflect.DeepEqual(offsetsIn(t, got.RecordBatches), span(0, 5)) {
		t.Fatalf("after the commit: hw %d offsets %v, want 5 and 0-4", got.HighWatermark, offsetsIn(t, got.RecordBatches))
	}
	if off := listLatestOffset(t, rc, tp, false); off != 5 {
		t.Fatalf("after the commit: ListOffsets latest %d, want 5", off)
	}
}

// An acks=all answer waits for the high watermark to cover the batch: at
// once on one node (the append's commit step ran), until the commit step
// when it has not run yet, and not past the deadline.
func TestAwaitCommitted(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "acks-all", 1)
	p := tp.Partitions()[0]
	mustAppend(t, p, plainBatch(2, 10), 0)
	var alone partition.Leadership // a node alone: no assignment
	if c := p.AwaitCommitted(2, alone, 0, b.closing); c != partition.Committed {
		t.Fatalf("a committed batch waited: %v", c)
	}
	_, lead, err := p.AppendProduce(plainBatch(2, 10))
	if err != nil {
		t.Fatal(err)
	}
	if c := p.AwaitCommitted(4, lead, 10*time.Millisecond, b.closing); c != partition.CommitTimedOut {
		t.Fatalf("an uncommitted batch: %v, want CommitTimedOut", c)
	}
	done := make(chan partition.Commit)
	go func() { done <- p.AwaitCommitted(4, lead, time.Minute, b.closing) }()
	testutil.CheckFor(t, testutil.Timeout, testutil.True("the produce parked", func() bool { return waiters(p) == 1 }))
	p.Appended()
	if c := <-done; c != partition.Committed {
		t.Fatalf("the wait ended with %v, not the commit", c)
	}
	if waiters(p) != 0 {
		t.Fatalf("%d waiters left", waiters(p))
	}
}

// The node writes each log directory's replication-offset-checkpoint in
// Kafka's format, periodically and at shutdown; at the next start a
// partition starts from it, then (one node) at its log end, whatever the
// file says, and a corrupt file keeps no partition from starting.
func TestHighWatermarkCheckpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, storage.ReplicationOffsetCheckpoint)
	start := func() *Broker {
		return newTestBroker(t, func(c *Config) {
			c.LogDirs = []string{dir}
			c.HighWatermarkCheckpointInterval = 10 * time.Millisecond
		})
	}
	b := start()
	tp := mustTopic(t, b, "ckpt", 2)
	mustAppend(t, tp.Partitions()[0], plainBatch(3, 10), 0)
	testutil.CheckFor(t, testutil.Timeout, func() error {
		if got, _ := os.ReadFile(file); string(got) != "0\n2\nckpt 0 3\nckpt 1 0\n" {
			return fmt.Errorf("checkpoint %q", got)
		}
		return nil
	})
	mustAppend(t, tp.Partitions()[1], plainBatch(2, 10), 0)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(file); err != nil || string(got) != "0\n2\nckpt 0 3\nckpt 1 2\n" {
		t.Fatalf("checkpoint at shutdown %q %v", got, err)
	}

	for _, tc := range []struct{ name, body string }{
		{"below the log end", "0\n2\nckpt 0 1\nckpt 1 0\n"},
		{"above the log end", "0\n3\nckpt 0 100\nckpt 1 100\ngone 0 7\n"},
		{"corrupt", "0\n2\nckpt 0 1\n"},
		{"missing", ""},
	} {
		if tc.body == "" {
			os.Remove(file)
		} else if err := os.WriteFile(file, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		b = start()
		parts := b.partitions.Topic("ckpt").Partitions()
		for i, want := range []int64{3, 2} {
			if hw := parts[i].Log().HighWatermark(); hw != want {
				t.Fatalf("%s: partition %d starts at hw %d, want its log end %d", tc.name, i, hw, want)
			}
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(file); err != nil || string(got) != "0\n2\nckpt 0 3\nckpt 1 2\n" {
			t.Fatalf("%s: checkpoint after the restart %q %v", tc.name, got, err)
		}
	}
}
