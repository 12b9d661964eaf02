package storage

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kmirror/kmirror/batch"
)

// walk collects the chunk of blob as the fetchers do, CRCs checked unless
// skipCRC.
func walk(blob []byte, skipCRC bool) *batch.Chunk {
	var c batch.Chunk
	it := batch.NewIterator(blob)
	if skipCRC {
		it.SkipCRC()
	}
	it.Collect(&c)
	for _, ok := it.Next(); ok; _, ok = it.Next() {
	}
	return &c
}

// AppendChunk stores what AppendMirror stores, with the same result, epochs
// and producer state, from the walk's summary.
func TestAppendChunkMatchesAppendMirror(t *testing.T) {
	t.Parallel()
	blobs := [][]byte{
		bytes.Join([][]byte{dataBatch(0, 3, 10, 0, 7, 0, 100), dataBatch(3, 2, 10, 0, -1, -1, 90)}, nil),
		bytes.Join([][]byte{dataBatch(10, 1, 500, 1, 7, 3, 200), dataBatch(11, 4, 10, 1, 8, 0, 210),
			dataBatch(20, 2, 10, 2, -1, -1, 50)}, nil),
		batch.AppendTxnMarker(nil, batch.TxnMarker{BaseOffset: 22, PartitionLeaderEpoch: 2, ProducerID: 7, Commit: true}),
	}
	cfg := Config{SegmentBytes: 600, IndexIntervalBytes: 1}
	mirror := openTestLog(t, t.TempDir(), cfg)
	defer mirror.Close()
	chunked := openTestLog(t, t.TempDir(), cfg)
	defer chunked.Close()
	for i, blob := range blobs {
		want, err := mirror.AppendMirror(append([]byte(nil), blob...))
		if err != nil {
			t.Fatal(err)
		}
		got, err := chunked.AppendChunk(walk(append([]byte(nil), blob...), false))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("chunk %d: AppendChunk %+v, AppendMirror %+v", i, got, want)
		}
	}
	if a, b := readAll(t, mirror, 0), readAll(t, chunked, 0); len(a) != len(b) {
		t.Fatalf("%d batches vs %d", len(a), len(b))
	} else {
		for i := range a {
			if !bytes.Equal(a[i], b[i]) {
				t.Fatalf("batch %d differs", i)
			}
		}
	}
	if mirror.NumSegments() != chunked.NumSegments() || mirror.NumSegments() < 2 {
		t.Fatalf("segments %d vs %d", mirror.NumSegments(), chunked.NumSegments())
	}
	for e := int32(0); e <= 2; e++ {
		we, wo := mirror.EndOffsetForEpoch(e)
		ge, gend := chunked.EndOffsetForEpoch(e)
		if we != ge || wo != gend {
			t.Fatalf("epoch %d ends at %d/%d vs %d/%d", e, ge, gend, we, wo)
		}
	}
	for _, ts := range []int64{0, 95, 205, 211} {
		wo, wts, wok, werr := mirror.OffsetForTimestamp(ts)
		go2, gts, gok, gerr := chunked.OffsetForTimestamp(ts)
		if wo != go2 || wts != gts || wok != gok || (werr == nil) != (gerr == nil) {
			t.Fatalf("timestamp %d: %d %d %v %v vs %d %d %v %v", ts, go2, gts, gok, gerr, wo, wts, wok, werr)
		}
	}
	if w, g := len(mirror.Producers().OngoingTxns()), len(chunked.Producers().OngoingTxns()); w != g {
		t.Fatalf("%d open transactions vs %d", g, w)
	}
}

// What AppendMirror refuses AppendChunk refuses with the same error, and
// appends nothing: offsets out of order, a corrupt CRC in a chunk walked
// without the check, bytes restamped after the walk.
func TestAppendChunkRefuses(t *testing.T) {
	t.Parallel()
	l := openTestLog(t, t.TempDir(), Config{})
	defer l.Close()
	if _, err := l.AppendChunk(walk(dataBatch(0, 5, 10, 0, -1, -1, 1), false)); err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Join([][]byte{dataBatch(5, 1, 10, 0, -1, -1, 1), dataBatch(6, 1, 10, 0, -1, -1, 1)}, nil)
	corrupt[len(corrupt)-1] ^= 1
	restamped := bytes.Join([][]byte{dataBatch(5, 1, 10, 0, -1, -1, 1), dataBatch(6, 1, 10, 0, -1, -1, 1)}, nil)
	restampedChunk := walk(restamped, false)
	restampedChunk.Batch(1).SetBaseOffset(3)
	tests := []struct {
		name  string
		chunk *batch.Chunk
		want  error
	}{
		{"below the log end", walk(dataBatch(4, 1, 10, 0, -1, -1, 1), false), ErrOffsetOrder},
		{"out of order", walk(bytes.Join([][]byte{dataBatch(10, 3, 10, 0, -1, -1, 1), dataBatch(11, 1, 10, 0, -1, -1, 1)}, nil), false), ErrOffsetOrder},
		{"corrupt, unverified", walk(corrupt, true), ErrInvalidRecord},
		{"restamped after the walk", restampedChunk, ErrInvalidRecord},
	}
	for _, tt := range tests {
		if _, err := l.AppendChunk(tt.chunk); !errors.Is(err, tt.want) {
			t.Fatalf("%s: %v, want %v", tt.name, err, tt.want)
		}
		if l.LogEndOffset() != 5 {
			t.Fatalf("%s: a refused append moved the log end to %d", tt.name, l.LogEndOffset())
		}
	}
	// The walk stops before a corrupt batch: what it collected appends.
	c := walk(corrupt, false)
	if res, err := l.AppendChunk(c); err != nil || res.Batches != 1 || l.LogEndOffset() != 6 {
		t.Fatalf("the verified part: %+v %v, log end %d", res, err, l.LogEndOffset())
	}
	// An empty chunk appends nothing and is no error.
	if res, err := l.AppendChunk(walk(nil, false)); err != nil || res.Batches != 0 {
		t.Fatalf("empty chunk: %+v %v", res, err)
	}
}
