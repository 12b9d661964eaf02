package batch

// Iterator walks the batches of a records blob as a Fetch response or a log
// segment carries it: zero or more whole batches, possibly followed by the
// front part of one more. Kafka cuts the last batch of a response at the
// byte limit; that partial tail is reported by Incomplete, not as an error.
//
// Every yielded batch has passed the structural checks and its CRC32C. The
// first failure stops the iteration and is kept in Err; batches before it
// were valid and may be used.
//
//	it := batch.NewIterator(records)
//	for b, ok := it.Next(); ok; b, ok = it.Next() { ... }
//	if err := it.Err(); err != nil { ... }
type Iterator struct {
	src    []byte
	pos    int
	maxLen int32
	skip   bool
	err    error
	chunk  *Chunk
}

// NewIterator iterates over src. The iterator does not copy src.
func NewIterator(src []byte) Iterator {
	return Iterator{src: src, maxLen: defaultMaxBatchLen}
}

// MaxBatchBytes rejects (with ErrTooLarge) any batch whose total size exceeds
// n bytes, before any of it is read. Kafka's message.max.bytes is such a limit.
func (it *Iterator) MaxBatchBytes(n int) {
	l := n - LogOverhead
	if l < MinLength {
		l = MinLength
	}
	if int64(l) > defaultMaxBatchLen {
		l = defaultMaxBatchLen
	}
	it.maxLen = int32(l)
}

// SkipCRC turns the CRC32C check off, for bytes this process already
// verified (its own log). Structural checks stay on.
func (it *Iterator) SkipCRC() { it.skip = true }

// Collect makes the iterator summarise every batch it yields into c (see
// Chunk), replacing what c held; c's memory is reused. c is Verified only
// while no batch was yielded with the CRC check off.
func (it *Iterator) Collect(c *Chunk) {
	c.src, c.entries, c.verified = it.src, c.entries[:0], true
	it.chunk = c
}

// Next returns the next whole, valid batch, or false at the end, at a
// partial tail, or at the first error.
func (it *Iterator) Next() (Batch, bool) {
	if it.err != nil || it.pos >= len(it.src) {
		return nil, false
	}
	rest := it.src[it.pos:]
	n, err := frame(rest, it.maxLen)
	if err != nil {
		it.err = err
		return nil, false
	}
	if n == 0 {
		return nil, false
	}
	b := Batch(rest[:n:n])
	if !it.skip {
		if err := b.Verify(); err != nil {
			it.err = err
			return nil, false
		}
	}
	if it.chunk != nil {
		it.chunk.collect(b, it.pos, !it.skip)
	}
	it.pos += n
	return b, true
}

// Err is the error that stopped the iteration, nil at a clean end or a
// partial tail.
func (it *Iterator) Err() error { return it.err }

// Incomplete reports that the iteration stopped at a partial trailing batch.
func (it *Iterator) Incomplete() bool { return it.err == nil && it.pos < len(it.src) }

// Consumed is the number of bytes of whole, valid batches yielded so far.
func (it *Iterator) Consumed() int { return it.pos }

// Rest is what follows the last yielded batch: a partial tail, the failing
// batch, or nothing.
func (it *Iterator) Rest() []byte { return it.src[it.pos:] }
