package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/realkafka"
	"github.com/kmirror/kmirror/internal/testutil"
)

// Mirroring from Apache Kafka itself, the JVM broker that
// internal/realkafka runs. kfake is a model of Kafka; what kmirror must
// copy byte for byte is what Kafka really writes: its compressed batches
// and transaction markers, the batches its log cleaner rewrites, its log
// start after DeleteRecords and retention, its leader epochs across a
// restart. Each test runs against both Kafka versions the project
// supports (realkafka.Newest and realkafka.Previous).
//
// A JVM broker takes seconds to start on a small machine, so one broker
// per version serves the whole file: TestRealKafkaMirror starts it, runs
// the tests that leave it up in parallel, then the one that restarts it.
// The helpers are in realkafka_helpers_test.go.

// TestRealKafkaMirror mirrors from a real Kafka broker of each version.
func TestRealKafkaMirror(t *testing.T) {
	// Not parallel with the other tests: see jvmTestsFirst.
	for _, version := range []string{realkafka.Newest, realkafka.Previous} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			src := startRealSource(t, version)
			// t.Run returns once its parallel subtests are done: the
			// restart below never pulls the broker from under them.
			t.Run("source-up", func(t *testing.T) {
				for _, c := range []struct {
					name string
					run  func(*testing.T, *realSource)
				}{
					{"CodecsAndTransactions", realCodecsAndTransactions},
					{"CompactedGaps", realCompactedGaps},
					{"LogStart", realLogStart},
				} {
					t.Run(c.name, func(t *testing.T) {
						t.Parallel()
						c.run(t, src)
					})
				}
			})
			t.Run("RestartAndFailover", func(t *testing.T) { realRestartAndFailover(t, src) })
		})
	}
}

// realCodecsAndTransactions mirrors, for every codec, a three-partition
// topic of idempotent batches and of committed and aborted transactions
// (with Kafka's markers), half written before the mirror starts and half
// while it runs: the mirrored logs are Kafka's bytes at Kafka's offsets,
// and read_committed consumers of the node see exactly the committed
// records. Each codec has a node of its own, so the codecs run in
// parallel.
func realCodecsAndTransactions(t *testing.T, src *realSource) {
	ctx := testCtx(t, 2*time.Minute)
	meta, err := src.adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("source Metadata: %v", err)
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			topic := "codec-" + c.name
			createTopic(t, ctx, src.adm, topic, 3, nil)
			mix := produceTxnMix(t, ctx, src.seeds(), topic, c.codec, 3, false)
			n := startCtlNode(t, "codec-"+c.name, control.Config{})
			n.ok(ctx, createReq("rk", src.addr()))
			n.ok(ctx, startReq("rk", topic))
			testutil.CheckFor(t, mirrorCatchUp, testutil.Named("ListClusterMirrors naming the source cluster", func() error {
				l := n.list(ctx)["rk"]
				if l.SourceClusterID == nil || *l.SourceClusterID != meta.Cluster || l.TopicCount != 1 {
					return fmt.Errorf("mirror rk: %+v, want source cluster id %q and 1 topic", l, meta.Cluster)
				}
				return nil
			}))
			more := produceTxnMix(t, ctx, src.seeds(), topic, c.codec, 3, false)
			mix.all = sortedUnion(mix.all, more.all)
			mix.committed = sortedUnion(mix.committed, more.committed)

			n.waitMirrored(ctx, "rk", topic, settledEnds(t, ctx, src.adm, topic))
			raw := checkSameLog(t, ctx, src.cl, n.cl, topic)
			checkVerified(t, ctx, src.cl, n.cl, topic)
			checkReadOnly(t, ctx, n.addr(), topic)
			// The comparison means something only if Kafka's log really
			// holds markers, transactional and compressed batches: two
			// mixes of three transactions on partitions 0 and 1, none on
			// 2.
			for p, wantMarkers := range map[int32]int{0: 6, 1: 6, 2: 0} {
				var markers, txnal, compressed, otherCodec int
				for _, b := range splitBatches(t, raw[p]) {
					switch {
					case b.IsControl():
						markers++
						continue
					case b.IsTransactional():
						txnal++
					}
					switch int(b.Codec()) {
					case int(c.attr):
						compressed++
					case 0: // kgo sends a batch uncompressed when that is smaller
					default:
						otherCodec++
					}
				}
				if markers != wantMarkers || (wantMarkers > 0) != (txnal > 0) || compressed == 0 || otherCodec > 0 {
					t.Fatalf("%s-%d at the source: %d markers (want %d), %d transactional batches (want some: %v), %d %s batches (want some), %d of another codec (want 0)",
						topic, p, markers, wantMarkers, txnal, wantMarkers > 0, compressed, c.name, otherCodec)
				}
			}
			if len(mix.committed) == len(mix.all) {
				t.Fatalf("%s: no aborted records were written; the read_committed check proves nothing", topic)
			}
			checkSameRecords(t, topic+": read_committed from the node",
				consumeAll(t, ctx, []string{n.addr()}, topic, true, len(mix.committed)), mix.committed)
			checkSameRecords(t, topic+": read_uncommitted from the node",
				consumeAll(t, ctx, []string{n.addr()}, topic, false, len(mix.all)), mix.all)
		})
	}
}

// realCompactedGaps mirrors a compacted topic after Kafka's log cleaner
// rewrote it: the gaps the cleaner left (whole batches gone, batches
// rewritten with fewer records, a tombstone's batch stamped with its
// delete horizon, KIP-534) are mirrored as they are, at the same offsets,
// and a read inside a gap answers the batch after it, as Kafka does.
func realCompactedGaps(t *testing.T, src *realSource) {
	ctx := testCtx(t, 2*time.Minute)
	const topic = "compacted"
	createTopic(t, ctx, src.adm, topic, 1, map[string]*string{
		"cleanup.policy":            kmsg.StringPtr("compact"),
		"segment.ms":                kmsg.StringPtr("100"),
		"min.cleanable.dirty.ratio": kmsg.StringPtr("0.01"),
	})
	// Kafka rolls the active segment when a batch's timestamp is more than
	// segment.ms past the segment's first batch: rounds 10 s apart in
	// record time each get a segment of their own at once, with no wait
	// on the wall clock. The cleaner never touches the active segment.
	const rounds, keys = 12, 5
	pr := manualProducer(t, src.seeds(), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)
	var activeBase, end int64
	once := 0 // once- keys below the active segment: each survives
	for round := range rounds {
		ts := base.Add(time.Duration(round) * 10 * time.Second)
		var rs []*kgo.Record
		for k := range keys {
			rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", k), Value: fmt.Appendf(nil, "round-%d", round), Timestamp: ts})
		}
		// Every third round also writes a key of its own; the round
		// before the last deletes the first of them.
		if round == rounds-2 {
			rs = append(rs, &kgo.Record{Topic: topic, Key: []byte("once-0"), Timestamp: ts})
		}
		if round%3 == 0 {
			rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "once-%d", round), Value: []byte("kept"), Timestamp: ts})
			if round < rounds-1 {
				once++
			}
		}
		res := pr.ProduceSync(ctx, rs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("producing round %d to %s: %v", round, topic, err)
		}
		activeBase = res[0].Record.Offset
		end = res[len(res)-1].Record.Offset + 1
	}
	// Once the cleaner cleaned everything below the active segment, each
	// key- keeps its copy of the round before the last, each once- key its
	// only copy (once-0 its tombstone, kept for delete.retention.ms, a
	// day); the last round is all there. The pass that gets there is the
	// one that stamps the tombstone's batch with its delete horizon. That
	// state is final: with no new segment, the cleaner finds nothing
	// dirty, and a batch that keeps all its records, its horizon stamped,
	// is never rewritten again.
	wantRecords := keys + once + int(end-activeBase)
	var raw []byte
	realWait(t, ctx, time.Minute, "Kafka's log cleaner compacting "+topic, func() error {
		raw = readRaw(t, ctx, src.cl, -1, topic, 0, 0, end)
		if got := countRecords(t, raw); got != wantRecords {
			return fmt.Errorf("%d records in offsets [0, %d), want %d once everything below the active segment at %d is cleaned", got, end, wantRecords, activeBase)
		}
		return nil
	})
	next, gaps, rewritten, horizons := int64(0), 0, 0, 0
	var gapAt, gapEnd int64
	for _, b := range splitBatches(t, raw) {
		if b.BaseOffset() > next {
			gaps++
			gapAt, gapEnd = next, b.BaseOffset()
		}
		if int64(b.RecordCount()) < b.NextOffset()-b.BaseOffset() {
			rewritten++
		}
		if b.HasDeleteHorizon() {
			horizons++
		}
		next = b.NextOffset()
	}
	if gaps < 2 || rewritten == 0 || horizons != 1 || wantRecords >= int(end) {
		t.Fatalf("Kafka's cleaner left %d records in %d offsets, %d gaps between batches, %d batches missing records inside, %d with a delete horizon; the test needs fewer records than offsets, >= 2 gaps, some batches missing records and 1 delete horizon",
			wantRecords, end, gaps, rewritten, horizons)
	}
	t.Logf("%s at the source: %d records in %d offsets, %d gaps between batches, %d batches missing records inside, %d with a delete horizon", topic, wantRecords, end, gaps, rewritten, horizons)

	n := startCtlNode(t, "compacted", control.Config{})
	n.ok(ctx, createReq("rk", src.addr()))
	n.ok(ctx, startReq("rk", topic))
	n.waitMirrored(ctx, "rk", topic, map[int32]int64{0: end})
	checkSameLog(t, ctx, src.cl, n.cl, topic)
	for _, side := range []struct {
		name string
		cl   *kgo.Client
	}{{"source", src.cl}, {"node", n.cl}} {
		rp := fetchPartition(t, ctx, side.cl, -1, topic, 0, gapAt)
		if bs := splitBatches(t, rp.RecordBatches); rp.ErrorCode != 0 || len(bs) == 0 || bs[0].BaseOffset() != gapEnd {
			first := int64(-1)
			if len(bs) > 0 {
				first = bs[0].BaseOffset()
			}
			t.Fatalf("%s: fetch at %d (in the gap [%d, %d)): error %d, first batch at %d, want the batch at %d", side.name, gapAt, gapAt, gapEnd, rp.ErrorCode, first, gapEnd)
		}
	}
	want := consumeAll(t, ctx, src.seeds(), topic, false, wantRecords)
	checkSameRecords(t, "consumed from the node", consumeAll(t, ctx, []string{n.addr()}, topic, false, wantRecords), want)
}

// realLogStart moves the source log start before and while mirroring, with
// DeleteRecords (anywhere, inside a batch too) and with time retention
// (whole segments): the node's log start follows the source's, and reads
// below it are OFFSET_OUT_OF_RANGE.
func realLogStart(t *testing.T, src *realSource) {
	ctx := testCtx(t, 2*time.Minute)
	const topic = "log-start"
	createTopic(t, ctx, src.adm, topic, 3, nil)
	pr := manualProducer(t, src.seeds())
	ends := map[int32]int64{}
	for p := range int32(3) {
		ends[p] = produceBatchesTo(t, ctx, pr, topic, p, 10, 10, "a")
	}
	// Before mirroring: partition 0 starts inside a batch, partition 1
	// lost everything, then got more.
	deleteRecordsTo(t, ctx, src.adm, topic, 0, 35)
	deleteRecordsTo(t, ctx, src.adm, topic, 1, ends[1])
	ends[1] = produceBatchesTo(t, ctx, pr, topic, 1, 2, 10, "b")

	n := startCtlNode(t, "log-start", control.Config{})
	n.ok(ctx, createReq("rk", src.addr()))
	n.ok(ctx, startReq("rk", topic))
	n.waitMirrored(ctx, "rk", topic, ends)
	checkSameLog(t, ctx, src.cl, n.cl, topic) // log starts included
	checkOutOfRangeAt(t, ctx, n.cl, topic, 0, 34)
	checkOutOfRangeAt(t, ctx, n.cl, topic, 1, 99)

	// While mirroring.
	deleteRecordsTo(t, ctx, src.adm, topic, 2, 55)
	deleteRecordsTo(t, ctx, src.adm, topic, 0, 70)
	waitLocalStarts(t, ctx, n, topic, map[int32]int64{0: 70, 1: 100, 2: 55})
	checkOutOfRangeAt(t, ctx, n.cl, topic, 0, 69)
	checkOutOfRangeAt(t, ctx, n.cl, topic, 2, 54)
	checkSameLog(t, ctx, src.cl, n.cl, topic)

	// Retention: four rounds two hours old, four ten minutes old, each in
	// a segment of its own (segment.ms, see realCompactedGaps), mirrored;
	// then retention.ms drops to an hour and Kafka deletes the old
	// segments.
	const rtopic = "retention"
	createTopic(t, ctx, src.adm, rtopic, 1, map[string]*string{"segment.ms": kmsg.StringPtr("100")})
	n.ok(ctx, startReq("rk", rtopic))
	var keptFrom, rend int64
	for i, at := range []time.Time{time.Now().Add(-2 * time.Hour), time.Now().Add(-10 * time.Minute)} {
		for round := range 4 {
			ts := at.Add(time.Duration(round) * time.Second)
			rs := make([]*kgo.Record, 8)
			for j := range rs {
				rs[j] = &kgo.Record{Topic: rtopic, Key: fmt.Appendf(nil, "%d-%d-%d", i, round, j), Value: []byte("retained?"), Timestamp: ts}
			}
			res := pr.ProduceSync(ctx, rs...)
			if err := res.FirstErr(); err != nil {
				t.Fatalf("producing to %s: %v", rtopic, err)
			}
			if i == 1 && round == 0 {
				keptFrom = res[0].Record.Offset
			}
			rend = res[len(res)-1].Record.Offset + 1
		}
	}
	n.waitMirrored(ctx, "rk", rtopic, map[int32]int64{0: rend})
	checkSameLog(t, ctx, src.cl, n.cl, rtopic)
	resp, err := src.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("3600000")}}, rtopic)
	if err == nil && (len(resp) != 1 || resp[0].Err != nil) {
		err = fmt.Errorf("answered %+v", resp)
	}
	if err != nil {
		t.Fatalf("source: setting retention.ms of %s: %v", rtopic, err)
	}
	realWait(t, ctx, time.Minute, "Kafka's retention deleting the old segments of "+rtopic, func() error {
		if got := listOffsets(t, ctx, src.adm, rtopic, true)[0]; got != keptFrom {
			return fmt.Errorf("source log start %d, want %d (the first recent batch)", got, keptFrom)
		}
		return nil
	})
	waitLocalStarts(t, ctx, n, rtopic, map[int32]int64{0: keptFrom})
	checkOutOfRangeAt(t, ctx, n.cl, rtopic, 0, keptFrom-1)
	checkSameLog(t, ctx, src.cl, n.cl, rtopic)
}

// realRestartAndFailover restarts the source broker while the node mirrors
// a topic of idempotent and transactional data: Kafka's partition leader
// epochs move on, the mirror reconnects and catches up with what is
// written after the restart, byte for byte, the new batches carrying the
// new epoch, and the node's own leader epoch stays above the source's.
// Then the node fails over (StopMirrorTopics): the topic becomes writable
// and consumers read back everything committed, at the source and here.
func realRestartAndFailover(t *testing.T, src *realSource) {
	ctx := testCtx(t, 3*time.Minute)
	const topic = "restart"
	createTopic(t, ctx, src.adm, topic, 3, nil)
	n := startCtlNode(t, "restart", control.Config{})
	n.ok(ctx, createReq("rk", src.addr()))
	n.ok(ctx, startReq("rk", topic))
	before := produceTxnMix(t, ctx, src.seeds(), topic, kgo.Lz4Compression(), 3, false)
	restartAt := settledEnds(t, ctx, src.adm, topic)
	n.waitMirrored(ctx, "rk", topic, restartAt)
	oldEpochs, err := leaderEpochs(ctx, src.adm, topic)
	if err != nil {
		t.Fatalf("source: %v", err)
	}

	if err := src.b.Restart(); err != nil {
		t.Fatalf("restarting Kafka %s: %v", src.b.Version(), err)
	}
	var newEpochs map[int32]int32
	realWait(t, ctx, time.Minute, "source leader epochs moving on after the restart", func() error {
		var err error
		if newEpochs, err = leaderEpochs(ctx, src.adm, topic); err != nil {
			return err
		}
		for p, e := range newEpochs {
			if e <= oldEpochs[p] {
				return fmt.Errorf("partition %d: leader epoch %d, %d before the restart", p, e, oldEpochs[p])
			}
		}
		return nil
	})
	after := produceTxnMix(t, ctx, src.seeds(), topic, kgo.ZstdCompression(), 3, false)
	n.waitMirrored(ctx, "rk", topic, settledEnds(t, ctx, src.adm, topic))
	raw := checkSameLog(t, ctx, src.cl, n.cl, topic)
	checkReadOnly(t, ctx, n.addr(), topic)

	md, err := n.adm.ListTopics(ctx, topic)
	if err != nil || md[topic].Err != nil {
		t.Fatalf("node: metadata of %s: %v %v", topic, err, md[topic].Err)
	}
	for p := range int32(3) {
		var old, cur int
		for _, b := range splitBatches(t, raw[p]) {
			want := newEpochs[p]
			if b.BaseOffset() < restartAt[p] {
				want = oldEpochs[p]
				old++
			} else {
				cur++
			}
			if b.PartitionLeaderEpoch() != want {
				t.Fatalf("%s-%d: batch at %d carries leader epoch %d, want %d (the restart was at offset %d, epochs %d before, %d after)",
					topic, p, b.BaseOffset(), b.PartitionLeaderEpoch(), want, restartAt[p], oldEpochs[p], newEpochs[p])
			}
		}
		if old == 0 || cur == 0 {
			t.Fatalf("%s-%d: %d batches before the restart and %d after; want some of both", topic, p, old, cur)
		}
		// The node keeps its leader epoch at least 3 above the newest
		// source epoch it appended (fetch package doc).
		if got := md[topic].Partitions[p].LeaderEpoch; got < newEpochs[p]+3 {
			t.Fatalf("node: %s-%d leader epoch %d, want >= %d (3 above the source's %d)", topic, p, got, newEpochs[p]+3, newEpochs[p])
		}
	}

	// Failover.
	n.ok(ctx, stopReq("rk", topic))
	n.checkStates(ctx, "rk", topic, 3, "STOPPED")
	n.checkNoFetcher("rk", topic, 3)
	stoppedAt := listOffsets(t, ctx, n.adm, topic, false)
	local := produceTo(t, ctx, manualProducer(t, []string{n.addr()}), topic, 3, 5, "after-failover")
	for _, r := range local {
		var p int32
		var off int64
		if k, err := fmt.Sscanf(r, "%d:%d:", &p, &off); k != 2 {
			t.Fatalf("parsing record %s: %v", r, err)
		}
		if off < stoppedAt[p] {
			t.Fatalf("node: record %s written at %d, want >= %d (the log end after the stop)", r, off, stoppedAt[p])
		}
	}
	committed := sortedUnion(before.committed, after.committed, local)
	checkSameRecords(t, "read_committed from the node after the failover",
		consumeAll(t, ctx, []string{n.addr()}, topic, true, len(committed)), committed)
	all := sortedUnion(before.all, after.all, local)
	checkSameRecords(t, "read_uncommitted from the node after the failover",
		consumeAll(t, ctx, []string{n.addr()}, topic, false, len(all)), all)
	// The source shows the same committed records, without the node's own.
	checkSameRecords(t, "read_committed from the source",
		consumeAll(t, ctx, src.seeds(), topic, true, len(before.committed)+len(after.committed)), sortedUnion(before.committed, after.committed))
}
