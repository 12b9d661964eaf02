package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/codec"
	"github.com/kmirror/kmirror/partition"
)

// keyedRecords returns n records, those at the indexes in keyless without
// a key (null, not empty).
func keyedRecords(n int, keyless ...int) []kmsg.Record {
	recs := valueRecords(n, 8)
	for _, i := range keyless {
		recs[i].Key = nil
	}
	return recs
}

// codecBatch is buildBatch's non-idempotent batch with its records
// section compressed with c.
func codecBatch(t testing.TB, c batch.Codec, recs []kmsg.Record) []byte {
	t.Helper()
	plain := buildBatch(-1, -1, -1, 0, time.Now().UnixMilli(), recs...)
	if c == batch.CodecNone {
		return plain
	}
	raw, err := codec.Compress(c, plain[batch.HeaderSize:], slices.Clone(plain[:batch.HeaderSize]))
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-batch.LogOverhead))
	binary.BigEndian.PutUint16(raw[21:], uint16(c))
	binary.BigEndian.PutUint32(raw[17:], batch.Checksum(raw[21:]))
	return raw
}

// compactedTopic creates a topic with the given cleanup.policy.
func compactedTopic(t testing.TB, b *Broker, name, policy string) *partition.Topic {
	t.Helper()
	tp, err := b.partitions.Create(name, 1, map[string]string{"cleanup.policy": policy}, [16]byte{}, "", partition.Placement{RF: 1})
	if err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	return tp
}

// TestProduceKeylessToCompactedTopic: Kafka's LogValidator refuses a
// record without a key on a compacted topic. The whole batch is refused
// with INVALID_RECORD, one RecordErrors entry per keyless record (its
// index in the batch, Kafka's message) and Kafka's summary as the
// partition's error message; nothing is appended. Compressed batches are
// read too; keyed batches and non-compacted topics are accepted.
func TestProduceKeylessToCompactedTopic(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	rc := dialRaw(t, b)
	tests := []struct {
		name    string
		policy  string // "" is delete, the default
		codec   batch.Codec
		n       int
		keyless []int
	}{
		{"compact/none", "compact", batch.CodecNone, 100, []int{0, 7, 13, 21, 34, 50, 64, 77, 88, 99}},
		{"compact/lz4", "compact", batch.CodecLz4, 10, []int{3}},
		{"compact/zstd", "compact", batch.CodecZstd, 10, []int{1, 2, 9}},
		{"compact,delete/gzip", "compact,delete", batch.CodecGzip, 5, []int{4}},
		{"compact/all keyed", "compact", batch.CodecZstd, 10, nil},
		{"delete/keyless", "", batch.CodecNone, 10, []int{0, 1, 2}},
		{"delete/keyless lz4", "delete", batch.CodecLz4, 10, []int{5}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("keys-%d", i)
			tp := mustTopic(t, b, name, 1)
			if tc.policy != "" {
				tp = compactedTopic(t, b, name+"-c", tc.policy)
			}
			raw := codecBatch(t, tc.codec, keyedRecords(tc.n, tc.keyless...))
			for _, v := range []int16{8, 9, 13} {
				sp := onlyPartition(t, rc.roundTrip(produceReq(v, -1, tp, 0, raw)).(*kmsg.ProduceResponse))
				if tc.policy == "" || tc.policy == "delete" || len(tc.keyless) == 0 {
					if sp.ErrorCode != 0 || len(sp.ErrorRecords) != 0 {
						t.Fatalf("v%d: error %d, %d record errors; want the batch accepted", v, sp.ErrorCode, len(sp.ErrorRecords))
					}
					continue
				}
				if sp.ErrorCode != kerr.InvalidRecord.Code || sp.BaseOffset != -1 {
					t.Fatalf("v%d: error %d at %d, want INVALID_RECORD at -1", v, sp.ErrorCode, sp.BaseOffset)
				}
				msg := "Compacted topic cannot accept message without key in topic partition " + tp.Name() + "-0"
				var got []int
				for _, re := range sp.ErrorRecords {
					got = append(got, int(re.RelativeOffset))
					if re.ErrorMessage == nil || *re.ErrorMessage != msg {
						t.Errorf("v%d: record %d message %v, want %q", v, re.RelativeOffset, re.ErrorMessage, msg)
					}
				}
				if !slices.Equal(got, tc.keyless) {
					t.Errorf("v%d: record errors at %v, want %v", v, got, tc.keyless)
				}
				var shown []string
				for _, k := range tc.keyless[:min(3, len(tc.keyless))] {
					shown = append(shown, fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", k, msg))
				}
				want := fmt.Sprintf("One or more records have been rejected due to %d record errors in total, "+
					"and only showing the first three errors at most: [%s]", len(tc.keyless), strings.Join(shown, ", "))
				if sp.ErrorMessage == nil || *sp.ErrorMessage != want {
					t.Errorf("v%d: message %v\nwant %q", v, sp.ErrorMessage, want)
				}
			}
			wantEnd := int64(0)
			if tc.policy == "" || tc.policy == "delete" || len(tc.keyless) == 0 {
				wantEnd = 3 * int64(tc.n)
			}
			if end := tp.Partitions()[0].Log().LogEndOffset(); end != wantEnd {
				t.Errorf("log end %d, want %d", end, wantEnd)
			}
		})
	}
}

// TestProduceKeylessCompactedKgo: a franz-go producer batching keyed and
// keyless records to a compacted topic gets INVALID_RECORD for every
// record of the refused batch (kgo fails the batch; it does not read
// RecordErrors), and keyed records produced alone are stored.
func TestProduceKeylessCompactedKgo(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := compactedTopic(t, b, "kgo-compact", "compact")
	cl := newTestClient(t, b, kgo.ProducerLinger(time.Minute), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.DefaultProduceTopic(tp.Name()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	produce := func(recs []*kgo.Record) []error {
		errs := make([]error, len(recs))
		done := make(chan struct{}, len(recs))
		for i, r := range recs {
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) { errs[i] = err; done <- struct{}{} })
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for range recs {
			<-done
		}
		return errs
	}
	var mixed []*kgo.Record
	for i := range 10 {
		r := &kgo.Record{Value: []byte("v")}
		if i%3 != 0 {
			r.Key = fmt.Appendf(nil, "k%d", i)
		}
		mixed = append(mixed, r)
	}
	for i, err := range produce(mixed) {
		if !errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("record %d of the mixed batch: %v, want INVALID_RECORD", i, err)
		}
	}
	if end := tp.Partitions()[0].Log().LogEndOffset(); end != 0 {
		t.Fatalf("log end %d after the refused batch, want 0", end)
	}
	keyed := []*kgo.Record{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}
	for i, err := range produce(keyed) {
		if err != nil {
			t.Errorf("keyed record %d: %v", i, err)
		}
	}
	if end := tp.Partitions()[0].Log().LogEndOffset(); end != 2 {
		t.Fatalf("log end %d, want 2", end)
	}
}

// TestMirrorAppendKeepsKeylessRecords: the keyless check is the Produce
// path's alone. A compacted mirror topic's fetcher appends (through
// MirrorPartition, as fetch does) store what the source accepted, keyless
// records included, without reading the records.
func TestMirrorAppendKeepsKeylessRecords(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	if err := b.CreateMirrorTopic("mirrored", [16]byte{1}, 1, "m1"); err != nil {
		t.Fatal(err)
	}
	tp := b.partitions.Topic("mirrored")
	if err := b.partitions.SetConfigs(tp, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	if !tp.Partitions()[0].Compact() {
		t.Fatal("the mirror topic is not compacted")
	}
	mp, err := b.partitions.MirrorPartition("mirrored", 0)
	if err != nil {
		t.Fatal(err)
	}
	raw := codecBatch(t, batch.CodecLz4, keyedRecords(10, 0, 5, 9))
	if _, err := mp.(*partition.Partition).Log().AppendMirror(raw); err != nil {
		t.Fatalf("mirror append of keyless records: %v", err)
	}
	if end := mp.(*partition.Partition).Log().LogEndOffset(); end != 10 {
		t.Fatalf("log end %d, want 10", end)
	}
}
