package batch

import (
	"github.com/klauspost/crc32"
)

// castagnoli is the CRC32C table. klauspost/crc32 is used instead of
// hash/crc32 because it was measured faster on our machines (BENCHMARKS.md,
// BenchmarkCRC32C); both compute the same function.
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
// reflected order (bit 31 is x^0).
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

// shiftZeros advances a raw CRC register over n zero bytes.
func shiftZeros(reg uint32, n int) uint32 {
	bits := uint64(n) * 8
	for k := 0; bits != 0; k, bits = k+1, bits>>1 {
		if bits&1 != 0 {
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
