package batch

import (
	"errors"
	"testing"
)

// checkSummary fails t unless c's entries describe the batches of c's bytes.
func checkSummary(t *testing.T, c *Chunk) {
	t.Helper()
	it := NewIterator(c.Bytes())
	it.SkipCRC()
	i := 0
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		if i >= c.Len() {
			t.Fatalf("%d batches in the bytes, %d in the summary", i+1, c.Len())
		}
		e := c.At(i)
		want := Entry{Pos: e.Pos, Size: len(b), BaseOffset: b.BaseOffset(), LastOffsetDelta: b.LastOffsetDelta(),
			LeaderEpoch: b.PartitionLeaderEpoch(), MaxTimestamp: b.MaxTimestamp(), RecordCount: b.RecordCount(),
			Producer: b.HasProducerID() || b.IsControl()}
		if e != want {
			t.Fatalf("entry %d: %+v, the batch says %+v", i, e, want)
		}
		if string(c.Batch(i)) != string(b) {
			t.Fatalf("entry %d: Batch is not the batch's bytes", i)
		}
		i++
	}
	if it.Err() != nil || it.Incomplete() || i != c.Len() || len(c.Bytes()) != c.Size() {
		t.Fatalf("summary of %d batches, bytes hold %d (err %v, incomplete %v)", c.Len(), i, it.Err(), it.Incomplete())
	}
}

func TestChunkCollect(t *testing.T) {
	t.Parallel()
	marker := AppendTxnMarker(nil, TxnMarker{BaseOffset: 14, ProducerID: -1, Commit: true})
	good := concat(testBatch(0, 3, 10, 5), testBatch(3, 1, 100, -1), testBatch(10, 4, 1, -1), marker)
	corrupt := testBatch(20, 2, 10, 1)
	corrupt[len(corrupt)-1] ^= 1
	tests := []struct {
		name     string
		blob     []byte
		skipCRC  bool
		batches  int
		verified bool
		err      error
	}{
		{"whole", good, false, 4, true, nil},
		{"partial tail", concat(good, testBatch(30, 2, 10, 1)[:40]), false, 4, true, nil},
		{"corrupt after good", concat(good, corrupt), false, 4, true, ErrCorrupt},
		{"skip crc", concat(good, corrupt), true, 5, false, nil},
		{"empty", nil, false, 0, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c Chunk
			it := NewIterator(tt.blob)
			if tt.skipCRC {
				it.SkipCRC()
			}
			it.Collect(&c)
			for _, ok := it.Next(); ok; _, ok = it.Next() {
			}
			if !errors.Is(it.Err(), tt.err) {
				t.Fatalf("err %v, want %v", it.Err(), tt.err)
			}
			if c.Len() != tt.batches || c.Verified() != tt.verified || c.Size() != it.Consumed() {
				t.Fatalf("%d batches verified=%v size %d, want %d verified=%v size %d",
					c.Len(), c.Verified(), c.Size(), tt.batches, tt.verified, it.Consumed())
			}
			checkSummary(t, &c)
			if err := c.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestChunkSliceAndReuse(t *testing.T) {
	t.Parallel()
	a, b, c := testBatch(0, 3, 10, 5), testBatch(3, 1, 100, 5), testBatch(10, 4, 1, 5)
	var ch Chunk
	it := NewIterator(concat(a, b, c))
	it.Collect(&ch)
	for _, ok := it.Next(); ok; _, ok = it.Next() {
	}
	mid := ch.Slice(1, 3)
	if mid.Len() != 2 || string(mid.Bytes()) != string(concat(b, c)) || mid.At(0).BaseOffset != 3 || !mid.Verified() {
		t.Fatalf("slice: %d batches from %d", mid.Len(), mid.At(0).BaseOffset)
	}
	checkSummary(t, &mid)
	if e := ch.At(2); e.LastOffset() != 13 || e.NextOffset() != 14 {
		t.Fatalf("last %d next %d", e.LastOffset(), e.NextOffset())
	}
	// A second walk into the same chunk replaces what it held.
	it = NewIterator(a)
	it.Collect(&ch)
	it.Next()
	if ch.Len() != 1 || string(ch.Bytes()) != string(a) {
		t.Fatalf("reused chunk holds %d batches", ch.Len())
	}
	ch.Reset()
	if ch.Len() != 0 || ch.Bytes() != nil || ch.src != nil || cap(ch.entries) == 0 {
		t.Fatalf("reset chunk holds %d batches, src %v, capacity %d", ch.Len(), ch.src != nil, cap(ch.entries))
	}
	var zero Chunk
	if zero.Len() != 0 || zero.Bytes() != nil || zero.Size() != 0 || zero.Check() != nil {
		t.Fatal("zero chunk not empty")
	}
}

// A chunk whose bytes were restamped or reused after the walk fails Check.
func TestChunkCheck(t *testing.T) {
	t.Parallel()
	for _, which := range []int{0, 2} {
		blob := concat(testBatch(0, 3, 10, 5), testBatch(3, 1, 100, 5), testBatch(10, 4, 1, 5))
		var c Chunk
		it := NewIterator(blob)
		it.Collect(&c)
		for _, ok := it.Next(); ok; _, ok = it.Next() {
		}
		b := c.Batch(which)
		b.RewriteProducerID() // allowed: the summary holds no producer id
		if err := c.Check(); err != nil {
			t.Fatalf("batch %d after a producer id rewrite: %v", which, err)
		}
		checkSummary(t, &c)
		b.SetBaseOffset(b.BaseOffset() + 1)
		if err := c.Check(); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("batch %d restamped: %v, want ErrCorrupt", which, err)
		}
	}
}

func TestChunkCollectZeroAllocs(t *testing.T) {
	blob := concat(testBatch(0, 10, 100, 5), testBatch(10, 10, 100, 5), testBatch(20, 3, 100, 5))
	var c Chunk
	allocs := testing.AllocsPerRun(100, func() {
		it := NewIterator(blob)
		it.Collect(&c)
		for _, ok := it.Next(); ok; _, ok = it.Next() {
		}
		if c.Len() != 3 || c.Check() != nil {
			panic("bad chunk")
		}
	})
	if allocs > 0 {
		t.Fatalf("%.1f allocations per run, want 0 (the chunk's memory is reused)", allocs)
	}
}
