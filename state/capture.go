package state

import (
	"errors"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// A store with a Replicator (SetReplicator) writes its replicated records
// through the cluster's metadata log: every write method runs as before,
// against the records as this store holds them, but its writes to the
// replicated families are captured as Ops and handed to the replicator,
// which appends them as one entry; the store changes when the entry is
// applied (ApplyOps), on this node as on every other. Writes to the
// node's own families (group offsets, transactions, leader epochs) are
// committed here as without a replicator. Only the controller writes
// through the log: other nodes forward the request that would write.

// Replicator appends a change to the metadata log.
type Replicator interface {
	// Replicate appends ops as one entry and returns once this store
	// has applied it, or fails.
	Replicate(ops []Op) error
}

// ErrMixedWrite is the error of a write that changes replicated and
// node-local records in one transaction: it cannot be one log entry and
// one local commit at once.
var ErrMixedWrite = errors.New("state: one transaction writes replicated and node-local records")

// SetReplicator makes every later write of the replicated records go
// through r. REQUIRES: called once, before the store is shared.
func (s *Store) SetReplicator(r Replicator) { s.repl = r }

// capture notes a transaction's writes: the replicated ones as Ops, the
// others only as a flag. A nil capture notes nothing.
type capture struct {
	ops   []Op
	local bool
}

func (c *capture) note(key, value []byte) {
	switch {
	case c == nil:
	case replicatedKey(key):
		op := Op{Key: slices.Clone(key)}
		if value != nil {
			op.Value = slices.Clone(value)
		}
		c.ops = append(c.ops, op)
	default:
		c.local = true
	}
}

// replicate is a write with a replicator. fn runs once to see what it
// writes: node-local records only, committed here (synced or not, as the
// caller asks); replicated ones, discarded, then fn runs again under
// replMu, so that it computes from the records every earlier replicated
// write left, and its ops go to the replicator (if what it writes is
// node-local this time, that is committed instead).
func (s *Store) replicate(freeing, synced bool, fn func(txn tx) error) error {
	ops, err := s.captureOrCommit(freeing, synced, fn)
	if err != nil || len(ops) == 0 {
		return err
	}
	s.replMu.Lock()
	defer s.replMu.Unlock()
	if ops, err = s.captureOrCommit(freeing, synced, fn); err != nil || len(ops) == 0 {
		return err
	}
	if err := s.repl.Replicate(ops); err != nil {
		return fmt.Errorf("state: replicating: %w", err)
	}
	return nil
}

// captureOrCommit runs fn in a read-write transaction: one that wrote only
// node-local records is committed (and fsynced when synced); one that
// wrote replicated records is discarded and its ops returned; both at
// once is ErrMixedWrite. Conflicts are retried as commit retries them.
func (s *Store) captureOrCommit(freeing, synced bool, fn func(txn tx) error) (ops []Op, err error) {
	err = s.writing(freeing, synced, func() error {
		var err error
		for range maxConflictRetries {
			var c capture
			t := s.db.NewTransaction(true)
			err = fn(tx{t: t, c: &c})
			switch {
			case err == nil && len(c.ops) > 0 && c.local:
				err = ErrMixedWrite
			case err == nil && len(c.ops) > 0:
				t.Discard()
				ops = c.ops
				return nil
			case err == nil:
				err = t.Commit()
			}
			t.Discard()
			switch {
			case errors.Is(err, badger.ErrTxnTooBig):
				return fmt.Errorf("%w: %w", ErrTooLarge, err)
			case errors.Is(err, badger.ErrConflict):
				continue
			case err != nil:
				return err
			}
			if synced {
				if err := s.db.Sync(); err != nil {
					return fmt.Errorf("state: syncing: %w", err)
				}
			}
			return nil
		}
		return fmt.Errorf("state: %d transaction conflicts in a row: %w", maxConflictRetries, err)
	})
	return ops, err
}
