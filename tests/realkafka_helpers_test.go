package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/realkafka"
	"github.com/kmirror/kmirror/internal/testutil"
)

// The harness of realkafka_mirror_test.go: a real Kafka source broker and
// the checks that wait on Kafka's own background work.

// realSourceProps make Kafka's log cleaner and retention check run within
// a fraction of a second (Kafka waits 15 s between cleaner passes, checks
// retention every 5 minutes and first 30 s after startup), so that tests
// wait for them in seconds.
var realSourceProps = map[string]string{
	"log.cleaner.backoff.ms":          "100",
	"log.retention.check.interval.ms": "100",
	"log.initial.task.delay.ms":       "0",
}

// realSource is a running Kafka broker with a client for raw reads (Fetch
// pinned to v11, as readRaw needs) and admin requests.
type realSource struct {
	b   *realkafka.Broker
	cl  *kgo.Client
	adm *kadm.Client
}

// startRealSource starts a single-node Kafka of version, closed (its
// directory removed) when t ends; if t failed, the end of the broker's log
// goes to the test log first. A broker that does not start fails t.
func startRealSource(t *testing.T, version string) *realSource {
	t.Helper()
	b, err := realkafka.Start(realkafka.Config{Version: version, Props: realSourceProps})
	if err != nil {
		t.Fatalf("starting Kafka %s: %v", version, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Kafka %s broker.log, the end:\n%s", version, b.LogTail(4000))
		}
		if err := b.Close(); err != nil {
			t.Errorf("closing Kafka %s: %v", version, err)
		}
	})
	cl := newClient(t, b.Addr(), kgo.MaxVersions(rawFetchVersions()))
	return &realSource{b: b, cl: cl, adm: kadm.NewClient(cl)}
}

func (s *realSource) addr() string    { return s.b.Addr() }
func (s *realSource) seeds() []string { return []string{s.b.Addr()} }

// realWait polls cond every 100 ms until it returns nil, and fails the test
// with cond's last error when d passes first. It waits on Kafka's own
// background work (cleaner, retention, elections), which needs no faster
// polling than that.
func realWait(t *testing.T, ctx context.Context, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: still not done after %v: %v", what, d, err)
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// countRecords counts the data records of raw batches (control batches
// hold markers, not records a consumer sees).
func countRecords(t *testing.T, raw []byte) int {
	t.Helper()
	n := 0
	for _, b := range splitBatches(t, raw) {
		if !b.IsControl() {
			n += int(b.RecordCount())
		}
	}
	return n
}

// deleteRecordsTo moves the log start of topic/p to offset with
// DeleteRecords.
func deleteRecordsTo(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, p int32, offset int64) {
	t.Helper()
	var offs kadm.Offsets
	offs.AddOffset(topic, p, offset, -1)
	resp, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatalf("DeleteRecords %s-%d to %d: %v", topic, p, offset, err)
	}
	if r, ok := resp.Lookup(topic, p); !ok || r.Err != nil || r.LowWatermark != offset {
		t.Fatalf("DeleteRecords %s-%d to %d: %+v, want low watermark %d and no error", topic, p, offset, r, offset)
	}
}

// waitLocalStarts waits until the node's log starts of topic are want.
func waitLocalStarts(t *testing.T, ctx context.Context, n *ctlNode, topic string, want map[int32]int64) {
	t.Helper()
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named(fmt.Sprintf("node: log starts of %s following the source to %v", topic, want), func() error {
		got := listOffsets(t, ctx, n.adm, topic, true)
		for p, start := range want {
			if got[p] != start {
				return fmt.Errorf("partition %d: log start %d, want %d", p, got[p], start)
			}
		}
		return nil
	}))
}

// checkOutOfRangeAt checks that a fetch of topic/p at offset (below the
// log start) is OFFSET_OUT_OF_RANGE.
func checkOutOfRangeAt(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, p int32, offset int64) {
	t.Helper()
	rp := fetchPartition(t, ctx, cl, -1, topic, p, offset)
	if rp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch %s-%d at %d, below the log start: error %v, want OFFSET_OUT_OF_RANGE", topic, p, offset, kerr.ErrorForCode(rp.ErrorCode))
	}
}

// leaderEpochs returns the leader epoch of every partition of topic, or an
// error while a partition has no leader (a broker just restarted).
func leaderEpochs(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int32, error) {
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	td := tds[topic]
	if td.Err != nil || len(td.Partitions) == 0 {
		return nil, fmt.Errorf("metadata of %s: %v, %d partitions", topic, td.Err, len(td.Partitions))
	}
	out := map[int32]int32{}
	for p, pd := range td.Partitions {
		if pd.Err != nil || pd.Leader < 0 {
			return nil, fmt.Errorf("metadata of %s-%d: leader %d, %v", topic, p, pd.Leader, pd.Err)
		}
		out[p] = pd.LeaderEpoch
	}
	return out, nil
}

// settledEnds waits until no transaction is open on any partition of topic
// at the source (its last stable offset is its log end) and returns the log
// ends. Kafka answers EndTxn once the decision is in the transaction log
// and writes the markers to the partitions afterwards: a log end read
// right after EndTxn (or after a produce that followed it) may still lack
// a marker. kfake writes them before answering.
func settledEnds(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	var ends map[int32]int64
	realWait(t, ctx, 30*time.Second, "source transaction markers of "+topic+" written", func() error {
		lso, err := adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = lso.Error()
		}
		if err != nil {
			return fmt.Errorf("ListOffsets read_committed %s: %w", topic, err)
		}
		ends = listOffsets(t, ctx, adm, topic, false)
		for p, end := range ends {
			if o, _ := lso.Lookup(topic, p); o.Offset != end {
				return fmt.Errorf("partition %d: last stable offset %d, log end %d", p, o.Offset, end)
			}
		}
		return nil
	})
	return ends
}

// jvmTestsFirst: the tests that run Apache Kafka (the JVM broker and its
// tools) do not call t.Parallel at the top level, so go test runs them
// one after another before the parallel tests start (their own subtests
// are parallel). Each holds a JVM for tens of seconds; run alongside the
// short in-process tests they filled the parallel slots while the short
// tests' deadlines ran out waiting for one.
