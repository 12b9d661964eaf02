package broker

import (
	"bytes"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/storage"
)

// mustAppend appends a client batch to a partition's log at leaderEpoch.
func mustAppend(t testing.TB, p *partition.Partition, raw []byte, leaderEpoch int32) storage.AppendResult {
	t.Helper()
	res, err := p.Log().AppendProduce(raw, leaderEpoch)
	if err != nil {
		t.Fatalf("appending to %s-%d: %v", p.Topic().Name(), p.Index(), err)
	}
	p.Appended()
	return res
}

// mustRead returns the stored bytes of [offset, upTo).
func mustRead(t testing.TB, l *storage.Log, offset int64, maxBytes int, upTo int64) []byte {
	t.Helper()
	raw, _, err := l.Read(offset, maxBytes, upTo, nil)
	if err != nil {
		t.Fatalf("reading at %d: %v", offset, err)
	}
	return raw
}

// diffPart is one partition of the differential encoder test.
type diffPart struct {
	topic     int // index into the test's topics
	partition int32
	errCode   int16
	region    storage.Region
	records   []byte // what region holds
	info      storage.ReadInfo
	aborted   []storage.AbortedTxn
	diverging bool
	fenced    bool
	notLeader bool // node 2 leads it (diffNotLeader)
	include   bool
	session   bool // carries a session position
}

type diffTopic struct {
	name string
	id   [16]byte
	t    *partition.Topic
}

// offsetsIn lists the offsets of every record (control records included)
// in a records blob, checking each batch's CRC.
func offsetsIn(t testing.TB, raw []byte) []int64 {
	t.Helper()
	var out []int64
	it := batch.NewIterator(raw)
	for bt, ok := it.Next(); ok; bt, ok = it.Next() {
		for o := bt.BaseOffset(); o <= bt.LastOffset(); o++ {
			out = append(out, o)
		}
	}
	if err := it.Err(); err != nil || it.Incomplete() {
		t.Fatalf("records blob: err %v, incomplete %v", err, it.Incomplete())
	}
	return out
}

func span(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

func waiters(p *partition.Partition) int { return p.Waiting() }

func TestFetchVersions(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "fetch-versions", 1)
	p := tp.Partitions()[0]
	mustAppend(t, p, plainBatch(3, 10), 0)
	mustAppend(t, p, plainBatch(2, 10), 0)
	all, tail := mustRead(t, p.Log(), 0, 1<<20, 5), mustRead(t, p.Log(), 3, 1<<20, 5)
	rc := dialRaw(t, b) // one connection: the fetch scratch is reused across versions
	for v := int16(4); v <= 17; v++ {
		for _, tc := range []struct {
			offset int64
			want   []byte
		}{{0, all}, {3, tail}, {5, nil}} {
			req := newFetchReq(v)
			addPart(req, tp, 0, tc.offset)
			resp := rc.roundTrip(req).(*kmsg.FetchResponse)
			rp := mustPart(t, resp, tp, 0)
			wantLogStart := int64(0)
			if v < 5 {
				wantLogStart = -1 // not in the response
			}
			if resp.ErrorCode != 0 || rp.ErrorCode != 0 || rp.HighWatermark != 5 || rp.LastStableOffset != 5 ||
				rp.LogStartOffset != wantLogStart || !bytes.Equal(rp.RecordBatches, tc.want) || rp.AbortedTransactions != nil {
				t.Fatalf("v%d offset %d: %+v", v, tc.offset, rp)
			}
		}
	}
}

func TestFetchLongPoll(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	t.Run("woken by a produce", func(t *testing.T) {
		t.Parallel()
		tp := mustTopic(t, b, "long-poll-woken", 1)
		rc := dialRaw(t, b)
		req := newFetchReq(17)
		req.MaxWaitMillis = 5000
		addPart(req, tp, 0, 0)
		start := time.Now()
		corr := rc.send(req)
		testutil.CheckFor(t, 5*time.Second, testutil.True("a fetch parked", func() bool { return waiters(tp.Partitions()[0]) > 0 }))
		pr := dialRaw(t, b).roundTrip(produceReq(9, -1, tp, 0, plainBatch(2, 10))).(*kmsg.ProduceResponse)
		if sp := onlyPartition(t, pr); sp.ErrorCode != 0 {
			t.Fatalf("produce: error %d", sp.ErrorCode)
		}
		resp := rc.recv(req, corr).(*kmsg.FetchResponse)
		if took := time.Since(start); took >= 4*time.Second {
			t.Fatalf("fetch took %v after the produce, want well under MaxWait", took)
		}
		if got := offsetsIn(t, mustPart(t, resp, tp, 0).RecordBatches); !reflect.DeepEqual(got, []int64{0, 1}) {
			t.Fatalf("offsets %v, want [0 1]", got)
		}
		testutil.CheckFor(t, 5*time.Second, testutil.True("no fetch parked", func() bool { return waiters(tp.Partitions()[0]) == 0 }))
	})
	t.Run("nothing produced", func(t *testing.T) {
		t.Parallel()
		tp := mustTopic(t, b, "long-poll-idle", 2)
		req := newFetchReq(17)
		req.MaxWaitMillis = 2000
		addPart(req, tp, 0, 0)
		addPart(req, tp, 1, 0)
		start := time.Now()
		resp := dialRaw(t, b).roundTrip(req).(*kmsg.FetchResponse)
		if took := time.Since(start); took < 1600*time.Millisecond {
			t.Fatalf("fetch returned after %v, want about MaxWait (2s)", took)
		}
		if rp := mustPart(t, resp, tp, 1); rp.ErrorCode != 0 || len(rp.RecordBatches) != 0 || rp.HighWatermark != 0 {
			t.Fatalf("idle partition: %+v", rp)
		}
		for _, p := range tp.Partitions() {
			if n := waiters(p); n != 0 {
				t.Fatalf("partition %d keeps %d waiters after the fetch", p.Index(), n)
			}
		}
	})
	t.Run("min bytes not reached", func(t *testing.T) {
		t.Parallel()
		tp := mustTopic(t, b, "long-poll-min-bytes", 1)
		mustAppend(t, tp.Partitions()[0], plainBatch(1, 100), 0)
		req := newFetchReq(12)
		req.MaxWaitMillis, req.MinBytes = 1000, 1<<20
		addPart(req, tp, 0, 0)
		start := time.Now()
		resp := dialRaw(t, b).roundTrip(req).(*kmsg.FetchResponse)
		if took := time.Since(start); took < 800*time.Millisecond {
			t.Fatalf("fetch returned after %v, want about MaxWait (1s)", took)
		}
		if got := offsetsIn(t, mustPart(t, resp, tp, 0).RecordBatches); !reflect.DeepEqual(got, []int64{0}) {
			t.Fatalf("offsets %v, want what there is at the deadline", got)
		}
	})
	t.Run("min bytes reached by a later append", func(t *testing.T) {
		t.Parallel()
		tp := mustTopic(t, b, "long-poll-min-bytes-later", 1)
		p := tp.Partitions()[0]
		first := plainBatch(1, 100)
		mustAppend(t, p, bytes.Clone(first), 0)
		rc := dialRaw(t, b)
		req := newFetchReq(17)
		req.MaxWaitMillis, req.MinBytes = 5000, int32(len(first)+1)
		addPart(req, tp, 0, 0)
		start := time.Now()
		corr := rc.send(req)
		testutil.CheckFor(t, 5*time.Second, testutil.True("a fetch parked", func() bool { return waiters(p) > 0 }))
		mustAppend(t, p, plainBatch(1, 100), 0)
		resp := rc.recv(req, corr).(*kmsg.FetchResponse)
		if took := time.Since(start); took >= 4*time.Second {
			t.Fatalf("fetch took %v, want an answer at the append", took)
		}
		if got := offsetsIn(t, mustPart(t, resp, tp, 0).RecordBatches); !reflect.DeepEqual(got, []int64{0, 1}) {
			t.Fatalf("offsets %v, want [0 1]", got)
		}
	})
}

func TestFetchSessions(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	for _, v := range []int16{7, 12, 17} { // names before v13, IDs after
		t.Run(fmt.Sprintf("v=%d", v), func(t *testing.T) {
			t.Parallel()
			tp := mustTopic(t, b, fmt.Sprintf("sessions-v%d", v), 3)
			mustAppend(t, tp.Partitions()[0], plainBatch(3, 10), 0)
			rc := dialRaw(t, b)
			fetch := func(id, epoch int32, build func(req *kmsg.FetchRequest)) *kmsg.FetchResponse {
				t.Helper()
				req := newFetchReq(v)
				req.SessionID, req.SessionEpoch = id, epoch
				if build != nil {
					build(req)
				}
				return rc.roundTrip(req).(*kmsg.FetchResponse)
			}
			expect := func(step string, resp *kmsg.FetchResponse, want map[int32][]int64) {
				t.Helper()
				if resp.ErrorCode != 0 || listedParts(resp) != len(want) {
					t.Fatalf("%s: error %d, %d partitions listed, want %d: %+v", step, resp.ErrorCode, listedParts(resp), len(want), resp.Topics)
				}
				for p, offsets := range want {
					if got := offsetsIn(t, mustPart(t, resp, tp, p).RecordBatches); !reflect.DeepEqual(got, offsets) {
						t.Fatalf("%s: partition %d offsets %v, want %v", step, p, got, offsets)
					}
				}
			}

			resp := fetch(0, 0, func(req *kmsg.FetchRequest) {
				for p := range int32(3) {
					addPart(req, tp, p, 0)
				}
			})
			id := resp.SessionID
			if id == 0 {
				t.Fatal("a full fetch at epoch 0 opened no session")
			}
			expect("full", resp, map[int32][]int64{0: {0, 1, 2}, 1: nil, 2: nil})
			expect("no news", fetch(id, 1, func(req *kmsg.FetchRequest) { addPart(req, tp, 0, 3) }), nil)

			mustAppend(t, tp.Partitions()[1], plainBatch(1, 10), 0)
			expect("new data in 1", fetch(id, 2, nil), map[int32][]int64{1: {0}})

			resp = fetch(id, 3, func(req *kmsg.FetchRequest) {
				addPart(req, tp, 1, 1)
				req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: tp.Name(), TopicID: tp.ID(), Partitions: []int32{2}}}
			})
			expect("forget 2", resp, nil)
			mustAppend(t, tp.Partitions()[2], plainBatch(1, 10), 0)
			mustAppend(t, tp.Partitions()[0], plainBatch(1, 10), 0)
			expect("forgotten 2 stays silent", fetch(id, 4, nil), map[int32][]int64{0: {3}})

			for _, tc := range []struct {
				name      string
				id, epoch int32
				want      *kerr.Error
			}{
				{"epoch from the past", id, 3, kerr.InvalidFetchSessionEpoch},
				{"epoch from the future", id, 99, kerr.InvalidFetchSessionEpoch},
				{"unknown session", id ^ 0x5a5a5a5a, 5, kerr.FetchSessionIDNotFound},
			} {
				resp := fetch(tc.id, tc.epoch, func(req *kmsg.FetchRequest) { addPart(req, tp, 0, 0) })
				if resp.ErrorCode != tc.want.Code || len(resp.Topics) != 0 {
					t.Fatalf("%s: error %d, %d topics, want %v and none", tc.name, resp.ErrorCode, len(resp.Topics), tc.want)
				}
			}
			// The refused requests did not move the session on.
			expect("after refused epochs", fetch(id, 5, func(req *kmsg.FetchRequest) { addPart(req, tp, 0, 4) }), nil)

			resp = fetch(id, -1, func(req *kmsg.FetchRequest) { addPart(req, tp, 0, 0) })
			if resp.SessionID != 0 {
				t.Fatalf("closing fetch answered with session %d", resp.SessionID)
			}
			expect("close", resp, map[int32][]int64{0: {0, 1, 2, 3}})
			if resp := fetch(id, 6, nil); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
				t.Fatalf("closed session: error %d, want FETCH_SESSION_ID_NOT_FOUND", resp.ErrorCode)
			}
		})
	}
}

func TestFetchLeaderEpochs(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	fresh := mustTopic(t, b, "epochs-fresh", 1)
	tp := mustTopic(t, b, "epochs", 1)
	p := tp.Partitions()[0]
	mustAppend(t, p, plainBatch(3, 10), 0) // epoch 0: offsets 0-2
	mustAppend(t, p, plainBatch(2, 10), 2) // epoch 2: offsets 3-4
	type want struct {
		code          *kerr.Error
		offsets       []int64
		div           [2]int64 // epoch, end offset; -1 -1 for none
		leaderEpoch   int32    // CurrentLeader.LeaderEpoch, -1 for none
		minTagVersion int16
	}
	tests := []struct {
		name       string
		tp         *partition.Topic
		offset     int64
		cur, last  int32
		minVersion int16
		want       want
	}{
		{"no epochs", tp, 0, -1, -1, 4, want{nil, span(0, 5), [2]int64{-1, -1}, -1, 0}},
		{"current epoch", tp, 3, 2, -1, 9, want{nil, span(3, 5), [2]int64{-1, -1}, -1, 0}},
		{"newer than ours, fresh log", fresh, 0, 1, -1, 9, want{kerr.UnknownLeaderEpoch, nil, [2]int64{-1, -1}, -1, 0}},
		{"newer than ours", tp, 0, 3, -1, 9, want{kerr.UnknownLeaderEpoch, nil, [2]int64{-1, -1}, -1, 0}},
		{"older than ours", tp, 0, 1, -1, 9, want{kerr.FencedLeaderEpoch, nil, [2]int64{-1, -1}, 2, 12}},
		{"last fetched epoch matches", tp, 3, -1, 0, 12, want{nil, span(3, 5), [2]int64{-1, -1}, -1, 0}},
		{"last fetched epoch unknown to us", tp, 4, -1, 1, 12, want{nil, nil, [2]int64{0, 3}, -1, 0}},
		{"offset past the epoch end", tp, 4, -1, 0, 12, want{nil, nil, [2]int64{0, 3}, -1, 0}},
		{"at the log end of the latest epoch", tp, 5, 2, 2, 12, want{nil, nil, [2]int64{-1, -1}, -1, 0}},
		{"last fetched epoch newer than ours", tp, 5, -1, 7, 12, want{kerr.OffsetOutOfRange, nil, [2]int64{-1, -1}, -1, 0}},
	}
	rc := dialRaw(t, b)
	for _, tc := range tests {
		for _, v := range []int16{tc.minVersion, 11, 12, 17} {
			if v < tc.minVersion {
				continue
			}
			req := newFetchReq(v)
			rp := addPart(req, tc.tp, 0, tc.offset)
			rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = tc.cur, tc.last
			got := mustPart(t, rc.roundTrip(req).(*kmsg.FetchResponse), tc.tp, 0)
			w := tc.want
			wantLeader := int32(-1)
			if w.leaderEpoch >= 0 && v >= w.minTagVersion {
				wantLeader = w.leaderEpoch
			}
			if got.ErrorCode != errCode(w.code) || !reflect.DeepEqual(offsetsIn(t, got.RecordBatches), w.offsets) ||
				int64(got.DivergingEpoch.Epoch) != w.div[0] || got.DivergingEpoch.EndOffset != w.div[1] ||
				got.CurrentLeader.LeaderEpoch != wantLeader {
				t.Fatalf("%s (v%d): error %d, offsets %v, diverging %+v, leader %+v; want %+v",
					tc.name, v, got.ErrorCode, offsetsIn(t, got.RecordBatches), got.DivergingEpoch, got.CurrentLeader, w)
			}
			if wantLeader >= 0 && got.CurrentLeader.LeaderID != b.cfg.NodeID {
				t.Fatalf("%s (v%d): current leader %d, want node %d", tc.name, v, got.CurrentLeader.LeaderID, b.cfg.NodeID)
			}
		}
	}
}

func TestFetchOffsetOutOfRange(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "out-of-range", 1)
	p := tp.Partitions()[0]
	mustAppend(t, p, plainBatch(3, 10), 0)
	mustAppend(t, p, plainBatch(2, 10), 0)
	if err := p.Log().SetLogStartOffset(3); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, b)
	tests := []struct {
		offset  int64
		code    *kerr.Error
		offsets []int64
	}{
		{6, kerr.OffsetOutOfRange, nil}, // beyond the log end
		{100, kerr.OffsetOutOfRange, nil},
		{5, nil, nil}, // at the log end: nothing yet
		{3, nil, span(3, 5)},
		{2, kerr.OffsetOutOfRange, nil}, // below the log start
		{0, kerr.OffsetOutOfRange, nil},
		{-1, kerr.OffsetOutOfRange, nil},
	}
	for _, tc := range tests {
		for _, v := range []int16{4, 17} {
			req := newFetchReq(v)
			addPart(req, tp, 0, tc.offset)
			got := mustPart(t, rc.roundTrip(req).(*kmsg.FetchResponse), tp, 0)
			wantHW := int64(5)
			if tc.code != nil {
				wantHW = -1
			}
			if got.ErrorCode != errCode(tc.code) || got.HighWatermark != wantHW || !reflect.DeepEqual(offsetsIn(t, got.RecordBatches), tc.offsets) {
				t.Fatalf("offset %d (v%d): %+v, want %v", tc.offset, v, got, tc.code)
			}
		}
	}
}

func TestFetchReadCommitted(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "read-committed", 1)
	p := tp.Partitions()[0]
	const pid = 4242
	ts := time.Now().UnixMilli()
	mustAppend(t, p, plainBatch(2, 10), 0)                                          // 0-1
	mustAppend(t, p, buildBatch(pid, 0, 0, attrTxn, ts, valueRecords(2, 10)...), 0) // 2-3, open transaction
	mustAppend(t, p, plainBatch(1, 10), 0)                                          // 4
	rc := dialRaw(t, b)
	fetch := func(v int16, committed bool, offset int64) kmsg.FetchResponseTopicPartition {
		t.Helper()
		return fetchPart0(t, rc, tp, v, committed, offset)
	}
	aborted := func(rp kmsg.FetchResponseTopicPartition) []int64 {
		if rp.AbortedTransactions == nil {
			return nil
		}
		out := []int64{}
		for _, a := range rp.AbortedTransactions {
			out = append(out, a.ProducerID, a.FirstOffset)
		}
		return out
	}
	for _, v := range []int16{4, 12, 17} {
		got := fetch(v, false, 0)
		if got.HighWatermark != 5 || got.LastStableOffset != 2 || got.AbortedTransactions != nil ||
			!reflect.DeepEqual(offsetsIn(t, got.RecordBatches), span(0, 5)) {
			t.Fatalf("v%d read_uncommitted, open txn: %+v", v, got)
		}
		got = fetch(v, true, 0)
		if got.LastStableOffset != 2 || !reflect.DeepEqual(aborted(got), []int64{}) ||
			!reflect.DeepEqual(offsetsIn(t, got.RecordBatches), span(0, 2)) {
			t.Fatalf("v%d read_committed, open txn: LSO %d aborted %v offsets %v", v, got.LastStableOffset, aborted(got), offsetsIn(t, got.RecordBatches))
		}
		if got = fetch(v, true, 2); got.ErrorCode != 0 || len(got.RecordBatches) != 0 {
			t.Fatalf("v%d read_committed at the LSO: %+v", v, got)
		}
	}

	marker := batch.AppendTxnMarker(nil, batch.TxnMarker{ProducerID: pid, ProducerEpoch: 0, Timestamp: ts, CoordinatorEpoch: 1})
	if _, err := p.Log().AppendControl(marker, 0); err != nil { // ABORT at 5
		t.Fatal(err)
	}
	p.Appended() // the node's step after an append: the high watermark follows
	for _, v := range []int16{4, 12, 17} {
		got := fetch(v, true, 0)
		if got.LastStableOffset != 6 || got.HighWatermark != 6 || !reflect.DeepEqual(aborted(got), []int64{pid, 2}) ||
			!reflect.DeepEqual(offsetsIn(t, got.RecordBatches), span(0, 6)) {
			t.Fatalf("v%d read_committed, aborted: LSO %d aborted %v offsets %v", v, got.LastStableOffset, aborted(got), offsetsIn(t, got.RecordBatches))
		}
		if got = fetch(v, true, 4); !reflect.DeepEqual(aborted(got), []int64{pid, 2}) {
			t.Fatalf("v%d read_committed from inside the aborted range: aborted %v", v, aborted(got))
		}
		if got = fetch(v, false, 0); got.AbortedTransactions != nil || got.LastStableOffset != 6 {
			t.Fatalf("v%d read_uncommitted after the abort: %+v", v, got)
		}
	}
}

func TestFetchResponseMaxBytes(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "max-bytes", 2)
	const batchValue = 250 << 10 // four batches fit in 1 MiB
	for _, p := range tp.Partitions() {
		for range 4 { // 1 MiB per partition
			mustAppend(t, p, plainBatch(1, batchValue), 0)
		}
	}
	tests := []struct {
		name                  string
		maxBytes, partitionMB int32
		want0, want1          []int64
	}{
		{"response limit below one batch", 100 << 10, 1 << 20, span(0, 1), nil},
		{"response limit of two batches", 600 << 10, 1 << 20, span(0, 2), nil},
		{"response limit beyond both", 50 << 20, 1 << 20, span(0, 4), span(0, 4)},
		{"partition limit below one batch", 50 << 20, 100 << 10, span(0, 1), nil},
		{"partition limit of two batches", 50 << 20, 600 << 10, span(0, 2), span(0, 2)},
		{"zero limits", 0, 0, span(0, 1), nil},
	}
	rc := dialRaw(t, b)
	for _, tc := range tests {
		for _, v := range []int16{4, 17} {
			req := newFetchReq(v)
			req.MaxBytes = tc.maxBytes
			addPart(req, tp, 0, 0).PartitionMaxBytes = tc.partitionMB
			addPart(req, tp, 1, 0).PartitionMaxBytes = tc.partitionMB
			resp := rc.roundTrip(req).(*kmsg.FetchResponse)
			got0, got1 := mustPart(t, resp, tp, 0), mustPart(t, resp, tp, 1)
			if o := offsetsIn(t, got0.RecordBatches); !reflect.DeepEqual(o, tc.want0) {
				t.Fatalf("%s (v%d): partition 0 offsets %v, want %v", tc.name, v, o, tc.want0)
			}
			if o := offsetsIn(t, got1.RecordBatches); !reflect.DeepEqual(o, tc.want1) || got1.ErrorCode != 0 || got1.HighWatermark != 4 {
				t.Fatalf("%s (v%d): partition 1 offsets %v error %d HW %d, want %v", tc.name, v, o, got1.ErrorCode, got1.HighWatermark, tc.want1)
			}
		}
	}
}

func TestFetchUnknownTopic(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	known := mustTopic(t, b, "known", 1)
	unknown := partition.NewTopic("unknown", [16]byte{0xAB})
	rc := dialRaw(t, b)
	tests := []struct {
		name      string
		version   int16
		tp        *partition.Topic
		partition int32
		want      *kerr.Error
	}{
		{"unknown name", 12, unknown, 0, kerr.UnknownTopicOrPartition},
		{"unknown name v4", 4, unknown, 0, kerr.UnknownTopicOrPartition},
		{"unknown id", 13, unknown, 0, kerr.UnknownTopicID},
		{"unknown id v17", 17, unknown, 0, kerr.UnknownTopicID},
		{"unknown partition by name", 12, known, 1, kerr.UnknownTopicOrPartition},
		{"unknown partition by id", 17, known, 1, kerr.UnknownTopicOrPartition},
		{"negative partition by id", 17, known, -1, kerr.UnknownTopicOrPartition},
	}
	for _, tc := range tests {
		req := newFetchReq(tc.version)
		req.MaxWaitMillis = 5000 // an error answers at once
		addPart(req, tc.tp, tc.partition, 0)
		addPart(req, known, 0, 0)
		start := time.Now()
		resp := rc.roundTrip(req).(*kmsg.FetchResponse)
		if took := time.Since(start); took > 4*time.Second {
			t.Fatalf("%s: took %v, an error must end the long poll", tc.name, took)
		}
		got := mustPart(t, resp, tc.tp, tc.partition)
		if got.ErrorCode != tc.want.Code || got.HighWatermark != -1 || len(got.RecordBatches) != 0 {
			t.Fatalf("%s: %+v, want %v", tc.name, got, tc.want)
		}
		if ok := mustPart(t, resp, known, 0); ok.ErrorCode != 0 {
			t.Fatalf("%s: the known partition failed too: %+v", tc.name, ok)
		}
	}
}

// TestFetchSessionMaintenance: expiry and eviction never wait for a session
// that is serving a long poll (they used to block the whole session cache
// for up to MaxWait), and they drop only idle sessions.
func TestFetchSessionMaintenance(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "session-maintenance", 1)
	rc := dialRaw(t, b)
	req := newFetchReq(17)
	req.SessionID, req.SessionEpoch = 0, 0
	addPart(req, tp, 0, 0)
	id := rc.roundTrip(req).(*kmsg.FetchResponse).SessionID
	if id == 0 {
		t.Fatal("no session")
	}
	req = newFetchReq(17)
	req.SessionID, req.SessionEpoch, req.MaxWaitMillis = id, 1, 5000
	corr := rc.send(req)
	testutil.CheckFor(t, 5*time.Second, testutil.True("a fetch parked", func() bool { return waiters(tp.Partitions()[0]) > 0 }))

	start := time.Now()
	b.sessions.expire(time.Now().Add(time.Hour)) // the busy session looks idle by its clock
	other := newFetchSessions(1)
	busy := other.create(time.Now().Add(-time.Hour))
	busy.mu.Lock()
	if s := other.create(time.Now()); s != nil {
		t.Fatal("create evicted a session in use")
	}
	busy.mu.Unlock()
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("expiry and eviction waited %v for a long poll", took)
	}
	if b.sessions.get(id) == nil {
		t.Fatal("the session serving a fetch was expired")
	}
	mustAppend(t, tp.Partitions()[0], plainBatch(1, 10), 0) // end the long poll
	if resp := rc.recv(req, corr).(*kmsg.FetchResponse); resp.ErrorCode != 0 || listedParts(resp) != 1 {
		t.Fatalf("long poll: error %d, %d partitions", resp.ErrorCode, listedParts(resp))
	}

	// Idle sessions go: by expiry, and by eviction when the cache is full.
	b.sessions.expire(time.Now().Add(fetchSessionIdle + time.Minute))
	if b.sessions.get(id) != nil {
		t.Fatal("an idle session survived expiry")
	}
	if s := other.create(time.Now()); s == nil || other.get(busy.id) != nil {
		t.Fatal("a full cache did not evict its idle session")
	}
	if s := other.create(time.Now()); s != nil {
		t.Fatal("a full cache of fresh sessions made room")
	}
}

// An append that lands after a long-poll Fetch read its partitions and
// before it registered to wait has no signal left to send: the fetch
// sees it in the partition's wake count and answers at once. It used to
// sleep out its MaxWait, which a follower's fetch turned into a 500 ms
// stall of every acks=all write waiting for it (replica.fetch.wait.max.ms).
func TestFetchLongPollCatchesAnAppendBeforeItWaits(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "long-poll-race", 1)
	p := tp.Partitions()[0]
	var once sync.Once
	hook := func() {
		once.Do(func() {
			if _, _, err := p.AppendProduce(plainBatch(2, 10)); err != nil {
				t.Error(err)
			}
			p.Appended()
		})
	}
	b.fetchParking.Store(&hook)
	req := newFetchReq(17)
	req.MaxWaitMillis = 5000
	addPart(req, tp, 0, 0)
	start := time.Now()
	resp := dialRaw(t, b).roundTrip(req).(*kmsg.FetchResponse)
	if took := time.Since(start); took >= 2*time.Second {
		t.Fatalf("fetch took %v with the append made before it waited, want well under MaxWait", took)
	}
	if got := offsetsIn(t, mustPart(t, resp, tp, 0).RecordBatches); !reflect.DeepEqual(got, []int64{0, 1}) {
		t.Fatalf("offsets %v, want [0 1]", got)
	}
}
