package state

import (
	"cmp"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/kmirror/kmirror/internal/diskspace"
)

// Errors. Corruption errors wrap ErrCorrupt and name the key; lookups of an
// absent record wrap ErrNotFound.
var (
	ErrClosed   = errors.New("state: store closed")
	ErrCorrupt  = errors.New("state: corrupt record")
	ErrNotFound = errors.New("state: not found")
	// ErrTooLarge marks a change that does not fit one Badger transaction
	// (about 1.2 MiB or 13000 keys with the sizing below), such as an
	// offset commit of many thousands of partitions. Nothing was written;
	// the caller may split the change.
	ErrTooLarge = errors.New("state: change too large for one transaction")
	// ErrLocked marks a store another process holds open (Badger's
	// directory lock): a node runs on it.
	ErrLocked = errors.New("state: store in use by another process")
)

// Options for Open.
type Options struct {
	// Logger receives the store's own messages and Badger's warnings and
	// errors (Badger's info and debug chatter is dropped). Nil discards.
	Logger *slog.Logger
	// InMemory runs Badger without files, for tests. The dir argument of
	// Open is then ignored and nothing survives Close.
	InMemory bool
	// Secret is password.encoder.secret: mirror config values IsSecret
	// names are stored sealed with a key derived from it (secrets.go).
	// Empty: such values cannot be stored.
	Secret   string
	IsSecret func(configName string) bool
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
	db  *badger.DB
	log *slog.Logger
	// clusterID is the cluster id; it changes only when the store joins
	// the metadata log's cluster (joinCluster), which handlers may race.
	clusterID atomic.Pointer[string]

	// aead seals credentials (nil without a secret); isSecret says which
	// mirror configs are credentials. Set by Open, and again when the
	// store joins a cluster, before its node serves (afterApply).
	aead     cipher.AEAD
	isSecret func(string) bool
	// secret is password.encoder.secret, kept to derive the key again
	// when the store joins a cluster and takes its salt (afterApply).
	secret string

	// space keeps Badger's reserve free on its filesystem (space.go);
	// nil in memory.
	space *space

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
	pidMu sync.Mutex

	// syncMu keeps every other write out of the window between an fsynced
	// commit and its Sync: update holds it exclusively from the commit
	// through the Sync, updateNoSync holds it shared. Without it a
	// commit could lose its fsync:
	//
	//  1. update commits txn A; Badger appends A to the WAL of the active
	//     memtable M1 (an mmap, so A is in the page cache, not on disk);
	//  2. any other commit finds M1 full: Badger moves M1 to the flush
	//     queue and starts memtable M2 with a new WAL;
	//  3. update calls DB.Sync, which syncs the WAL of the *active*
	//     memtable only: M2's. A sits unsynced in M1's WAL until M1's
	//     flush to an SSTable completes, and a power loss in between
	//     loses A although update reported it durable.
	//
	// With syncMu held exclusively no commit can run at step 2, and a
	// rotation before step 1 is harmless: A then goes to the new
	// memtable, the one Sync syncs. Sync waits for the disk (0.2 ms to
	// a few ms), so an fsynced write stalls offset commits for that
	// long; fsynced writes are rare (topic changes, group generations,
	// producer id blocks). Fsynced writes also run one at a time, so
	// each pays its own fsync.
	//
	// Lock order: pidMu, then replMu, then mu, then syncMu.
	syncMu sync.RWMutex

	// repl, when set, takes the writes of the replicated records to the
	// metadata log (capture.go); replMu runs them one at a time, so each
	// is computed from the records the previous one left.
	repl   Replicator
	replMu sync.Mutex
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
		// No fsync per commit: update fsyncs itself with DB.Sync, and
		// updateNoSync (committed offsets) does not fsync at all. A
		// commit still reaches the OS (Badger's WAL is an mmap) before it
		// returns, so nothing is lost to kill -9.
		WithSyncWrites(false).
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
		if opts.InMemory {
			return nil, fmt.Errorf("state: opening an in-memory store: %w", err)
		}
		if lockedByOther(dir) {
			return nil, fmt.Errorf("%w: opening %s: %w. A kmirror node runs on this data dir: stop it first",
				ErrLocked, dir, err)
		}
		// Badger's damage errors (a manifest or table checksum mismatch)
		// are not all exported, so every refusal says what the operator
		// can do; the partition logs are not in this directory and are
		// never touched by it.
		return nil, fmt.Errorf("state: opening %s: %w. If another kmirror runs on this data dir, stop it first. If the "+
			"store is damaged (a checksum mismatch, a corrupt manifest or table), kmirror will not start on it: restore %s "+
			"from a backup, or move it aside and run `kmirror storage rebuild`, which registers the topics again from "+
			"the partition logs (with their ids and the cluster id); mirrors, topic configs, group offsets, ACLs and "+
			"SCRAM users must then be created again (the partition logs are kept)", dir, err, dir)
	}
	s := &Store{db: db, log: logger}
	if !opts.InMemory {
		mon, err := diskspace.New(dir)
		if err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("state: opening %s: %w", dir, err)
		}
		s.space = &space{mon: mon}
	}
	created, err := s.initClusterID()
	if err == nil {
		err = s.initSealer(opts.Secret, opts.IsSecret)
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("state: opening %s: %w", dir, err)
	}
	logger.Info("state store opened", "dir", dir, "in_memory", opts.InMemory,
		"cluster_id", s.ClusterID(), "cluster_id_created", created)
	return s, nil
}

// Close flushes and closes the store. It waits for operations in flight;
// later operations fail with ErrClosed. Closing twice is a no-op. On a
// disk too full for the flush, Close leaves Badger open rather than crash
// (the next Open replays what was not flushed) and fails with ErrNoSpace.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.checkSpaceAtClose(); err != nil {
		// Closing flushes the memtable to a table, a memory-mapped write
		// that the full disk cannot back: a SIGBUS. Badger is left open
		// instead; its write-ahead log holds every write, and the next
		// Open replays it. Our own writes keep this room free, so only
		// another program filling the disk gets here.
		s.log.Error("state store not flushed at close: the disk is full; the next start replays its write-ahead log",
			"err", err)
		return fmt.Errorf("state: closing without a flush: %w", err)
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("state: closing: %w", err)
	}
	return nil
}

// ClusterID returns the cluster id: 16 random bytes generated on the first
// Open of the directory, written as Kafka's Uuid.toString does (22 chars of
// unpadded base64url). It stays readable after Close.
func (s *Store) ClusterID() string {
	if id := s.clusterID.Load(); id != nil {
		return *id
	}
	return ""
}

func (s *Store) setClusterID(id string) { s.clusterID.Store(&id) }

// initClusterID loads the cluster id, generating and persisting it when the
// store is new. created reports a new id.
func (s *Store) initClusterID() (created bool, err error) {
	// Read first: a node restarted on a full disk must open its store
	// without writing to it.
	err = s.view(func(txn tx) error {
		found, err := getRecord(txn, []byte(keyClusterID), func(v []byte) error {
			id, err := decodeClusterID(v)
			s.setClusterID(base64.RawURLEncoding.EncodeToString(id[:]))
			return err
		})
		if err == nil && !found {
			s.setClusterID("")
		}
		return err
	})
	if err != nil || s.ClusterID() != "" {
		return false, err
	}
	err = s.update(func(txn tx) error {
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
			// Generated, not formatted: the store may still join a
			// metadata log's cluster (joinCluster).
			if err := txn.Set([]byte(keyClusterIDGenerated), []byte{1}); err != nil {
				return err
			}
		}
		s.setClusterID(base64.RawURLEncoding.EncodeToString(id[:]))
		return nil
	})
	return created, err
}

// RestoreClusterID makes id (Kafka's string form) the store's cluster id,
// for `kmirror storage rebuild`: the cluster id of a lost store comes back
// from the log dirs' meta.properties. It refuses to change the id of a
// store that names a topic: that store is a live cluster's.
// REQUIRES: nothing else uses the store meanwhile (ClusterID reads the id
// without a lock); the rebuild command holds it alone.
func (s *Store) RestoreClusterID(id string) error {
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(raw) != 16 {
		return fmt.Errorf("state: cluster id %q is not URL-safe base64 of 16 bytes", id)
	}
	if id == s.ClusterID() {
		return nil
	}
	err = s.update(func(txn tx) error {
		if namesATopic(txn) {
			return fmt.Errorf("state: the store names topics of cluster %s: its cluster id stays", s.ClusterID())
		}
		if err := txn.Delete([]byte(keyClusterIDGenerated)); err != nil {
			return err
		}
		return txn.Set([]byte(keyClusterID), appendClusterID(nil, [16]byte(raw)))
	})
	if err != nil {
		return err
	}
	s.setClusterID(id)
	return nil
}

// namesATopic reports whether the store in txn names any topic (keys
// only: no value is read).
func namesATopic(txn tx) bool {
	opts := badger.IteratorOptions{Prefix: []byte(keyTopicPrefix)}
	it := txn.NewIterator(opts)
	defer it.Close()
	it.Seek(opts.Prefix)
	return it.ValidForPrefix(opts.Prefix)
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

// tx is a store transaction: Badger's, behind the only operations the
// records use (Get, Set, Delete, NewIterator), so that the store alone
// decides what a write does. A value, not a pointer: it costs no
// allocation per transaction.
type tx struct {
	t *badger.Txn
	// c, when set, notes every write (capture.go): a store with a
	// replicator sends its replicated records' writes to the metadata
	// log instead of committing them.
	c *capture
}

func (x tx) Get(key []byte) (*badger.Item, error) { return x.t.Get(key) }

func (x tx) Set(key, value []byte) error {
	x.c.note(key, value)
	return x.t.Set(key, value)
}

func (x tx) Delete(key []byte) error {
	x.c.note(key, nil)
	return x.t.Delete(key)
}

func (x tx) NewIterator(opt badger.IteratorOptions) *badger.Iterator {
	return x.t.NewIterator(opt)
}

// view runs fn in a read-only transaction, or fails with ErrClosed.
func (s *Store) view(fn func(txn tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.db.View(func(t *badger.Txn) error { return fn(tx{t: t}) })
}

// update runs fn in a read-write transaction, commits it and fsyncs it
// (DB.Sync) before returning, or fails with ErrClosed. The change then
// survives kill -9 and power loss. Every method writes through update
// except CommitOffsets and PutMirrorSourceOffsets (see updateNoSync).
//
// A commit that loses a conflict to a concurrent transaction runs fn again
// on fresh data, so fn must not keep effects outside the transaction other
// than results it reassigns. A change too large for one transaction fails
// with ErrTooLarge. A failed Sync is returned: the change is then visible
// but its durability is unknown.
func (s *Store) update(fn func(txn tx) error) error {
	return s.updateSynced(false, fn)
}

// updateFreeing is update for deletions that free disk space (a topic's
// records, before its logs go): they may use the last part of the reserve
// that ordinary writes leave (space.go), so that deleting topics works on
// a full disk.
func (s *Store) updateFreeing(fn func(txn tx) error) error {
	return s.updateSynced(true, fn)
}

func (s *Store) updateSynced(freeing bool, fn func(txn tx) error) error {
	if s.repl != nil {
		return s.replicate(freeing, true, fn)
	}
	return s.commitSynced(freeing, fn)
}

// commitSynced is updateSynced without a replicator: the change is
// committed here and fsynced.
func (s *Store) commitSynced(freeing bool, fn func(txn tx) error) error {
	return s.writing(freeing, true, func() error {
		if err := s.commit(fn); err != nil {
			return err
		}
		if err := s.db.Sync(); err != nil {
			return fmt.Errorf("state: syncing: %w", err)
		}
		return nil
	})
}

// writing runs fn with the store open for a write: mu held shared (Close
// waits for it), the free space checked (freeing: with the margin kept
// for deletions, space.go), and syncMu held exclusively for a write that
// fsyncs (see syncMu for why no other commit may run meanwhile), shared
// for one that does not.
func (s *Store) writing(freeing, synced bool, fn func() error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.checkSpace(freeing); err != nil {
		return err
	}
	if synced {
		s.syncMu.Lock()
		defer s.syncMu.Unlock()
	} else {
		s.syncMu.RLock()
		defer s.syncMu.RUnlock()
	}
	return fn()
}

// updateNoSync is update without the fsync, for committed offsets and the
// mirror source offset checkpoints only: a change reaches the OS before
// updateNoSync returns and survives kill -9 of the process, but not
// necessarily a power loss or an OS crash. This is Kafka's guarantee for
// __consumer_offsets, which it does not fsync either, and it allows
// commit rates an fsync per commit cannot; a lost checkpoint only leaves
// an older source offset, shown with its older time. The
// change becomes durable at Close, at the flush of its memtable to an
// SSTable, or at a later update's Sync while its memtable is still the
// active one.
func (s *Store) updateNoSync(fn func(txn tx) error) error {
	if s.repl != nil {
		return s.replicate(false, false, fn)
	}
	return s.writing(false, false, func() error { return s.commit(fn) })
}

// commit runs fn in a read-write transaction and commits it, retrying
// conflicts. REQUIRES: s.mu and s.syncMu held (either mode).
func (s *Store) commit(fn func(txn tx) error) error {
	var err error
	for range maxConflictRetries {
		err = s.db.Update(func(t *badger.Txn) error { return fn(tx{t: t}) })
		switch {
		case errors.Is(err, badger.ErrTxnTooBig):
			return fmt.Errorf("%w: %w", ErrTooLarge, err)
		case !errors.Is(err, badger.ErrConflict):
			return err
		}
	}
	return fmt.Errorf("state: %d transaction conflicts in a row: %w", maxConflictRetries, err)
}

// getRecord reads key in txn and hands its value to decode, which must copy
// what it keeps (the value dies with the transaction). found is false for
// an absent key. A decode error is wrapped with the key's name.
func getRecord(txn tx, key []byte, decode func(v []byte) error) (found bool, err error) {
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
func scanPrefix(txn tx, prefix string, fn func(suffix string, v []byte) error) error {
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

// scanTopicPartitions reads every record under prefix whose key ends in a
// topic partition tail, decodes its value, lets place fill the key fields
// in, and returns the records sorted by topic, then partition (keys order
// topics by the length uvarint first, so the scan order is not that).
func scanTopicPartitions[T any](s *Store, prefix []byte, what string,
	decode func([]byte) (T, error), place func(v *T, topic string, partition int32)) ([]T, error) {
	type entry struct {
		topic     string
		partition int32
		v         T
	}
	var es []entry
	err := s.view(func(txn tx) error {
		es = es[:0]
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
			item := it.Item()
			key := item.Key()
			topic, partition, err := decodeTopicPartitionKeyTail(key[len(prefix):], what)
			if err != nil {
				return fmt.Errorf("state: key %q: %w", key, err)
			}
			var v T
			if err := item.Value(func(b []byte) (err error) {
				v, err = decode(b)
				return err
			}); err != nil {
				return fmt.Errorf("state: key %q: %w", key, err)
			}
			place(&v, topic, partition)
			es = append(es, entry{topic, partition, v})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(es, func(a, b entry) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	out := make([]T, len(es))
	for i := range es {
		out[i] = es[i].v
	}
	return out, nil
}
