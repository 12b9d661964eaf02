package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/vfs"
)

// segment is one .log file with its indexes. Appends happen under the Log's
// write lock; size and next are atomics so that readers holding an older
// snapshot of the segment list see a consistent prefix.
type segment struct {
	base    int64
	path    string // directory + zero-padded base, no extension
	file    vfs.File
	size    atomic.Int64 // bytes of whole batches
	next    atomic.Int64 // offset after the last batch (base when empty)
	maxTs   atomic.Int64 // largest batch max timestamp, -1 when empty
	created int64        // ms of the first append, for segment.ms; 0 when empty
	ix      segmentIndex
	// ixMu guards ix against readers while the writer appends entries.
	ixMu            sync.RWMutex
	bytesSinceIndex int64
	// damageLogged is set once a read met damage here: logged once, not
	// at every fetch that meets it again.
	damageLogged atomic.Bool
}

func segmentPath(dir string, base int64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d", base))
}

// headerPool holds scratch buffers for reading batch headers on the read path.
var headerPool = sync.Pool{New: func() any { return new([batch.HeaderSize]byte) }}

// createSegment makes a new empty segment at base, replacing leftovers.
func createSegment(fsys vfs.FS, dir string, base int64) (*segment, error) {
	s := &segment{base: base, path: segmentPath(dir, base)}
	f, err := fsys.OpenFile(s.path+".log", os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating segment %s.log: %w", s.path, err)
	}
	s.file = f
	if err := s.ix.openFiles(fsys, s.path); err != nil {
		f.Close()
		return nil, fmt.Errorf("creating index of %s: %w", s.path, err)
	}
	if err := s.ix.rewrite(); err != nil {
		s.close()
		return nil, fmt.Errorf("creating index of %s: %w", s.path, err)
	}
	s.next.Store(base)
	s.maxTs.Store(-1)
	return s, nil
}

// openSegment opens an existing segment. With verify, every batch is
// checked (structure and CRC32C), a damaged tail is cut and the indexes are
// rebuilt; otherwise the index files are trusted if they decode cleanly and
// only the stretch after the last index entry is walked.
func openSegment(fsys vfs.FS, dir string, base int64, verify bool, indexInterval int64) (_ *segment, cut bool, err error) {
	// s is not a named result: early returns set results to nil, and the
	// deferred cleanup must still reach the files opened so far.
	s := &segment{base: base, path: segmentPath(dir, base)}
	if s.file, err = fsys.OpenFile(s.path+".log", os.O_RDWR, 0o644); err != nil {
		return nil, false, fmt.Errorf("opening segment %s.log: %w", s.path, err)
	}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	fi, err := s.file.Stat()
	if err != nil {
		return nil, false, err
	}
	s.size.Store(fi.Size())
	s.created = fi.ModTime().UnixMilli()
	if err := s.ix.openFiles(fsys, s.path); err != nil {
		return nil, false, fmt.Errorf("opening index of %s: %w", s.path, err)
	}
	rebuild := verify
	if !rebuild {
		if err := s.loadIndex(fsys); err != nil {
			rebuild = true
		}
	}
	if rebuild {
		s.ix.offsets, s.ix.times = s.ix.offsets[:0], s.ix.times[:0]
	}
	// Index files are rewritten whole below, never appended during open.
	defer func() { s.ix.pendingOff, s.ix.pendingTs = s.ix.pendingOff[:0], s.ix.pendingTs[:0] }()
	from := int64(0)
	if !rebuild {
		from = s.ix.floorPositionBelow(fi.Size())
	}
	s.next.Store(base)
	s.maxTs.Store(-1)
	if n := len(s.ix.times); n > 0 {
		s.maxTs.Store(s.ix.times[n-1].ts)
	}
	indexAndObserve := func(b batch.Batch, pos int64) error {
		s.indexBatch(b, pos, indexInterval)
		s.observe(b)
		return nil
	}
	observeOnly := func(b batch.Batch, _ int64) error {
		s.observe(b)
		return nil
	}
	walk := observeOnly
	if rebuild {
		walk = indexAndObserve
	}
	end, scanErr := s.scan(from, verify, walk)
	if !rebuild {
		s.bytesSinceIndex = end - from
	}
	var damaged *batch.Error
	if scanErr != nil && !errors.As(scanErr, &damaged) {
		return nil, false, scanErr
	}
	if end != fi.Size() {
		// A torn or corrupt tail: everything from end on is cut. Only
		// allowed when verifying (recovery); a clean segment with a bad
		// tail means the clean marker lied, so recover it the same way.
		if err := s.file.Truncate(end); err != nil {
			return nil, false, fmt.Errorf("cutting damaged tail of %s.log at %d: %w", s.path, end, err)
		}
		s.size.Store(end)
		cut = true
		if !rebuild {
			rebuild = true
			s.ix.offsets, s.ix.times = s.ix.offsets[:0], s.ix.times[:0]
			s.next.Store(base)
			s.maxTs.Store(-1)
			if _, err := s.scan(0, false, indexAndObserve); err != nil {
				return nil, false, err
			}
		}
	}
	if rebuild {
		if err := s.ix.rewrite(); err != nil {
			return nil, false, fmt.Errorf("rewriting index of %s: %w", s.path, err)
		}
	}
	if _, err := s.file.Seek(s.size.Load(), io.SeekStart); err != nil {
		return nil, false, err
	}
	return s, cut, nil
}

// loadIndex reads and checks both index files.
func (s *segment) loadIndex(fsys vfs.FS) error {
	ob, err := vfs.ReadFile(fsys, s.path+".index")
	if err != nil {
		return err
	}
	if s.ix.offsets, err = decodeOffsetIndex(ob, s.size.Load()); err != nil {
		return err
	}
	tb, err := vfs.ReadFile(fsys, s.path+".timeindex")
	if err != nil {
		return err
	}
	s.ix.times, err = decodeTimeIndex(tb, math.MaxUint32)
	return err
}

// observe advances next and maxTs past b.
func (s *segment) observe(b batch.Batch) {
	if n := b.NextOffset(); n > s.next.Load() {
		s.next.Store(n)
	}
	if ts := b.MaxTimestamp(); ts > s.maxTs.Load() {
		s.maxTs.Store(ts)
	}
}

// indexBatch adds index entries for a batch at pos, sparse by interval.
// Entries are queued for the index files; flushPending writes them.
func (s *segment) indexBatch(b batch.Batch, pos int64, interval int64) {
	s.indexEntry(b.BaseOffset(), b.MaxTimestamp(), len(b), pos, interval)
}

// indexEntry is indexBatch from the batch's base offset, max timestamp and
// size.
func (s *segment) indexEntry(base, maxTs int64, size int, pos int64, interval int64) {
	if s.bytesSinceIndex >= interval || len(s.ix.offsets) == 0 {
		rel := uint32(base - s.base)
		s.bytesSinceIndex = 0
		s.ix.addOffset(rel, uint32(pos))
		s.ix.addTime(maxTs, rel)
	}
	s.bytesSinceIndex += int64(size)
}

// scanChunk is the read size of sequential scans.
const scanChunk = 1 << 20

// scan walks the whole batches from position from to the end of the
// segment, calling fn for each. It returns the position after the last
// whole valid batch; a torn or corrupt tail ends the walk with a corruption
// error (batch.IsCorruption) and that position.
func (s *segment) scan(from int64, verify bool, fn func(b batch.Batch, pos int64) error) (int64, error) {
	size := s.size.Load()
	buf := make([]byte, scanChunk)
	pos := from
	for pos < size {
		want := min(int64(len(buf)), size-pos)
		n, err := s.file.ReadAt(buf[:want], pos)
		if err != nil && !(errors.Is(err, io.EOF) && int64(n) == want) {
			return pos, fmt.Errorf("reading %s.log at %d: %w", s.path, pos, err)
		}
		it := batch.NewIterator(buf[:n])
		if !verify {
			it.SkipCRC()
		}
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			if err := fn(b, pos+int64(it.Consumed()-len(b))); err != nil {
				return pos + int64(it.Consumed()-len(b)), err
			}
		}
		if err := it.Err(); err != nil {
			return pos + int64(it.Consumed()), err
		}
		pos += int64(it.Consumed())
		if it.Incomplete() {
			rest := it.Rest()
			if len(rest) < batch.LogOverhead {
				if pos+int64(len(rest)) >= size {
					return pos, tornAt(s, pos)
				}
				continue
			}
			total := int64(batch.LogOverhead) + int64(int32(be32(rest[8:])))
			if pos+total > size {
				return pos, tornAt(s, pos)
			}
			if total > int64(len(buf)) {
				buf = make([]byte, total) // a batch larger than the chunk
			}
		}
	}
	return pos, nil
}

func tornAt(s *segment, pos int64) error {
	return &batch.Error{Offset: -1, Err: batch.ErrShort, Detail: fmt.Sprintf("torn batch at position %d of %s.log", pos, s.path)}
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// readHeader reads the header of the batch at pos into h.
func (s *segment) readHeader(pos int64, h *[batch.HeaderSize]byte) (batch.Batch, error) {
	if _, err := s.file.ReadAt(h[:], pos); err != nil {
		return nil, fmt.Errorf("reading batch header in %s.log at %d: %w", s.path, pos, err)
	}
	return batch.Batch(h[:]), nil
}

// batchSize is the on-disk size of the batch whose header is h.
func batchSize(h batch.Batch) int64 { return int64(batch.LogOverhead) + int64(h.Length()) }

// minBatchLength is the smallest length field a v2 batch can have: its
// header after the offset and length fields, with no records.
const minBatchLength = batch.HeaderSize - batch.LogOverhead

// readBatchHeader reads the header of the batch at pos and checks that the
// batch is one: a length no smaller than a header's, and the whole batch
// inside the file. WHY on every read path: a damaged length (0x7fffffff)
// would send a reader 2 GiB past the end of the file, and a consumer would
// wait forever for bytes that never come. The error is a corruption
// (batch.IsCorruption) naming the file and position.
func (s *segment) readBatchHeader(pos int64, h *[batch.HeaderSize]byte) (batch.Batch, error) {
	b, err := s.readHeader(pos, h)
	if err != nil {
		return nil, err
	}
	if size := s.size.Load(); b.Length() < minBatchLength || pos+batchSize(b) > size {
		return nil, &batch.Error{Offset: b.BaseOffset(), Err: batch.ErrCorrupt,
			Detail: fmt.Sprintf("damaged segment %s.log: the batch at position %d claims %d bytes, %d are left in the file",
				s.path, pos, batchSize(b), size-pos)}
	}
	return b, nil
}

// sanityCheck is the cheap check of a segment opened without a full scan
// (a clean shutdown): its first batch is whole and starts at or after the
// segment's base offset, and its index points inside the file.
func (s *segment) sanityCheck() error {
	size := s.size.Load()
	if size == 0 {
		return nil
	}
	h := headerPool.Get().(*[batch.HeaderSize]byte)
	defer headerPool.Put(h)
	b, err := s.readBatchHeader(0, h)
	if err != nil {
		return err
	}
	if b.BaseOffset() < s.base {
		return &batch.Error{Offset: b.BaseOffset(), Err: batch.ErrCorrupt,
			Detail: fmt.Sprintf("damaged segment %s.log: its first batch starts at offset %d, below the segment's base %d",
				s.path, b.BaseOffset(), s.base)}
	}
	s.ixMu.RLock()
	last := s.ix.floorPositionBelow(size)
	s.ixMu.RUnlock()
	if last >= size {
		return &batch.Error{Offset: -1, Err: batch.ErrCorrupt,
			Detail: fmt.Sprintf("damaged index of %s: it points at position %d of a %d-byte segment", s.path, last, size)}
	}
	return nil
}

// find returns the position of the first batch whose last offset is >=
// offset, or size when there is none, with that batch's base offset.
func (s *segment) find(offset int64, size int64) (pos int64, base int64, err error) {
	rel := offset - s.base
	if rel < 0 {
		rel = 0
	}
	if rel > math.MaxUint32 {
		rel = math.MaxUint32
	}
	s.ixMu.RLock()
	pos = s.ix.floorPosition(uint32(rel))
	s.ixMu.RUnlock()
	h := headerPool.Get().(*[batch.HeaderSize]byte)
	defer headerPool.Put(h)
	for pos < size {
		b, err := s.readBatchHeader(pos, h)
		if err != nil {
			return 0, 0, err
		}
		if b.LastOffset() >= offset {
			return pos, b.BaseOffset(), nil
		}
		pos += batchSize(b)
	}
	return size, -1, nil
}

// boundaryAtOrBelow returns the largest batch boundary <= limit, walking from
// start (a boundary). If the first batch alone exceeds limit, its end is
// returned so that a reader always makes progress.
func (s *segment) boundaryAtOrBelow(start, limit, size int64) (int64, error) {
	if limit >= size {
		return size, nil
	}
	s.ixMu.RLock()
	pos := max(start, s.ix.floorPositionBelow(limit))
	s.ixMu.RUnlock()
	h := headerPool.Get().(*[batch.HeaderSize]byte)
	defer headerPool.Put(h)
	for pos < size {
		b, err := s.readBatchHeader(pos, h)
		if err != nil {
			return 0, err
		}
		end := pos + batchSize(b)
		if end > limit {
			if pos == start {
				return end, nil
			}
			return pos, nil
		}
		pos = end
	}
	return pos, nil
}

// write appends whole batches at the end of the file. On failure the file
// is cut back to its previous size so no partial batch stays behind.
func (s *segment) write(chunk []byte) error {
	size := s.size.Load()
	if _, err := s.file.Write(chunk); err != nil {
		if terr := s.file.Truncate(size); terr != nil {
			return fmt.Errorf("writing %s.log: %w (and cutting the partial write failed: %v)", s.path, err, terr)
		}
		if _, serr := s.file.Seek(size, io.SeekStart); serr != nil {
			return fmt.Errorf("writing %s.log: %w (and seeking back failed: %v)", s.path, err, serr)
		}
		if errors.Is(err, syscall.ENOSPC) {
			return fmt.Errorf("%w: writing %s.log: %w", ErrNoSpace, s.path, err)
		}
		return fmt.Errorf("writing %s.log: %w", s.path, err)
	}
	return nil
}

// truncateAt cuts the segment at pos (a batch boundary) and drops index
// entries at or beyond it; next becomes newNext.
func (s *segment) truncateAt(pos int64, newNext int64) error {
	if err := s.file.Truncate(pos); err != nil {
		return fmt.Errorf("truncating %s.log to %d: %w", s.path, pos, err)
	}
	if _, err := s.file.Seek(pos, io.SeekStart); err != nil {
		return err
	}
	s.ixMu.Lock()
	err := s.ix.truncateAfter(uint32(max(0, newNext-s.base)), pos)
	s.ixMu.Unlock()
	if err != nil {
		return fmt.Errorf("truncating index of %s: %w", s.path, err)
	}
	s.size.Store(pos)
	s.next.Store(newNext)
	s.bytesSinceIndex = 0
	return nil
}

func (s *segment) sync() error {
	if err := s.ix.flushPending(); err != nil {
		return fmt.Errorf("writing index of %s: %w", s.path, err)
	}
	if err := s.file.Sync(); err != nil {
		return fmt.Errorf("syncing %s.log: %w", s.path, err)
	}
	if err := s.ix.sync(); err != nil {
		return fmt.Errorf("syncing index of %s: %w", s.path, err)
	}
	return nil
}

func (s *segment) close() error {
	var err error
	if s.file != nil {
		err = s.file.Close()
	}
	if s.ix.offFile != nil {
		if e := s.ix.close(); err == nil {
			err = e
		}
	}
	return err
}

// remove closes and deletes the segment's files.
func (s *segment) remove(fsys vfs.FS) error {
	s.close()
	for _, ext := range []string{".log", ".index", ".timeindex"} {
		if err := fsys.Remove(s.path + ext); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("deleting %s%s: %w", s.path, ext, err)
		}
	}
	return nil
}
