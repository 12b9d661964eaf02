package storage

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/kmirror/kmirror/batch"
)

// FuzzDecodeRecords: any records section and count decodes or is refused as
// corruption, never panics, and what decodes is exact: the raw records tile
// the input in order, re-encoding them gives the input back, each raw
// record decodes alone to the same view, and the two halves of a split at a
// record boundary decode to the same records (the nats split trick).
func FuzzDecodeRecords(f *testing.F) {
	for _, raw := range [][]byte{
		dataBatch(0, 3, 10, 0, -1, -1, 1),
		tbatch{recs: []trec{kv("a", "1"), tomb("b"), nullKey("c"), kv("", "")}}.encode(f, batch.CodecNone),
		batch.AppendTxnMarker(nil, batch.TxnMarker{ProducerID: 1, Commit: true}),
	} {
		b := batch.Batch(raw)
		f.Add(b.Records(), b.RecordCount())
		f.Add(b.Records()[:len(b.Records())-1], b.RecordCount())
		f.Add(b.Records(), b.RecordCount()+1)
	}
	f.Add([]byte{}, int32(0))
	f.Add(bytes.Repeat([]byte{0x01}, 40), int32(5))
	f.Add(binary.AppendVarint(nil, 1<<40), int32(1))
	f.Fuzz(func(t *testing.T, recs []byte, count int32) {
		views, err := decodeRecords(nil, recs, count)
		if err != nil {
			if !batch.IsCorruption(err) {
				t.Fatalf("error is not a corruption: %v", err)
			}
			return
		}
		if len(views) != int(count) {
			t.Fatalf("%d records, header says %d", len(views), count)
		}
		if got := appendRecords(nil, views); !bytes.Equal(got, recs) {
			t.Fatalf("re-encoding gives %d bytes of %d", len(got), len(recs))
		}
		pos := 0
		for i, v := range views {
			if &recs[pos] != &v.raw[0] {
				t.Fatalf("record %d does not start where the previous ended", i)
			}
			pos += len(v.raw)
			one, err := decodeRecords(nil, v.raw, 1)
			if err != nil || !sameView(one[0], v) {
				t.Fatalf("record %d alone: %v", i, err)
			}
		}
		half := len(views) / 2
		cut := 0
		for _, v := range views[:half] {
			cut += len(v.raw)
		}
		a, errA := decodeRecords(nil, recs[:cut], int32(half))
		b, errB := decodeRecords(nil, recs[cut:], count-int32(half))
		if errA != nil || errB != nil || len(a)+len(b) != len(views) {
			t.Fatalf("split at record %d: %v %v", half, errA, errB)
		}
		for i, v := range append(a, b...) {
			if !sameView(v, views[i]) {
				t.Fatalf("split decode differs at record %d", i)
			}
		}
	})
}

func sameView(a, b recordView) bool {
	return a.offsetDelta == b.offsetDelta && a.timestampDelta == b.timestampDelta &&
		(a.key == nil) == (b.key == nil) && bytes.Equal(a.key, b.key) &&
		(a.value == nil) == (b.value == nil) && bytes.Equal(a.value, b.value) &&
		bytes.Equal(a.raw, b.raw)
}

// FuzzRetainedRecords: any two batches compare or are refused as
// corruption, never panic, and a batch always holds its own records.
func FuzzRetainedRecords(f *testing.F) {
	orig := tbatch{base: 5, recs: []trec{kv("a", "1"), kv("b", "2")}, pid: 3}.encode(f, batch.CodecNone)
	kept := tbatch{base: 5, recs: []trec{kv("b", "2")}, pid: 3, deltas: []int64{1}, tsShift: 1}.encode(f, batch.CodecLz4)
	f.Add(orig, kept)
	f.Add(orig, orig[:len(orig)-1])
	f.Add(kept, orig)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ob, err := batch.Parse(a)
		if err != nil {
			return
		}
		kb, err := batch.Parse(b)
		if err != nil {
			return
		}
		if _, err := RetainedRecords(ob, kb); err != nil && !batch.IsCorruption(err) {
			t.Fatalf("error is not a corruption: %v", err)
		}
		if same, err := RetainedRecords(ob, ob); err == nil && ob.RecordCount() > 0 && !same && !duplicateOffsets(ob) {
			t.Fatalf("a batch does not hold its own records")
		}
	})
}

// duplicateOffsets reports whether b's records repeat an offset (a forged
// batch: then a batch need not match itself record for record).
func duplicateOffsets(b batch.Batch) bool {
	var k RecordKeys
	if k.read(b) != nil {
		return true
	}
	seen := map[int32]bool{}
	for _, v := range k.views {
		if seen[v.offsetDelta] {
			return true
		}
		seen[v.offsetDelta] = true
	}
	return false
}
