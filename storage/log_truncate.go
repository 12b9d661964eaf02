package storage

import (
	"fmt"

	"github.com/kmirror/kmirror/batch"
)

// TruncateTo removes every batch whose last offset is >= offset and makes
// offset the log end (used when a mirror finds its source diverged). A batch
// that straddles offset is removed whole and the log end becomes its base
// offset, so the next fetch brings it back intact. Indexes, the epoch cache
// and producer state follow. An offset below the log start truncates fully.
func (l *Log) TruncateTo(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(); err != nil {
		return err
	}
	if offset < l.logStart.Load() {
		return l.truncateFullyLocked(offset)
	}
	if offset >= l.active().next.Load() {
		return nil
	}
	n, pos, newEnd, err := cutPoint(l.segs, offset)
	if err != nil {
		return l.fail(err)
	}
	keep := append([]*segment(nil), l.segs[:n]...)
	dropped := l.segs[n:]
	seg := keep[len(keep)-1]
	size := seg.size.Load()
	if pos < size || seg.next.Load() > newEnd {
		if err := seg.truncateAt(pos, max(newEnd, seg.base)); err != nil {
			return l.fail(err)
		}
	}
	l.setSegments(keep)
	for _, s := range dropped {
		if err := l.retire(s); err != nil {
			return l.fail(err)
		}
	}
	return l.afterTruncation(newEnd)
}

// cutPoint is where TruncateTo(offset) cuts segs, for an offset inside
// the log: the first n segments stay, the last of them is cut at byte pos,
// and newEnd is the new log end (offset, or the base of a batch that
// straddles it and goes whole). REQUIRES: logStart <= offset < log end.
func cutPoint(segs []*segment, offset int64) (n int, pos, newEnd int64, err error) {
	i := segmentFor(segs, offset)
	for len(segs) > i+1 && segs[len(segs)-1].base >= offset {
		segs = segs[:len(segs)-1]
	}
	seg := segs[len(segs)-1]
	size := seg.size.Load()
	pos, base, err := seg.find(offset, size)
	if err != nil {
		return 0, 0, 0, err
	}
	newEnd = offset
	if pos < size && base < offset {
		newEnd = base
	}
	return len(segs), pos, newEnd, nil
}

// Truncation is what a truncation removes (PreviewTruncateTo).
type Truncation struct {
	// End is the log end the truncation leaves.
	End int64
	// Records and Bytes count the batches removed: their records (the
	// batches' record counts) and their bytes on disk.
	Records, Bytes int64
}

// PreviewTruncateTo reports what TruncateTo(offset) would remove, and
// changes nothing: the same cut (cutPoint, a full truncation below the
// log start), then the headers of the batches after it are read to count
// their records. ok is false when nothing would be removed. A log being
// appended to meanwhile may end later than what was counted.
func (l *Log) PreviewTruncateTo(offset int64) (t Truncation, ok bool, err error) {
	if err := l.readCheck(); err != nil {
		return Truncation{}, false, err
	}
	segs := l.segments()
	if offset >= segs[len(segs)-1].next.Load() {
		return Truncation{}, false, nil
	}
	n, pos := 0, int64(0) // a full truncation: everything goes
	t.End = offset
	if offset >= l.logStart.Load() {
		if n, pos, t.End, err = cutPoint(segs, offset); err != nil {
			return Truncation{}, false, err
		}
		n--
	}
	h := headerPool.Get().(*[batch.HeaderSize]byte)
	defer headerPool.Put(h)
	for _, s := range segs[n:] {
		size := s.size.Load()
		for p := pos; p < size; {
			b, err := s.readBatchHeader(p, h)
			if err != nil {
				return Truncation{}, false, err
			}
			t.Records += int64(b.RecordCount())
			p += batchSize(b)
		}
		t.Bytes += size - pos
		pos = 0
	}
	return t, true, nil
}

// afterTruncation brings epochs, producer state and offsets in line with a
// log that now ends at end. REQUIRES: l.mu held.
func (l *Log) afterTruncation(end int64) error {
	if err := l.epochs.TruncateFromEnd(end); err != nil {
		return l.fail(err)
	}
	if err := DeleteSnapshotsAbove(l.fs, l.dir, end); err != nil {
		return l.fail(err)
	}
	if err := l.loadProducerState(); err != nil {
		return l.fail(err)
	}
	l.highWatermark.Store(min(l.highWatermark.Load(), end))
	l.recoveryPoint = min(l.recoveryPoint, end)
	if err := l.writeMeta(); err != nil {
		return l.fail(err)
	}
	return nil
}

// TruncateFullyAndStartAt deletes the whole log and restarts it empty at
// offset, which becomes the log start and end (DESIGN.md decision 1: the
// source log start moved past everything we hold).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset)
}

func (l *Log) truncateFullyLocked(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: negative start offset %d", ErrOffsetOutOfRange, offset)
	}
	old := l.segs
	seg, err := createSegment(l.fs, l.dir, offset)
	if err != nil {
		return l.fail(err)
	}
	l.setSegments([]*segment{seg})
	for _, s := range old {
		if s.path == seg.path {
			s.close() // same file name: createSegment already truncated it
			continue
		}
		if err := l.retire(s); err != nil {
			return l.fail(err)
		}
	}
	l.logStart.Store(offset)
	l.highWatermark.Store(offset)
	l.recoveryPoint = offset
	if err := l.epochs.Clear(); err != nil {
		return l.fail(err)
	}
	if err := DeleteSnapshotsAbove(l.fs, l.dir, -1); err != nil {
		return l.fail(err)
	}
	l.setProducers(NewProducerState())
	if err := l.writeMeta(); err != nil {
		return l.fail(err)
	}
	return nil
}

// SetLogStartOffset moves the log start forward (DeleteRecords, or a mirror
// following its source): reads below it fail, whole segments below it are
// deleted. It never moves backwards and never past the high watermark.
func (l *Log) SetLogStartOffset(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(); err != nil {
		return err
	}
	if offset <= l.logStart.Load() {
		return nil
	}
	if hw := l.highWatermark.Load(); offset > hw {
		return fmt.Errorf("%w: log start %d beyond the high watermark %d", ErrOffsetOutOfRange, offset, hw)
	}
	return l.advanceLogStart(offset)
}

// advanceLogStart. REQUIRES: l.mu held; logStart < offset <= log end.
func (l *Log) advanceLogStart(offset int64) error {
	l.logStart.Store(offset)
	// The high watermark never lies below the log start (Kafka's
	// maybeIncrementLogStartOffset). Retention stops at the high watermark
	// and SetLogStartOffset refuses to pass it, so this only matters for
	// an owner that set it below a log start it moved some other way.
	if l.highWatermark.Load() < offset {
		l.highWatermark.Store(offset)
	}
	if err := l.writeMeta(); err != nil {
		return l.fail(err)
	}
	if offset >= l.active().next.Load() && l.active().size.Load() > 0 {
		if err := l.roll(offset); err != nil {
			return err
		}
	}
	segs := l.segs
	n := 0
	for n < len(segs)-1 && segs[n+1].base <= offset {
		n++
	}
	if n > 0 {
		l.setSegments(append([]*segment(nil), segs[n:]...))
		for _, s := range segs[:n] {
			if err := l.retire(s); err != nil {
				return l.fail(err)
			}
		}
	}
	if err := l.epochs.TruncateFromStart(offset); err != nil {
		return l.fail(err)
	}
	l.producer().DropAbortedBefore(offset)
	if err := DeleteSnapshotsBelow(l.fs, l.dir, offset, snapshotsToKeep); err != nil {
		l.cfg.Logger.Warn("deleting old producer snapshots failed", "dir", l.dir, "err", err)
	}
	return nil
}

// ApplyRetention deletes the oldest segments past retention.ms (by their
// newest timestamp) or retention.bytes, never the active one, and moves the
// log start to the first kept segment. It returns the number deleted.
func (l *Log) ApplyRetention() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(); err != nil {
		return 0, err
	}
	now := l.cfg.Now().UnixMilli()
	var total int64
	for _, s := range l.segs {
		total += s.size.Load()
	}
	// As Kafka's deletableSegments: a segment goes only when all of it lies
	// below the high watermark (the next segment starts at or below it),
	// so retention never removes records that are not committed yet. With
	// the high watermark at the log end (one node), that is every segment
	// but the active one, as before.
	hw := l.highWatermark.Load()
	n := 0
	for i, s := range l.segs[:len(l.segs)-1] {
		if l.segs[i+1].base > hw {
			break
		}
		newest := s.maxTs.Load()
		if newest < 0 {
			newest = s.created
		}
		expired := l.cfg.RetentionMs >= 0 && now-newest > l.cfg.RetentionMs
		oversized := l.cfg.RetentionBytes >= 0 && total-s.size.Load() >= l.cfg.RetentionBytes
		if !expired && !oversized {
			break
		}
		total -= s.size.Load()
		n++
	}
	if n == 0 {
		return 0, nil
	}
	start := max(l.logStart.Load(), l.segs[n].base)
	if err := l.advanceLogStart(start); err != nil {
		return 0, err
	}
	return n, nil
}
