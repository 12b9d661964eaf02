package state

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/internal/diskspace"
)

// ErrNoSpace marks a write refused because the state store's filesystem is
// down to the reserve the store keeps free (see Reserve). Nothing was
// written and the store stays usable: writes resume by themselves once
// space is freed.
var ErrNoSpace = errors.New("state: no space for the state store")

// Badger writes through memory-mapped files it creates sparse, and a store
// into such a page on a full filesystem is a SIGBUS that kills the process
// (package diskspace says more). So the store keeps free, on its
// filesystem, what Badger may still write once the node stops writing to
// it: the flush of its full memtables to tables, the compaction of the
// tables it has (which rewrites them before deleting them), and small
// writes (the manifest, a value log head). Writes stop there.
const (
	// flushReserve covers the memtables waiting to be flushed.
	flushReserve = numMemtables * memTableSize
	// slackReserve covers the manifest, value-log heads and the writes in
	// flight between a check and Badger's own write.
	slackReserve = 4 << 20
	// writeReserve is what ordinary writes leave free on top of the above;
	// deletions (of topics, which free their logs) may use it, so that an
	// operator can always free space by deleting topics.
	writeReserve = 8 << 20
	// tablesSizeInterval is how often the size of the tables is summed.
	tablesSizeInterval = time.Second
)

// space is the store's view of its filesystem; nil for an in-memory store.
type space struct {
	mon        *diskspace.Monitor
	tablesSize atomic.Int64 // bytes of Badger tables, for the compaction reserve
	tablesDue  atomic.Int64 // unix nanoseconds of the next sum
}

// Reserve is the number of bytes the store keeps free on its filesystem:
// ordinary writes fail with ErrNoSpace below it. Other writers sharing the
// filesystem (the partition logs) stop above it. Zero for an in-memory
// store.
func (s *Store) Reserve() int64 {
	if s.space == nil {
		return 0
	}
	return s.keepFree(false)
}

// SpaceMonitor returns the monitor of the store's filesystem, for writers
// that share it; nil for an in-memory store.
func (s *Store) SpaceMonitor() *diskspace.Monitor {
	if s.space == nil {
		return nil
	}
	return s.space.mon
}

// keepFree is the floor for a write; freeing writes (deletions of topics)
// may go lower, down to what Badger itself needs.
func (s *Store) keepFree(freeing bool) int64 {
	sp := s.space
	if now := time.Now().UnixNano(); now >= sp.tablesDue.Load() {
		sp.tablesDue.Store(now + int64(tablesSizeInterval))
		var total int64
		for _, t := range s.db.Tables() {
			total += int64(t.OnDiskSize)
		}
		sp.tablesSize.Store(total)
	}
	floor := flushReserve + slackReserve + sp.tablesSize.Load()
	if !freeing {
		floor += writeReserve
	}
	return floor
}

// checkSpaceAtClose is checkSpace(true) measured afresh: Close flushes.
func (s *Store) checkSpaceAtClose() error {
	if s.space == nil {
		return nil
	}
	if err := s.space.mon.ReserveMeasured(0, s.keepFree(true)); err != nil {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return nil
}

// checkSpace refuses a write when the filesystem is down to the reserve.
// REQUIRES: s.mu held (the tables are read from Badger).
func (s *Store) checkSpace(freeing bool) error {
	if s.space == nil {
		return nil
	}
	if err := s.space.mon.Reserve(0, s.keepFree(freeing)); err != nil {
		return fmt.Errorf("%w: %w; free space on that filesystem (delete topics, lower their retention, or grow "+
			"it) and state writes resume by themselves", ErrNoSpace, err)
	}
	return nil
}
