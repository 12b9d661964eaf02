package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/vfs"
)

// Errors a Log returns. Kafka error codes map onto them in the broker.
var (
	// ErrOffline means an I/O error took the partition offline; the
	// wrapped error says which. Nothing more is appended until reopen.
	ErrOffline = errors.New("storage: partition offline after an I/O error")
	// ErrNoSpace is a write of an append the disk had no room for, undone
	// whole (an append of several runs keeps the runs written before it):
	// the log stays readable and writable, and the next append tries
	// again, so appends resume by themselves once space is freed. It
	// wraps the ENOSPC of the write, or the refusal of the log's
	// SpaceGuard.
	ErrNoSpace = errors.New("storage: no space left on the device: nothing of the append was written")
	// ErrOffsetOutOfRange is a read outside [log start, log end].
	ErrOffsetOutOfRange = errors.New("storage: offset out of range")
	// ErrOffsetOrder is a mirror append whose batches do not start at or
	// after the log end offset, or are not in increasing order.
	ErrOffsetOrder = errors.New("storage: batch offsets out of order")
	// ErrInvalidRecord is a produce append that is not exactly one valid
	// data batch (Kafka's INVALID_RECORD / CORRUPT_MESSAGE).
	ErrInvalidRecord = errors.New("storage: invalid record batch")
	// ErrClosed is any operation on a closed log.
	ErrClosed = errors.New("storage: log closed")
)

const (
	metaFile         = "partition.meta"
	cleanMarker      = ".clean"
	fileDeleteDelay  = 60 * time.Second // Kafka's file.delete.delay.ms
	metaVersionLine  = "kmirror-partition-meta 0"
	snapshotsToKeep  = 2
	maxRelativeDelta = 1<<31 - 1 // keep relative offsets positive int32, as Kafka does
)

// Log is the log of one partition. See the package doc for its layout and
// concurrency rules.
type Log struct {
	dir string
	cfg Config
	fs  vfs.FS

	// mu serialises writers: appends, truncation, retention, flush, close.
	mu sync.Mutex
	// segMu guards segs; readers copy the slice header under RLock.
	segMu sync.RWMutex
	segs  []*segment

	logStart      atomic.Int64
	highWatermark atomic.Int64
	recoveryPoint int64 // offset below which all data is fsynced
	// offline is set under mu and read by readers.
	offline atomic.Pointer[error]
	closed  bool
	// deleted is set by MarkDeleted under mu: the owner renamed the
	// directory away to remove it, so nothing may be written under dir
	// again (it may already hold a re-created partition of the same name).
	deleted bool

	unflushedRecords int64
	firstUnflushedMs int64

	// space, when set, is asked before every write that grows the log's
	// files; set by SetSpaceGuard under mu.
	space SpaceGuard

	epochs    *EpochCache
	producers atomic.Pointer[ProducerState]

	// chunk is the summary AppendMirror and the assigned appends build for
	// appendChunk; under mu, its memory reused across appends.
	chunk batch.Chunk
}

// Open opens (creating if needed) the partition log in dir and recovers it.
func Open(dir string, cfg Config) (*Log, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, cfg: cfg, fs: cfg.FS}
	if err := l.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating log dir %s: %w", dir, err)
	}
	if err := l.recover(); err != nil {
		l.closeSegments()
		return nil, fmt.Errorf("opening log %s: %w", dir, err)
	}
	return l, nil
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// LogStartOffset is the first offset a reader may fetch.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LogEndOffset is the offset the next appended batch gets (produce) or must
// be at or beyond (mirror).
func (l *Log) LogEndOffset() int64 {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	return l.segs[len(l.segs)-1].next.Load()
}

// HighWatermark is the offset up to which consumers may read: every record
// below it is committed. It lies in [log start, log end]. Without
// Config.ExternalHighWatermark every append raises it to the log end;
// with it, only SetHighWatermark raises it.
func (l *Log) HighWatermark() int64 { return l.highWatermark.Load() }

// SetHighWatermark raises the high watermark to offset, clamped into
// [log start, log end], and reports whether it moved. It never lowers it:
// as in Kafka, only a truncation below it (TruncateTo, the full truncation)
// brings it down, and a log start moved above it (retention is bounded by
// it; DeleteRecords refuses to pass it) pulls it up. The caller wakes the
// readers waiting for it (a Fetch long poll, an acks=all produce) when it
// moved. A closed log ignores it.
//
// Kafka splits this in two: UnifiedLog.maybeIncrementHighWatermark, the
// leader's, which only goes up, and updateHighWatermark, which follows
// the leader's value down too and is used at open and by followers. A
// follower here would need the second; only the first exists for now.
func (l *Log) SetHighWatermark(offset int64) bool {
	if offset <= l.highWatermark.Load() {
		// Already there (concurrent appends raise it for each other).
		// Without the lock: a truncation racing with this only lowers
		// it, to at most where the raise would have clamped it.
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	// mu orders this against truncation: a log end read here is not one a
	// concurrent TruncateTo is cutting away.
	offset = min(max(offset, l.logStart.Load()), l.active().next.Load())
	if offset <= l.highWatermark.Load() {
		return false
	}
	l.highWatermark.Store(offset)
	return true
}

// LastStableOffset is the high watermark, or the first offset of the
// earliest open transaction if that is lower.
func (l *Log) LastStableOffset() int64 {
	hw := l.highWatermark.Load()
	if first, ok := l.producer().FirstUnstableOffset(); ok && first < hw {
		return first
	}
	return hw
}

// Producers is the log's producer state (idempotence, transactions). The
// pointer changes when truncation reloads it; do not keep it.
func (l *Log) Producers() *ProducerState { return l.producers.Load() }

func (l *Log) producer() *ProducerState { return l.producers.Load() }

func (l *Log) setProducers(ps *ProducerState) { l.producers.Store(ps) }

// Epochs is the log's leader-epoch cache.
func (l *Log) Epochs() *EpochCache { return l.epochs }

// EndOffsetForEpoch answers OffsetForLeaderEpoch as Kafka does.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return l.epochs.EndOffsetFor(epoch, l.LogEndOffset())
}

// Size is the total size of the segment files in bytes.
func (l *Log) Size() int64 {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size.Load()
	}
	return n
}

// NumSegments is the number of segments, for tests and metrics.
func (l *Log) NumSegments() int {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	return len(l.segs)
}

// check returns the reason the log cannot be used, if any.
func (l *Log) check() error {
	if p := l.offline.Load(); p != nil {
		return *p
	}
	if l.closed || l.deleted {
		return ErrClosed
	}
	return nil
}

// fail takes the log offline after an I/O error and returns the error to
// report. REQUIRES: l.mu held.
func (l *Log) fail(err error) error {
	wrapped := fmt.Errorf("%w: %w", ErrOffline, err)
	l.offline.Store(&wrapped)
	l.cfg.Logger.Error("partition log offline", "dir", l.dir, "err", err)
	return wrapped
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// segments returns the current segment list; callers must not modify it.
func (l *Log) segments() []*segment {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	return l.segs
}

// setSegments publishes a new segment list. Lists are never modified after
// publication (copy on write). REQUIRES: l.mu held.
func (l *Log) setSegments(segs []*segment) {
	l.segMu.Lock()
	l.segs = segs
	l.segMu.Unlock()
}

// Flush fsyncs every segment with unflushed data and advances the recovery
// point to the log end.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(); err != nil {
		return err
	}
	return l.flushLocked()
}

// FlushIfDue flushes when flush.ms has passed since the oldest unflushed
// append. Owners call it periodically.
func (l *Log) FlushIfDue() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(); err != nil {
		return err
	}
	if l.cfg.FlushMs < 0 || l.unflushedRecords == 0 || l.cfg.Now().UnixMilli()-l.firstUnflushedMs < l.cfg.FlushMs {
		return nil
	}
	return l.flushLocked()
}

// flushLocked. REQUIRES: l.mu held.
func (l *Log) flushLocked() error {
	leo := l.active().next.Load()
	for _, s := range l.segs {
		if s.next.Load() > l.recoveryPoint || s == l.active() {
			if err := s.sync(); err != nil {
				return l.fail(err)
			}
		}
	}
	// Recovery re-assigns epochs only after the recovery point: the
	// epochs of the batches below it must be on disk first.
	if err := l.epochs.Sync(); err != nil {
		return l.fail(err)
	}
	l.recoveryPoint = leo
	l.unflushedRecords = 0
	if err := l.writeMeta(); err != nil {
		return l.fail(err)
	}
	return nil
}

// MarkDeleted is for a partition being deleted: from its return no write
// of any kind (append, truncation, retention, compaction, flush, the
// metadata and the clean-shutdown marker of Close) touches the directory
// again; they answer ErrClosed. Readers keep the open segment files until
// Close, which then only closes them: a Fetch may still be sending a
// region of them.
//
// Why it exists: the owner renames a deleted partition's directory away
// (so its name can be reused at once) and closes the log only later. A
// write in between, such as the flush of Close, went to the old path:
// partition.meta.tmp failed with "no such file or directory" and took the
// log offline with an ERROR, or, worse, landed in the directory of a
// partition re-created under the same name.
func (l *Log) MarkDeleted() {
	l.mu.Lock()
	l.deleted = true
	l.mu.Unlock()
}

// Close flushes, snapshots producer state and marks a clean shutdown so the
// next open skips the CRC re-validation. A log marked deleted is only
// closed (see MarkDeleted).
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	if l.deleted {
		l.closed = true
		return l.closeSegments()
	}
	err := l.check()
	if err == nil {
		err = l.flushLocked()
	}
	if err == nil {
		if err = l.producer().WriteSnapshot(l.fs, l.dir, l.active().next.Load()); err != nil {
			err = fmt.Errorf("writing producer snapshot: %w", err)
		}
	}
	if err == nil {
		err = vfs.WriteFileAtomic(l.fs, l.dir, filepath.Join(l.dir, cleanMarker), nil)
	}
	l.closed = true
	if cerr := l.closeSegments(); err == nil {
		err = cerr
	}
	return err
}

func (l *Log) closeSegments() error {
	var err error
	for _, s := range l.segs {
		if e := s.close(); err == nil {
			err = e
		}
	}
	return err
}

// writeMeta persists the log start offset and the recovery point.
// REQUIRES: l.mu held.
func (l *Log) writeMeta() error {
	body := fmt.Sprintf("%s\nlog.start.offset %d\nrecovery.point %d\n", metaVersionLine, l.logStart.Load(), l.recoveryPoint)
	return vfs.WriteFileAtomic(l.fs, l.dir, filepath.Join(l.dir, metaFile), []byte(body))
}

// readMeta returns the persisted log start offset and recovery point;
// found is false when the file does not exist.
func readMeta(fsys vfs.FS, dir string) (logStart, recoveryPoint int64, found bool, err error) {
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, metaFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 3 || lines[0] != metaVersionLine {
		return 0, 0, false, fmt.Errorf("%s: unrecognised content", metaFile)
	}
	vals := [2]int64{}
	for i, key := range []string{"log.start.offset ", "recovery.point "} {
		v, ok := strings.CutPrefix(lines[i+1], key)
		if !ok {
			return 0, 0, false, fmt.Errorf("%s: line %d: want %q", metaFile, i+2, key)
		}
		if vals[i], err = strconv.ParseInt(v, 10, 64); err != nil || vals[i] < 0 {
			return 0, 0, false, fmt.Errorf("%s: line %d: bad value %q", metaFile, i+2, v)
		}
	}
	return vals[0], vals[1], true, nil
}

// segmentFor returns the index of the last segment whose base is <= offset
// (0 if offset is below all). REQUIRES: segs non-empty.
func segmentFor(segs []*segment, offset int64) int {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })
	return max(0, i-1)
}

// retire removes a segment from disk now and closes its files later, so
// that readers holding file regions of it can finish (file.delete.delay.ms).
func (l *Log) retire(s *segment) error {
	for _, ext := range []string{".log", ".index", ".timeindex"} {
		if err := l.fs.Remove(s.path + ext); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("deleting %s%s: %w", s.path, ext, err)
		}
	}
	time.AfterFunc(fileDeleteDelay, func() { s.close() })
	return nil
}
