package tests

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/control"
)

// Failover and failback through the control plane (DESIGN.md decision 5),
// and what a node restart keeps. The harness is in control_e2e_test.go.

// TestControlE2EDisasterRecovery mirrors idempotent and transactional data
// from kfake, with one transaction left open at the source, then loses the
// source and fails over (StopMirrorTopics): the topic becomes writable, the
// stop aborted the open transaction (read_committed consumers neither see
// its records nor stall on it) and reset producer state, and a new
// idempotent producer writes with a fresh producer id.
func TestControlE2EDisasterRecovery(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	src, srcCl := startSource(t)
	seeds := src.ListenAddrs()
	const topic = "dr-orders"
	createTopic(t, ctx, kadm.NewClient(srcCl), topic, 3, nil)
	mix := produceTxnMix(t, ctx, seeds, topic, kgo.Lz4Compression(), 3, false)
	// The open transaction: partitions 0 and 2, never ended.
	openRecs, openPID := openSourceTxn(t, ctx, seeds, topic, "dr-open", 4)
	ends := listOffsets(t, ctx, kadm.NewClient(srcCl), topic, false)

	n := startCtlNode(t, "dr", control.Config{})
	n.ok(ctx, createReq("dr", seeds[0]))
	n.ok(ctx, startReq("dr", topic))
	checkReadOnly(t, ctx, n.addr(), topic)
	n.waitMirrored(ctx, "dr", topic, ends)
	mirrored := checkSameLog(t, ctx, srcCl, n.cl, topic)

	// Disaster: the source is gone. Failover.
	src.Close()
	n.ok(ctx, stopReq("dr", topic))
	n.checkStates(ctx, "dr", topic, 3, "STOPPED")
	n.checkNoFetcher("dr", topic, 3)

	// After the mirrored data, each partition holds what the stop
	// appended: an ABORT marker for the open transaction where it wrote,
	// then MIRROR_PID_RESET.
	newEnds := listOffsets(t, ctx, n.adm, topic, false)
	for p := range int32(3) {
		var got []string
		for _, b := range splitBatches(t, readRaw(t, ctx, n.cl, -1, topic, p, ends[p], newEnds[p])) {
			typ, err := b.ControlType()
			if !b.IsControl() || err != nil {
				t.Fatalf("partition %d: batch at %d after the mirrored end %d is no control batch (%v)", p, b.BaseOffset(), ends[p], err)
			}
			switch {
			case typ == batch.ControlAbort && b.ProducerID() == openPID:
				got = append(got, "abort")
			case typ == batch.ControlMirrorPIDReset:
				got = append(got, "pid-reset")
			default:
				got = append(got, fmt.Sprintf("type %d pid %d", typ, b.ProducerID()))
			}
		}
		want := []string{"abort", "pid-reset"}
		if p == 1 {
			want = want[1:]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("partition %d: the stop appended %v, want %v", p, got, want)
		}
	}

	// Writable: a new idempotent producer gets an id no mirrored batch
	// carries.
	pr := manualProducer(t, []string{n.addr()})
	pid, _, err := pr.ProducerID(ctx)
	if err != nil {
		t.Fatalf("InitProducerID after the failover: %v", err)
	}
	for p, raw := range mirrored {
		for _, b := range splitBatches(t, raw) {
			if b.HasProducerID() && b.ProducerID() == pid {
				t.Fatalf("new producer id %d is in a mirrored batch of partition %d at %d", pid, p, b.BaseOffset())
			}
		}
	}
	after := produceTo(t, ctx, pr, topic, 3, 5, "after")
	for _, r := range after {
		var p int32
		var off int64
		if n, err := fmt.Sscanf(r, "%d:%d:", &p, &off); n != 2 {
			t.Fatalf("parsing record %s: %v", r, err)
		}
		if off < newEnds[p] {
			t.Fatalf("record %s written below the log end %d after the stop", r, newEnds[p])
		}
	}

	// read_committed: everything committed at the source plus the new
	// records, none of the open transaction's, and no stall at its first
	// offset (the new records lie beyond it).
	checkSameRecords(t, "read_committed after the failover",
		consumeAll(t, ctx, []string{n.addr()}, topic, true, len(mix.committed)+len(after)), sortedUnion(mix.committed, after))
	// read_uncommitted shows the open transaction's records: they were
	// mirrored, and hidden above only by the abort.
	uncommitted := consumeAll(t, ctx, []string{n.addr()}, topic, false, len(mix.all)+len(openRecs)+len(after))
	openSeen := 0
	for _, r := range uncommitted {
		if strings.Contains(r, ":open-p") {
			openSeen++
		}
	}
	if openSeen != len(openRecs) {
		t.Fatalf("read_uncommitted shows %d records of the open transaction, want %d", openSeen, len(openRecs))
	}
}

// TestControlE2EFailback fails over from kmirror node A to node B and
// back, with divergent tails on both sides: B stops following A (pause),
// A writes on (a tail B never gets), B fails over (stop) and writes its own
// tail. Then A mirrors the topic back from B: A's tail after the failover
// point is cut (the fetcher's OffsetForLeaderEpoch at start answers where
// B's own epoch began) and A ends byte-identical to B. Partition 0 has the
// longer tail on A, partition 1 on B.
func TestControlE2EFailback(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	a, b := startCtlNode(t, "A", control.Config{}), startCtlNode(t, "B", control.Config{})
	const topic = "failback"
	createTopic(t, ctx, a.adm, topic, 2, nil)
	apr := manualProducer(t, []string{a.addr()})
	var common []string
	for i := range 3 {
		common = append(common, produceTo(t, ctx, apr, topic, 2, 5, fmt.Sprint("common", i))...)
	}
	b.ok(ctx, createReq("dr", a.addr()))
	b.ok(ctx, startReq("dr", topic))
	failoverAt := listOffsets(t, ctx, a.adm, topic, false)
	b.waitMirrored(ctx, "dr", topic, failoverAt)
	checkSameLog(t, ctx, a.cl, b.cl, topic)

	// B stops following A; A writes on.
	b.ok(ctx, pauseReq("dr", topic))
	b.checkNoFetcher("dr", topic, 2)
	for i := range 4 {
		produceToPartition(t, ctx, apr, topic, 0, 6, fmt.Sprint("divergent", i))
	}
	produceToPartition(t, ctx, apr, topic, 1, 3, "divergent")
	if got := listOffsets(t, ctx, b.adm, topic, false); !maps.Equal(got, failoverAt) {
		t.Fatalf("B paused: log ends %v, want %v", got, failoverAt)
	}

	// Failover: B stops (from PAUSED) and writes its own tail.
	b.ok(ctx, stopReq("dr", topic))
	b.checkStates(ctx, "dr", topic, 2, "STOPPED")
	bpr := manualProducer(t, []string{b.addr()})
	own := produceToPartition(t, ctx, bpr, topic, 0, 3, "b-own")
	for i := range 4 {
		own = append(own, produceToPartition(t, ctx, bpr, topic, 1, 6, fmt.Sprint("b-own", i))...)
	}
	aEnds, bEnds := listOffsets(t, ctx, a.adm, topic, false), listOffsets(t, ctx, b.adm, topic, false)
	if aEnds[0] <= bEnds[0] || aEnds[1] >= bEnds[1] {
		t.Fatalf("log ends A %v, B %v: want A ahead on partition 0, B on 1", aEnds, bEnds)
	}

	// Failback: A mirrors the topic from B.
	a.ok(ctx, createReq("back", b.addr()))
	a.ok(ctx, startReq("back", topic))
	checkReadOnly(t, ctx, a.addr(), topic)
	a.waitMirrored(ctx, "back", topic, bEnds)
	checkSameLog(t, ctx, b.cl, a.cl, topic)
	// What A wrote after the failover point is gone, B's is there.
	want := sortedUnion(common, own)
	checkSameRecords(t, "A after the failback", consumeAll(t, ctx, []string{a.addr()}, topic, false, len(want)), want)

	// A is the primary again.
	a.ok(ctx, stopReq("back", topic))
	a.checkStates(ctx, "back", topic, 2, "STOPPED")
	produceTo(t, ctx, manualProducer(t, []string{a.addr()}), topic, 2, 2, "a-again")
}

// TestControlE2ERestart restarts the destination node (broker and control
// plane, same directories) with one topic MIRRORING, one PAUSED and one
// STOPPED: after the restart the first catches up with what the source
// wrote meanwhile, the second stays paused (and resumes), the third stays
// stopped and writable.
func TestControlE2ERestart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	src, srcCl := startSource(t)
	srcAdm := kadm.NewClient(srcCl)
	pr := manualProducer(t, src.ListenAddrs())
	topics := []string{"r-mirroring", "r-paused", "r-stopped"}
	for _, topic := range topics {
		createTopic(t, ctx, srcAdm, topic, 2, nil)
		produceTo(t, ctx, pr, topic, 2, 10, "a")
	}
	n := startCtlNode(t, "rs", control.Config{})
	n.ok(ctx, createReq("rs", src.ListenAddrs()[0]))
	n.ok(ctx, startReq("rs", topics...))
	for _, topic := range topics {
		n.waitMirrored(ctx, "rs", topic, listOffsets(t, ctx, srcAdm, topic, false))
	}
	n.ok(ctx, pauseReq("rs", "r-paused"))
	n.ok(ctx, stopReq("rs", "r-stopped"))
	pausedEnds := listOffsets(t, ctx, n.adm, "r-paused", false)
	for _, topic := range topics {
		produceTo(t, ctx, pr, topic, 2, 10, "b")
	}

	n.restart()
	for _, topic := range topics {
		produceTo(t, ctx, pr, topic, 2, 10, "c")
	}
	n.waitMirrored(ctx, "rs", "r-mirroring", listOffsets(t, ctx, srcAdm, "r-mirroring", false))
	checkSameLog(t, ctx, srcCl, n.cl, "r-mirroring")
	checkReadOnly(t, ctx, n.addr(), "r-mirroring")

	n.checkStates(ctx, "rs", "r-paused", 2, "PAUSED")
	n.checkNoFetcher("rs", "r-paused", 2)
	if got := listOffsets(t, ctx, n.adm, "r-paused", false); !maps.Equal(got, pausedEnds) {
		t.Fatalf("paused across a restart: log ends %v, want %v", got, pausedEnds)
	}
	checkReadOnly(t, ctx, n.addr(), "r-paused")

	n.checkStates(ctx, "rs", "r-stopped", 2, "STOPPED")
	n.checkNoFetcher("rs", "r-stopped", 2)
	produceTo(t, ctx, manualProducer(t, []string{n.addr()}), "r-stopped", 2, 3, "local")
	if l := n.list(ctx)["rs"]; l.TopicCount != 1 || !slices.Equal(l.TopicNames, []string{"r-mirroring", "r-paused"}) {
		t.Fatalf("ListClusterMirrors after the restart: %+v", l)
	}

	// The pause survives a second restart too, and resumes from where it
	// stopped.
	n.restart()
	n.checkStates(ctx, "rs", "r-paused", 2, "PAUSED")
	n.ok(ctx, resumeReq("rs", "r-paused"))
	n.waitMirrored(ctx, "rs", "r-paused", listOffsets(t, ctx, srcAdm, "r-paused", false))
	checkSameLog(t, ctx, srcCl, n.cl, "r-paused")
	n.checkStates(ctx, "rs", "r-stopped", 2, "STOPPED")
}

// openSourceTxn begins a transaction at the source under txnID, writes
// perPartition records (keys "open-p<partition>-<i>") to partitions 0 and
// 2, and never ends it: a source holding an open transaction at failover.
// It returns the records and the producer id.
func openSourceTxn(t *testing.T, ctx context.Context, seeds []string, topic, txnID string, perPartition int) ([]*kgo.Record, int64) {
	t.Helper()
	open := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID(txnID))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, p := range []int32{0, 2} {
		for i := range perPartition {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "open-p%d-%d", p, i), Value: []byte("open")})
		}
	}
	if err := open.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing in the open transaction: %v", err)
	}
	pid, _, err := open.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return recs, pid
}
