package state

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// The cluster's identity in the metadata log. Each store has a cluster id
// of its own (generated at its first Open, or given by `kmirror storage
// format`); the cluster's is the one the first controller writes into the
// log (ClusterIdentityOps), with the secret salt, so that every node seals
// credentials alike. A node applying that record keeps its store's id when
// they agree. When they differ, a store whose id was generated, not
// formatted, and which holds nothing yet (no entry applied, no topic)
// joins: it adopts the log's id and salt. Any other store belongs to
// another cluster: the entry (or snapshot) is refused whole, before any
// of its records is written, with ErrOtherCluster naming both ids.

// keyLogClusterID is the cluster id record of the metadata log (a
// replicated key); keyClusterIDGenerated marks a store whose own id
// (keyClusterID) was generated at its first Open rather than formatted.
const (
	keyLogClusterID       = "v1/cluster/id"
	keyClusterIDGenerated = "v1/meta/cluster-id-generated"
)

// ErrOtherCluster is returned when the metadata log's cluster id is not
// this store's, and the store cannot join it.
var ErrOtherCluster = errors.New("state: this node's data belongs to another cluster")

// ClusterIdentityOps are the ops that write this store's cluster id (and
// its secret salt, when it has one) as the cluster's: the first
// controller's entry.
func (s *Store) ClusterIdentityOps() ([]Op, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s.ClusterID())
	if err != nil || len(raw) != 16 {
		return nil, fmt.Errorf("state: the store's cluster id %q is not a uuid", s.ClusterID())
	}
	ops := []Op{{Key: []byte(keyLogClusterID), Value: appendClusterID(nil, [16]byte(raw))}}
	err = s.view(func(txn tx) error {
		item, err := txn.Get([]byte(keySecretSalt)) // raw bytes, no format version
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		salt, err := item.ValueCopy(nil)
		ops = append(ops, Op{Key: []byte(keySecretSalt), Value: salt})
		return err
	})
	return ops, err
}

// LogClusterID returns the metadata log's cluster id, ok false while the
// log has not given one.
func (s *Store) LogClusterID() (id string, ok bool, err error) {
	err = s.view(func(txn tx) error {
		ok, err = getRecord(txn, []byte(keyLogClusterID), func(v []byte) error {
			raw, err := decodeClusterID(v)
			id = base64.RawURLEncoding.EncodeToString(raw[:])
			return err
		})
		return err
	})
	return id, ok, err
}

// joinCluster checks an entry's or snapshot's ops against the store's
// cluster id, own, before they are written in txn: a log cluster id among
// them that differs is joined when the store may join (the store's id
// written in txn; joining is the id the caller adopts, joinedCluster),
// else refused. REQUIRES: ops checked (CheckOps).
func (s *Store) joinCluster(txn tx, own string, ops []Op) (joining string, err error) {
	for _, op := range ops {
		if string(op.Key) != keyLogClusterID || op.Value == nil {
			continue
		}
		raw, err := decodeClusterID(op.Value)
		if err != nil {
			return "", fmt.Errorf("state: the metadata log's cluster id: %w", err)
		}
		logID := base64.RawURLEncoding.EncodeToString(raw[:])
		if logID == own {
			return "", nil
		}
		generated, err := getRecord(txn, []byte(keyClusterIDGenerated), func([]byte) error { return nil })
		if err != nil {
			return "", err
		}
		applied, err := readApplied(txn)
		if err != nil {
			return "", err
		}
		if !generated || applied > 0 || namesATopic(txn) {
			why := "it was formatted with its id"
			if generated {
				why = "it holds metadata of its own"
			}
			return "", fmt.Errorf("%w: the metadata log is cluster %s's, this node's store is cluster %s's (%s); "+
				"to join, stop the node, move its data dirs aside and run `kmirror storage format --cluster-id %s`",
				ErrOtherCluster, logID, own, why, logID)
		}
		if err := txn.Set([]byte(keyClusterID), appendClusterID(nil, raw)); err != nil {
			return "", err
		}
		if err := txn.Delete([]byte(keyClusterIDGenerated)); err != nil {
			return "", err
		}
		return logID, nil
	}
	return "", nil
}

// joinedCluster logs that the store joined the log's cluster, joining
// (from joinCluster), leaving its generated id; nothing when joining is
// empty.
func (s *Store) joinedCluster(joining, generated string) {
	if joining != "" {
		s.log.Info("state: joined the metadata log's cluster", "cluster_id", joining, "generated_id", generated)
	}
}
