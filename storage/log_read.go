package storage

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"syscall"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/codec"
	"github.com/kmirror/kmirror/internal/vfs"
)

// ReadInfo describes what a read found, with the partition offsets a Fetch
// response carries, all taken at the same moment.
type ReadInfo struct {
	// FirstOffset is the base offset of the first returned batch, -1 when
	// nothing was returned.
	FirstOffset      int64
	Bytes            int
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
	LogEndOffset     int64
}

// Region is a stretch of a segment file holding whole batches, for
// sendfile or vectored writes. The file stays readable for at least
// file.delete.delay.ms (60 s) even if retention deletes the segment.
type Region struct {
	File   vfs.File
	Offset int64
	Length int64
}

// Read copies whole batches into dst (grown if needed) starting with the
// batch that contains offset, up to maxBytes, never past upTo (the high
// watermark or the last stable offset, by isolation level). If the first
// batch alone exceeds maxBytes it is returned whole, so a reader always
// progresses (KIP-74). Reads stay within one segment.
func (l *Log) Read(offset int64, maxBytes int, upTo int64, dst []byte) ([]byte, ReadInfo, error) {
	seg, pos, end, info, err := l.locate(offset, int64(maxBytes), upTo)
	if err != nil || seg == nil {
		return dst[:0], info, err
	}
	n := int(end - pos)
	dst = slices.Grow(dst[:0], n)[:n]
	if m, err := seg.file.ReadAt(dst, pos); m != n {
		return dst[:0], info, fmt.Errorf("reading %s.log at %d: %w", seg.path, pos, shortRead(err))
	}
	info.Bytes = n
	return dst, info, nil
}

// ReadRegion is Read without the copy: it returns where the bytes are.
func (l *Log) ReadRegion(offset int64, maxBytes int, upTo int64) (Region, ReadInfo, error) {
	seg, pos, end, info, err := l.locate(offset, int64(maxBytes), upTo)
	if err != nil || seg == nil {
		return Region{}, info, err
	}
	info.Bytes = int(end - pos)
	return Region{File: seg.file, Offset: pos, Length: end - pos}, info, nil
}

func shortRead(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// locate finds the byte range [pos, end) to serve; seg is nil when there is
// nothing to return.
func (l *Log) locate(offset, maxBytes, upTo int64) (seg *segment, pos, end int64, info ReadInfo, err error) {
	if err := l.readCheck(); err != nil {
		return nil, 0, 0, ReadInfo{FirstOffset: -1}, err
	}
	segs := l.segments()
	info = ReadInfo{
		FirstOffset:      -1,
		LogStartOffset:   l.logStart.Load(),
		HighWatermark:    l.highWatermark.Load(),
		LastStableOffset: l.LastStableOffset(),
		LogEndOffset:     segs[len(segs)-1].next.Load(),
	}
	if offset < info.LogStartOffset || offset > info.LogEndOffset {
		return nil, 0, 0, info, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange,
			offset, info.LogStartOffset, info.LogEndOffset)
	}
	upTo = min(upTo, info.LogEndOffset)
	for i := segmentFor(segs, offset); i < len(segs) && offset < upTo; i++ {
		s := segs[i]
		if s.base >= upTo {
			break
		}
		size := s.size.Load()
		p, base, err := s.find(offset, size)
		if err != nil {
			return nil, 0, 0, info, l.readFailed(s, err)
		}
		if p == size {
			continue // offset lies in a gap after this segment's last batch
		}
		if base >= upTo {
			break
		}
		limit := size
		if upTo < s.next.Load() {
			if limit, _, err = s.find(upTo, size); err != nil {
				return nil, 0, 0, info, l.readFailed(s, err)
			}
		}
		e, err := s.boundaryAtOrBelow(p, p+max(maxBytes, 1), limit)
		if err != nil {
			return nil, 0, 0, info, l.readFailed(s, err)
		}
		if e <= p {
			break
		}
		info.FirstOffset = base
		return s, p, e, info, nil
	}
	return nil, 0, 0, info, nil
}

// readFailed logs the first read that meets damage in segment s (later
// ones answer the same error without a line each) and returns err.
func (l *Log) readFailed(s *segment, err error) error {
	if batch.IsCorruption(err) && s.damageLogged.CompareAndSwap(false, true) {
		l.cfg.Logger.Error("read from a damaged segment; reads there fail until it is repaired", "segment", s.path, "err", err)
	}
	return err
}

// readCheck is check for readers, which do not take l.mu. A log taken
// offline by a full disk still serves what it holds: readers only see
// bytes whose write completed (size and the log end are published after
// it), and a full disk damages nothing written before.
func (l *Log) readCheck() error {
	if p := l.offline.Load(); p != nil && !errors.Is(*p, syscall.ENOSPC) {
		return *p
	}
	return nil
}

// OffsetForTimestamp returns the offset and timestamp of the first record
// whose timestamp is >= ts (ListOffsets by timestamp), as Kafka answers:
// the time index finds the batch, then the batch's records are read
// (decompressed if needed) to find the record. A batch whose records
// cannot be read answers at batch granularity (its base offset and max
// timestamp), which may re-read but never skips.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, found bool, err error) {
	if err := l.readCheck(); err != nil {
		return 0, 0, false, err
	}
	logStart := l.logStart.Load()
	var rs recordSearch
	for _, s := range l.segments() {
		if s.maxTs.Load() < ts {
			continue
		}
		s.ixMu.RLock()
		rel := s.ix.timeFloorRel(ts)
		s.ixMu.RUnlock()
		size := s.size.Load()
		from, _, err := s.find(s.base+int64(rel), size)
		if err != nil {
			return 0, 0, false, err
		}
		_, err = s.scan(from, false, func(b batch.Batch, _ int64) error {
			if b.MaxTimestamp() < ts || b.LastOffset() < logStart {
				return nil
			}
			if offset, timestamp, found = rs.firstAtOrAfter(b, ts, logStart); found {
				return errStopScan
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopScan) {
			return 0, 0, false, err
		}
		if found {
			return offset, timestamp, true, nil
		}
	}
	return 0, 0, false, nil
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (ListOffsets -3; the first such record, as Kafka 3.7+).
func (l *Log) MaxTimestamp() (offset, timestamp int64, found bool, err error) {
	best := int64(-1)
	for _, s := range l.segments() {
		best = max(best, s.maxTs.Load())
	}
	if best < 0 {
		return 0, 0, false, l.readCheck()
	}
	return l.OffsetForTimestamp(best)
}

// recordSearch finds records by timestamp inside a batch. Its buffers are
// reused across the batches of one lookup.
type recordSearch struct {
	plain []byte
	views []recordView
}

// firstAtOrAfter returns the first record of b at or after logStart whose
// timestamp is >= ts.
func (rs *recordSearch) firstAtOrAfter(b batch.Batch, ts, logStart int64) (offset, timestamp int64, found bool) {
	base := b.BaseOffset()
	if b.LogAppendTime() {
		// Every record carries the batch's append time.
		return max(base, logStart), b.MaxTimestamp(), true
	}
	data := b.Records()
	if b.Codec() != batch.CodecNone {
		out, err := codec.Decompress(b.Codec(), data, rs.plain[:0], codec.DefaultMaxOut)
		rs.plain = out
		if err != nil {
			return max(base, logStart), b.MaxTimestamp(), true
		}
		data = out
	}
	var err error
	if rs.views, err = decodeRecords(rs.views, data, b.RecordCount()); err != nil {
		return max(base, logStart), b.MaxTimestamp(), true
	}
	for i := range rs.views {
		v := &rs.views[i]
		off, rts := base+int64(v.offsetDelta), b.BaseTimestamp()+v.timestampDelta
		if off >= logStart && rts >= ts {
			return off, rts, true
		}
	}
	return 0, 0, false
}

var errStopScan = errors.New("stop scan")
