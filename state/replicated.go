package state

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// The cluster's metadata log (meta/) replicates the store's metadata
// families: every node applies the same changes in the same order, so
// every node's store holds the same topics, configs, ACLs, credentials,
// quotas and mirrors. A change travels as Ops, the records' keys and
// encoded values exactly as this package writes them, so the log needs no
// codec of its own and a record has one encoding everywhere.
//
// The cluster id is not an Op: it is each store's identity, which a node
// checks against its cluster's before it applies anything. The other
// families stay each node's own too: group metadata and offsets and
// transactions (the coordinators' state, which moves to the internal
// topics __consumer_offsets and __transaction_state) and the local leader
// epochs of mirrored partitions (a property of one replica's log).

// replicatedPrefixes are the key prefixes of the replicated families, and
// replicatedKeys the single keys. Part of the cluster's protocol: a node
// refuses an Op outside them.
var (
	replicatedPrefixes = []string{keyTopicPrefix, keyTopicIDPrefix, keyBrokerConfigPrefix, keyNodeConfigPrefix,
		keyGroupConfigPrefix, keyACLPrefix, keySCRAMPrefix, keyQuotaPrefix, keyMirrorPrefix, keyMirrorPartitionPrefix,
		keyMirrorACLPrefix, keyMirrorQuotaPrefix, keyMirrorSyncPrefix, keyBrokerPrefix, keyPartitionPrefix}
	replicatedKeys = []string{keyNextProducerID, keySecretSalt, keyLogClusterID}
)

// Op is one change to a replicated record: Value is the record's encoded
// value, nil to delete the key.
type Op struct {
	Key   []byte
	Value []byte
}

// ErrNotReplicated is returned for an Op on a key outside the replicated
// families.
var ErrNotReplicated = errors.New("state: not a replicated key")

// replicatedKey reports whether key belongs to a replicated family.
func replicatedKey(key []byte) bool {
	k := string(key)
	if slices.Contains(replicatedKeys, k) {
		return true
	}
	for _, p := range replicatedPrefixes {
		if strings.HasPrefix(k, p) && len(k) > len(p) {
			return true
		}
	}
	return false
}

// checkOp refuses an Op this package could not have produced: a key
// outside the replicated families, or a value without one of its family's
// format bytes (1; mirror partition states and partition assignments
// are written as 1 or 2).
func checkOp(op Op) error {
	if !replicatedKey(op.Key) {
		return fmt.Errorf("%w: %q", ErrNotReplicated, op.Key)
	}
	if op.Value == nil {
		return nil
	}
	if string(op.Key) == keySecretSalt { // raw bytes, as initSealer writes them
		if len(op.Value) != secretSaltLength {
			return fmt.Errorf("state: key %q: %d bytes, want %d", op.Key, len(op.Value), secretSaltLength)
		}
		return nil
	}
	if len(op.Value) > 0 && (op.Value[0] == formatV1 ||
		op.Value[0] == mirrorPartitionFormatV2 && bytes.HasPrefix(op.Key, []byte(keyMirrorPartitionPrefix)) ||
		op.Value[0] == partitionFormatV2 && bytes.HasPrefix(op.Key, []byte(keyPartitionPrefix))) {
		return nil
	}
	return fmt.Errorf("state: key %q: value of no known format version", op.Key)
}

// CheckOps refuses ops ApplyOps would refuse, so that the metadata log
// never commits an entry every node then fails to apply.
func CheckOps(ops []Op) error {
	for _, op := range ops {
		if err := checkOp(op); err != nil {
			return err
		}
	}
	return nil
}

// keyMetadataApplied is the index of the last metadata log entry applied
// to the store (a node's own record: big-endian uint64 after the format
// byte), written with each entry's ops, so that a restarted node neither
// applies an entry twice nor skips one.
const keyMetadataApplied = "v1/meta/metadata-applied"

// MetadataApplied is the index of the last metadata log entry applied
// (ApplyOps, RestoreMetadata), 0 if none.
func (s *Store) MetadataApplied() (uint64, error) {
	var index uint64
	err := s.view(func(txn tx) error {
		var err error
		index, err = readApplied(txn)
		return err
	})
	return index, err
}

// readApplied reads the applied index in txn, 0 when none is stored.
func readApplied(txn tx) (uint64, error) {
	var applied uint64
	_, err := getRecord(txn, []byte(keyMetadataApplied), func(v []byte) error {
		var err error
		applied, err = decodeApplied(v)
		return err
	})
	return applied, err
}

func decodeApplied(v []byte) (uint64, error) {
	if len(v) != 9 || v[0] != formatV1 {
		return 0, fmt.Errorf("%w: %s: %d bytes", ErrCorrupt, keyMetadataApplied, len(v))
	}
	return binary.BigEndian.Uint64(v[1:]), nil
}

func appliedValue(index uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{formatV1}, index)
}

// ApplyOps applies the ops of metadata log entry index in one transaction,
// fsynced, with the index: all or none. The metadata log's state machine
// calls it for each committed entry, on every node, in log order; an
// entry at or below the applied index is skipped, so a replay after a
// restart changes nothing.
func (s *Store) ApplyOps(index uint64, ops []Op) error {
	if err := CheckOps(ops); err != nil {
		return err
	}
	// Committed here, never replicated again: these are the log's own
	// changes. A committed entry must apply, or this node stops applying
	// the log: it passed the space check when the controller's store
	// captured it, so applying it may use the margin kept for freeing
	// space (a disk filled in between fails it only once that is gone).
	// The store's id changes to the log's before the commit that makes
	// the log's id readable (and back if it fails): whoever reads the
	// log's id here then reads the same id from ClusterID (node.joinCluster
	// waits for the one, then writes the other into the log dirs).
	own := s.ClusterID()
	var joining string
	err := s.commitSynced(true, func(txn tx) error {
		applied, err := readApplied(txn)
		if err != nil {
			return err
		}
		if index <= applied {
			return nil
		}
		if joining, err = s.joinCluster(txn, own, ops); err != nil {
			return err
		}
		if err := txn.Set([]byte(keyMetadataApplied), appliedValue(index)); err != nil {
			return err
		}
		for _, op := range ops {
			var err error
			if op.Value == nil {
				err = txn.Delete(op.Key)
			} else {
				err = txn.Set(op.Key, op.Value)
			}
			if err != nil {
				return fmt.Errorf("state: applying key %q: %w", op.Key, err)
			}
		}
		s.setClusterID(cmp.Or(joining, own))
		return nil
	})
	if err != nil {
		s.setClusterID(own)
		return err
	}
	s.joinedCluster(joining, own)
	return s.afterApply(ops)
}

// afterApply derives the sealing key again when an applied entry or
// snapshot replaced the secret salt.
func (s *Store) afterApply(ops []Op) error {
	for _, op := range ops {
		if string(op.Key) == keySecretSalt {
			return s.initSealer(s.secret, s.isSecret)
		}
	}
	return nil
}

// snapshotMagic starts a metadata snapshot (format version 1). Part of the
// cluster's protocol: snapshots travel between nodes.
const snapshotMagic = "kmirror-metadata-snapshot-v1\n"

// WriteMetadataSnapshot writes every replicated record to w, in key order,
// from one consistent view, with the index of the last entry applied to
// them: the magic, the index (8 bytes big endian), then per record the
// key and value each as a uvarint length and bytes, then a zero key length
// and the CRC32C (Castagnoli, big endian) of everything before it.
func (s *Store) WriteMetadataSnapshot(w io.Writer) error {
	bw := bufio.NewWriter(w)
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	out := io.MultiWriter(bw, crc)
	if _, err := io.WriteString(out, snapshotMagic); err != nil {
		return err
	}
	var lenBuf [binary.MaxVarintLen64]byte
	field := func(b []byte) error {
		if _, err := out.Write(binary.AppendUvarint(lenBuf[:0], uint64(len(b)))); err != nil {
			return err
		}
		_, err := out.Write(b)
		return err
	}
	err := s.view(func(txn tx) error {
		applied, err := readApplied(txn)
		if err != nil {
			return err
		}
		if _, err := out.Write(binary.BigEndian.AppendUint64(nil, applied)); err != nil {
			return err
		}
		write := func(key []byte, v []byte) error {
			if err := field(key); err != nil {
				return err
			}
			return field(v)
		}
		keys := slices.Clone(replicatedKeys)
		slices.Sort(keys)
		for _, k := range keys {
			if _, err := getRecord(txn, []byte(k), func(v []byte) error { return write([]byte(k), v) }); err != nil {
				return err
			}
		}
		for _, p := range replicatedPrefixes {
			if err := scanPrefix(txn, p, func(suffix string, v []byte) error { return write([]byte(p+suffix), v) }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := out.Write([]byte{0}); err != nil {
		return err
	}
	if _, err := bw.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return err
	}
	return bw.Flush()
}

// maxSnapshotBytes bounds a snapshot read into memory: far above any
// cluster's metadata (a million topics is about 200 MB).
const maxSnapshotBytes = 1 << 30

// ReadMetadataSnapshot decodes a snapshot written by WriteMetadataSnapshot
// into its applied index and records, checking its checksum and every
// record: a damaged or foreign snapshot is refused whole.
func ReadMetadataSnapshot(r io.Reader) (index uint64, ops []Op, err error) {
	data, err := io.ReadAll(io.LimitReader(r, maxSnapshotBytes+1))
	if err != nil {
		return 0, nil, fmt.Errorf("state: reading a metadata snapshot: %w", err)
	}
	ops, index, err = decodeMetadataSnapshot(data)
	return index, ops, err
}

// MetadataSnapshotIndex reads only a snapshot's header: the index of the
// last entry its records hold (a node compares it with its own applied
// index before it decides to restore). The checksum is not checked.
func MetadataSnapshotIndex(r io.Reader) (uint64, error) {
	head := make([]byte, len(snapshotMagic)+8)
	if _, err := io.ReadFull(r, head); err != nil || string(head[:len(snapshotMagic)]) != snapshotMagic {
		return 0, fmt.Errorf("%w: not a kmirror metadata snapshot", ErrCorrupt)
	}
	return binary.BigEndian.Uint64(head[len(snapshotMagic):]), nil
}

func decodeMetadataSnapshot(data []byte) ([]Op, uint64, error) {
	if len(data) > maxSnapshotBytes {
		return nil, 0, fmt.Errorf("state: metadata snapshot over %d bytes", maxSnapshotBytes)
	}
	if !bytes.HasPrefix(data, []byte(snapshotMagic)) {
		return nil, 0, fmt.Errorf("%w: not a kmirror metadata snapshot", ErrCorrupt)
	}
	if len(data) < len(snapshotMagic)+8+1+4 {
		return nil, 0, fmt.Errorf("%w: metadata snapshot truncated", ErrCorrupt)
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)) != sum {
		return nil, 0, fmt.Errorf("%w: metadata snapshot checksum mismatch", ErrCorrupt)
	}
	index := binary.BigEndian.Uint64(body[len(snapshotMagic):])
	rest := body[len(snapshotMagic)+8:]
	field := func() ([]byte, error) {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			return nil, fmt.Errorf("%w: metadata snapshot: bad field length", ErrCorrupt)
		}
		f := rest[w : w+int(n) : w+int(n)]
		rest = rest[w+int(n):]
		return f, nil
	}
	var ops []Op
	for {
		key, err := field()
		if err != nil {
			return nil, 0, err
		}
		if len(key) == 0 {
			break
		}
		v, err := field()
		if err != nil {
			return nil, 0, err
		}
		op := Op{Key: key, Value: v}
		if err := checkOp(op); err != nil {
			return nil, 0, fmt.Errorf("%w: metadata snapshot: %w", ErrCorrupt, err)
		}
		ops = append(ops, op)
	}
	if len(rest) != 0 {
		return nil, 0, fmt.Errorf("%w: metadata snapshot: %d bytes after the last record", ErrCorrupt, len(rest))
	}
	return ops, index, nil
}

// RestoreMetadata replaces every replicated record with ops (the snapshot
// of the metadata log up to entry index, from ReadMetadataSnapshot),
// fsynced; the node's own families are left as they are. It runs as write
// batches, not one transaction, because a large cluster's metadata exceeds
// a transaction, and sets the applied index last: a crash midway leaves
// the old index, so the metadata log restores the snapshot again at the
// next start.
func (s *Store) RestoreMetadata(index uint64, ops []Op) error {
	// The snapshot's cluster is checked (and joined) first: a snapshot of
	// another cluster must not replace anything.
	// The join is committed, and the store's id adopted, before the
	// records that make the log's id readable are written (see ApplyOps).
	own := s.ClusterID()
	var joining string
	err := s.update(func(txn tx) (err error) {
		joining, err = s.joinCluster(txn, own, ops)
		return err
	})
	if err != nil {
		return err
	}
	s.setClusterID(cmp.Or(joining, own))
	s.joinedCluster(joining, own)
	err = s.writing(false, true, func() error {
		for _, k := range replicatedKeys {
			if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(k)) }); err != nil {
				return fmt.Errorf("state: restoring metadata: %w", err)
			}
		}
		var prefixes [][]byte
		for _, p := range replicatedPrefixes {
			prefixes = append(prefixes, []byte(p))
		}
		if err := s.db.DropPrefix(prefixes...); err != nil {
			return fmt.Errorf("state: restoring metadata: %w", err)
		}
		wb := s.db.NewWriteBatch()
		defer wb.Cancel()
		for _, op := range ops {
			if err := wb.Set(op.Key, op.Value); err != nil {
				return fmt.Errorf("state: restoring metadata: %w", err)
			}
		}
		if err := wb.Flush(); err != nil {
			return fmt.Errorf("state: restoring metadata: %w", err)
		}
		if err := s.db.Update(func(txn *badger.Txn) error {
			return txn.Set([]byte(keyMetadataApplied), appliedValue(index))
		}); err != nil {
			return fmt.Errorf("state: restoring metadata: %w", err)
		}
		if err := s.db.Sync(); err != nil {
			return fmt.Errorf("state: syncing: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.afterApply(ops)
}

// Changes says which kinds of the node's state an entry's ops change, so
// that a node following the metadata log reloads only those (a mirror
// partition's state change, the most frequent entry, reloads nothing).
type Changes uint8

const (
	// ChangedTopics: topics, their partition counts, configs or mirror.
	ChangedTopics Changes = 1 << iota
	// ChangedCluster: broker registrations or partition assignments.
	ChangedCluster
	// ChangedACLs, ChangedQuotas, ChangedBrokerConfigs: the records of
	// those names.
	ChangedACLs
	ChangedQuotas
	ChangedBrokerConfigs
	// ChangedMirrors: mirrors and their partitions' states, which the
	// broker does not hold (the mirror control plane reads them).
	ChangedMirrors
	// ChangedAll is every kind: a snapshot restored, a change of
	// controller.
	ChangedAll Changes = 1<<iota - 1
)

// ChangesOf classifies ops.
func ChangesOf(ops []Op) Changes {
	var c Changes
	for _, op := range ops {
		k := string(op.Key)
		switch {
		case strings.HasPrefix(k, keyTopicPrefix), strings.HasPrefix(k, keyTopicIDPrefix):
			c |= ChangedTopics
		case strings.HasPrefix(k, keyBrokerPrefix), strings.HasPrefix(k, keyPartitionPrefix):
			c |= ChangedCluster
		case strings.HasPrefix(k, keyACLPrefix):
			c |= ChangedACLs
		case strings.HasPrefix(k, keyQuotaPrefix):
			c |= ChangedQuotas
		case strings.HasPrefix(k, keyBrokerConfigPrefix), strings.HasPrefix(k, keyNodeConfigPrefix):
			c |= ChangedBrokerConfigs
		case strings.HasPrefix(k, keyMirrorPrefix), strings.HasPrefix(k, keyMirrorPartitionPrefix):
			c |= ChangedMirrors
		}
	}
	return c
}
