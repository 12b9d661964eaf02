package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/kmirror/kmirror/internal/vfs"
)

// The leader-epoch checkpoint is Kafka's leader-epoch-checkpoint text file:
//
//	0\n          version, always 0
//	2\n          number of entries that follow
//	0 0\n        "epoch startOffset", one '\n'-terminated line per entry,
//	5 1200\n     epochs strictly ascending, start offsets non-decreasing
//
// Numbers are canonical decimal (no sign, no leading zero; epochs fit an
// int32, offsets an int64) and nothing follows the last entry. Reading is
// strict so that every strict prefix of a valid file is invalid: a torn write
// is always detected. An empty file (Kafka leaves one for a partition that
// never had an epoch) counts as damaged too; the log's recovery then rebuilds
// the cache from the batches, which is always right. These rules are part of
// the on-disk format.
const epochCheckpointName = "leader-epoch-checkpoint"

// ErrEpochCheckpointCorrupt marks a damaged leader-epoch checkpoint, a
// storage corruption: the caller rebuilds the cache from the log (Rebuild)
// rather than failing the partition.
var ErrEpochCheckpointCorrupt = errors.New("storage: leader-epoch checkpoint corrupt")

// EpochEntry says that leader epoch Epoch began at StartOffset, the first
// offset written in it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// EpochCache maps the leader epochs of one partition log to their start
// offsets (Kafka's LeaderEpochFileCache) and checkpoints them to disk. It is
// safe for concurrent use: Fetch and OffsetsForLeaderEpoch handlers read
// while the appender, truncation and retention write.
//
// A change is computed on a copy, written with an atomic replace, and only
// then published, so memory never shows a state the file does not hold. wmu
// serializes mutators over that whole sequence (two writers can never persist
// out of order); mu guards only the entries slice header and is write-locked
// just for the swap, so readers never wait for an fsync. Lock order: wmu, mu.
//
// Assign, the appender's mutator, replaces the file without fsyncing it
// (Kafka's LeaderEpochFileCache does the same since KAFKA-15046): a
// partition's first append at a new epoch, one per partition at every
// leader change or failover, would otherwise wait for two fsyncs. Sync
// makes it durable; the log calls it before it advances its recovery
// point, and recovery re-assigns the epochs of every batch after that
// point, so what a crash loses of an unsynced Assign is rebuilt from the
// batches. The other mutators (truncation, recovery) fsync at once.
//
// Invariant: epochs and start offsets are both strictly ascending.
type EpochCache struct {
	fsys      vfs.FS
	dir, path string
	wmu       sync.Mutex
	mu        sync.RWMutex
	// entries is copy-on-write: a published slice is never modified, so a
	// reader may keep using it after dropping mu. Written under wmu and mu.
	entries []EpochEntry
	// unsynced: the file holds entries but may not be on disk (an Assign
	// since the last fsynced write). Under wmu.
	unsynced bool
}

// OpenEpochCache loads dir/leader-epoch-checkpoint. A missing file gives an
// empty cache; a damaged one an error wrapping ErrEpochCheckpointCorrupt.
// Entries are loaded as by Assign in order, as Kafka does, so an epoch that
// holds no offsets (its successor starts at the same offset) is dropped.
func OpenEpochCache(fsys vfs.FS, dir string) (*EpochCache, error) {
	c := &EpochCache{fsys: fsys, dir: dir, path: filepath.Join(dir, epochCheckpointName)}
	data, err := vfs.ReadFile(fsys, c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	var es []EpochEntry
	if err == nil {
		es, err = parseEpochCheckpoint(data)
	}
	if err != nil {
		return nil, fmt.Errorf("reading leader-epoch checkpoint %s: %w", c.path, err)
	}
	c.entries = epochRebuildList(es)
	return c, nil
}

// Assign records that epoch starts at startOffset, with Kafka's rules:
// negative values are ignored, and nothing changes when the latest entry has
// this epoch and starts at or before startOffset. Otherwise the tail entries
// that conflict (epoch >= epoch or start offset >= startOffset) are removed,
// the entry is appended and the checkpoint file replaced, without an fsync
// (Sync). On error nothing changed. The appender calls it per batch: the
// no-change case takes only the read lock and does not allocate.
func (c *EpochCache) Assign(epoch int32, startOffset int64) (changed bool, err error) {
	if epoch < 0 || startOffset < 0 {
		return false, nil
	}
	e := EpochEntry{Epoch: epoch, StartOffset: startOffset}
	c.mu.RLock()
	need := epochNeedsUpdate(c.entries, e)
	c.mu.RUnlock()
	if !need {
		return false, nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !epochNeedsUpdate(c.entries, e) { // another mutator ran in between
		return false, nil
	}
	if err := c.write(epochAssignTo(slices.Clone(c.entries), e), false); err != nil {
		return false, err
	}
	return true, nil
}

// Sync makes the entries durable: it rewrites the checkpoint with fsyncs if
// an Assign replaced it since the last durable write. The log calls it
// before advancing its recovery point past the batches of that Assign.
func (c *EpochCache) Sync() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.unsynced {
		return nil
	}
	return c.commit(c.entries)
}

// Latest returns the entry of the newest epoch.
func (c *EpochCache) Latest() (EpochEntry, bool) {
	es := c.load()
	return epochAt(es, len(es)-1)
}

// Earliest returns the entry of the oldest epoch still cached.
func (c *EpochCache) Earliest() (EpochEntry, bool) { return epochAt(c.load(), 0) }

func epochAt(es []EpochEntry, i int) (EpochEntry, bool) {
	if i < 0 || i >= len(es) {
		return EpochEntry{}, false
	}
	return es[i], true
}

// Entries returns a copy of all entries, oldest first.
func (c *EpochCache) Entries() []EpochEntry { return slices.Clone(c.load()) }

// EndOffsetFor answers OffsetsForLeaderEpoch exactly as Kafka's
// LeaderEpochFileCache.endOffsetFor: the largest epoch <= requested and the
// offset where it ended, i.e. the start of the first higher epoch, or
// logEndOffset when requested is the latest epoch. It returns (-1, -1)
// (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) for requested -1, an empty cache
// or no higher epoch. Below every cached epoch the data is gone from the log:
// the answer is (requested, first start offset), where a follower resumes.
func (c *EpochCache) EndOffsetFor(requested int32, logEndOffset int64) (int32, int64) {
	es := c.load()
	if requested == -1 {
		return -1, -1
	}
	if len(es) > 0 && es[len(es)-1].Epoch == requested {
		return requested, logEndOffset
	}
	higher := sort.Search(len(es), func(i int) bool { return es[i].Epoch > requested })
	switch {
	case higher == len(es):
		return -1, -1
	case higher == 0:
		return requested, es[0].StartOffset
	default:
		return es[higher-1].Epoch, es[higher].StartOffset
	}
}

// EpochForOffset returns the epoch whose range holds offset: that of the
// last entry starting at or before it; false if there is none.
func (c *EpochCache) EpochForOffset(offset int64) (int32, bool) {
	es := c.load()
	after := sort.Search(len(es), func(i int) bool { return es[i].StartOffset > offset })
	if after == 0 {
		return 0, false
	}
	return es[after-1].Epoch, true
}

// TruncateFromEnd drops the entries starting at or after endOffset, after
// the log was truncated to end there. A negative endOffset is ignored.
func (c *EpochCache) TruncateFromEnd(endOffset int64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	keep := len(c.entries)
	for keep > 0 && endOffset >= 0 && c.entries[keep-1].StartOffset >= endOffset {
		keep--
	}
	if keep == len(c.entries) {
		return nil
	}
	return c.commit(slices.Clone(c.entries[:keep]))
}

// TruncateFromStart follows the log start offset up to startOffset: entries
// whose epoch ended at or before it are dropped and the first remaining one
// is moved up to start there. Like Kafka, an entry starting exactly at
// startOffset is kept.
func (c *EpochCache) TruncateFromStart(startOffset int64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	cur := c.entries
	first := 0
	for first+1 < len(cur) && cur[first+1].StartOffset <= startOffset {
		first++
	}
	if len(cur) == 0 || first == 0 && cur[0].StartOffset >= startOffset {
		return nil
	}
	next := slices.Clone(cur[first:])
	next[0].StartOffset = max(next[0].StartOffset, startOffset)
	return c.commit(next)
}

// Clear removes every entry and writes the empty checkpoint.
func (c *EpochCache) Clear() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.commit(nil)
}

// Rebuild replaces the whole cache (recovery, after a scan of the log) and
// writes the checkpoint. Entries are applied in order with Assign's rules, so
// the caller may pass every batch's (epoch, base offset) or only each epoch's
// first. On error nothing changed.
func (c *EpochCache) Rebuild(entries []EpochEntry) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.commit(epochRebuildList(entries))
}

// load returns the published entries; the caller must not modify them.
func (c *EpochCache) load() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.entries
}

// commit writes next durably, then publishes it. REQUIRES: c.wmu held; next
// is owned by the cache from now on. If only the final directory fsync fails
// the rename may be visible: a reopen may show next while memory keeps the
// old entries. Both are valid caches, and a failed fsync means a failing disk.
func (c *EpochCache) commit(next []EpochEntry) error { return c.write(next, true) }

// write replaces the checkpoint file with next, fsynced or not, then
// publishes next. REQUIRES: c.wmu held; next is owned by the cache from now
// on.
func (c *EpochCache) write(next []EpochEntry, durable bool) error {
	data := appendEpochCheckpoint(make([]byte, 0, 8+16*len(next)), next)
	var err error
	if durable {
		err = vfs.WriteFileAtomic(c.fsys, c.dir, c.path, data)
	} else {
		err = vfs.ReplaceFile(c.fsys, c.path, data)
	}
	if err != nil {
		return fmt.Errorf("writing leader-epoch checkpoint %s: %w", c.path, err)
	}
	c.unsynced = !durable
	c.mu.Lock()
	c.entries = next
	c.mu.Unlock()
	return nil
}

// epochNeedsUpdate is Kafka's isUpdateNeeded: whether Assign(e) changes es.
func epochNeedsUpdate(es []EpochEntry, e EpochEntry) bool {
	if len(es) == 0 {
		return true
	}
	last := es[len(es)-1]
	return e.Epoch != last.Epoch || e.StartOffset < last.StartOffset
}

// epochAssignTo drops the tail entries that conflict with e and appends e,
// reusing es's array: REQUIRES es is owned by the caller.
func epochAssignTo(es []EpochEntry, e EpochEntry) []EpochEntry {
	keep := len(es)
	for keep > 0 && (es[keep-1].Epoch >= e.Epoch || es[keep-1].StartOffset >= e.StartOffset) {
		keep--
	}
	return append(es[:keep], e)
}

// epochRebuildList applies in to an empty cache with Assign's rules.
func epochRebuildList(in []EpochEntry) []EpochEntry {
	var out []EpochEntry
	for _, e := range in {
		if e.Epoch >= 0 && e.StartOffset >= 0 && epochNeedsUpdate(out, e) {
			out = epochAssignTo(out, e)
		}
	}
	return out
}

// appendEpochCheckpoint appends the checkpoint file of es to dst.
func appendEpochCheckpoint(dst []byte, es []EpochEntry) []byte {
	dst = strconv.AppendInt(append(dst, "0\n"...), int64(len(es)), 10)
	dst = append(dst, '\n')
	for _, e := range es {
		dst = append(strconv.AppendInt(dst, int64(e.Epoch), 10), ' ')
		dst = append(strconv.AppendInt(dst, e.StartOffset, 10), '\n')
	}
	return dst
}

// parseEpochCheckpoint parses a checkpoint strictly (format above
// epochCheckpointName). Errors wrap ErrEpochCheckpointCorrupt and name the
// line. The entry count is never trusted for an allocation.
func parseEpochCheckpoint(data []byte) ([]EpochEntry, error) {
	rest, lineNo := data, 0
	quote := func(b []byte) string { return strconv.Quote(string(b[:min(len(b), 40)])) }
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: line %d: %s", ErrEpochCheckpointCorrupt, max(lineNo, 1), fmt.Sprintf(format, args...))
	}
	next := func() ([]byte, error) {
		lineNo++
		i := bytes.IndexByte(rest, '\n')
		switch {
		case len(data) == 0:
			return nil, fail("empty file")
		case len(rest) == 0:
			return nil, fail("unexpected end of file")
		case i < 0:
			return nil, fail("line %s not terminated by a newline", quote(rest))
		}
		line := rest[:i]
		rest = rest[i+1:]
		return line, nil
	}
	line, err := next()
	if err != nil {
		return nil, err
	}
	if string(line) != "0" {
		return nil, fail("unsupported version %s, want 0", quote(line))
	}
	if line, err = next(); err != nil {
		return nil, err
	}
	n, ok := epochParseDecimal(line, 31)
	if !ok {
		return nil, fail("malformed entry count %s", quote(line))
	}
	es := make([]EpochEntry, 0, min(n, int64(len(rest)/len("0 0\n"))))
	for range n {
		if line, err = next(); err != nil {
			return nil, err
		}
		sp := bytes.IndexByte(line, ' ')
		epoch, ok1 := epochParseDecimal(line[:max(sp, 0)], 31)
		off, ok2 := epochParseDecimal(line[sp+1:], 63)
		if sp < 0 || !ok1 || !ok2 {
			return nil, fail("malformed entry %s, want \"epoch startOffset\"", quote(line))
		}
		if k := len(es); k > 0 && int32(epoch) <= es[k-1].Epoch {
			return nil, fail("epoch %d not above previous epoch %d", epoch, es[k-1].Epoch)
		} else if k > 0 && off < es[k-1].StartOffset {
			return nil, fail("start offset %d below previous start offset %d", off, es[k-1].StartOffset)
		}
		es = append(es, EpochEntry{Epoch: int32(epoch), StartOffset: off})
	}
	if len(rest) > 0 {
		lineNo++
		return nil, fail("%d unexpected bytes after the last of %d entries", len(rest), n)
	}
	return es, nil
}

// epochParseDecimal parses a canonical non-negative decimal (no sign, no
// leading zero) that fits in bits bits.
func epochParseDecimal(b []byte, bits uint) (int64, bool) {
	if len(b) == 0 || len(b) > 19 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var v uint64 // 19 digits cannot overflow a uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		v = v*10 + uint64(ch-'0')
	}
	return int64(v), v <= 1<<bits-1
}
