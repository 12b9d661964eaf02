package batch

// Chunk is a run of whole batches together with a summary of each one's
// header, collected by the walk that checked them (an Iterator with
// Collect). A log appends a Chunk without walking the headers again: the
// summary gives it the offsets, sizes, epochs, timestamps and record counts
// its indexes, epoch cache and producer state need.
//
// A Chunk can only be made by an Iterator, so its summary always describes
// bytes that passed the structural checks, and, when Verified reports it,
// their CRC32C. It keeps a view of those bytes, not a copy: a caller that
// changes them afterwards must leave alone what the summary holds (base
// offset, length, leader epoch, last offset delta, max timestamp, record
// count, the control attribute, whether a producer id is set). Patching the
// producer id with RewriteProducerID is fine: a mapped id is set iff the
// original was. Consumers may check the first and last batch cheaply with
// Check.
//
// The zero Chunk is empty.
type Chunk struct {
	src      []byte
	entries  []Entry
	verified bool
}

// Entry is the summary of one batch of a Chunk.
type Entry struct {
	// Pos is where the batch starts in the bytes the iterator walked.
	Pos int
	// Size is the batch's total size in bytes.
	Size int
	// BaseOffset and LastOffsetDelta are the header's offset fields.
	BaseOffset      int64
	LastOffsetDelta int32
	// LeaderEpoch is the partition leader epoch field.
	LeaderEpoch int32
	// MaxTimestamp is the max timestamp field.
	MaxTimestamp int64
	// RecordCount is the record count field.
	RecordCount int32
	// Producer is set when the batch has a producer id or is a control
	// batch: a log's producer state must see it.
	Producer bool
}

// LastOffset is the offset of the batch's last record.
func (e *Entry) LastOffset() int64 { return e.BaseOffset + int64(e.LastOffsetDelta) }

// NextOffset is the offset after the batch.
func (e *Entry) NextOffset() int64 { return e.LastOffset() + 1 }

// collect appends the summary of b, found at pos, to c.
func (c *Chunk) collect(b Batch, pos int, verified bool) {
	c.entries = append(c.entries, Entry{
		Pos:             pos,
		Size:            len(b),
		BaseOffset:      b.BaseOffset(),
		LastOffsetDelta: b.LastOffsetDelta(),
		LeaderEpoch:     b.PartitionLeaderEpoch(),
		MaxTimestamp:    b.MaxTimestamp(),
		RecordCount:     b.RecordCount(),
		Producer:        b.HasProducerID() || b.IsControl(),
	})
	c.verified = c.verified && verified
}

// Reset empties c and drops its view of the bytes, so a chunk kept for
// its memory does not keep the last walked buffer from the collector; the
// summary's memory stays for the next walk.
func (c *Chunk) Reset() { c.src, c.entries, c.verified = nil, c.entries[:0], false }

// Len is the number of batches in c.
func (c *Chunk) Len() int { return len(c.entries) }

// At is the summary of batch i.
func (c *Chunk) At(i int) Entry { return c.entries[i] }

// Batch is the view of batch i.
func (c *Chunk) Batch(i int) Batch {
	e := &c.entries[i]
	return Batch(c.src[e.Pos : e.Pos+e.Size : e.Pos+e.Size])
}

// Bytes are the batches of c, back to back (nil for an empty chunk).
func (c *Chunk) Bytes() []byte {
	if len(c.entries) == 0 {
		return nil
	}
	first, last := &c.entries[0], &c.entries[len(c.entries)-1]
	return c.src[first.Pos : last.Pos+last.Size]
}

// Size is len(c.Bytes()).
func (c *Chunk) Size() int {
	if len(c.entries) == 0 {
		return 0
	}
	return c.entries[len(c.entries)-1].Pos + c.entries[len(c.entries)-1].Size - c.entries[0].Pos
}

// Verified reports whether every batch of c passed its CRC32C check.
func (c *Chunk) Verified() bool { return c.verified }

// Slice returns the chunk of batches i to j-1 of c. It shares c's memory.
func (c *Chunk) Slice(i, j int) Chunk {
	return Chunk{src: c.src, entries: c.entries[i:j:j], verified: c.verified}
}

// Check is the cheap test that the bytes of the first and last batch of c
// still carry the base offset and length the summary holds: it catches a
// chunk whose bytes were restamped or reused after the walk, not every
// change.
func (c *Chunk) Check() error {
	if len(c.entries) == 0 {
		return nil
	}
	for _, i := range [2]int{0, len(c.entries) - 1} {
		e := &c.entries[i]
		b := Batch(c.src[e.Pos : e.Pos+e.Size])
		if b.BaseOffset() != e.BaseOffset || LogOverhead+int(b.Length()) != e.Size {
			return &Error{Offset: b.BaseOffset(), Err: ErrCorrupt,
				Detail: "batch bytes changed after their walk"}
		}
	}
	return nil
}
