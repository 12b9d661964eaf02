package storage

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/kmirror/kmirror/batch"
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
			return nil, 0, 0, info, err
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
				return nil, 0, 0, info, err
			}
		}
		e, err := s.boundaryAtOrBelow(p, p+max(maxBytes, 1), limit)
		if err != nil {
			return nil, 0, 0, info, err
		}
		if e <= p {
			break
		}
		info.FirstOffset = base
		return s, p, e, info, nil
	}
	return nil, 0, 0, info, nil
}

// readCheck is check for readers, which do not take l.mu.
func (l *Log) readCheck() error {
	if p := l.offline.Load(); p != nil {
		return *p
	}
	return nil
}

// OffsetForTimestamp returns the base offset of the first batch whose max
// timestamp is >= ts (ListOffsets by timestamp), and that timestamp. The
// answer has batch granularity: a consumer reset by time may re-read the
// records of that batch older than ts, never skip newer ones.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, found bool, err error) {
	if err := l.readCheck(); err != nil {
		return 0, 0, false, err
	}
	logStart := l.logStart.Load()
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
		var hit batch.Batch
		_, err = s.scan(from, false, func(b batch.Batch, _ int64) error {
			if b.MaxTimestamp() >= ts && b.LastOffset() >= logStart {
				hit = b
				return errStopScan
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopScan) {
			return 0, 0, false, err
		}
		if hit != nil {
			return max(hit.BaseOffset(), logStart), hit.MaxTimestamp(), true, nil
		}
	}
	return 0, 0, false, nil
}

// MaxTimestamp returns the offset of the batch holding the largest
// timestamp (ListOffsets -3), batch granularity as OffsetForTimestamp.
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

var errStopScan = errors.New("stop scan")
