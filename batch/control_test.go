package batch

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestTxnMarkerMatchesKmsg(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{false, true} {
		m := TxnMarker{BaseOffset: 77, PartitionLeaderEpoch: 4, Timestamp: 1_700_000_000_123,
			ProducerID: 9001, ProducerEpoch: 3, CoordinatorEpoch: 12, Commit: commit}
		raw := AppendTxnMarker([]byte("prefix"), m)
		if !bytes.HasPrefix(raw, []byte("prefix")) {
			t.Fatal("dst prefix lost")
		}
		raw = raw[len("prefix"):]
		b, err := Parse(raw)
		if err != nil || b.Verify() != nil {
			t.Fatalf("parse: %v / %v", err, b.Verify())
		}
		if !b.IsControl() || !b.IsTransactional() || b.ProducerID() != 9001 || b.ProducerEpoch() != 3 ||
			b.BaseSequence() != -1 || b.RecordCount() != 1 || b.LastOffset() != 77 || b.PartitionLeaderEpoch() != 4 {
			t.Fatalf("header fields wrong: %+v", b)
		}
		typ, err := b.ControlType()
		wantType := ControlAbort
		if commit {
			wantType = ControlCommit
		}
		if err != nil || typ != wantType {
			t.Fatalf("control type %d (%v), want %d", typ, err, wantType)
		}

		// Same bytes as kmsg's encoders would produce for the same record.
		var kb kmsg.RecordBatch
		if err := kb.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		key := kmsg.NewControlRecordKey()
		key.Type = kmsg.ControlRecordKeyType(wantType)
		val := kmsg.NewEndTxnMarker()
		val.CoordinatorEpoch = 12
		rec := kmsg.NewRecord()
		rec.Key = key.AppendTo(nil)
		rec.Value = val.AppendTo(nil)
		var recs []byte
		body := rec.AppendTo(nil)
		// kmsg.Record.AppendTo writes Length itself from the field; set it and re-encode.
		rec.Length = int32(len(body)) - 1
		recs = rec.AppendTo(recs)
		if !bytes.Equal(kb.Records, recs) {
			t.Fatalf("record bytes differ from kmsg:\n ours %x\n kmsg %x", kb.Records, recs)
		}
	}
}

func TestMirrorPIDResetLayout(t *testing.T) {
	t.Parallel()
	raw := AppendMirrorPIDReset(nil, PIDReset{BaseOffset: 500, PartitionLeaderEpoch: 11,
		Timestamp: 1_700_000_000_000, SourceClusterID: "src-cluster-Xy"})
	b, err := Parse(raw)
	if err != nil || b.Verify() != nil {
		t.Fatalf("parse: %v", err)
	}
	if !b.IsControl() || b.IsTransactional() || b.HasProducerID() || b.ProducerEpoch() != -1 {
		t.Fatal("MIRROR_PID_RESET must be a non-transactional control batch without producer")
	}
	if typ, err := b.ControlType(); err != nil || typ != ControlMirrorPIDReset {
		t.Fatalf("control type %d %v", typ, err)
	}
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	var rec kmsg.Record
	if err := rec.ReadFrom(kb.Records); err != nil {
		t.Fatal(err)
	}
	var key kmsg.ControlRecordKey
	if err := key.ReadFrom(rec.Key); err != nil || key.Version != 0 || int16(key.Type) != 7 {
		t.Fatalf("key %+v %v", key, err)
	}
	// Value: version int16 0, then an int16-length string.
	want := append([]byte{0, 0, 0, byte(len("src-cluster-Xy"))}, "src-cluster-Xy"...)
	if !bytes.Equal(rec.Value, want) {
		t.Fatalf("value %x, want %x", rec.Value, want)
	}
}

// kgo, the client most mirror consumers use, must read our control batches:
// kept as control records with KeepControlRecords, and never shown as data.
func TestKgoDecodesControlBatches(t *testing.T) {
	t.Parallel()
	var blob []byte
	blob = append(blob, testBatch(0, 2, 5, 9001)...)
	blob = AppendTxnMarker(blob, TxnMarker{BaseOffset: 2, ProducerID: 9001, ProducerEpoch: 2, Commit: true, Timestamp: 1})
	blob = AppendMirrorPIDReset(blob, PIDReset{BaseOffset: 3, Timestamp: 2, SourceClusterID: "c"})
	blob = append(blob, testBatch(4, 1, 5, -1)...)

	for _, keep := range []bool{true, false} {
		part := kmsg.NewFetchResponseTopicPartition()
		part.HighWatermark, part.LastStableOffset = 5, 5
		part.RecordBatches = blob
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{KeepControlRecords: keep, Topic: "t"},
			&part, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			t.Fatal(fp.Err)
		}
		var offs []int64
		controls := 0
		for _, r := range fp.Records {
			offs = append(offs, r.Offset)
			if r.Attrs.IsControl() {
				controls++
			}
		}
		want, wantControls := []int64{0, 1, 4}, 0
		if keep {
			want, wantControls = []int64{0, 1, 2, 3, 4}, 2
		}
		if !equalInt64s(offs, want) || controls != wantControls {
			t.Fatalf("keep=%v: offsets %v (%d control), want %v (%d)", keep, offs, controls, want, wantControls)
		}
	}
}

func TestControlTypeRejectsMalformed(t *testing.T) {
	t.Parallel()
	raw := AppendTxnMarker(nil, TxnMarker{ProducerID: 1})
	for cut := HeaderSize; cut < len(raw); cut++ {
		b := Batch(append([]byte(nil), raw[:cut]...))
		if _, err := b.ControlType(); err == nil {
			t.Fatalf("cut at %d accepted", cut)
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	if _, err := Batch(testBatch(0, 1, 1, 1)).ControlType(); err == nil {
		t.Fatal("a data batch has no control type")
	}
}

// AppendRecords writes what kmsg reads back: every record's key and value
// (nil as null), offset deltas 0..n-1, no producer, CRC valid.
func TestAppendRecordsMatchesKmsg(t *testing.T) {
	t.Parallel()
	recs := []Record{{Key: []byte("k0"), Value: []byte("v0")}, {Key: []byte("k1")}, {Value: []byte("v2")}, {Key: []byte{}, Value: []byte{}}}
	raw := AppendRecords([]byte("prefix"), 1_700_000_000_123, recs)
	b, err := Parse(raw[len("prefix"):])
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
	if b.RecordCount() != 4 || b.LastOffsetDelta() != 3 || b.HasProducerID() || b.IsControl() || b.Codec() != CodecNone ||
		b.MaxTimestamp() != 1_700_000_000_123 {
		t.Fatalf("header: %d records, delta %d, producer %v, control %v, codec %v, max ts %d", b.RecordCount(),
			b.LastOffsetDelta(), b.HasProducerID(), b.IsControl(), b.Codec(), b.MaxTimestamp())
	}
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(raw[len("prefix"):]); err != nil {
		t.Fatal(err)
	}
	rest := kb.Records
	for i, want := range recs {
		var r kmsg.Record
		if err := r.ReadFrom(rest); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		rest = rest[r.Length+int32(varintLen(int(r.Length))):]
		if r.OffsetDelta != int32(i) || !bytes.Equal(r.Key, want.Key) || (r.Key == nil) != (want.Key == nil) ||
			!bytes.Equal(r.Value, want.Value) || (r.Value == nil) != (want.Value == nil) {
			t.Errorf("record %d: delta %d key %q value %q, want %q %q", i, r.OffsetDelta, r.Key, r.Value, want.Key, want.Value)
		}
	}
}
