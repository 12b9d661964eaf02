package state

import (
	"fmt"
)

// firstProducerID is the first id a new store hands out, as Kafka's first
// producer id block starts at 0. Part of the on-disk format only in that
// an absent allocator record means "start here".
const firstProducerID int64 = 0

// producerIDLimit is the first id the allocator never issues. It equals
// batch.MirrorPIDOffset: ids at and above it belong to mirrored producers
// rewritten with producer.id.rewrite (DESIGN.md decision 2). state may
// import only std and Badger, so the value is repeated here; a test pins it.
const producerIDLimit int64 = 1 << 62

// AllocateProducerIDs reserves a block of n (>= 1) producer ids and returns
// the first; the block is [first, first+n). The end of the block is
// persisted (fsynced) before AllocateProducerIDs returns, so ids are never
// reissued after a restart or crash. Ids start at 0 and strictly increase
// across calls and restarts. It fails once a block would reach 1<<62.
//
// Concurrent callers are served one at a time, so blocks never overlap.
func (s *Store) AllocateProducerIDs(n int64) (first int64, err error) {
	if n < 1 {
		return 0, fmt.Errorf("state: allocate producer ids: block of %d ids", n)
	}
	s.pidMu.Lock()
	defer s.pidMu.Unlock()
	err = s.update(func(txn tx) error {
		next, err := readNextProducerID(txn)
		if err != nil {
			return err
		}
		// Written as a subtraction: next+n may overflow int64.
		if n > producerIDLimit-next {
			return fmt.Errorf("state: producer ids exhausted: %d ids asked, %d left below %d",
				n, producerIDLimit-next, producerIDLimit)
		}
		first = next
		return txn.Set([]byte(keyNextProducerID), appendNextProducerID(nil, next+n))
	})
	if err != nil {
		return 0, err
	}
	return first, nil
}

// SkipProducerIDsThrough makes every later block start above max: a
// store that was lost and rebuilt, or made anew, must not hand out again
// the ids its partition logs still know. It never moves the allocator
// back, and refuses a max at or past the limit (those are rewritten
// mirror ids, never the allocator's).
func (s *Store) SkipProducerIDsThrough(max int64) error {
	if max < firstProducerID || max >= producerIDLimit-1 {
		return fmt.Errorf("state: skip producer ids: %d outside [%d, %d)", max, firstProducerID, producerIDLimit-1)
	}
	s.pidMu.Lock()
	defer s.pidMu.Unlock()
	return s.update(func(txn tx) error {
		next, err := readNextProducerID(txn)
		if err != nil {
			return err
		}
		if next > max {
			return nil
		}
		return txn.Set([]byte(keyNextProducerID), appendNextProducerID(nil, max+1))
	})
}

// readNextProducerID reads the allocator's next id, firstProducerID when
// none was allocated yet.
func readNextProducerID(txn tx) (int64, error) {
	next := firstProducerID
	_, err := getRecord(txn, []byte(keyNextProducerID), func(v []byte) error {
		var err error
		next, err = decodeNextProducerID(v)
		return err
	})
	return next, err
}
