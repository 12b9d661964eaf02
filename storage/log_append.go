package storage

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/kmirror/kmirror/batch"
)

// AppendResult describes an append.
type AppendResult struct {
	// FirstOffset and LastOffset span the appended batches (for a
	// duplicate produce, the original batch's offsets).
	FirstOffset, LastOffset int64
	// NextOffset is the log end offset after the append.
	NextOffset int64
	// Batches and Records count what was appended (0 for a duplicate).
	Batches int
	Records int64
	// Duplicate is set when a produce retry matched an appended batch:
	// nothing was written and the offsets are the original ones.
	Duplicate bool
}

// AppendMirror appends batches fetched from a source cluster at their own
// offsets (DESIGN.md decision 1): each batch's base offset must be at or
// beyond the log end offset and beyond the previous batch; gaps stay gaps.
// The bytes are stored unchanged. The whole chunk is appended or nothing is.
//
// REQUIRES: every batch's CRC32C was verified (the fetcher's single pass);
// storage re-checks only the structure. A caller whose walk can collect a
// batch.Chunk should use AppendChunk, which walks no header again.
func (l *Log) AppendMirror(records []byte) (AppendResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(); err != nil {
		return AppendResult{}, err
	}
	it := batch.NewIterator(records)
	it.SkipCRC()
	it.Collect(&l.chunk)
	defer l.chunk.Reset() // the caller's buffer is not the log's to keep
	for _, ok := it.Next(); ok; _, ok = it.Next() {
	}
	// The offset order is checked before the structure, as it was when
	// both ran in one walk: a batch out of order before a broken one
	// reports the order.
	if err := l.checkOrder(&l.chunk); err != nil {
		return AppendResult{}, err
	}
	if err := it.Err(); err != nil {
		return AppendResult{}, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if it.Incomplete() {
		return AppendResult{}, fmt.Errorf("%w: partial batch after %d bytes", ErrInvalidRecord, it.Consumed())
	}
	return l.appendChunk(&l.chunk)
}

// AppendChunk is AppendMirror for batches whose walk collected their
// summary (batch.Iterator.Collect): the same offset checks and result,
// without walking the headers again. A chunk that is not Verified has its
// CRCs checked here; a corrupt one appends nothing and is
// ErrInvalidRecord.
func (l *Log) AppendChunk(c *batch.Chunk) (AppendResult, error) {
	if err := c.Check(); err != nil {
		return AppendResult{}, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if !c.Verified() {
		for i := range c.Len() {
			if err := c.Batch(i).Verify(); err != nil {
				return AppendResult{}, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(); err != nil {
		return AppendResult{}, err
	}
	if err := l.checkOrder(c); err != nil {
		return AppendResult{}, err
	}
	return l.appendChunk(c)
}

// checkOrder refuses a chunk whose batches do not start at or beyond the
// log end and each past the one before. REQUIRES: l.mu held.
func (l *Log) checkOrder(c *batch.Chunk) error {
	next := l.active().next.Load()
	for i := range c.Len() {
		e := c.At(i)
		if e.BaseOffset < next || e.LastOffsetDelta < 0 {
			return fmt.Errorf("%w: batch at %d (last %d) below the log end %d",
				ErrOffsetOrder, e.BaseOffset, e.LastOffset(), next)
		}
		next = e.NextOffset()
	}
	return nil
}

// appendChunk appends c. REQUIRES: l.mu held; c's offsets checked.
func (l *Log) appendChunk(c *batch.Chunk) (AppendResult, error) {
	res := AppendResult{FirstOffset: -1, LastOffset: -1}
	if err := l.appendBatches(c, &res); err != nil {
		return AppendResult{}, err
	}
	return res, nil
}

// AppendProduce appends one client batch (a Produce request's records for a
// partition): the CRC is verified, idempotence and epoch checks run, then
// the base offset becomes the log end offset and the partition leader epoch
// the given local epoch. It modifies raw in place.
//
// A retried batch that was already appended returns Duplicate with the
// original offsets. Producer errors are ErrOutOfOrderSequence,
// ErrInvalidProducerEpoch and friends from producer state.
func (l *Log) AppendProduce(raw []byte, leaderEpoch int32) (AppendResult, error) {
	b, err := checkClientBatch(raw)
	if err != nil {
		return AppendResult{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(); err != nil {
		return AppendResult{}, err
	}
	dup, err := l.producer().CheckProduce(b)
	if err != nil {
		return AppendResult{}, err
	}
	if dup != nil {
		return AppendResult{FirstOffset: dup.BaseOffset, LastOffset: dup.LastOffset,
			NextOffset: l.active().next.Load(), Duplicate: true}, nil
	}
	return l.appendAssigned(b, leaderEpoch)
}

// AppendControl appends a control batch written by this broker
// (transaction markers, MIRROR_PID_RESET at failover) at the log end with
// the given epoch. No producer checks run. It modifies raw in place.
func (l *Log) AppendControl(raw []byte, leaderEpoch int32) (AppendResult, error) {
	return l.appendOwn(raw, leaderEpoch, true)
}

// AppendCoordinator appends a data batch a coordinator of this broker
// wrote (the group coordinator's transactional offsets, base sequence -1)
// as AppendControl does: no producer checks run, as for Kafka's
// AppendOrigin.COORDINATOR; the producer state still tracks it (a
// transactional batch opens its producer's transaction).
func (l *Log) AppendCoordinator(raw []byte, leaderEpoch int32) (AppendResult, error) {
	return l.appendOwn(raw, leaderEpoch, false)
}

func (l *Log) appendOwn(raw []byte, leaderEpoch int32, control bool) (AppendResult, error) {
	b, err := batch.Parse(raw)
	if err != nil {
		return AppendResult{}, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if b.IsControl() != control {
		return AppendResult{}, fmt.Errorf("%w: control attribute %t, want %t", ErrInvalidRecord, b.IsControl(), control)
	}
	if err := b.Verify(); err != nil {
		return AppendResult{}, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(); err != nil {
		return AppendResult{}, err
	}
	return l.appendAssigned(b, leaderEpoch)
}

// checkClientBatch applies Kafka's checks on a produced batch.
func checkClientBatch(raw []byte) (batch.Batch, error) {
	b, err := batch.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if err := b.Verify(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	switch {
	case b.IsControl():
		return nil, fmt.Errorf("%w: clients may not write control batches", ErrInvalidRecord)
	case b.RecordCount() <= 0 || int64(b.LastOffsetDelta()) != int64(b.RecordCount())-1:
		return nil, fmt.Errorf("%w: last offset delta %d does not match %d records",
			ErrInvalidRecord, b.LastOffsetDelta(), b.RecordCount())
	}
	if err := validateRecords(b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	return b, nil
}

// appendAssigned stamps b with the log end offset and epoch and appends it.
// REQUIRES: l.mu held.
func (l *Log) appendAssigned(b batch.Batch, leaderEpoch int32) (AppendResult, error) {
	b.SetBaseOffset(l.active().next.Load())
	b.SetPartitionLeaderEpoch(leaderEpoch)
	it := batch.NewIterator(b)
	it.SkipCRC()
	it.Collect(&l.chunk)
	defer l.chunk.Reset()
	it.Next() // b passed Parse: one whole batch
	return l.appendChunk(&l.chunk)
}

// appendBatches writes checked, offset-ordered batches, rolling segments as
// needed, and updates indexes, epochs, producer state and (unless the
// owner sets it: Config.ExternalHighWatermark) the high watermark. It reads
// the batches' headers from c's summary only. REQUIRES: l.mu held.
func (l *Log) appendBatches(c *batch.Chunk, res *AppendResult) error {
	runStart := 0 // first batch of the pending run
	var runBytes int64
	now := int64(-1) // read once, if a segment's age is asked
	for i := range c.Len() {
		e := c.At(i)
		seg := l.active()
		used := seg.size.Load() + runBytes
		roll := false
		switch {
		case used == 0 && e.BaseOffset != seg.base:
			roll = true // an empty segment is renamed to the batch's offset
		case used > 0 && used+int64(e.Size) > l.cfg.SegmentBytes:
			roll = true
		case used > 0 && seg.created > 0 && l.ageMs(seg, &now) >= l.cfg.SegmentMs:
			// created is set at a segment's first write: a run still
			// pending for a new segment is not "old".
			roll = true
		case e.LastOffset()-seg.base > maxRelativeDelta:
			roll = true
		}
		if roll {
			if err := l.writeRun(c, runStart, i, res); err != nil {
				return err
			}
			if err := l.roll(e.BaseOffset); err != nil {
				return err
			}
			runStart, runBytes = i, 0
		}
		runBytes += int64(e.Size)
	}
	return l.writeRun(c, runStart, c.Len(), res)
}

// ageMs is how old seg is, reading the clock at most once per append.
func (l *Log) ageMs(seg *segment, now *int64) int64 {
	if *now < 0 {
		*now = l.cfg.Now().UnixMilli()
	}
	return *now - seg.created
}

// writeRun appends batches from to to-1 of c, whole, to the active segment
// with one write. REQUIRES: l.mu held.
func (l *Log) writeRun(c *batch.Chunk, from, to int, res *AppendResult) error {
	if from == to {
		return nil
	}
	run := c.Slice(from, to)
	bytes := run.Bytes()
	if err := l.reserveSpace(int64(len(bytes))); err != nil {
		return err
	}
	seg := l.active()
	if err := seg.write(bytes); err != nil {
		if errors.Is(err, ErrNoSpace) {
			return err // undone whole: the log is as before, readable and writable
		}
		return l.fail(err)
	}
	start := seg.size.Load()
	if start == 0 {
		seg.created = l.cfg.Now().UnixMilli()
	}
	maxTs := seg.maxTs.Load()
	var records int64
	pos := start
	seg.ixMu.Lock()
	for i := range run.Len() {
		e := run.At(i)
		seg.indexEntry(e.BaseOffset, e.MaxTimestamp, e.Size, pos, l.cfg.IndexIntervalBytes)
		pos += int64(e.Size)
		maxTs = max(maxTs, e.MaxTimestamp)
		records += int64(e.RecordCount)
	}
	seg.ixMu.Unlock()
	if err := seg.ix.flushPendingFull(); err != nil {
		l.cfg.Logger.Warn("index write failed; it is rebuilt at the next open", "segment", seg.path, "err", err)
	}
	first, last := run.At(0), run.At(run.Len()-1)
	if res.FirstOffset < 0 {
		res.FirstOffset = first.BaseOffset
	}
	res.LastOffset = last.LastOffset()
	res.Batches += run.Len()
	next := last.NextOffset()
	// Publish: size before next, so that a reader never sees a log end
	// offset whose bytes it cannot read; epochs and producer state before
	// next too, so that a reader who sees the new log end also sees the
	// epochs and transactions of the batches below it.
	seg.size.Add(int64(len(bytes)))
	seg.maxTs.Store(maxTs)

	epoch := int32(-1)
	for i := range run.Len() {
		e := run.At(i)
		// Assign is a no-op for an epoch already latest: ask once per
		// epoch change within the run.
		if ple := e.LeaderEpoch; ple >= 0 && ple != epoch {
			if _, err := l.epochs.Assign(ple, e.BaseOffset); err != nil {
				return l.fail(err)
			}
			epoch = ple
		}
		if e.Producer {
			l.producer().OnAppend(run.Batch(i))
		}
	}
	seg.next.Store(next)
	res.Records += records
	res.NextOffset = next
	if !l.cfg.ExternalHighWatermark {
		l.highWatermark.Store(next)
	}

	if l.unflushedRecords == 0 {
		l.firstUnflushedMs = l.cfg.Now().UnixMilli()
	}
	l.unflushedRecords += records
	if l.cfg.FlushMessages > 0 && l.unflushedRecords >= l.cfg.FlushMessages {
		return l.flushLocked()
	}
	return nil
}

// roll starts a new active segment at base. An empty active segment is
// replaced instead of kept. REQUIRES: l.mu held.
func (l *Log) roll(base int64) error {
	old := l.active()
	if err := old.ix.flushPending(); err != nil {
		l.cfg.Logger.Warn("index write failed; it is rebuilt at the next open", "segment", old.path, "err", err)
	}
	seg, err := createSegment(l.fs, l.dir, base)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			// Nothing changed but maybe an empty leftover file, which the
			// next roll replaces: the append that rolled fails, and the
			// next one rolls again.
			return fmt.Errorf("%w: %w", ErrNoSpace, err)
		}
		return l.fail(err)
	}
	// Copy on write: readers keep iterating the slice they loaded.
	segs := append([]*segment(nil), l.segs...)
	if old.size.Load() == 0 {
		segs[len(segs)-1] = seg
	} else {
		segs = append(segs, seg)
	}
	l.setSegments(segs)
	if old.size.Load() == 0 {
		if err := l.retire(old); err != nil {
			return l.fail(err)
		}
		return nil
	}
	// Kafka snapshots producer state at every roll, so that recovery
	// replays at most one segment.
	if err := l.producer().WriteSnapshot(l.fs, l.dir, base); err != nil {
		l.cfg.Logger.Warn("producer snapshot failed; recovery will replay more", "offset", base, "err", err)
	}
	return nil
}
