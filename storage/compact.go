package storage

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/codec"
	"github.com/kmirror/kmirror/internal/vfs"
)

// Log compaction (cleanup.policy=compact), after Kafka's LogCleaner.
//
// Which segments. The non-active segments from the oldest on, up to the
// first one that reaches past the last stable offset (it may hold records
// of open transactions, which could still abort) or whose newest timestamp
// is younger than min.compaction.lag.ms. The active segment is never
// rewritten.
//
// Which record wins. An offset map (key -> latest offset) is built from
// every data record below the last stable offset, the active segment's
// included. Kafka's map stops at the active segment, so a key rewritten
// there keeps its older copies until the segment rolls; here the newest
// copy anywhere below the LSO lets the older ones go, which frees space
// sooner and is as safe (those records are committed log data). Records of
// aborted transactions (the producer state's aborted index, the one
// read_committed fetches get) stay out of the map, so an aborted write
// never displaces a committed value. Keys are mapped by a 128-bit digest
// (a SHA-256 prefix), as Kafka maps them by MD5: memory per key does not
// grow with the key, and a collision is beyond practical odds.
//
// What is kept, batch by batch, in a cleaned segment:
//
//   - Control batches, as they are: transaction markers must stay for
//     read_committed consumers and producer state. (Kafka drops a marker
//     once its transaction's data is gone and delete.retention.ms passed;
//     kmirror keeps them.)
//   - A data record when its key is null (Kafka refuses null keys in a
//     compacted topic at produce time, but a mirror stores what its source
//     has, so they are kept rather than silently dropped), or when no later
//     record of the map has its key and it is not an expired tombstone. A
//     tombstone (null value) expires delete.retention.ms after the newest
//     timestamp of its segment: in the spirit of Kafka's legacy rule (a
//     horizon per segment, there from file modification times), simple
//     and free of per-batch state. Since KIP-534 Kafka stamps a delete
//     horizon into v2 batches instead; such a stamp coming from a source
//     is kept in the bytes, not used.
//   - A batch that keeps every record: byte for byte, not recompressed.
//   - A batch that keeps some: re-encoded by appendPartialBatch (same base
//     offset, last offset delta, producer fields and codec; new max
//     timestamp, count and CRC).
//   - A batch that keeps none: dropped, except kept empty (appendEmptyBatch)
//     when it is the last data batch of a producer still in producer state,
//     so that its last sequence and epoch survive a reload (Kafka's rule),
//     or the last batch of its segment, so that the segment keeps its
//     offset range and never ends up empty (Kafka keeps the last batch of a
//     cleaning round for the same reason; it merges segments, kmirror does
//     not).
//   - A batch whose records cannot be read (bad compression, malformed
//     records, more than compactMaxBatchBytes decompressed): as it is,
//     mapping nothing. A batch failing its CRC stops the compaction.
//
// Crash safety. Each cleaned segment replaces its original by a rename, so
// <base>.log is always the old file or the new one, never both or neither:
//
//  1. The cleaned copy is written to <base>.log.cleaned.tmp and fsynced.
//     It is created only when the first batch differs from the original:
//     a segment with nothing to remove is not rewritten. A crash leaves the
//     .tmp file, which recovery deletes (listSegments).
//  2. Before the first rename, the recovery point in partition.meta is
//     lowered to that segment's base. A crash from here until step 5 makes
//     recovery verify the segment and every later one batch by batch and
//     rebuild their indexes, whichever .log and index files it finds: a new
//     .log next to the old index files is never trusted.
//  3. rename(<base>.log.cleaned.tmp, <base>.log), then the directory is
//     fsynced: the switch.
//  4. Fresh index files are written from the index built while writing.
//  5. After the last swap the recovery point is restored.
//
// Concurrency. Compact holds l.mu throughout (compaction is off the hot
// path; appends wait). Readers keep working: the segment list is replaced
// copy-on-write, and a reader holding the old segment (or a Region of its
// file) reads the old inode, whose descriptor is closed only after
// file.delete.delay.ms, as retire does.
//
// Cost. Every call reads and decompresses the whole log below the LSO to
// build the map (Kafka remembers a clean/dirty boundary instead), and
// rewrites only the segments that change. Owners schedule it, as
// log.cleaner.backoff.ms schedules Kafka's cleaner.

// CompactStats describes one Compact call. Batch, record and byte counts
// cover the segments that were eligible for cleaning, rewritten or not.
type CompactStats struct {
	// SegmentsCleaned is the number of segments rewritten.
	SegmentsCleaned int
	BatchesBefore   int64
	BatchesAfter    int64
	RecordsRemoved  int64
	BytesBefore     int64
	BytesAfter      int64
}

const (
	// compactMaxBatchBytes bounds the decompressed size of one batch the
	// cleaner reads; a larger one is kept as it is.
	compactMaxBatchBytes = codec.DefaultMaxOut
	// compactWriteChunk is the write size of cleaned segments.
	compactWriteChunk = 1 << 20
	// cleanedSuffix names a cleaned copy before its swap. It ends in .tmp
	// so that recovery deletes a leftover.
	cleanedSuffix = ".log.cleaned.tmp"
)

// keyDigest identifies a record key in the offset map.
type keyDigest [16]byte

func digestKey(k []byte) keyDigest {
	sum := sha256.Sum256(k)
	return keyDigest(sum[:16])
}

// abortedRange spans an aborted transaction of one producer: its first
// data offset up to its ABORT marker.
type abortedRange struct{ first, marker int64 }

// compactor holds the state of one Compact call.
type compactor struct {
	l         *Log
	nowMs     int64
	producers *ProducerState
	latest    map[keyDigest]int64
	aborted   map[int64][]abortedRange // by producer id, by first offset

	plain   []byte // decompressed records of the current batch
	views   []recordView
	kept    []recordView
	out     []byte // the current re-encoded batch
	scratch []byte // uncompressed kept records

	undecodable int
	stats       CompactStats
	savedRP     int64
	lowered     bool
}

// Compact cleans the log as described above, if the config enables
// compaction (Config.Compact); now decides tombstone expiry and the
// compaction lag. It returns what it did. An I/O error after a swap began
// takes the partition offline; other errors (a CRC failure, a write error
// on the cleaned copy) leave the log as it was for the segments not yet
// swapped.
func (l *Log) Compact(now time.Time) (CompactStats, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(); err != nil {
		return CompactStats{}, err
	}
	if !l.cfg.Compact {
		return CompactStats{}, nil
	}
	c := &compactor{l: l, nowMs: now.UnixMilli(), producers: l.producer()}
	lso := l.LastStableOffset()
	n := c.cleanable(l.segs, lso)
	if n == 0 {
		return CompactStats{}, nil
	}
	err := c.buildOffsetMap(l.segs, lso)
	for i := 0; i < n && err == nil; i++ {
		err = c.cleanSegment(i)
	}
	if rerr := c.restoreRecoveryPoint(); err == nil {
		err = rerr
	}
	if c.undecodable > 0 {
		l.cfg.Logger.Warn("compaction kept batches whose records it could not read",
			"dir", l.dir, "batches", c.undecodable)
	}
	if err != nil {
		return c.stats, fmt.Errorf("compacting %s: %w", l.dir, err)
	}
	return c.stats, nil
}

// cleanable returns how many segments, from the first, may be cleaned.
func (c *compactor) cleanable(segs []*segment, lso int64) int {
	lag := c.l.cfg.MinCompactionLagMs
	n := 0
	for _, s := range segs[:len(segs)-1] {
		if s.next.Load() > lso || (lag > 0 && c.nowMs-segmentNewest(s) < lag) {
			break
		}
		n++
	}
	return n
}

// segmentNewest is the newest timestamp of s, or its creation time when it
// holds no timestamps (as retention judges it).
func segmentNewest(s *segment) int64 {
	if ts := s.maxTs.Load(); ts >= 0 {
		return ts
	}
	return s.created
}

// buildOffsetMap maps every key of the data records below end to its
// latest offset, leaving out aborted transactions.
func (c *compactor) buildOffsetMap(segs []*segment, end int64) error {
	c.latest = make(map[keyDigest]int64)
	c.aborted = make(map[int64][]abortedRange)
	for _, a := range c.producers.AbortedTxns(0, end) { // by first offset
		c.aborted[a.ProducerID] = append(c.aborted[a.ProducerID], abortedRange{a.FirstOffset, a.LastOffset})
	}
	for _, s := range segs {
		if s.base >= end {
			break
		}
		_, err := s.scan(0, false, func(b batch.Batch, _ int64) error {
			if b.BaseOffset() >= end {
				return errStopScan
			}
			if b.IsControl() || c.isAborted(b) {
				return nil
			}
			recs, ok, err := c.records(b)
			if err != nil || !ok {
				return err
			}
			for i := range recs {
				off := b.BaseOffset() + int64(recs[i].offsetDelta)
				if off >= end {
					break
				}
				if recs[i].key == nil {
					continue
				}
				d := digestKey(recs[i].key)
				if prev, found := c.latest[d]; !found || off > prev {
					c.latest[d] = off
				}
			}
			return nil
		})
		if errors.Is(err, errStopScan) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s.log: %w", s.path, err)
		}
	}
	return nil
}

// isAborted reports whether b belongs to an aborted transaction.
func (c *compactor) isAborted(b batch.Batch) bool {
	if !b.IsTransactional() {
		return false
	}
	rs, base := c.aborted[b.ProducerID()], b.BaseOffset()
	i := sort.Search(len(rs), func(i int) bool { return rs[i].first > base })
	return i > 0 && base < rs[i-1].marker
}

// records checks b's CRC and decodes its records (valid until the next
// call). ok is false when the records cannot be read; err is a CRC failure.
func (c *compactor) records(b batch.Batch) (recs []recordView, ok bool, err error) {
	if err := b.Verify(); err != nil {
		return nil, false, err
	}
	data := b.Records()
	if b.Codec() != batch.CodecNone {
		out, err := codec.Decompress(b.Codec(), data, c.plain[:0], compactMaxBatchBytes)
		c.plain = out
		if err != nil {
			return nil, false, nil
		}
		data = out
	}
	c.views, err = decodeRecords(c.views, data, b.RecordCount())
	if err != nil || !offsetDeltasValid(c.views, b.LastOffsetDelta()) {
		return nil, false, nil
	}
	return c.views, true, nil
}

// offsetDeltasValid: strictly increasing, within [0, lastOffsetDelta]. A
// batch breaking this has no well-defined record offsets to compact by.
func offsetDeltasValid(recs []recordView, lastOffsetDelta int32) bool {
	prev := int32(-1)
	for i := range recs {
		d := recs[i].offsetDelta
		if d <= prev || d > lastOffsetDelta {
			return false
		}
		prev = d
	}
	return true
}

// cleanSegment rewrites segment i when anything in it goes.
func (c *compactor) cleanSegment(i int) error {
	src := c.l.segs[i]
	size := src.size.Load()
	c.stats.BytesBefore += size
	if size == 0 {
		return nil
	}
	expired := c.nowMs-segmentNewest(src) > c.l.cfg.DeleteRetentionMs
	last := src.next.Load()
	w := newCleanedSegment(c.l, src)
	_, err := src.scan(0, false, func(b batch.Batch, _ int64) error {
		c.stats.BatchesBefore++
		out, same, err := c.filter(b, b.NextOffset() == last, expired)
		if err != nil {
			return err
		}
		return w.add(out, same)
	})
	if err == nil && w.seg.next.Load() != last {
		err = fmt.Errorf("cleaned copy ends at %d, the segment at %d", w.seg.next.Load(), last)
	}
	c.stats.BatchesAfter += w.batches
	c.stats.BytesAfter += w.size
	if err != nil {
		w.discard()
		return fmt.Errorf("cleaning %s.log: %w", src.path, err)
	}
	if w.f == nil {
		return nil // nothing went: the segment stays as it is
	}
	return c.swap(i, w)
}

// filter decides the fate of batch b of a cleaned segment: out is what to
// write (nil: nothing) and same reports that out is b unchanged. out may
// alias c.out or the scan buffer; the caller copies it.
func (c *compactor) filter(b batch.Batch, lastInSegment, expired bool) (out []byte, same bool, err error) {
	if b.IsControl() {
		return b, true, nil
	}
	recs, ok, err := c.records(b)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		c.undecodable++
		return b, true, nil
	}
	kept := c.kept[:0]
	for _, r := range recs {
		if c.keep(b, &r, expired) {
			kept = append(kept, r)
		}
	}
	c.kept = kept
	c.stats.RecordsRemoved += int64(len(recs) - len(kept))
	switch {
	case len(kept) > 0 && len(kept) == len(recs):
		return b, true, nil
	case len(kept) > 0:
		c.out, c.scratch, err = appendPartialBatch(c.out[:0], c.scratch, b, kept)
		return c.out, false, err
	case !lastInSegment && !c.lastOfProducer(b):
		return nil, false, nil
	case len(recs) == 0:
		return b, true, nil // already an empty batch
	default:
		c.out = appendEmptyBatch(c.out[:0], b)
		return c.out, false, nil
	}
}

// keep reports whether record r of batch b survives.
func (c *compactor) keep(b batch.Batch, r *recordView, expired bool) bool {
	if r.key == nil {
		return true
	}
	off := b.BaseOffset() + int64(r.offsetDelta)
	if latest, ok := c.latest[digestKey(r.key)]; ok && latest > off {
		return false
	}
	return r.value != nil || !expired
}

// lastOfProducer reports whether b is the last data batch of a producer
// that producer state still tracks.
func (c *compactor) lastOfProducer(b batch.Batch) bool {
	if !b.HasProducerID() {
		return false
	}
	e, ok := c.producers.Entry(b.ProducerID())
	return ok && e.LastOffset == b.LastOffset()
}

// cleanedSegment collects the cleaned copy of src. Until the first batch
// that differs, the copy is a byte-exact prefix of src and nothing is
// written; diverge then creates the file and copies that prefix.
type cleanedSegment struct {
	l       *Log
	src     *segment
	seg     *segment // the replacement: indexes, next, maxTs; file set at swap
	tmp     string
	f       vfs.File // nil until the copy differs from src
	buf     []byte   // output not yet written to f
	size    int64
	batches int64
}

func newCleanedSegment(l *Log, src *segment) *cleanedSegment {
	ns := &segment{base: src.base, path: src.path, created: src.created}
	ns.next.Store(src.base)
	ns.maxTs.Store(-1)
	return &cleanedSegment{l: l, src: src, seg: ns, tmp: src.path + cleanedSuffix}
}

// add appends one output batch (nil: a dropped batch); same says it is the
// source batch unchanged.
func (w *cleanedSegment) add(b []byte, same bool) error {
	if b == nil || !same {
		if err := w.diverge(); err != nil {
			return err
		}
	}
	if b == nil {
		return nil
	}
	v := batch.Batch(b)
	w.seg.indexBatch(v, w.size, w.l.cfg.IndexIntervalBytes)
	w.seg.observe(v)
	w.size += int64(len(b))
	w.batches++
	if w.f == nil {
		return nil
	}
	w.buf = append(w.buf, b...)
	if len(w.buf) >= compactWriteChunk {
		return w.flush()
	}
	return nil
}

// diverge creates the cleaned file with the first w.size bytes of src,
// which the output so far equals.
func (w *cleanedSegment) diverge() error {
	if w.f != nil {
		return nil
	}
	// The cleaned copy is at most the size of its source.
	if err := w.l.reserveSpace(w.src.size.Load()); err != nil {
		return err
	}
	f, err := w.l.fs.OpenFile(w.tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("creating %s: %w", w.tmp, err)
	}
	w.f = f
	buf := make([]byte, min(w.size, compactWriteChunk))
	for pos := int64(0); pos < w.size; {
		n := min(int64(len(buf)), w.size-pos)
		if m, err := w.src.file.ReadAt(buf[:n], pos); int64(m) != n {
			return fmt.Errorf("reading %s.log at %d: %w", w.src.path, pos, shortRead(err))
		}
		if _, err := f.Write(buf[:n]); err != nil {
			return fmt.Errorf("writing %s: %w", w.tmp, err)
		}
		pos += n
	}
	return nil
}

func (w *cleanedSegment) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.f.Write(w.buf)
	w.buf = w.buf[:0]
	if err != nil {
		return fmt.Errorf("writing %s: %w", w.tmp, err)
	}
	return nil
}

// discard deletes an unswapped cleaned copy. A failed delete is harmless:
// recovery removes .tmp leftovers.
func (w *cleanedSegment) discard() {
	if w.f == nil {
		return
	}
	w.f.Close()
	w.f = nil
	if err := w.l.fs.Remove(w.tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.l.cfg.Logger.Warn("removing a cleaned segment copy failed", "file", w.tmp, "err", err)
	}
}

// swap replaces segment i by its cleaned copy (steps 1 to 4 of the
// crash-safety walkthrough above). Before the rename a failure leaves the
// old segment in place; after it, the partition goes offline.
func (c *compactor) swap(i int, w *cleanedSegment) error {
	l := c.l
	old := l.segs[i]
	err := w.flush()
	if err == nil {
		if err = w.f.Sync(); err != nil {
			err = fmt.Errorf("syncing %s: %w", w.tmp, err)
		}
	}
	if err == nil {
		err = c.lowerRecoveryPoint(old.base)
	}
	if err == nil {
		if err = l.fs.Rename(w.tmp, old.path+".log"); err != nil {
			err = fmt.Errorf("renaming %s: %w", w.tmp, err)
		}
	}
	if err != nil {
		w.discard()
		return err
	}
	ns := w.seg
	ns.file, w.f = w.f, nil // the descriptor follows the rename
	ns.size.Store(w.size)
	ns.ix.pendingOff, ns.ix.pendingTs = nil, nil // rewrite writes the entries
	if err := l.fs.SyncDir(l.dir); err != nil {
		ns.file.Close()
		return l.fail(fmt.Errorf("syncing %s after swapping %s.log: %w", l.dir, ns.path, err))
	}
	if err := c.writeIndexes(old, ns); err != nil {
		ns.close()
		return l.fail(err)
	}
	segs := slices.Clone(l.segs)
	segs[i] = ns
	l.setSegments(segs)
	// Readers may hold the old segment's file: close it later (retire's
	// delay), never remove its paths, which now name the new files.
	time.AfterFunc(fileDeleteDelay, func() { old.close() })
	c.stats.SegmentsCleaned++
	return nil
}

// writeIndexes replaces old's index files by fresh ones holding ns's
// entries, and positions ns's file at its end as openSegment does.
func (c *compactor) writeIndexes(old, ns *segment) error {
	for _, ext := range []string{".index", ".timeindex"} {
		if err := c.l.fs.Remove(old.path + ext); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("deleting %s%s: %w", old.path, ext, err)
		}
	}
	if err := ns.ix.openFiles(c.l.fs, ns.path); err != nil {
		ns.ix.offFile, ns.ix.tsFile = nil, nil
		return fmt.Errorf("creating index of %s: %w", ns.path, err)
	}
	if err := ns.ix.rewrite(); err != nil {
		return fmt.Errorf("writing index of %s: %w", ns.path, err)
	}
	if err := ns.sync(); err != nil {
		return err
	}
	if _, err := ns.file.Seek(ns.size.Load(), io.SeekStart); err != nil {
		return fmt.Errorf("seeking %s.log: %w", ns.path, err)
	}
	return nil
}

// lowerRecoveryPoint persists a recovery point at or below base before the
// first swap (step 2).
func (c *compactor) lowerRecoveryPoint(base int64) error {
	l := c.l
	if c.lowered || l.recoveryPoint <= base {
		return nil
	}
	c.savedRP, c.lowered = l.recoveryPoint, true
	l.recoveryPoint = base
	if err := l.writeMeta(); err != nil {
		return l.fail(err)
	}
	return nil
}

// restoreRecoveryPoint undoes lowerRecoveryPoint once every swap is
// durable (step 5). An offline log keeps the lowered point on disk, so the
// next open verifies what the failed swap touched.
func (c *compactor) restoreRecoveryPoint() error {
	l := c.l
	if !c.lowered || l.offline.Load() != nil {
		return nil
	}
	l.recoveryPoint = max(l.recoveryPoint, c.savedRP)
	if err := l.writeMeta(); err != nil {
		return l.fail(err)
	}
	return nil
}
