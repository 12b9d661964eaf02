package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/vfs"
	"github.com/kmirror/kmirror/partition"
)

// mustTopic creates a topic directly, bypassing any admin API.
func mustTopic(t testing.TB, b *Broker, name string, partitions int32) *partition.Topic {
	t.Helper()
	tp, err := b.partitions.Create(name, partitions, nil, [16]byte{}, "", partition.Placement{RF: 1})
	if err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	return tp
}

// Attribute bits of a RecordBatch.
const (
	attrTxn     int16 = 0x10
	attrControl int16 = 0x20
)

// buildBatch encodes an uncompressed v2 batch with a correct length and
// CRC32C: the producer fields and records are the caller's, offset deltas
// are the record indexes.
func buildBatch(pid int64, epoch int16, seq int32, attrs int16, baseTS int64, recs ...kmsg.Record) []byte {
	var body []byte
	maxTS := baseTS
	for i := range recs {
		r := recs[i]
		r.OffsetDelta, r.Length = int32(i), 0
		r.Length = int32(len(r.AppendTo(nil)) - 1) // everything after a 1-byte varint 0
		body = r.AppendTo(body)
		maxTS = max(maxTS, baseTS+r.TimestampDelta64)
	}
	rb := kmsg.RecordBatch{
		Length: int32(batch.HeaderSize - batch.LogOverhead + len(body)), PartitionLeaderEpoch: -1, Magic: 2,
		Attributes: attrs, LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: baseTS, MaxTimestamp: maxTS,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: int32(len(recs)), Records: body,
	}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[17:], batch.Checksum(raw[21:]))
	return raw
}

// valueRecords returns n records with a key and a value of size bytes.
func valueRecords(n, size int) []kmsg.Record {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i].Key = fmt.Appendf(nil, "k%d", i)
		recs[i].Value = bytes.Repeat([]byte{byte('a' + i%26)}, size)
		recs[i].TimestampDelta64 = int64(i)
	}
	return recs
}

// plainBatch is a non-idempotent batch of n records.
func plainBatch(n, size int) []byte {
	return buildBatch(-1, -1, -1, 0, time.Now().UnixMilli(), valueRecords(n, size)...)
}

func produceReq(version, acks int16, tp *partition.Topic, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = tp.Name(), tp.ID()
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// onlyPartition returns the single partition of a one-partition response.
func onlyPartition(t testing.TB, resp *kmsg.ProduceResponse) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("want one topic with one partition, got %+v", resp.Topics)
	}
	return resp.Topics[0].Partitions[0]
}

func initProducerID(t testing.TB, rc *rawConn) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	resp := rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 || resp.ProducerID < 0 {
		t.Fatalf("InitProducerId: error %d, id %d", resp.ErrorCode, resp.ProducerID)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

func TestProduceCodecRoundTrip(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tests := []struct {
		name  string
		codec kgo.CompressionCodec
		want  batch.Codec
	}{
		{"none", kgo.NoCompression(), batch.CodecNone},
		{"gzip", kgo.GzipCompression(), batch.CodecGzip},
		{"snappy", kgo.SnappyCompression(), batch.CodecSnappy},
		{"lz4", kgo.Lz4Compression(), batch.CodecLz4},
		{"zstd", kgo.ZstdCompression(), batch.CodecZstd},
	}
	for _, tc := range tests {
		t.Run("codec="+tc.name, func(t *testing.T) {
			t.Parallel()
			name := "codec-" + tc.name
			tp := mustTopic(t, b, name, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p := newTestClient(t, b, kgo.DefaultProduceTopic(name), kgo.ProducerBatchCompression(tc.codec),
				kgo.ProducerLinger(50*time.Millisecond))
			const n = 300
			base := time.UnixMilli(time.Now().UnixMilli() - 10_000)
			var sent []*kgo.Record
			for i := range n {
				r := &kgo.Record{
					Key:       fmt.Appendf(nil, "key-%d", i),
					Value:     []byte(strings.Repeat(fmt.Sprintf("value %d of %s ", i, tc.name), 4)),
					Timestamp: base.Add(time.Duration(i) * time.Millisecond),
				}
				if i%3 == 0 {
					r.Headers = []kgo.RecordHeader{{Key: "h1", Value: []byte("v1")}, {Key: fmt.Sprint("h", i), Value: nil}}
				}
				if i%7 == 0 {
					r.Key = nil
				}
				sent = append(sent, r)
			}
			if err := p.ProduceSync(ctx, sent...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			// The stored batches carry the codec: the broker kept the
			// producer's bytes.
			raw, _, err := tp.Partitions()[0].Log().Read(0, 1<<30, tp.Partitions()[0].Log().HighWatermark(), nil)
			if err != nil {
				t.Fatal(err)
			}
			it := batch.NewIterator(raw)
			for bt, ok := it.Next(); ok; bt, ok = it.Next() {
				if bt.Codec() != tc.want {
					t.Fatalf("stored batch at %d has codec %v, want %v", bt.BaseOffset(), bt.Codec(), tc.want)
				}
			}
			c := newTestClient(t, b, kgo.ConsumeTopics(name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			var got []*kgo.Record
			for len(got) < n {
				fs := c.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					t.Fatalf("after %d records: %v", len(got), err)
				}
				got = append(got, fs.Records()...)
			}
			if len(got) != n {
				t.Fatalf("got %d records, want %d", len(got), n)
			}
			for i, r := range got {
				w := sent[i]
				if r.Offset != int64(i) || !bytes.Equal(r.Key, w.Key) || (r.Key == nil) != (w.Key == nil) ||
					!bytes.Equal(r.Value, w.Value) || !r.Timestamp.Equal(w.Timestamp) || len(r.Headers) != len(w.Headers) {
					t.Fatalf("record %d: got offset %d key %q value %q ts %v headers %v, want key %q value %q ts %v headers %v",
						i, r.Offset, r.Key, r.Value, r.Timestamp, r.Headers, w.Key, w.Value, w.Timestamp, w.Headers)
				}
				for j, h := range r.Headers {
					if h.Key != w.Headers[j].Key || !bytes.Equal(h.Value, w.Headers[j].Value) {
						t.Fatalf("record %d header %d: %+v, want %+v", i, j, h, w.Headers[j])
					}
				}
			}
		})
	}
}

func TestProduceIdempotentRetry(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "idem", 1)
	l := tp.Partitions()[0].Log()
	rc := dialRaw(t, b)
	pid, epoch := initProducerID(t, rc)
	ts := time.Now().UnixMilli()
	first := buildBatch(pid, epoch, 0, 0, ts, valueRecords(3, 10)...)
	second := buildBatch(pid, epoch, 3, 0, ts, valueRecords(2, 10)...)
	steps := []struct {
		name    string
		records []byte
		base    int64
		leo     int64
	}{
		{"first", first, 0, 3},
		{"retry of first", first, 0, 3},
		{"second", second, 3, 5},
		{"retry of second", second, 3, 5},
		{"late retry of first", first, 0, 5},
	}
	for _, s := range steps {
		for _, v := range []int16{3, 9} {
			resp := rc.roundTrip(produceReq(v, -1, tp, 0, bytes.Clone(s.records))).(*kmsg.ProduceResponse)
			sp := onlyPartition(t, resp)
			if sp.ErrorCode != 0 || sp.BaseOffset != s.base {
				t.Fatalf("%s (v%d): error %d base offset %d, want 0 and %d", s.name, v, sp.ErrorCode, sp.BaseOffset, s.base)
			}
			if got := l.LogEndOffset(); got != s.leo {
				t.Fatalf("%s (v%d): log end %d, want %d", s.name, v, got, s.leo)
			}
		}
	}
	if got := b.Stats().ProduceBatches.Load(); got != 2 {
		t.Fatalf("ProduceBatches = %d, want 2 (retries are not appends)", got)
	}
}

func TestProduceSequenceErrors(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	ts := time.Now().UnixMilli()
	tests := []struct {
		name   string
		epochs [2]int16 // producer epoch of the first and the second batch
		seqs   [2]int32
		want   *kerr.Error
	}{
		{"in order", [2]int16{0, 0}, [2]int32{0, 3}, nil},
		{"gap in sequence", [2]int16{0, 0}, [2]int32{0, 5}, kerr.OutOfOrderSequenceNumber},
		{"sequence going back", [2]int16{0, 0}, [2]int32{0, 1}, kerr.OutOfOrderSequenceNumber},
		{"stale epoch", [2]int16{1, 0}, [2]int32{0, 3}, kerr.InvalidProducerEpoch},
		{"new epoch not at 0", [2]int16{0, 1}, [2]int32{0, 3}, kerr.OutOfOrderSequenceNumber},
		{"new epoch at 0", [2]int16{0, 1}, [2]int32{0, 0}, nil},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tp := mustTopic(t, b, fmt.Sprintf("seq-%d", i), 1)
			rc := dialRaw(t, b)
			pid, _ := initProducerID(t, rc)
			recs := valueRecords(3, 8)
			resp := rc.roundTrip(produceReq(9, -1, tp, 0, buildBatch(pid, tc.epochs[0], tc.seqs[0], 0, ts, recs...))).(*kmsg.ProduceResponse)
			if sp := onlyPartition(t, resp); sp.ErrorCode != 0 {
				t.Fatalf("first batch: error %d", sp.ErrorCode)
			}
			resp = rc.roundTrip(produceReq(9, -1, tp, 0, buildBatch(pid, tc.epochs[1], tc.seqs[1], 0, ts, recs...))).(*kmsg.ProduceResponse)
			sp := onlyPartition(t, resp)
			if sp.ErrorCode != errCode(tc.want) {
				t.Fatalf("second batch: error %d (%v), want %v", sp.ErrorCode, kerr.ErrorForCode(sp.ErrorCode), tc.want)
			}
			wantLEO := int64(6)
			if tc.want != nil {
				wantLEO = 3
				if sp.BaseOffset != -1 {
					t.Fatalf("refused batch has base offset %d, want -1", sp.BaseOffset)
				}
			}
			if got := tp.Partitions()[0].Log().LogEndOffset(); got != wantLEO {
				t.Fatalf("log end %d, want %d", got, wantLEO)
			}
		})
	}
}

func TestProduceAcks(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "acks", 1)
	l := tp.Partitions()[0].Log()
	rc := dialRaw(t, b)

	// acks=0: appended, never answered. The next request on the same
	// connection gets the next frame, so a stray Produce answer would show
	// up as a wrong correlation id in recv.
	rc.send(produceReq(9, 0, tp, 0, plainBatch(2, 10)))
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	if resp := rc.roundTrip(av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions after acks=0: error %d", resp.ErrorCode)
	}
	if got := l.LogEndOffset(); got != 2 {
		t.Fatalf("log end after acks=0: %d, want 2", got)
	}

	for _, acks := range []int16{2, -2, 5} {
		resp := rc.roundTrip(produceReq(9, acks, tp, 0, plainBatch(1, 10))).(*kmsg.ProduceResponse)
		if sp := onlyPartition(t, resp); sp.ErrorCode != kerr.InvalidRequiredAcks.Code {
			t.Fatalf("acks=%d: error %d, want INVALID_REQUIRED_ACKS", acks, sp.ErrorCode)
		}
	}
	for _, acks := range []int16{1, -1} {
		resp := rc.roundTrip(produceReq(9, acks, tp, 0, plainBatch(1, 10))).(*kmsg.ProduceResponse)
		if sp := onlyPartition(t, resp); sp.ErrorCode != 0 {
			t.Fatalf("acks=%d: error %d", acks, sp.ErrorCode)
		}
	}
	if got := l.LogEndOffset(); got != 4 {
		t.Fatalf("log end %d, want 4 (refused batches appended?)", got)
	}
}

func TestProduceRejects(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	plain := mustTopic(t, b, "rejects", 2)
	mirrored := mustTopic(t, b, "rejects-mirrored", 1)
	if err := b.SetTopicsMirror([]string{mirrored.Name()}, "m"); err != nil {
		t.Fatal(err)
	}
	unknown := partition.NewTopic("no-such-topic", [16]byte{1, 2, 3})

	corrupt := plainBatch(2, 10)
	corrupt[len(corrupt)-1] ^= 0xFF
	huge := plainBatch(1, DefaultMessageMaxBytes+100)
	withMagic := func(m byte) []byte {
		b := plainBatch(1, 10)
		b[16] = m // the magic byte lies before the CRC's range
		return b
	}
	// resealed patches a valid batch and fixes its CRC: the bytes are what
	// a buggy client would send, checksummed as it would.
	resealed := func(patch func(b []byte)) []byte {
		b := plainBatch(3, 10)
		patch(b)
		binary.BigEndian.PutUint32(b[17:], batch.Checksum(b[21:]))
		return b
	}
	gzipGarbage := resealed(func(b []byte) { b[22] |= 1 }) // codec gzip over plain records
	codec7 := resealed(func(b []byte) { b[22] |= 7 })
	garbageRecords := resealed(func(b []byte) {
		for i := batch.HeaderSize; i < len(b); i++ {
			b[i] = 0xff
		}
	})
	// The second record's offset delta (after its length and attributes
	// varints and its timestamp delta) is 1 in a valid batch: make it 2.
	badDelta := resealed(func(b []byte) {
		rec := b[batch.HeaderSize:]
		_, n := binary.Varint(rec)
		first, _ := binary.Varint(rec)
		second := rec[n+int(first):]
		_, l := binary.Varint(second) // length
		pos := l + 1                  // attributes
		_, ts := binary.Varint(second[pos:])
		second[pos+ts] = 4 // zigzag varint of 2
	})

	tests := []struct {
		name      string
		version   int16
		tp        *partition.Topic
		partition int32
		records   []byte
		want      int16
		wantMsg   bool
	}{
		{"ok v3", 3, plain, 0, plainBatch(1, 10), 0, false},
		{"ok v13 by topic id", 13, plain, 1, plainBatch(1, 10), 0, false},
		{"corrupt crc", 9, plain, 0, corrupt, kerr.CorruptMessage.Code, true},
		{"shorter than a header", 9, plain, 0, plainBatch(1, 10)[:40], kerr.CorruptMessage.Code, true},
		{"unknown magic", 9, plain, 0, withMagic(3), kerr.CorruptMessage.Code, true},
		{"legacy magic", 9, plain, 0, withMagic(1), kerr.UnsupportedForMessageFormat.Code, true},
		{"gzip with a garbage payload", 9, plain, 0, gzipGarbage, kerr.CorruptMessage.Code, true},
		{"compression codec 7", 9, plain, 0, codec7, kerr.CorruptMessage.Code, true},
		{"garbage records", 9, plain, 0, garbageRecords, kerr.CorruptMessage.Code, true},
		{"offset deltas out of order", 9, plain, 0, badDelta, kerr.InvalidRecord.Code, true},
		{"two batches", 9, plain, 0, append(plainBatch(1, 10), plainBatch(1, 10)...), kerr.InvalidRecord.Code, true},
		{"control batch", 9, plain, 0, buildBatch(-1, -1, -1, attrControl, 0, valueRecords(1, 4)...), kerr.InvalidRecord.Code, true},
		{"too large", 9, plain, 0, huge, kerr.MessageTooLarge.Code, true},
		{"unknown topic", 9, unknown, 0, plainBatch(1, 10), kerr.UnknownTopicOrPartition.Code, false},
		{"unknown topic id", 13, unknown, 0, plainBatch(1, 10), kerr.UnknownTopicID.Code, false},
		{"unknown partition", 9, plain, 2, plainBatch(1, 10), kerr.UnknownTopicOrPartition.Code, false},
		{"negative partition", 9, plain, -1, plainBatch(1, 10), kerr.UnknownTopicOrPartition.Code, false},
		{"mirror topic", 9, mirrored, 0, plainBatch(1, 10), kerr.PolicyViolation.Code, true},
		{"mirror topic v13", 13, mirrored, 0, plainBatch(1, 10), kerr.PolicyViolation.Code, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rc := dialRaw(t, b)
			resp := rc.roundTrip(produceReq(tc.version, -1, tc.tp, tc.partition, tc.records)).(*kmsg.ProduceResponse)
			sp := onlyPartition(t, resp)
			if sp.ErrorCode != tc.want {
				t.Fatalf("error %d (%v), want %d (%v)", sp.ErrorCode, kerr.ErrorForCode(sp.ErrorCode), tc.want, kerr.ErrorForCode(tc.want))
			}
			if tc.wantMsg && (sp.ErrorMessage == nil || *sp.ErrorMessage == "") {
				t.Fatalf("want an error message")
			}
			if want := map[string]string{"offset deltas out of order": "record 1 of the batch has offset delta 2",
				"compression codec 7": "codec", "gzip with a garbage payload": "gzip"}[tc.name]; want != "" &&
				!strings.Contains(*sp.ErrorMessage, want) {
				t.Fatalf("message %q lacks %q", *sp.ErrorMessage, want)
			}
			// The refusal of a mirror topic names the mirror: with
			// POLICY_VIOLATION's generic name, the message is what tells
			// the operator why.
			const roMsg = "topic rejects-mirrored is mirrored by cluster mirror m and read-only until failover"
			if tc.tp == mirrored && *sp.ErrorMessage != roMsg {
				t.Fatalf("message %q, want %q", *sp.ErrorMessage, roMsg)
			}
			rt := resp.Topics[0]
			if tc.version >= 13 && rt.TopicID != tc.tp.ID() || tc.version < 13 && rt.Topic != tc.tp.Name() {
				t.Fatalf("response names topic %q / %x", rt.Topic, rt.TopicID)
			}
			if tc.want != 0 && sp.BaseOffset != -1 {
				t.Fatalf("refused partition has base offset %d", sp.BaseOffset)
			}
		})
	}
	if got := mirrored.Partitions()[0].Log().LogEndOffset(); got != 0 {
		t.Fatalf("mirror topic log end %d, want 0", got)
	}
}

// TestProduceBadBatchesLogged: a client that keeps sending bad batches is
// warned about once a minute per client id, never at ERROR (the node is
// fine), each answer still carrying its message.
func TestProduceBadBatchesLogged(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	b := newTestBroker(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	tp := mustTopic(t, b, "bad-batches", 1)
	bad := plainBatch(1, 10)
	bad[16] = 3
	rc := dialRaw(t, b)
	for range 5 {
		sp := onlyPartition(t, rc.roundTrip(produceReq(9, -1, tp, 0, bad)).(*kmsg.ProduceResponse))
		if sp.ErrorCode != kerr.CorruptMessage.Code || sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, "magic 3") {
			t.Fatalf("bad magic: %v %v", kerr.ErrorForCode(sp.ErrorCode), sp.ErrorMessage)
		}
	}
	if n, errs := logs.count("produce refused a bad record batch"), logs.count("level=ERROR"); n != 1 || errs != 0 {
		t.Fatalf("%d warnings and %d ERROR lines for 5 bad batches from one client, want 1 and 0", n, errs)
	}
}

// warnLimiter lets one warning a minute through per key, counting the
// ones held back.
func TestWarnLimiter(t *testing.T) {
	t.Parallel()
	var w warnLimiter
	now := time.Unix(1000, 0)
	if ok, _ := w.allow("a", now); !ok {
		t.Fatal("first warning held back")
	}
	for i := range 3 {
		if ok, _ := w.allow("a", now.Add(time.Duration(i)*time.Second)); ok {
			t.Fatal("a repeat within the minute let through")
		}
	}
	if ok, _ := w.allow("b", now); !ok {
		t.Fatal("another key held back")
	}
	if ok, held := w.allow("a", now.Add(warnEvery)); !ok || held != 3 {
		t.Fatalf("after a minute: %v, held %d, want let through with 3 held", ok, held)
	}
}

// A transactional id keeps its producer id across InitProducerId calls at
// every version, each call bumping the epoch (fencing the previous
// instance); a timeout above transaction.max.timeout.ms is refused.
func TestProduceTransactionalInitProducerID(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	rc := dialRaw(t, b)
	pid := int64(-1)
	for i, v := range []int16{0, 2, 4, 5} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = v
		id := "txn-a"
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		resp := rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
		if pid < 0 {
			pid = resp.ProducerID
		}
		if resp.ErrorCode != 0 || resp.ProducerID != pid || resp.ProducerEpoch != int16(i) {
			t.Fatalf("v%d: error %d id %d epoch %d, want id %d at epoch %d", v, resp.ErrorCode, resp.ProducerID,
				resp.ProducerEpoch, pid, i)
		}
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	id := "txn-b"
	req.TransactionalID, req.TransactionTimeoutMillis = &id, int32(16*time.Minute/time.Millisecond)
	if resp := rc.roundTrip(req).(*kmsg.InitProducerIDResponse); resp.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("a 16 min timeout: error %d, want INVALID_TRANSACTION_TIMEOUT", resp.ErrorCode)
	}
}

// TestProduceDiskFull: a produce the disk has no room for answers
// KAFKA_STORAGE_ERROR with the reason, warned about once a minute per
// partition (not ERROR per batch), and the partition takes produces again
// by itself once space is back: no restart.
func TestProduceDiskFull(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	ffs := vfs.NewFaultFS(vfs.Default)
	b := newTestBroker(t, func(c *Config) {
		c.Log.FS = ffs
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	tp := mustTopic(t, b, "disk-full", 1)
	rc := dialRaw(t, b)
	produce := func() kmsg.ProduceResponseTopicPartition {
		return onlyPartition(t, rc.roundTrip(produceReq(9, -1, tp, 0, plainBatch(1, 10))).(*kmsg.ProduceResponse))
	}
	if sp := produce(); sp.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	ffs.DiskFull(10)
	for range 3 {
		sp := produce()
		if sp.ErrorCode != kerr.KafkaStorageError.Code || sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, "no space") {
			t.Fatalf("produce on a full disk: %v %v", kerr.ErrorForCode(sp.ErrorCode), sp.ErrorMessage)
		}
	}
	if n, errs := logs.count("the disk is full"), logs.count("level=ERROR"); n != 1 || errs != 0 {
		t.Fatalf("%d full-disk warnings and %d ERROR lines for 3 refused produces, want 1 and 0", n, errs)
	}
	ffs.DiskFull(-1)
	if sp := produce(); sp.ErrorCode != 0 || sp.BaseOffset != 1 {
		t.Fatalf("produce once space is back: %v at %d, want offset 1", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
	}
}

// Stats.ProduceErrors (kmirror_broker_produce_errors_total) counts Produce
// partitions answered with an error, and nothing else: it used to count
// config API errors too.
func TestProduceErrorsStat(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "counted", 1)
	rc := dialRaw(t, b)
	if sp := onlyPartition(t, rc.roundTrip(produceReq(9, -1, tp, 3, plainBatch(1, 10))).(*kmsg.ProduceResponse)); sp.ErrorCode == 0 {
		t.Fatal("produce to a partition that does not exist succeeded")
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "missing"
	req.Resources = append(req.Resources, rr)
	if resp := rc.roundTrip(req).(*kmsg.DescribeConfigsResponse); resp.Resources[0].ErrorCode == 0 {
		t.Fatal("DescribeConfigs of a missing topic succeeded")
	}
	if got := b.Stats().ProduceErrors.Load(); got != 1 {
		t.Fatalf("ProduceErrors = %d, want 1 (the produce, not the config error)", got)
	}
}
