package batch

import (
	"bytes"
	"testing"
)

func fuzzSeeds(f *testing.F) {
	good := concat(testBatch(0, 3, 10, 5), testBatch(3, 1, 40, -1))
	f.Add(good)
	f.Add(good[:len(good)-7])
	f.Add(AppendTxnMarker(nil, TxnMarker{BaseOffset: 4, ProducerID: 5, Commit: true}))
	f.Add(AppendMirrorPIDReset(nil, PIDReset{BaseOffset: 9, SourceClusterID: "src"}))
	f.Add(legacyMessage(3, 1))
	f.Add([]byte{})
	f.Add(make([]byte, 12))
	f.Add(bytes.Repeat([]byte{0xFF}, 70))
}

// FuzzIterator: any input, whole or delivered in two parts, never panics,
// yields only valid batches, and the split delivery yields the same batches
// as the whole one (the iterator's Rest carries the partial tail over); the
// Chunk it collects summarises exactly the batches it yielded.
func FuzzIterator(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		whole := NewIterator(in)
		var chunk Chunk
		whole.Collect(&chunk)
		var wantOffsets []int64
		for b, ok := whole.Next(); ok; b, ok = whole.Next() {
			if _, err := Parse(b); err != nil {
				t.Fatalf("yielded batch does not parse: %v", err)
			}
			if err := b.Verify(); err != nil {
				t.Fatalf("yielded batch fails CRC: %v", err)
			}
			wantOffsets = append(wantOffsets, b.BaseOffset())
		}
		if whole.Consumed() > len(in) || (whole.Err() != nil && whole.Incomplete()) {
			t.Fatalf("consumed %d of %d, err %v incomplete %v", whole.Consumed(), len(in), whole.Err(), whole.Incomplete())
		}
		// The summary the walk collected describes exactly what it yielded.
		if chunk.Len() != len(wantOffsets) || chunk.Size() != whole.Consumed() || !chunk.Verified() || chunk.Check() != nil {
			t.Fatalf("chunk of %d batches, %d bytes; the walk yielded %d, %d bytes",
				chunk.Len(), chunk.Size(), len(wantOffsets), whole.Consumed())
		}
		checkSummary(t, &chunk)
		for _, cut := range []int{len(in) / 2, len(in) / 3} {
			first := NewIterator(in[:cut])
			got := collect(&first)
			if first.Err() != nil {
				continue // the failure was in the first part; the whole run saw it too
			}
			second := NewIterator(append(append([]byte(nil), first.Rest()...), in[cut:]...))
			got = append(got, collect(&second)...)
			if !equalInt64s(got, wantOffsets) {
				t.Fatalf("split at %d: %v, whole: %v", cut, got, wantOffsets)
			}
			if (second.Err() == nil) != (whole.Err() == nil) || second.Incomplete() != whole.Incomplete() {
				t.Fatalf("split at %d ends differently: %v/%v vs %v/%v", cut, second.Err(), second.Incomplete(), whole.Err(), whole.Incomplete())
			}
		}
	})
}

// FuzzValidate: Parse and Verify never panic; a batch that verifies keeps
// verifying through every patch, and a control batch's type never panics.
func FuzzValidate(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		b, err := Parse(in)
		if err != nil {
			return
		}
		_, _ = b.ControlType()
		if b.Verify() != nil {
			return
		}
		cp := Batch(append([]byte(nil), b...))
		for _, pid := range []int64{-1, 0, 1 << 62, int64(len(in)) * 7919} {
			cp.SetProducerID(pid)
			if cp.ProducerID() != pid || cp.Verify() != nil {
				t.Fatalf("patch to %d broke the batch", pid)
			}
		}
		cp.RewriteProducerID()
		cp.SetBaseOffset(-5)
		cp.SetPartitionLeaderEpoch(99)
		if cp.Verify() != nil {
			t.Fatal("header patches broke the CRC")
		}
	})
}
