package state

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// Errors. Corruption errors wrap ErrCorrupt and name the key; lookups of an
// absent record wrap ErrNotFound.
var (
	ErrClosed   = errors.New("state: store closed")
	ErrCorrupt  = errors.New("state: corrupt record")
	ErrNotFound = errors.New("state: not found")
)

// Options for Open.
type Options struct {
	// Logger receives the store's own messages and Badger's warnings and
	// errors (Badger's info and debug chatter is dropped). Nil discards.
	Logger *slog.Logger
	// InMemory runs Badger without files, for tests. The dir argument of
	// Open is then ignored and nothing survives Close.
	InMemory bool
}

// Badger sizing. The store holds metadata (kilobytes to a few megabytes),
// not logs, so the defaults (64 MiB memtables times 5, 256 MiB block cache,
// 1 GiB value log files) would waste hundreds of megabytes per node.
const (
	memTableSize     = 8 << 20
	numMemtables     = 2
	blockCacheSize   = 8 << 20
	valueLogFileSize = 16 << 20
	numCompactors    = 2 // Badger refuses 1; 0 would disable compaction
)

// maxConflictRetries bounds the retries of a transaction that lost a
// conflict to a concurrent one. Conflicts need two writers of the same key
// at the same moment, so a handful of retries always suffices in practice.
const maxConflictRetries = 16

// Store is a node's state store. Create it with Open; all methods are safe
// for concurrent use and may block on disk I/O.
type Store struct {
	db        *badger.DB
	log       *slog.Logger
	clusterID string

	// mu guards closed. Every operation holds it shared for its whole
	// duration, so Close (exclusive) waits for transactions in flight and
	// never closes Badger under one; Badger itself may panic when an
	// iterator outlives the DB. Operations never take mu twice: a pending
	// Close would block the second RLock and deadlock the first.
	mu     sync.RWMutex
	closed bool

	// pidMu serializes AllocateProducerIDs. Badger's conflict detection
	// would already keep two blocks apart, but only by failing and
	// retrying one caller; the mutex makes allocation a queue instead.
	// Lock order: pidMu before mu.
	pidMu sync.Mutex
}

// Open opens the store in dir, creating dir when missing, and generates the
// cluster id on first use. Errors name dir.
func Open(dir string, opts Options) (*Store, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	bopts := badger.DefaultOptions("")
	if opts.InMemory {
		// Badger refuses a directory in memory mode.
		bopts = bopts.WithInMemory(true)
	} else {
		if dir == "" {
			return nil, errors.New("state: open: empty directory")
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("state: creating %s: %w", dir, err)
		}
		bopts = bopts.WithDir(dir).WithValueDir(dir)
	}
	bopts = bopts.
		WithSyncWrites(true).
		WithMemTableSize(memTableSize).
		WithNumMemtables(numMemtables).
		WithBlockCacheSize(blockCacheSize).
		WithValueLogFileSize(valueLogFileSize).
		WithNumCompactors(numCompactors).
		WithCompactL0OnClose(true).
		// Badger's metrics are process-global expvars; the core exposes
		// no metrics backend (STYLE.md item 4).
		WithMetricsEnabled(false).
		WithLogger(badgerLogger{logger.With("component", "badger")})

	db, err := badger.Open(bopts)
	if err != nil {
		return nil, fmt.Errorf("state: opening %s: %w", dir, err)
	}
	s := &Store{db: db, log: logger}
	created, err := s.initClusterID()
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("state: opening %s: %w", dir, err)
	}
	logger.Info("state store opened", "dir", dir, "in_memory", opts.InMemory,
		"cluster_id", s.clusterID, "cluster_id_created", created)
	return s, nil
}

// Close flushes and closes the store. It waits for operations in flight;
// later operations fail with ErrClosed. Closing twice is a no-op.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("state: closing: %w", err)
	}
	return nil
}

// ClusterID returns the cluster id: 16 random bytes generated on the first
// Open of the directory, written as Kafka's Uuid.toString does (22 chars of
// unpadded base64url). It stays readable after Close.
func (s *Store) ClusterID() string { return s.clusterID }

// initClusterID loads the cluster id, generating and persisting it when the
// store is new. created reports a new id.
func (s *Store) initClusterID() (created bool, err error) {
	err = s.update(func(txn *badger.Txn) error {
		created = false
		var id [16]byte
		found, err := getRecord(txn, []byte(keyClusterID), func(v []byte) error {
			var err error
			id, err = decodeClusterID(v)
			return err
		})
		if err != nil {
			return err
		}
		if !found {
			if id, err = newClusterID(); err != nil {
				return err
			}
			created = true
			if err := txn.Set([]byte(keyClusterID), appendClusterID(nil, id)); err != nil {
				return err
			}
		}
		s.clusterID = base64.RawURLEncoding.EncodeToString(id[:])
		return nil
	})
	return created, err
}

// newClusterID draws a random id, skipping the values Kafka's
// Uuid.randomUuid skips: the zero uuid, the metadata topic id (ONE_UUID)
// and ids whose string starts with '-', which command lines take for a flag.
func newClusterID() ([16]byte, error) {
	for {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return id, fmt.Errorf("state: generating cluster id: %w", err)
		}
		one := [16]byte{15: 1}
		if id == ([16]byte{}) || id == one || base64.RawURLEncoding.EncodeToString(id[:])[0] == '-' {
			continue
		}
		return id, nil
	}
}

// view runs fn in a read-only transaction, or fails with ErrClosed.
func (s *Store) view(fn func(txn *badger.Txn) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.db.View(fn)
}

// update runs fn in a read-write transaction and commits it (with an fsync,
// SyncWrites), or fails with ErrClosed. A commit that loses a conflict to a
// concurrent transaction runs fn again on fresh data, so fn must not keep
// effects outside the transaction other than results it reassigns.
func (s *Store) update(fn func(txn *badger.Txn) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	var err error
	for range maxConflictRetries {
		err = s.db.Update(fn)
		if !errors.Is(err, badger.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("state: %d transaction conflicts in a row: %w", maxConflictRetries, err)
}

// getRecord reads key in txn and hands its value to decode, which must copy
// what it keeps (the value dies with the transaction). found is false for
// an absent key. A decode error is wrapped with the key's name.
func getRecord(txn *badger.Txn, key []byte, decode func(v []byte) error) (found bool, err error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("state: reading key %q: %w", key, err)
	}
	if err := item.Value(decode); err != nil {
		return true, fmt.Errorf("state: key %q: %w", key, err)
	}
	return true, nil
}

// scanPrefix calls fn for every key under prefix, in key order, with the
// key's suffix and its value. Both die when fn returns. A decode error is
// wrapped with the key's name.
func scanPrefix(txn *badger.Txn, prefix string, fn func(suffix string, v []byte) error) error {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = []byte(prefix)
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Seek(opts.Prefix); it.ValidForPrefix(opts.Prefix); it.Next() {
		item := it.Item()
		key := item.Key()
		suffix := string(key[len(prefix):])
		if err := item.Value(func(v []byte) error { return fn(suffix, v) }); err != nil {
			return fmt.Errorf("state: key %q: %w", key, err)
		}
	}
	return nil
}

// badgerLogger routes Badger's logger into slog. Only warnings and errors
// pass: Badger logs every compaction and value-log replay at info level,
// which is noise for a metadata store.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(format string, args ...any) {
	b.l.Error(strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (b badgerLogger) Warningf(format string, args ...any) {
	b.l.Warn(strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}

// isCorrupt reports whether err marks a corrupt record.
func isCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }
