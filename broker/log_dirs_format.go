package broker

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/kmirror/kmirror/state"
)

// `kmirror storage format`, as Kafka's `kafka-storage.sh format`: an
// operator who formats first gives every node of a cluster the same
// cluster id before any of them starts, instead of letting the first
// start choose one. A node started on formatted dirs keeps that id.

// FormatReport is what FormatStorage did.
type FormatReport struct {
	StateDir  string
	ClusterID string
	// Formatted are the dirs given the cluster id now; Already those
	// that had it (kept with ignoreFormatted).
	Formatted, Already []string
}

// ErrAlreadyFormatted marks a dir formatted before, for a format without
// ignoreFormatted.
var ErrAlreadyFormatted = errors.New("already formatted")

// RandomClusterID is a new cluster id as `kafka-storage.sh random-uuid`
// prints one: 16 random bytes, URL-safe base64 without padding.
func RandomClusterID() string {
	var id [16]byte
	rand.Read(id[:])
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// checkClusterID checks a cluster id given by an operator.
func checkClusterID(id string) error {
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(raw) != 16 || string(raw) == string(make([]byte, 16)) {
		return fmt.Errorf("cluster id %q is not a Kafka cluster id: 22 characters of URL-safe base64 of 16 bytes, "+
			"not all zero (kmirror storage random-uuid prints one)", id)
	}
	return nil
}

// FormatStorage gives cfg's state store and log dirs cluster id clusterID.
// Every dir is checked before any is written: a dir already formatted
// fails with ErrAlreadyFormatted unless ignoreFormatted (then it must hold
// the same cluster id), a dir of another cluster or node, or one holding
// partitions without a meta.properties, fails and nothing is written.
func FormatStorage(cfg Config, clusterID string, ignoreFormatted bool) (FormatReport, error) {
	if err := cfg.Validate(); err != nil {
		return FormatReport{}, err
	}
	rep := FormatReport{StateDir: cfg.StateDir, ClusterID: clusterID}
	if err := checkClusterID(clusterID); err != nil {
		return rep, err
	}
	already := func(dir, had string) error {
		switch {
		case had != clusterID:
			return fmt.Errorf("%s belongs to cluster %s, not %s: format only new dirs, or point the settings at this "+
				"cluster's own", dir, had, clusterID)
		case !ignoreFormatted:
			return fmt.Errorf("%s: %w for cluster %s (--ignore-formatted accepts it)", dir, ErrAlreadyFormatted, had)
		}
		rep.Already = append(rep.Already, dir)
		return nil
	}
	storeFormatted, err := storeHasData(cfg.StateDir)
	if err != nil {
		return rep, err
	}
	if storeFormatted {
		store, err := state.Open(cfg.StateDir, state.Options{Logger: cfg.Logger})
		if err != nil {
			return rep, fmt.Errorf("opening the state store %s: %w", cfg.StateDir, err)
		}
		had := store.ClusterID()
		if err := store.Close(); err != nil {
			return rep, fmt.Errorf("closing the state store %s: %w", cfg.StateDir, err)
		}
		if err := already(cfg.StateDir, had); err != nil {
			return rep, err
		}
	}
	var toWrite []string
	for _, d := range cfg.LogDirs {
		meta, err := readMetaProperties(d)
		switch {
		case err != nil:
			return rep, err
		case meta != nil && meta["node.id"] != strconv.Itoa(int(cfg.NodeID)):
			return rep, fmt.Errorf("%s belongs to node %s, this is node %d", d, meta["node.id"], cfg.NodeID)
		case meta != nil:
			if err := already(d, meta["cluster.id"]); err != nil {
				return rep, err
			}
		case len(partitionDirs(d, cfg.StateDir)) > 0:
			return rep, fmt.Errorf("%s holds partition directories but no meta.properties: it is not a new dir "+
				"(kmirror storage info shows what it holds)", d)
		default:
			toWrite = append(toWrite, d)
		}
	}
	if !storeFormatted {
		if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
			return rep, err
		}
		store, err := state.Open(cfg.StateDir, state.Options{Logger: cfg.Logger})
		if err != nil {
			return rep, fmt.Errorf("creating the state store %s: %w", cfg.StateDir, err)
		}
		err = store.RestoreClusterID(clusterID)
		if cerr := store.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return rep, err
		}
		rep.Formatted = append(rep.Formatted, cfg.StateDir)
	}
	for _, d := range toWrite {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return rep, fmt.Errorf("log.dirs: creating %s: %w", d, err)
		}
		if err := writeMetaProperties(d, clusterID, cfg.NodeID); err != nil {
			return rep, err
		}
		rep.Formatted = append(rep.Formatted, d)
	}
	return rep, nil
}

// storeHasData reports whether dir holds a state store (any file).
func storeHasData(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading the state dir %s: %w", dir, err)
	}
	return len(entries) > 0, nil
}
