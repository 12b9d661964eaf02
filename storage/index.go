package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/kmirror/kmirror/internal/vfs"
)

// Sparse indexes of one segment. Both are kept in memory (a few bytes per
// index interval) and mirrored to an append-only file so that a clean
// restart need not rescan the segment. These constants are part of the
// on-disk format:
//
//	offset index entry (8 bytes):  relative base offset u32 | file position u32
//	time index entry (12 bytes):   max timestamp i64 | relative base offset u32
//
// Relative offsets are batch base offsets minus the segment's base offset.
// Entries are strictly increasing in both fields (time entries by timestamp
// and offset). A file whose size is not a multiple of the entry size, or
// whose entries are out of order or point past the segment, is damaged and
// rebuilt from the segment.
const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

// errIndexDamaged reports an index file that must be rebuilt.
var errIndexDamaged = errors.New("storage: index damaged")

type offsetEntry struct {
	rel uint32
	pos uint32
}

type timeEntry struct {
	ts  int64
	rel uint32
}

// segmentIndex holds the offset and time indexes of one segment.
type segmentIndex struct {
	offsets []offsetEntry
	times   []timeEntry
	offFile vfs.File
	tsFile  vfs.File
	// pendingOff and pendingTs hold entries added since the last
	// flushPending, written in one write per file once
	// pendingFlushBytes build up, and at roll, Flush and Close.
	pendingOff []byte
	pendingTs  []byte
}

// decodeOffsetIndex parses an offset index file body, checking order and
// that positions lie inside a segment of segSize bytes.
func decodeOffsetIndex(b []byte, segSize int64) ([]offsetEntry, error) {
	if len(b)%offsetEntrySize != 0 {
		return nil, fmt.Errorf("%w: offset index size %d not a multiple of %d", errIndexDamaged, len(b), offsetEntrySize)
	}
	out := make([]offsetEntry, 0, len(b)/offsetEntrySize)
	for i := 0; i < len(b); i += offsetEntrySize {
		e := offsetEntry{rel: binary.BigEndian.Uint32(b[i:]), pos: binary.BigEndian.Uint32(b[i+4:])}
		if int64(e.pos) >= segSize {
			return nil, fmt.Errorf("%w: position %d beyond segment size %d", errIndexDamaged, e.pos, segSize)
		}
		if n := len(out); n > 0 && (e.rel <= out[n-1].rel || e.pos <= out[n-1].pos) {
			return nil, fmt.Errorf("%w: entry %d out of order", errIndexDamaged, n)
		}
		out = append(out, e)
	}
	return out, nil
}

// decodeTimeIndex parses a time index file body; maxRel bounds relative offsets.
func decodeTimeIndex(b []byte, maxRel uint32) ([]timeEntry, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, fmt.Errorf("%w: time index size %d not a multiple of %d", errIndexDamaged, len(b), timeEntrySize)
	}
	out := make([]timeEntry, 0, len(b)/timeEntrySize)
	for i := 0; i < len(b); i += timeEntrySize {
		e := timeEntry{ts: int64(binary.BigEndian.Uint64(b[i:])), rel: binary.BigEndian.Uint32(b[i+8:])}
		if e.rel > maxRel {
			return nil, fmt.Errorf("%w: time entry offset %d beyond segment", errIndexDamaged, e.rel)
		}
		if n := len(out); n > 0 && (e.ts <= out[n-1].ts || e.rel <= out[n-1].rel) {
			return nil, fmt.Errorf("%w: time entry %d out of order", errIndexDamaged, n)
		}
		out = append(out, e)
	}
	return out, nil
}

// openIndexFiles opens (creating) both index files for appending.
func (ix *segmentIndex) openFiles(fsys vfs.FS, base string) error {
	var err error
	if ix.offFile, err = fsys.OpenFile(base+".index", os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644); err != nil {
		return err
	}
	if ix.tsFile, err = fsys.OpenFile(base+".timeindex", os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644); err != nil {
		ix.offFile.Close()
		return err
	}
	return nil
}

// rewrite replaces both files' content with the in-memory entries.
func (ix *segmentIndex) rewrite() error {
	if err := ix.offFile.Truncate(0); err != nil {
		return err
	}
	if err := ix.tsFile.Truncate(0); err != nil {
		return err
	}
	buf := make([]byte, 0, len(ix.offsets)*offsetEntrySize)
	for _, e := range ix.offsets {
		buf = binary.BigEndian.AppendUint32(buf, e.rel)
		buf = binary.BigEndian.AppendUint32(buf, e.pos)
	}
	if _, err := ix.offFile.Write(buf); err != nil {
		return err
	}
	buf = make([]byte, 0, len(ix.times)*timeEntrySize)
	for _, e := range ix.times {
		buf = binary.BigEndian.AppendUint64(buf, uint64(e.ts))
		buf = binary.BigEndian.AppendUint32(buf, e.rel)
	}
	_, err := ix.tsFile.Write(buf)
	return err
}

// addOffset adds an offset entry in memory and queues it for the file.
func (ix *segmentIndex) addOffset(rel, pos uint32) {
	if n := len(ix.offsets); n > 0 && (rel <= ix.offsets[n-1].rel || pos <= ix.offsets[n-1].pos) {
		return
	}
	ix.pendingOff = binary.BigEndian.AppendUint32(ix.pendingOff, rel)
	ix.pendingOff = binary.BigEndian.AppendUint32(ix.pendingOff, pos)
	ix.offsets = append(ix.offsets, offsetEntry{rel: rel, pos: pos})
}

// addTime adds a time entry when both the timestamp and the offset grow.
func (ix *segmentIndex) addTime(ts int64, rel uint32) {
	if n := len(ix.times); n > 0 && (ts <= ix.times[n-1].ts || rel <= ix.times[n-1].rel) {
		return
	}
	ix.pendingTs = binary.BigEndian.AppendUint64(ix.pendingTs, uint64(ts))
	ix.pendingTs = binary.BigEndian.AppendUint32(ix.pendingTs, rel)
	ix.times = append(ix.times, timeEntry{ts: ts, rel: rel})
}

// flushPending writes queued entries to the index files. Index files are a
// cache, so a failure here is reported but the entries stay in memory; a
// restart rebuilds the files.
func (ix *segmentIndex) flushPending() error {
	var err error
	if len(ix.pendingOff) > 0 {
		_, err = ix.offFile.Write(ix.pendingOff)
		ix.pendingOff = ix.pendingOff[:0]
	}
	if len(ix.pendingTs) > 0 {
		if _, e := ix.tsFile.Write(ix.pendingTs); err == nil {
			err = e
		}
		ix.pendingTs = ix.pendingTs[:0]
	}
	return err
}

// pendingFlushBytes is how many queued offset-index bytes an append lets
// build up before it writes them: 512 entries, about 2 MiB of batches at
// the default 4 KiB index interval. Writing them at every append cost two
// small write(2) calls per append, on top of the one for the batches
// (BENCHMARKS.md, storage: with the single header walk, a 16 KiB append
// went from 8.6 to 7.7 us). Holding them back loses nothing: they are in
// memory for readers, a roll, Flush and Close write them, and the active
// segment's index files are rebuilt at every open.
const pendingFlushBytes = 512 * offsetEntrySize

// flushPendingFull is flushPending once pendingFlushBytes are queued.
func (ix *segmentIndex) flushPendingFull() error {
	if len(ix.pendingOff) < pendingFlushBytes && len(ix.pendingTs) < pendingFlushBytes/offsetEntrySize*timeEntrySize {
		return nil
	}
	return ix.flushPending()
}

// floorPosition returns the file position of the last indexed batch whose
// relative base offset is <= rel (0 if none).
func (ix *segmentIndex) floorPosition(rel uint32) int64 {
	i := sort.Search(len(ix.offsets), func(i int) bool { return ix.offsets[i].rel > rel })
	if i == 0 {
		return 0
	}
	return int64(ix.offsets[i-1].pos)
}

// floorPositionBelow returns the last indexed position <= pos (0 if none).
func (ix *segmentIndex) floorPositionBelow(pos int64) int64 {
	i := sort.Search(len(ix.offsets), func(i int) bool { return int64(ix.offsets[i].pos) > pos })
	if i == 0 {
		return 0
	}
	return int64(ix.offsets[i-1].pos)
}

// timeFloorRel returns the relative offset from which to scan for the first
// batch with max timestamp >= ts: the entry before the first entry >= ts.
func (ix *segmentIndex) timeFloorRel(ts int64) uint32 {
	i := sort.Search(len(ix.times), func(i int) bool { return ix.times[i].ts >= ts })
	if i == 0 {
		return 0
	}
	return ix.times[i-1].rel
}

// truncateAfter drops entries for batches at or beyond rel / pos.
func (ix *segmentIndex) truncateAfter(rel uint32, pos int64) error {
	o := sort.Search(len(ix.offsets), func(i int) bool {
		return ix.offsets[i].rel >= rel || int64(ix.offsets[i].pos) >= pos
	})
	t := sort.Search(len(ix.times), func(i int) bool { return ix.times[i].rel >= rel })
	if o == len(ix.offsets) && t == len(ix.times) {
		return nil
	}
	ix.offsets, ix.times = ix.offsets[:o], ix.times[:t]
	ix.pendingOff, ix.pendingTs = ix.pendingOff[:0], ix.pendingTs[:0]
	return ix.rewrite()
}

func (ix *segmentIndex) sync() error {
	if err := ix.offFile.Sync(); err != nil {
		return err
	}
	return ix.tsFile.Sync()
}

func (ix *segmentIndex) close() error {
	err := ix.offFile.Close()
	if err2 := ix.tsFile.Close(); err == nil {
		err = err2
	}
	return err
}
