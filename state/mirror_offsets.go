package state

import (
	"errors"
	"fmt"
	"time"
)

// The last known source offset of each mirror partition (issue 16 item
// 7): the source high watermark a fetcher last read, and when. Describe
// needs it whenever no fetcher can say: a PAUSED, STOPPED or FAILED
// partition, and every partition after a restart until its source
// answers (a dead source broker may never answer). It rides on the
// partition's state record (MirrorPartitionState.SourceOffset) rather
// than a record of its own so that deleting the states deletes it too.
//
// It is written at two moments, never per fetch (the fetch path is hot):
// when a partition's fetcher is removed (stop, pause, a failure that
// takes it away), and by the control plane's periodic checkpoint,
// PutMirrorSourceOffsets, which also runs at shutdown.

// sourceOffsetsPerTxn bounds the partitions PutMirrorSourceOffsets
// updates in one transaction (with a quarter of Badger's batch size,
// for states with long error messages), far below Badger's limits.
const sourceOffsetsPerTxn = 1000

// MirrorSourceOffset is one partition's source high watermark and the time
// it was read.
type MirrorSourceOffset struct {
	Topic     string
	Partition int32
	Offset    int64
	Time      time.Time
}

// PutMirrorSourceOffsets records the source offsets of partitions of
// mirror whose states are stored, leaving every other field of the states
// as they are. An offset read no later than the stored one (to the
// millisecond) is skipped, as is a partition without a stored state (it
// is UNKNOWN: nothing to attach an offset to, and writing one would bring
// back the state of a topic that left the mirror).
//
// The write is not fsynced (like CommitOffsets): a checkpoint lost to a
// power cut only leaves an older offset, shown with its older time.
// Offsets go in transactions of up to a thousand; a stored state that is
// corrupt is left alone and reported, wrapping ErrCorrupt, after the
// others are written.
//
// It refuses, before writing anything, an invalid mirror or topic name, a
// negative partition or offset, or a time that is zero or before 1970.
func (s *Store) PutMirrorSourceOffsets(mirror string, offsets []MirrorSourceOffset) error {
	if err := checkMirrorName(mirror); err != nil {
		return fmt.Errorf("state: put mirror source offsets: %v", err)
	}
	for _, o := range offsets {
		err := checkMirrorPartitionKey(mirrorPartitionKey{mirror, o.Topic, o.Partition})
		if err == nil && o.Time.IsZero() {
			err = errors.New("no read time")
		}
		if err == nil {
			err = checkSourceOffset(o.Offset, o.Time)
		}
		if err != nil {
			return fmt.Errorf("state: put mirror source offsets: mirror %q topic %q partition %d: %v",
				mirror, o.Topic, o.Partition, err)
		}
	}
	var corrupt error
	for len(offsets) > 0 {
		var done int
		var bad error
		err := s.updateNoSync(func(txn tx) error {
			done, bad = 0, nil // the txn may run again after a conflict
			size, limit := int64(0), s.db.MaxBatchSize()/4
			for _, o := range offsets {
				if done == sourceOffsetsPerTxn || size > limit {
					break
				}
				done++
				key := appendMirrorPartitionKey(nil, mirrorPartitionKey{mirror, o.Topic, o.Partition})
				var p MirrorPartitionState
				found, err := getRecord(txn, key, func(v []byte) (err error) {
					p, err = decodeMirrorPartitionState(v)
					return err
				})
				switch {
				case isCorrupt(err):
					bad = firstErr(bad, err)
					continue
				case err != nil:
					return err
				case !found:
					continue
				}
				t := toMillis(o.Time)
				if !t.After(p.SourceOffsetTime) {
					continue
				}
				p.SourceOffset, p.SourceOffsetTime = o.Offset, t
				val := appendMirrorPartitionState(nil, p)
				size += int64(len(key) + len(val))
				if err := txn.Set(key, val); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("state: put mirror source offsets of mirror %q: %w", mirror, err)
		}
		offsets = offsets[done:]
		corrupt = firstErr(corrupt, bad)
	}
	return corrupt
}

// firstErr returns first, or next when first is nil.
func firstErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// toMillis drops what the store does not keep of t: the monotonic clock
// reading and anything below the millisecond. The zero time stays zero.
func toMillis(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli())
}

// checkSourceOffset holds the rules of a source offset and its read time,
// shared by the writers and the decoder: never read (a zero time) goes
// with offset 0; a read offset is not negative and was read after 1970
// (the encoding's "no time" is the absence of the fields, not 0).
func checkSourceOffset(offset int64, t time.Time) error {
	switch {
	case t.IsZero() && offset != 0:
		return fmt.Errorf("source offset %d without a read time", offset)
	case t.IsZero():
		return nil
	case offset < 0:
		return fmt.Errorf("source offset %d", offset)
	case t.UnixMilli() <= 0:
		return fmt.Errorf("source offset read at %d ms, not after 1970", t.UnixMilli())
	}
	return nil
}
