package batch

import (
	"encoding/binary"
	"errors"
	"testing"
)

func collect(it *Iterator) []int64 {
	var offs []int64
	for b, ok := it.Next(); ok; b, ok = it.Next() {
		offs = append(offs, b.BaseOffset())
	}
	return offs
}

func TestIteratorWholeBatches(t *testing.T) {
	t.Parallel()
	blob := concat(testBatch(0, 3, 10, 5), testBatch(3, 1, 100, 5), testBatch(10, 7, 1, -1))
	it := NewIterator(blob)
	got := collect(&it)
	if want := []int64{0, 3, 10}; !equalInt64s(got, want) {
		t.Fatalf("offsets %v, want %v", got, want)
	}
	if it.Err() != nil || it.Incomplete() || it.Consumed() != len(blob) || len(it.Rest()) != 0 {
		t.Fatalf("end state: err=%v incomplete=%v consumed=%d", it.Err(), it.Incomplete(), it.Consumed())
	}
	empty := NewIterator(nil)
	if _, ok := empty.Next(); ok || empty.Err() != nil || empty.Incomplete() {
		t.Fatal("empty blob must end cleanly")
	}
}

// Kafka may cut the last batch anywhere: every cut point yields the whole
// batches before it and reports the rest as incomplete, never as an error.
func TestIteratorPartialTail(t *testing.T) {
	t.Parallel()
	first, second := testBatch(0, 2, 10, 1), testBatch(2, 4, 30, 1)
	blob := concat(first, second)
	for cut := len(first) + 1; cut < len(blob); cut++ {
		it := NewIterator(blob[:cut])
		got := collect(&it)
		if len(got) != 1 || it.Err() != nil || !it.Incomplete() || it.Consumed() != len(first) {
			t.Fatalf("cut %d: got %v err=%v incomplete=%v", cut, got, it.Err(), it.Incomplete())
		}
	}
}

func TestIteratorErrors(t *testing.T) {
	t.Parallel()
	good := testBatch(0, 2, 10, 1)
	corrupt := testBatch(2, 2, 10, 1)
	corrupt[len(corrupt)-3] ^= 0xFF
	negative := testBatch(2, 1, 1, 1)
	binary.BigEndian.PutUint32(negative[offLength:], 0x80000000)
	huge := testBatch(2, 1, 1, 1)
	binary.BigEndian.PutUint32(huge[offLength:], 5000)
	short := testBatch(2, 1, 1, 1)
	binary.BigEndian.PutUint32(short[offLength:], 20)
	unknown := testBatch(2, 1, 1, 1)
	unknown[offMagic] = 9

	tests := []struct {
		name   string
		blob   []byte
		max    int
		want   error
		offset int64
	}{
		{"crc mismatch", concat(good, corrupt), 0, ErrCorrupt, 2},
		{"negative length", concat(good, negative), 0, ErrCorrupt, 2},
		{"oversized length", concat(good, huge), 1024, ErrTooLarge, 2},
		{"length below header", concat(good, short), 0, ErrCorrupt, 2},
		{"magic 0", concat(good, legacyMessage(2, 0)), 0, ErrLegacyMagic, 2},
		{"magic 1", concat(good, legacyMessage(77, 1)), 0, ErrLegacyMagic, 77},
		{"unknown magic", concat(good, unknown), 0, ErrUnknownMagic, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			it := NewIterator(tt.blob)
			if tt.max > 0 {
				it.MaxBatchBytes(tt.max)
			}
			got := collect(&it)
			if len(got) != 1 {
				t.Fatalf("batches before the failure: %v", got)
			}
			var be *Error
			if !errors.Is(it.Err(), tt.want) || !errors.As(it.Err(), &be) || be.Offset != tt.offset {
				t.Fatalf("err %v, want %v at %d", it.Err(), tt.want, tt.offset)
			}
			if it.Incomplete() {
				t.Fatal("an error is not an incomplete tail")
			}
			if _, ok := it.Next(); ok {
				t.Fatal("Next after an error must stay false")
			}
		})
	}
}

// A length announcing more than the limit is refused before the bytes arrive,
// so a reader never waits for (or buffers) a batch it would reject.
func TestIteratorOversizedBeforeBody(t *testing.T) {
	t.Parallel()
	head := testBatch(5, 1, 1, 1)[:LogOverhead]
	binary.BigEndian.PutUint32(head[offLength:], 1<<30)
	it := NewIterator(head)
	it.MaxBatchBytes(1 << 20)
	if _, ok := it.Next(); ok || !errors.Is(it.Err(), ErrTooLarge) {
		t.Fatalf("err %v", it.Err())
	}
}

func TestIteratorSkipCRC(t *testing.T) {
	t.Parallel()
	b := testBatch(0, 2, 10, 1)
	b[len(b)-1] ^= 1
	it := NewIterator(b)
	it.SkipCRC()
	if got := collect(&it); len(got) != 1 || it.Err() != nil {
		t.Fatalf("SkipCRC: %v %v", got, it.Err())
	}
}

func equalInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
