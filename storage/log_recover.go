package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/batch"
)

// recover opens the segments, cuts a damaged tail after an unclean
// shutdown, and restores the epoch cache and producer state.
func (l *Log) recover() error {
	logStart, recoveryPoint, haveMeta, err := readMeta(l.fs, l.dir)
	if err != nil {
		// The meta file is written atomically; damage means outside
		// interference. Recover everything from the segments instead.
		l.cfg.Logger.Warn("partition meta unreadable; recovering all segments", "dir", l.dir, "err", err)
		haveMeta = false
	}
	cleanPath := filepath.Join(l.dir, cleanMarker)
	_, statErr := l.fs.Stat(cleanPath)
	clean := statErr == nil && haveMeta
	if statErr == nil {
		if err := l.fs.Remove(cleanPath); err != nil {
			return fmt.Errorf("removing clean marker: %w", err)
		}
	}
	if !haveMeta {
		recoveryPoint = 0
	}

	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	// Segments from the one holding the recovery point on may hold data
	// that never reached the disk: verify them batch by batch.
	verifyFrom := int64(0)
	if len(bases) > 0 {
		verifyFrom = bases[max(0, sort.Search(len(bases), func(i int) bool { return bases[i] > recoveryPoint })-1)]
	}
	var segs []*segment
	cutAt := -1
	for i, base := range bases {
		verify := !clean && base >= verifyFrom
		s, cut, err := openSegment(l.fs, l.dir, base, verify, l.cfg.IndexIntervalBytes)
		if err != nil {
			closeAll(segs)
			return err
		}
		if n := len(segs); n > 0 && s.base < segs[n-1].next.Load() {
			// Overlap with the previous segment: only a crash mid-roll
			// or outside damage does this. Keep the earlier data.
			l.cfg.Logger.Warn("segment overlaps its predecessor; dropping it and later ones", "segment", s.path)
			s.close()
			cutAt = i
			break
		}
		if !verify {
			// Not scanned (a clean shutdown): the cheap checks Kafka
			// runs on open. A damaged segment is kept, never cut (its
			// records may exist nowhere else); reads inside it answer
			// a corruption error instead of hanging, and this says where.
			if err := s.sanityCheck(); err != nil {
				l.cfg.Logger.Error("damaged segment: reads from it fail until it is repaired or the partition "+
					"is restored from a replica or the mirror source", "segment", s.path, "err", err)
			}
		}
		segs = append(segs, s)
		if cut {
			l.cfg.Logger.Warn("cut a damaged tail during recovery", "segment", s.path, "size", s.size.Load())
			cutAt = i + 1
			break
		}
	}
	if cutAt >= 0 {
		for _, base := range bases[cutAt:] {
			_ = (&segment{path: segmentPath(l.dir, base)}).remove(l.fs)
		}
	}
	if !haveMeta && len(segs) > 0 {
		logStart = segs[0].base
	}
	if len(segs) == 0 {
		s, err := createSegment(l.fs, l.dir, logStart)
		if err != nil {
			return err
		}
		segs = append(segs, s)
	}
	l.segs = segs
	leo := l.active().next.Load()
	if logStart > leo {
		logStart = leo
	}
	l.logStart.Store(logStart)
	if l.cfg.ExternalHighWatermark {
		// Only the owner knows what was committed (its checkpoint, its
		// replicas): it raises this with SetHighWatermark.
		l.highWatermark.Store(logStart)
	} else {
		l.highWatermark.Store(leo)
	}
	l.recoveryPoint = min(recoveryPoint, leo)
	if !clean {
		l.recoveryPoint = leo // the recovered tail was just validated; fsync it below
		for _, s := range l.segs {
			if s.base >= verifyFrom {
				if err := s.sync(); err != nil {
					return err
				}
			}
		}
	}
	if err := l.writeMeta(); err != nil {
		return err
	}
	replayFrom := leo // a clean log's checkpoint is complete
	if !clean {
		replayFrom = verifyFrom
	}
	if err := l.recoverEpochs(leo, logStart, replayFrom); err != nil {
		return err
	}
	if err := DeleteSnapshotsAbove(l.fs, l.dir, leo); err != nil {
		return err
	}
	return l.loadProducerState()
}

// listSegments returns the base offsets of the .log files, sorted, and
// removes leftovers (temporary files, indexes without a segment).
func (l *Log) listSegments() ([]int64, error) {
	entries, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", l.dir, err)
	}
	logs := map[int64]bool{}
	var bases []int64
	for _, e := range entries {
		name := e.Name()
		if stem, ok := strings.CutSuffix(name, ".log"); ok {
			if base, err := strconv.ParseInt(stem, 10, 64); err == nil && base >= 0 && len(stem) == 20 {
				bases = append(bases, base)
				logs[base] = true
			}
		}
	}
	for _, e := range entries {
		name := e.Name()
		stem := strings.TrimSuffix(strings.TrimSuffix(name, ".index"), ".timeindex")
		orphan := stem != name && !logs[parseBase(stem)]
		if strings.HasSuffix(name, ".tmp") || orphan {
			if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("removing leftover %s: %w", name, err)
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

func parseBase(stem string) int64 {
	v, err := strconv.ParseInt(stem, 10, 64)
	if err != nil {
		return -1
	}
	return v
}

func closeAll(segs []*segment) {
	for _, s := range segs {
		s.close()
	}
}

// recoverEpochs opens the epoch cache, rebuilding it from the batches when
// the checkpoint is damaged or missing for a non-empty log. Batches in
// segments from replayFrom on are assigned again: a crash between a
// segment write and the checkpoint update leaves batches whose epoch the
// checkpoint lacks (Kafka re-assigns while recovering segments too).
func (l *Log) recoverEpochs(leo, logStart, replayFrom int64) error {
	c, err := OpenEpochCache(l.fs, l.dir)
	rebuild := false
	switch {
	case errors.Is(err, ErrEpochCheckpointCorrupt):
		l.cfg.Logger.Warn("leader-epoch checkpoint damaged; rebuilding from the log", "dir", l.dir, "err", err)
		if c, err = l.emptyEpochCache(); err != nil {
			return err
		}
		rebuild = true
	case err != nil:
		return err
	default:
		if _, ok := c.Latest(); !ok && leo > logStart {
			rebuild = true
		}
	}
	l.epochs = c
	if rebuild {
		var entries []EpochEntry
		for _, s := range l.segs {
			if _, err := s.scan(0, false, func(b batch.Batch, _ int64) error {
				// Every change of epoch goes to Rebuild, which applies
				// Kafka's assign rules (a lower epoch later in the log
				// removes the higher ones before it).
				ple := b.PartitionLeaderEpoch()
				if n := len(entries); ple >= 0 && (n == 0 || ple != entries[n-1].Epoch) {
					entries = append(entries, EpochEntry{Epoch: ple, StartOffset: b.BaseOffset()})
				}
				return nil
			}); err != nil {
				return err
			}
		}
		if err := c.Rebuild(entries); err != nil {
			return err
		}
	}
	if err := c.TruncateFromEnd(leo); err != nil {
		return err
	}
	if !rebuild {
		for _, s := range l.segs {
			if s.next.Load() <= replayFrom {
				continue
			}
			if _, err := s.scan(0, false, func(b batch.Batch, _ int64) error {
				// Only newer epochs: assigning an older one would cut
				// the entries after it (Kafka's recovery does the same).
				if last, ok := c.Latest(); ok && b.PartitionLeaderEpoch() <= last.Epoch {
					return nil
				}
				_, err := c.Assign(b.PartitionLeaderEpoch(), b.BaseOffset())
				return err
			}); err != nil {
				return fmt.Errorf("replaying leader epochs of %s: %w", s.path, err)
			}
		}
	}
	if err := c.TruncateFromStart(logStart); err != nil {
		return err
	}
	// The replay's Assigns are not fsynced, and the recovery point
	// already stands at the log end.
	return c.Sync()
}

// emptyEpochCache removes a damaged checkpoint and opens an empty cache.
func (l *Log) emptyEpochCache() (*EpochCache, error) {
	if err := l.fs.Remove(filepath.Join(l.dir, "leader-epoch-checkpoint")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return OpenEpochCache(l.fs, l.dir)
}

// loadProducerState loads the newest usable snapshot at or below the log
// end and replays the batches after it.
func (l *Log) loadProducerState() error {
	leo := l.active().next.Load()
	ps, from, err := LoadSnapshot(l.fs, l.dir, leo)
	if err != nil {
		return fmt.Errorf("loading producer state: %w", err)
	}
	for _, s := range l.segs {
		if s.next.Load() <= from {
			continue
		}
		size := s.size.Load()
		pos, _, err := s.find(from, size)
		if err != nil {
			return err
		}
		if _, err := s.scan(pos, false, func(b batch.Batch, _ int64) error {
			if b.BaseOffset() >= from && (b.HasProducerID() || b.IsControl()) {
				ps.OnAppend(b)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("replaying producer state from %d: %w", from, err)
		}
	}
	ps.DropAbortedBefore(l.logStart.Load())
	l.setProducers(ps)
	return nil
}
