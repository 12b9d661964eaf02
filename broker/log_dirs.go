package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/internal/diskspace"
	"github.com/kmirror/kmirror/internal/props"
	"github.com/kmirror/kmirror/internal/vfs"
	"github.com/kmirror/kmirror/state"
	"github.com/kmirror/kmirror/storage"
)

// Every log dir holds a meta.properties, as Kafka's do, naming the cluster
// and node its partitions belong to:
//
//	version=1
//	cluster.id=<the state store's cluster id>
//	node.id=<node.id>
//
// WHY: the partition logs and the state store that names them (topics,
// ids, mirrors) live apart. When the store is lost (deleted, another
// node's, a data dir copied half), a node that started anyway would take
// a new cluster id and serve none of the logs, with no word. So a node
// refuses to start when a log dir belongs to another cluster or node, or,
// for a log dir from before meta.properties, when its state store names
// no topic but the log dir holds partitions. (Not "the store is new": a
// refused start has made it, and the next start must refuse too.) A
// store that names topics starts, and partition directories it does not
// name are warned about (warnUnnamedPartitions). `kmirror storage
// rebuild` (log_dirs_rebuild.go) registers them again.

const metaPropertiesFile = "meta.properties"

// partitionDirRe matches a partition directory's name: <topic>-<partition>.
var partitionDirRe = regexp.MustCompile(`^[A-Za-z0-9._-]+-[0-9]+$`)

// errForeignLogDir marks a log dir that this node must not use.
var errForeignLogDir = errors.New("log.dirs")

// checkLogDirs checks each log dir against the state store (clusterID, and
// storeEmpty when it names no topic) and nodeID, then writes the
// meta.properties of those that have none.
func checkLogDirs(dirs []string, stateDir, clusterID string, nodeID int32, storeEmpty bool) error {
	for _, d := range dirs {
		meta, err := readMetaProperties(d)
		if err != nil {
			return err
		}
		switch {
		case meta != nil && meta["cluster.id"] != clusterID:
			return fmt.Errorf("%w: %s belongs to cluster %s, the state store %s to cluster %s: this is another cluster's "+
				"log dir, or the state store was lost and made anew. Restore the state store of cluster %s; or run "+
				"`kmirror storage rebuild` with this node's settings, which registers the topics again from the "+
				"partition directories under cluster %s; or point log.dirs at an empty directory",
				errForeignLogDir, d, meta["cluster.id"], stateDir, clusterID, meta["cluster.id"], meta["cluster.id"])
		case meta != nil && meta["node.id"] != strconv.Itoa(int(nodeID)):
			return fmt.Errorf("%w: %s belongs to node %s, this is node %d: set node.id=%s, or point log.dirs at this "+
				"node's own directory", errForeignLogDir, d, meta["node.id"], nodeID, meta["node.id"])
		case meta == nil && storeEmpty:
			if parts := partitionDirs(d, stateDir); len(parts) > 0 {
				return fmt.Errorf("%w: %s holds %d partition directories (%s) but the state store %s names no topic: "+
					"the store that names them was deleted or is another node's, and they would not be served. Restore "+
					"the state store from a backup; or run `kmirror storage rebuild` with this node's settings, which "+
					"registers the topics again from them; or, to start afresh, move those partition directories aside",
					errForeignLogDir, d, len(parts), strings.Join(parts[:min(3, len(parts))], ", "), stateDir)
			}
		}
		if meta == nil {
			if err := writeMetaProperties(d, clusterID, nodeID); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeMetaProperties writes log dir d's meta.properties.
func writeMetaProperties(d, clusterID string, nodeID int32) error {
	body := fmt.Sprintf("#kmirror log dir: do not edit\nversion=1\ncluster.id=%s\nnode.id=%d\n", clusterID, nodeID)
	if err := vfs.WriteFileAtomic(vfs.Default, d, filepath.Join(d, metaPropertiesFile), []byte(body)); err != nil {
		return fmt.Errorf("log.dirs: writing %s: %w", filepath.Join(d, metaPropertiesFile), err)
	}
	return nil
}

// readMetaProperties reads a log dir's meta.properties; nil when there is
// none.
func readMetaProperties(dir string) (map[string]string, error) {
	path := filepath.Join(dir, metaPropertiesFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("log.dirs: reading %s: %w", path, err)
	}
	defer f.Close()
	ps, err := props.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("log.dirs: %s: %w", path, err)
	}
	meta := map[string]string{}
	for _, p := range ps {
		meta[p.Key] = p.Value
	}
	if meta["cluster.id"] == "" || meta["node.id"] == "" {
		return nil, fmt.Errorf("log.dirs: %s names no cluster.id or node.id: restore it, or remove it if this log dir "+
			"is this node's", path)
	}
	return meta, nil
}

// partitionDirs lists the partition directories of log dir d, sorted (the
// state dir, which may sit inside it, is none).
func partitionDirs(d, stateDir string) []string {
	entries, err := os.ReadDir(d)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && partitionDirRe.MatchString(e.Name()) && filepath.Join(d, e.Name()) != filepath.Clean(stateDir) {
			out = append(out, e.Name())
		}
	}
	return out
}

// warnUnnamedPartitions logs, once at start, the partition directories no
// registered topic names: a topic a rebuild refused, a partition dir
// copied in, or the empty dirs of a topic creation that did not complete.
// They are not served, and a node that starts over them says so.
// REQUIRES: the topics are loaded.
func (b *Broker) warnUnnamedPartitions() {
	var unnamed []string
	for _, d := range b.cfg.LogDirs {
		for _, name := range partitionDirs(d, b.cfg.StateDir) {
			cut := strings.LastIndexByte(name, '-')
			n, err := strconv.Atoi(name[cut+1:])
			if t := b.partitions.Topic(name[:cut]); err != nil || t == nil || n >= len(t.Partitions()) {
				unnamed = append(unnamed, filepath.Join(d, name))
			}
		}
	}
	if len(unnamed) > 0 {
		b.log.Warn("partition directories that no topic names are not served: see `kmirror storage info`; with the "+
			"node stopped, `kmirror storage rebuild` registers their topics", "count", len(unnamed),
			"dirs", strings.Join(unnamed[:min(5, len(unnamed))], ","))
	}
}

// logDirMargin is how far above the state store's reserve partition appends
// stop on the store's filesystem: offset commits and other state writes go
// on for that long after producers and mirrors are refused.
const logDirMargin = 16 << 20

// stateReserveGuard keeps the state store's reserve (state.Store.Reserve)
// free on a log dir that shares the store's filesystem: a full disk there
// must refuse partition appends, which fail cleanly with
// KAFKA_STORAGE_ERROR, before it reaches the store, whose memory-mapped
// writes would kill the process (package diskspace).
//
// margin is how much more it keeps free: logDirMargin for partitions,
// none for __consumer_offsets, whose commits go on within that margin as
// the store's own writes do.
type stateReserveGuard struct {
	mon    *diskspace.Monitor
	store  *state.Store
	margin int64
}

func (g stateReserveGuard) Reserve(n int64) error {
	if err := g.mon.Reserve(n, g.store.Reserve()+g.margin); err != nil {
		return fmt.Errorf("%w (for the state store in %s, which shares the filesystem)", err, g.mon.Path())
	}
	return nil
}

// logDirGuards returns the space guard of each log dir (by its cleaned
// path) that shares the state store's filesystem, keeping margin above
// the store's reserve.
func logDirGuards(dirs []string, store *state.Store, margin int64) (map[string]storage.SpaceGuard, error) {
	mon := store.SpaceMonitor()
	if mon == nil {
		return nil, nil
	}
	guards := map[string]storage.SpaceGuard{}
	for _, d := range dirs {
		same, err := diskspace.SameFilesystem(d, mon.Path())
		if err != nil {
			return nil, fmt.Errorf("log.dirs: %w", err)
		}
		if same {
			guards[filepath.Clean(d)] = stateReserveGuard{mon: mon, store: store, margin: margin}
		}
	}
	return guards, nil
}
