// Package bufpool is a size-classed pool of byte buffers for the network
// and serving paths, where a buffer is taken per request or response and
// must not be allocated anew each time (STYLE.md item 14).
//
// Classes are powers of two from 512 B to 16 MiB. The pool stores the
// array pointer (unsafe.SliceData), not a *[]byte, so Put never allocates a
// slice header. A buffer larger than the biggest class is allocated and
// dropped on Put: holding rare huge buffers would pin memory for nothing.
//
// Ownership: whoever calls Get owns the buffer until it calls Put (or hands
// it, with that duty, to a documented new owner). Using a buffer after Put
// is a bug the race detector and the invariants build tag cannot see, so
// every Get site names its Put.
package bufpool

import (
	"math/bits"
	"sync"
	"unsafe"
)

const (
	minShift = 9  // 512 B
	maxShift = 24 // 16 MiB
	classes  = maxShift - minShift + 1
)

// MaxPooled is the largest capacity the pool keeps.
const MaxPooled = 1 << maxShift

var pools [classes]sync.Pool

// classFor returns the smallest class holding n bytes.
func classFor(n int) int {
	if n <= 1<<minShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minShift
}

// Get returns a buffer with length 0 and capacity at least n.
func Get(n int) []byte {
	if n > MaxPooled {
		return make([]byte, 0, n)
	}
	c := classFor(n)
	size := 1 << (c + minShift)
	if p, _ := pools[c].Get().(unsafe.Pointer); p != nil {
		return unsafe.Slice((*byte)(p), size)[:0]
	}
	return make([]byte, 0, size)
}

// Put returns b to the pool. b may have been resliced or grown by append:
// it goes to the largest class its capacity fills. Buffers under 512 B or
// over MaxPooled are dropped.
func Put(b []byte) {
	c := cap(b)
	if c < 1<<minShift || c > MaxPooled {
		return
	}
	class := bits.Len(uint(c)) - 1 - minShift
	pools[class].Put(unsafe.Pointer(unsafe.SliceData(b[:1])))
}
