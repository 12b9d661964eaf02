package batch

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// The CRC that SetProducerID derives from the old one must equal a full
// recomputation, for every batch size and every kind of id change.
func TestSetProducerIDMatchesFullCRC(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	pids := []int64{-1, 0, 1, 4242, 1<<62 - 1, 1 << 62, -2, 1<<63 - 1, -1 << 63}
	for _, n := range []int{1, 2, 17, 300} {
		for _, size := range []int{0, 1, 63, 4096} {
			raw := testBatch(int64(n), n, size, 7)
			b := Batch(raw)
			for range 20 {
				pid := pids[rng.IntN(len(pids))]
				if rng.IntN(2) == 0 {
					pid = int64(rng.Uint64())
				}
				b.SetProducerID(pid)
				if b.ProducerID() != pid {
					t.Fatalf("pid %d after set, want %d", b.ProducerID(), pid)
				}
				if want := Checksum(raw[crcStart:]); b.CRC() != want {
					t.Fatalf("n=%d size=%d pid=%d: crc %08x, full recompute %08x", n, size, pid, b.CRC(), want)
				}
			}
		}
	}
}

// A patch never repairs a wrong checksum: corruption stays detectable.
func TestSetProducerIDKeepsCorruptionVisible(t *testing.T) {
	t.Parallel()
	raw := testBatch(0, 4, 20, 9)
	raw[len(raw)-2] ^= 0x10
	b := Batch(raw)
	b.SetProducerID(12345)
	if b.Verify() == nil {
		t.Fatal("a corrupt batch verified after a producer id patch")
	}
}

func TestHeaderPatchesOutsideCRC(t *testing.T) {
	t.Parallel()
	b := Batch(testBatch(0, 3, 10, 9))
	crc := b.CRC()
	b.SetBaseOffset(1 << 40)
	b.SetPartitionLeaderEpoch(-1)
	if b.BaseOffset() != 1<<40 || b.PartitionLeaderEpoch() != -1 || b.LastOffset() != 1<<40+2 {
		t.Fatalf("patched fields: %d %d", b.BaseOffset(), b.PartitionLeaderEpoch())
	}
	if b.CRC() != crc || b.Verify() != nil {
		t.Fatal("base offset and leader epoch must not affect the CRC")
	}
}

func TestMirrorProducerID(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want int64 }{
		{-1, -1},
		{-2, -2},
		{-1 << 63, -1 << 63},
		{0, 1 << 62},
		{1, 1<<62 + 1},
		{1<<62 - 1, 1<<63 - 1},
		{1 << 62, 1 << 62},
		{1<<63 - 1, 1<<63 - 1},
	}
	for _, tt := range tests {
		if got := MirrorProducerID(tt.in); got != tt.want {
			t.Errorf("MirrorProducerID(%d) = %d, want %d", tt.in, got, tt.want)
		}
		// Idempotent along a chain of mirrors.
		if got := MirrorProducerID(MirrorProducerID(tt.in)); got != tt.want {
			t.Errorf("MirrorProducerID twice(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestRewriteProducerID(t *testing.T) {
	t.Parallel()
	b := Batch(testBatch(0, 2, 5, 31))
	if !b.RewriteProducerID() || b.ProducerID() != 31+MirrorPIDOffset || b.Verify() != nil {
		t.Fatalf("first rewrite: pid %d err %v", b.ProducerID(), b.Verify())
	}
	if b.RewriteProducerID() {
		t.Fatal("a rewritten id must not be rewritten again")
	}
	none := Batch(testBatch(0, 2, 5, -1))
	if none.RewriteProducerID() || none.ProducerID() != -1 {
		t.Fatal("a batch without producer id must stay as it is")
	}
}

func TestShiftZerosMatchesUpdate(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 8, 1000, 1 << 20} {
		seed := make([]byte, 8)
		binary.BigEndian.PutUint64(seed, rng.Uint64())
		zeros := make([]byte, n)
		want := rawCRC(append(seed, zeros...))
		if got := shiftZeros(rawCRC(seed), n); got != want {
			t.Fatalf("n=%d: %08x want %08x", n, got, want)
		}
	}
}

// The table-driven shift must equal the plain polynomial arithmetic for any
// length, including lengths beyond the tables (over 2 GiB).
func TestShiftZerosMatchesPolynomial(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	reference := func(reg uint32, n int) uint32 {
		bits := uint64(n) * 8
		for k := 0; bits != 0; k, bits = k+1, bits>>1 {
			if bits&1 != 0 {
				reg = gfMul(xPow2[k&63], reg)
			}
		}
		return reg
	}
	for range 2000 {
		n := int(rng.Uint64() >> rng.IntN(64))
		n &= 1<<40 - 1
		reg := rng.Uint32()
		if got, want := shiftZeros(reg, n), reference(reg, n); got != want {
			t.Fatalf("n=%d: %08x want %08x", n, got, want)
		}
	}
}

// The hot path's promise: no allocation to view, iterate, validate and patch.
func TestHotPathZeroAllocs(t *testing.T) {
	blob := concat(testBatch(0, 10, 100, 5), testBatch(10, 10, 100, 5), testBatch(20, 3, 100, 5)[:50])
	pid := int64(0)
	allocs := testing.AllocsPerRun(100, func() {
		it := NewIterator(blob)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			_ = b.BaseOffset() + b.LastOffset() + int64(b.RecordCount())
			b.SetProducerID(pid)
			b.RewriteProducerID()
			b.SetBaseOffset(b.BaseOffset())
			b.SetPartitionLeaderEpoch(1)
		}
		pid++
		if it.Err() != nil || !it.Incomplete() {
			panic("unexpected end")
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per run, want 0", allocs)
	}
	single := testBatch(0, 4, 64, 1)
	allocs = testing.AllocsPerRun(100, func() {
		b, err := Parse(single)
		if err != nil || b.Verify() != nil {
			panic("invalid")
		}
		if _, err := b.ControlType(); err == nil {
			panic("not a control batch")
		}
	})
	// ControlType on a data batch builds an error; Parse+Verify must not allocate.
	if allocs > 1 {
		t.Fatalf("%.1f allocations per Parse+Verify, want 0", allocs)
	}
}

func TestSetLogAppendTimeMatchesFullCRC(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 5, 300} {
		for _, ts := range []int64{0, 1, 1732876800000, -1, 1<<63 - 1} {
			raw := testBatch(0, n, 40, 7)
			b := Batch(raw)
			codec := b.Codec()
			b.SetLogAppendTime(ts)
			if !b.LogAppendTime() || b.MaxTimestamp() != ts || b.Codec() != codec {
				t.Fatalf("n=%d ts=%d: log append time %v, max timestamp %d, codec %v",
					n, ts, b.LogAppendTime(), b.MaxTimestamp(), b.Codec())
			}
			if err := b.Verify(); err != nil {
				t.Fatalf("n=%d ts=%d: %v", n, ts, err)
			}
			b.SetLogAppendTime(ts + 1) // patching twice stays consistent
			if want := Checksum(raw[crcStart:]); b.CRC() != want {
				t.Fatalf("n=%d: crc %08x, full recompute %08x", n, b.CRC(), want)
			}
		}
	}
}
