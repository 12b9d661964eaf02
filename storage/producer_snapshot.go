package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/vfs"
)

// A producer snapshot holds the producer state of a partition as of an
// offset: every batch below that offset has been applied, none at or above.
// It is written to <dir>/<offset, 20 digits>.snapshot and lets a log that
// opens replay only the batches from that offset on. All integers are big
// endian. These constants and this layout are part of the on-disk format:
//
//	file
//	+-------------+-------------+-------------+--------------------------+
//	| magic  [4]  | crc32c  u32 | version u16 | body (version 1)         |
//	| "KMPS"      | of [8, end) | 1           |                          |
//	+-------------+-------------+-------------+--------------------------+
//	0             4             8             10
//
//	body (version 1)
//	+----------------+-----------------+------------------+----------------+-----------------+
//	| offset     i64 | producers   i32 | producer * count | aborted    i32 | aborted * count |
//	+----------------+-----------------+------------------+----------------+-----------------+
//
//	producer (31 bytes + 28 per batch), strictly ascending producer id
//	+-----+-------+-------+----------+-----------+---------+-----------------+
//	| pid | epoch | coord | last ts  | txn first | batches | batch * batches |
//	| i64 | i16   | i32   | i64      | i64 (-1)  | u8 0..5 |                 |
//	+-----+-------+-------+----------+-----------+---------+-----------------+
//
//	batch (28 bytes), oldest first
//	+-----------+----------+-------------+--------------+-----------+
//	| first seq | last seq | last offset | offset delta | timestamp |
//	| i32       | i32      | i64         | i32          | i64       |
//	+-----------+----------+-------------+--------------+-----------+
//
//	aborted transaction (32 bytes), strictly ascending last offset
//	+-----+--------------+-------------+--------------------+
//	| pid | first offset | last offset | last stable offset |
//	| i64 | i64          | i64         | i64                |
//	+-----+--------------+-------------+--------------------+
//
// The CRC32C (batch.Checksum) covers the version and the body, so a torn
// write or a flipped bit anywhere after the magic is detected. The decoder
// accepts only the canonical encoding (sorted ids, no trailing bytes), so a
// snapshot that decodes re-encodes to the same bytes.
const (
	producerSnapshotMagic      = "KMPS"
	producerSnapshotVersion    = 1
	producerSnapshotHeaderSize = 10
	producerSnapshotSuffix     = ".snapshot"

	snapProducerSize = 8 + 2 + 4 + 8 + 8 + 1 // without its batches
	snapAbortedSize  = 8 * 4
)

// ErrCorruptProducerSnapshot marks a producer snapshot that cannot be
// trusted: torn, damaged, or not a snapshot at all. LoadSnapshot deletes
// such files and falls back to an older snapshot.
var ErrCorruptProducerSnapshot = errors.New("storage: corrupt producer snapshot")

// producerSnapshotName is the file name of the snapshot at offset.
func producerSnapshotName(offset int64) string {
	return fmt.Sprintf("%020d%s", offset, producerSnapshotSuffix)
}

// parseProducerSnapshotName returns the offset a snapshot file is named
// after; ok is false for any other name (including leftover .tmp files).
func parseProducerSnapshotName(name string) (offset int64, ok bool) {
	digits, found := strings.CutSuffix(name, producerSnapshotSuffix)
	if !found || len(digits) != 20 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	off, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return off, true
}

// WriteSnapshot writes the state as of offset to dir atomically: after a
// crash or an error the snapshot either exists whole or not at all (a
// leftover temporary file is never taken for a snapshot).
//
// REQUIRES: the state reflects exactly the batches below offset.
func (s *ProducerState) WriteSnapshot(fsys vfs.FS, dir string, offset int64) error {
	if offset < 0 {
		return fmt.Errorf("storage: producer snapshot at negative offset %d", offset)
	}
	s.mu.RLock()
	data := s.appendSnapshotLocked(nil, offset)
	s.mu.RUnlock()
	name := filepath.Join(dir, producerSnapshotName(offset))
	if err := vfs.WriteFileAtomic(fsys, dir, name, data); err != nil {
		return fmt.Errorf("writing producer snapshot %s: %w", name, err)
	}
	return nil
}

// LoadSnapshot loads the newest snapshot in dir whose offset is at most
// maxOffset and returns the state and that offset; the caller replays the
// log from offset on. A damaged snapshot is deleted and an older one tried;
// with none left the state is empty at offset 0 (replay everything). Only
// I/O errors (other than a damaged file) are returned. It also removes the
// temporary files of interrupted writes.
//
// REQUIRES: no WriteSnapshot to dir runs concurrently.
func LoadSnapshot(fsys vfs.FS, dir string, maxOffset int64) (s *ProducerState, offset int64, err error) {
	offsets, err := listProducerSnapshots(fsys, dir, true)
	if err != nil {
		return nil, 0, err
	}
	for i := len(offsets) - 1; i >= 0; i-- {
		off := offsets[i]
		if off > maxOffset {
			continue
		}
		name := filepath.Join(dir, producerSnapshotName(off))
		data, err := vfs.ReadFile(fsys, name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, 0, fmt.Errorf("reading producer snapshot %s: %w", name, err)
		}
		st, got, err := decodeProducerSnapshot(data)
		if err == nil && got != off {
			err = fmt.Errorf("%w: holds offset %d", ErrCorruptProducerSnapshot, got)
		}
		if err != nil {
			// Damaged: it would be rejected at every open, so it goes. A
			// failed removal is harmless for the same reason.
			_ = fsys.Remove(name)
			continue
		}
		return st, off, nil
	}
	return NewProducerState(), 0, nil
}

// ListSnapshots returns the offsets of the snapshots in dir, ascending.
func ListSnapshots(fsys vfs.FS, dir string) ([]int64, error) {
	return listProducerSnapshots(fsys, dir, false)
}

// listProducerSnapshots lists dir; with cleanTmp it also removes temporary
// files left by an interrupted WriteSnapshot.
func listProducerSnapshots(fsys vfs.FS, dir string, cleanTmp bool) ([]int64, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing producer snapshots in %s: %w", dir, err)
	}
	var out []int64
	for _, de := range ents {
		if de.IsDir() {
			continue
		}
		name := de.Name()
		if off, ok := parseProducerSnapshotName(name); ok {
			out = append(out, off)
			continue
		}
		if tmp, found := strings.CutSuffix(name, ".tmp"); cleanTmp && found {
			if _, ok := parseProducerSnapshotName(tmp); ok {
				_ = fsys.Remove(filepath.Join(dir, name))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// DeleteSnapshotsAbove deletes the snapshots whose offset is above offset:
// after the log is truncated to end at offset they describe batches that
// are gone. A snapshot at exactly offset stays valid.
func DeleteSnapshotsAbove(fsys vfs.FS, dir string, offset int64) error {
	offsets, err := ListSnapshots(fsys, dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, off := range offsets {
		if off > offset {
			errs = append(errs, removeProducerSnapshot(fsys, dir, off))
		}
	}
	return errors.Join(errs...)
}

// DeleteSnapshotsBelow deletes the snapshots whose offset is below offset
// (typically the log start, for retention), but always keeps the keep
// newest snapshots.
func DeleteSnapshotsBelow(fsys vfs.FS, dir string, offset int64, keep int) error {
	offsets, err := ListSnapshots(fsys, dir)
	if err != nil {
		return err
	}
	keep = max(keep, 0)
	var errs []error
	for i, off := range offsets {
		if i >= len(offsets)-keep {
			break
		}
		if off < offset {
			errs = append(errs, removeProducerSnapshot(fsys, dir, off))
		}
	}
	return errors.Join(errs...)
}

func removeProducerSnapshot(fsys vfs.FS, dir string, off int64) error {
	name := filepath.Join(dir, producerSnapshotName(off))
	if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting producer snapshot %s: %w", name, err)
	}
	return nil
}

// appendSnapshotLocked appends the whole snapshot file for offset to dst.
// REQUIRES: s.mu held.
func (s *ProducerState) appendSnapshotLocked(dst []byte, offset int64) []byte {
	start := len(dst)
	dst = append(dst, producerSnapshotMagic...)
	dst = binary.BigEndian.AppendUint32(dst, 0) // crc, filled below
	dst = binary.BigEndian.AppendUint16(dst, producerSnapshotVersion)
	dst = s.appendSnapshotBodyLocked(dst, offset)
	binary.BigEndian.PutUint32(dst[start+4:], batch.Checksum(dst[start+8:]))
	return dst
}

// appendSnapshotBodyLocked appends the version 1 body. REQUIRES: s.mu held.
func (s *ProducerState) appendSnapshotBodyLocked(dst []byte, offset int64) []byte {
	pids := make([]int64, 0, len(s.producers))
	for pid := range s.producers {
		pids = append(pids, pid)
	}
	slices.Sort(pids)

	be := binary.BigEndian
	dst = be.AppendUint64(dst, uint64(offset))
	dst = be.AppendUint32(dst, uint32(len(pids)))
	for _, pid := range pids {
		e := s.producers[pid]
		dst = be.AppendUint64(dst, uint64(e.pid))
		dst = be.AppendUint16(dst, uint16(e.epoch))
		dst = be.AppendUint32(dst, uint32(e.coordinatorEpoch))
		dst = be.AppendUint64(dst, uint64(e.lastTimestamp))
		dst = be.AppendUint64(dst, uint64(e.txnFirstOffset))
		dst = append(dst, byte(e.n))
		for i := range e.n {
			b := &e.batches[i]
			dst = be.AppendUint32(dst, uint32(b.firstSeq))
			dst = be.AppendUint32(dst, uint32(b.lastSeq))
			dst = be.AppendUint64(dst, uint64(b.lastOffset))
			dst = be.AppendUint32(dst, uint32(b.offsetDelta))
			dst = be.AppendUint64(dst, uint64(b.timestamp))
		}
	}
	dst = be.AppendUint32(dst, uint32(len(s.aborted)))
	for _, a := range s.aborted {
		dst = be.AppendUint64(dst, uint64(a.ProducerID))
		dst = be.AppendUint64(dst, uint64(a.FirstOffset))
		dst = be.AppendUint64(dst, uint64(a.LastOffset))
		dst = be.AppendUint64(dst, uint64(a.LastStableOffset))
	}
	return dst
}

// decodeProducerSnapshot checks the framing of a snapshot file and decodes
// its body. Errors wrap ErrCorruptProducerSnapshot.
func decodeProducerSnapshot(data []byte) (*ProducerState, int64, error) {
	if len(data) < producerSnapshotHeaderSize {
		return nil, 0, fmt.Errorf("%w: %d bytes", ErrCorruptProducerSnapshot, len(data))
	}
	if string(data[:4]) != producerSnapshotMagic {
		return nil, 0, fmt.Errorf("%w: bad magic %q", ErrCorruptProducerSnapshot, data[:4])
	}
	if got, want := batch.Checksum(data[8:]), binary.BigEndian.Uint32(data[4:]); got != want {
		return nil, 0, fmt.Errorf("%w: crc32c %08x, header says %08x", ErrCorruptProducerSnapshot, got, want)
	}
	if v := binary.BigEndian.Uint16(data[8:]); v != producerSnapshotVersion {
		return nil, 0, fmt.Errorf("%w: unknown version %d", ErrCorruptProducerSnapshot, v)
	}
	return decodeProducerSnapshotBody(data[producerSnapshotHeaderSize:])
}

// snapReader is a sticky-error big-endian reader: after the first short
// read every read returns zero and err stays set.
type snapReader struct {
	b   []byte
	err error
}

func (r *snapReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = fmt.Errorf("%w: truncated", ErrCorruptProducerSnapshot)
		r.b = nil
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *snapReader) u8() uint8 {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *snapReader) i16() int16 {
	if p := r.take(2); p != nil {
		return int16(binary.BigEndian.Uint16(p))
	}
	return 0
}

func (r *snapReader) i32() int32 {
	if p := r.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (r *snapReader) i64() int64 {
	if p := r.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

// count reads an element count and rejects one that is negative or that
// the remaining bytes cannot hold, before anything is allocated from it.
func (r *snapReader) count(minSize int) int {
	n := r.i32()
	if r.err == nil && (n < 0 || int64(n) > int64(len(r.b)/minSize)) {
		r.err = fmt.Errorf("%w: count %d for %d bytes left", ErrCorruptProducerSnapshot, n, len(r.b))
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

func (r *snapReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrCorruptProducerSnapshot}, args...)...)
	}
}

// decodeProducerSnapshotBody decodes a version 1 body. It never panics,
// whatever the bytes; anything inconsistent or non-canonical is an error
// wrapping ErrCorruptProducerSnapshot.
func decodeProducerSnapshotBody(body []byte) (*ProducerState, int64, error) {
	r := snapReader{b: body}
	offset := r.i64()
	if r.err == nil && offset < 0 {
		r.fail("negative offset %d", offset)
	}
	s := NewProducerState()
	n := r.count(snapProducerSize)
	prev := int64(-1)
	for range n {
		e := &producerEntry{}
		e.pid = r.i64()
		e.epoch = r.i16()
		e.coordinatorEpoch = r.i32()
		e.lastTimestamp = r.i64()
		e.txnFirstOffset = r.i64()
		e.n = int(r.u8())
		switch {
		case r.err != nil:
		case e.pid <= prev:
			r.fail("producer id %d after %d", e.pid, prev)
		case e.txnFirstOffset < -1:
			r.fail("producer %d: transaction first offset %d", e.pid, e.txnFirstOffset)
		case e.n > producerBatchesRetained:
			r.fail("producer %d: %d batches", e.pid, e.n)
		}
		if r.err != nil {
			break
		}
		prev = e.pid
		for i := range e.n {
			b := &e.batches[i]
			b.firstSeq = r.i32()
			b.lastSeq = r.i32()
			b.lastOffset = r.i64()
			b.offsetDelta = r.i32()
			b.timestamp = r.i64()
			if r.err == nil && (b.offsetDelta < 0 || b.lastOffset < int64(b.offsetDelta)) {
				r.fail("producer %d: batch ending at %d with offset delta %d", e.pid, b.lastOffset, b.offsetDelta)
			}
		}
		if r.err != nil {
			break
		}
		s.producers[e.pid] = e
		if e.txnFirstOffset >= 0 {
			s.ongoing = append(s.ongoing, ongoingRef{firstOffset: e.txnFirstOffset, pid: e.pid})
		}
	}
	m := r.count(snapAbortedSize)
	if m > 0 {
		s.aborted = make([]AbortedTxn, 0, m)
	}
	for range m {
		a := AbortedTxn{ProducerID: r.i64(), FirstOffset: r.i64(), LastOffset: r.i64(), LastStableOffset: r.i64()}
		switch {
		case r.err != nil:
		case a.ProducerID < 0 || a.FirstOffset < 0 || a.LastOffset < a.FirstOffset || a.LastStableOffset < 0:
			r.fail("aborted transaction %+v", a)
		case len(s.aborted) > 0 && a.LastOffset <= s.aborted[len(s.aborted)-1].LastOffset:
			r.fail("aborted transaction at %d after %d", a.LastOffset, s.aborted[len(s.aborted)-1].LastOffset)
		}
		if r.err != nil {
			break
		}
		s.aborted = append(s.aborted, a)
		s.abortedMaxSpan = max(s.abortedMaxSpan, a.LastOffset-a.FirstOffset)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return nil, 0, r.err
	}
	slices.SortFunc(s.ongoing, compareOngoing)
	return s, offset, nil
}
