package batch

import (
	"hash/crc32"
	"sync"
)

// castagnoli is the CRC32C table. hash/crc32 and github.com/klauspost/crc32
// were measured equal on our machines (BENCHMARKS.md, BenchmarkCRC32C: both
// run the SSE4.2 three-way kernel; klauspost v1.3.0 has its AVX-512 path
// disabled), so the standard library wins on having no dependency.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// castagnoliReversed is the CRC32C polynomial in the reflected bit order
// that the table-driven implementations use.
const castagnoliReversed = 0x82F63B78

// Checksum is the CRC32C of p, as stored in a batch header.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// CRC32C is linear over GF(2): for two messages of equal length,
// crc(A) ^ crc(B) == raw(A ^ B), where raw is the CRC register after
// processing the bytes from a zero register with no final inversion. When a
// patch changes k bytes at a known position, A ^ B is zero except for those
// k bytes, and the leading zeros leave a zero register unchanged. So
//
//	crc(new) = crc(old) ^ shift(raw(oldBytes ^ newBytes), bytesAfterPatch)
//
// where shift(r, n) advances the register r over n zero bytes, which is a
// multiplication by x^(8n) modulo the polynomial. With x^(2^k) precomputed,
// that costs O(log n) polynomial multiplications: the time of a patch does
// not depend on the batch size (the idea behind zlib's crc32_combine).

// xPow2 holds x^(2^k) mod P for k = 0..63, in reflected order.
var xPow2 = func() (t [64]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = gfMul(p, p)
	}
	return t
}()

// gfMul multiplies two polynomials modulo the CRC32C polynomial, both in
// reflected order (bit 31 is x^0). Only table construction uses it.
func gfMul(a, b uint32) uint32 {
	var prod uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			prod ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReversed
		} else {
			b >>= 1
		}
	}
	return prod
}

// Shifting by 8n bits multiplies the register by x^(8n) = the product of
// x^(2^k) over the set bits k of 8n. Multiplying by a fixed polynomial is
// linear in the register, so each x^(2^k) gets four 256-entry tables (one
// per register byte) and a multiplication is four lookups, branch-free.
// Bits 0-2 of 8n are always zero; bit 34 covers batches up to 2 GiB.
const (
	minShiftBit = 3
	maxShiftBit = 35
)

type mulTables [4][256]uint32

var (
	shiftTablesOnce sync.Once
	shiftTables     *[maxShiftBit - minShiftBit]mulTables
)

// buildShiftTables runs once, at the first patch (about 30k gfMul calls,
// a few milliseconds), so that programs that never patch never pay it.
func buildShiftTables() {
	t := new([maxShiftBit - minShiftBit]mulTables)
	for k := range t {
		c := xPow2[k+minShiftBit]
		for i := range 4 {
			for v := range 256 {
				t[k][i][v] = gfMul(c, uint32(v)<<(8*i))
			}
		}
	}
	shiftTables = t
}

// shiftZeros advances a raw CRC register over n zero bytes.
func shiftZeros(reg uint32, n int) uint32 {
	shiftTablesOnce.Do(buildShiftTables)
	bits := uint64(n)
	for k := 0; bits != 0 && k < len(shiftTables); k, bits = k+1, bits>>1 {
		if bits&1 != 0 {
			t := &shiftTables[k]
			reg = t[0][byte(reg)] ^ t[1][byte(reg>>8)] ^ t[2][byte(reg>>16)] ^ t[3][byte(reg>>24)]
		}
	}
	for k := len(shiftTables) + minShiftBit; bits != 0; k, bits = k+1, bits>>1 {
		if bits&1 != 0 { // beyond 2 GiB: never a batch, kept correct anyway
			reg = gfMul(xPow2[k&63], reg)
		}
	}
	return reg
}

// byteTable is the classic one-byte-at-a-time CRC32C table. The patch path
// runs it over a few bytes only; it exists because crc32.Update makes its
// argument escape (it dispatches through a function value), and the patch
// must not allocate.
var byteTable = func() (t [256]uint32) {
	for i := range t {
		c := uint32(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ castagnoliReversed
			} else {
				c >>= 1
			}
		}
		t[i] = c
	}
	return t
}()

// rawCRC is the register after processing p from zero, without the
// pre- and post-inversion of the standard CRC. For short inputs only.
func rawCRC(p []byte) uint32 {
	var reg uint32
	for _, c := range p {
		reg = byteTable[byte(reg)^c] ^ reg>>8
	}
	return reg
}

// patchedCRC returns the CRC of a message after the bytes at some position
// changed by delta (old XOR new), with after bytes following the change.
func patchedCRC(old uint32, delta []byte, after int) uint32 {
	return old ^ shiftZeros(rawCRC(delta), after)
}
