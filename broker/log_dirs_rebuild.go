package broker

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/internal/topicid"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
	"github.com/kmirror/kmirror/storage"
)

// This file is the library half of `kmirror storage info|rebuild`: what
// the log dirs hold, and the topic registry rebuilt from them when the
// state store was lost.
//
// A rebuild writes to the state store only. It never creates, changes or
// removes anything in a log dir: the partition logs are the one copy of
// the data, and a command run in a hurry on the wrong directory must not
// be able to hurt them.

// ErrRebuildRefused marks a rebuild that changed nothing.
var ErrRebuildRefused = errors.New("storage rebuild")

// RebuiltTopicConfigs are the configs every rebuilt topic gets: nothing
// is deleted, by retention or by compaction, until the operator sets the
// topic's real configs again (they were in the lost store). With the
// broker defaults instead, the first maintenance pass after the start
// would delete every segment older than log.retention.ms of a topic that
// kept its records forever, and compact a topic that was never compacted.
var RebuiltTopicConfigs = map[string]string{"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}

// rebuiltConfigs are the configs rebuilt topic name gets:
// RebuiltTopicConfigs, but the coordinators' internal topics get the
// shape kmirror creates them with (compacted: their keyed records are the
// groups' and the transactions' state, which the coordinators read again
// from them).
func rebuiltConfigs(name string) map[string]string {
	if isInternalTopic(name) {
		return coordinatorTopicConfigs()
	}
	return maps.Clone(RebuiltTopicConfigs)
}

// LogDirInfo is one log dir as `kmirror storage info` shows it.
type LogDirInfo struct {
	Dir string
	// Missing: the directory does not exist.
	Missing bool
	// Meta is its meta.properties, nil when it has none.
	Meta       map[string]string
	Partitions []PartitionDirInfo
}

// PartitionDirInfo is one partition directory of a log dir.
type PartitionDirInfo struct {
	Name      string // the directory's name, <topic>-<partition>
	Topic     string
	Partition int32
	// ID is partition.metadata's topic id when HasID; IDErr says why it
	// could not be read.
	ID    [16]byte
	HasID bool
	IDErr error
	// Registered: the state store names this topic and partition.
	// RegisteredID is the topic id the store gives it.
	Registered   bool
	RegisteredID [16]byte
}

// StorageInfo is what the log dirs and the state store hold.
type StorageInfo struct {
	StateDir string
	// StoreMissing: the state dir does not exist. StoreErr: it could not
	// be opened (state.ErrLocked while a node runs).
	StoreMissing bool
	StoreErr     error
	ClusterID    string
	Topics       []state.Topic
	LogDirs      []LogDirInfo
	// Unbacked are the topics the store names that have no partition
	// directory in any log dir.
	Unbacked []string
}

// InspectStorage reads cfg's log dirs and state store without changing
// either (a state dir that does not exist is not created).
func InspectStorage(cfg Config) (StorageInfo, error) {
	if err := cfg.Validate(); err != nil {
		return StorageInfo{}, err
	}
	info := StorageInfo{StateDir: cfg.StateDir}
	var err error
	if info.LogDirs, err = scanLogDirs(cfg); err != nil {
		return info, err
	}
	if _, err := os.Stat(cfg.StateDir); errors.Is(err, os.ErrNotExist) {
		info.StoreMissing = true
		return info, nil
	}
	store, err := state.Open(cfg.StateDir, state.Options{Logger: cfg.Logger})
	if err != nil {
		info.StoreErr = err
		return info, nil
	}
	defer store.Close()
	info.ClusterID = store.ClusterID()
	if info.Topics, err = store.Topics(); err != nil {
		info.StoreErr = err
		return info, nil
	}
	byName := map[string]state.Topic{}
	for _, t := range info.Topics {
		byName[t.Name] = t
	}
	backed := map[string]bool{}
	for i := range info.LogDirs {
		for j := range info.LogDirs[i].Partitions {
			p := &info.LogDirs[i].Partitions[j]
			backed[p.Topic] = true
			if t, ok := byName[p.Topic]; ok {
				p.Registered, p.RegisteredID = p.Partition < t.Partitions, t.ID
			}
		}
	}
	for _, t := range info.Topics {
		if !backed[t.Name] {
			info.Unbacked = append(info.Unbacked, t.Name)
		}
	}
	return info, nil
}

// scanLogDirs lists each log dir's meta.properties and partitions.
func scanLogDirs(cfg Config) ([]LogDirInfo, error) {
	var out []LogDirInfo
	for _, d := range cfg.LogDirs {
		ld := LogDirInfo{Dir: d}
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			ld.Missing = true
			out = append(out, ld)
			continue
		}
		meta, err := readMetaProperties(d)
		if err != nil {
			return nil, err
		}
		ld.Meta = meta
		for _, name := range partitionDirs(d, cfg.StateDir) {
			cut := strings.LastIndexByte(name, '-')
			n, err := strconv.ParseInt(name[cut+1:], 10, 32)
			if err != nil {
				continue // digits past int32: no partition of ours
			}
			p := PartitionDirInfo{Name: name, Topic: name[:cut], Partition: int32(n)}
			p.ID, p.HasID, p.IDErr = storage.ReadPartitionMetadata(filepath.Join(d, name))
			ld.Partitions = append(ld.Partitions, p)
		}
		out = append(out, ld)
	}
	return out, nil
}

// RebuildReport is what a rebuild did.
type RebuildReport struct {
	StateDir  string
	ClusterID string
	// ClusterIDFrom says where the cluster id came from: the log dirs'
	// meta.properties (restored, or the store's already), the store
	// itself, or nowhere (a new store's new id), for the operator.
	ClusterIDFrom string
	// NodeID is meta.properties' node.id, "" when no log dir has one.
	NodeID  string
	Added   []RebuiltTopic
	Kept    []string // registered already, matching the log dirs
	Refused []RefusedTopic
}

// RebuiltTopic is one topic the rebuild registered.
type RebuiltTopic struct {
	state.Topic
	// NewID: no partition.metadata named its id, so it has a new one.
	NewID bool
}

// RefusedTopic is a topic the log dirs hold that the rebuild could not
// register, and why.
type RefusedTopic struct {
	Name   string
	Reason string
}

// RebuildTopics registers, in cfg's state store, every topic whose
// partition directories cfg's log dirs hold and the store does not name:
// its partition count (the highest partition + 1), its id from the
// partitions' partition.metadata (a new one when none has it), the
// configs RebuiltTopicConfigs, no mirror. The cluster id comes back from
// the log dirs' meta.properties, so the node's log dir check passes.
//
// The whole rebuild is refused (nothing written, ErrRebuildRefused or
// state.ErrLocked) when a node holds the store, when the log dirs name
// different clusters or nodes, or when the store names a topic the log
// dirs do not hold as it says (another node's store, or a log dir left
// out of log.dirs). A topic is refused on its own, the others rebuilt,
// when its partitions name different topic ids, when a partition is
// missing (a gap: most often a log dir not listed or a disk not mounted;
// an empty partition made up in its place would hide the real one) or
// when one partition is in two log dirs. Topics the store names already,
// as the log dirs do, are kept: a rebuild can run again after a refused
// topic was mended.
func RebuildTopics(cfg Config) (RebuildReport, error) {
	if err := cfg.Validate(); err != nil {
		return RebuildReport{}, err
	}
	rep := RebuildReport{StateDir: cfg.StateDir}
	dirs, err := scanLogDirs(cfg)
	if err != nil {
		return rep, err
	}
	var metaCluster string
	for _, key := range []string{"cluster.id", "node.id"} {
		seen := map[string][]string{}
		for _, d := range dirs {
			if d.Missing {
				return rep, fmt.Errorf("%w: log dir %s does not exist: a rebuild needs every log dir of the node "+
					"(is a disk not mounted?)", ErrRebuildRefused, d.Dir)
			}
			if d.Meta != nil {
				seen[d.Meta[key]] = append(seen[d.Meta[key]], d.Dir)
			}
		}
		if len(seen) > 1 {
			var parts []string
			for _, v := range slices.Sorted(maps.Keys(seen)) {
				parts = append(parts, fmt.Sprintf("%s=%s in %s", key, v, strings.Join(seen[v], ", ")))
			}
			return rep, fmt.Errorf("%w: the log dirs belong to different %s: %s. A node's log dirs all "+
				"hold one cluster's and one node's partitions: list only this node's log dirs in log.dirs",
				ErrRebuildRefused, map[string]string{"cluster.id": "clusters", "node.id": "nodes"}[key],
				strings.Join(parts, "; "))
		}
		for v := range seen {
			if key == "cluster.id" {
				metaCluster = v
			} else {
				rep.NodeID = v
			}
		}
	}
	found := collectTopics(dirs)

	store, err := state.Open(cfg.StateDir, state.Options{Logger: cfg.Logger})
	if err != nil {
		if errors.Is(err, state.ErrLocked) {
			return rep, err
		}
		return rep, fmt.Errorf("%w: %w", ErrRebuildRefused, err)
	}
	defer store.Close()
	stored, err := store.Topics()
	if err != nil {
		return rep, fmt.Errorf("%w: reading the topics of %s: %w", ErrRebuildRefused, cfg.StateDir, err)
	}
	for _, st := range stored {
		f := found[st.Name]
		if f == nil || f.refusal() != "" || f.partitions() != st.Partitions || f.hasID && f.id != st.ID {
			return rep, fmt.Errorf("%w: the state store %s names topic %s (%d partitions, id %s), which the log dirs "+
				"do not hold as it says (%s): the store is another node's, or log.dirs lacks a directory. A rebuild adds "+
				"topics to a store that names none, or only topics the log dirs hold as it says: move %s aside and "+
				"run the rebuild again", ErrRebuildRefused, cfg.StateDir, st.Name, st.Partitions,
				topicid.String(st.ID), f.describe(), cfg.StateDir)
		}
	}
	rep.ClusterID = store.ClusterID()
	switch {
	case metaCluster == "" && len(stored) > 0:
		rep.ClusterIDFrom = "the state store's; no log dir has a meta.properties"
	case metaCluster == "":
		rep.ClusterIDFrom = "NEW: no log dir has a meta.properties to restore it from; clients that check the " +
			"cluster id see another cluster"
	case metaCluster != store.ClusterID() && len(stored) > 0:
		return rep, fmt.Errorf("%w: the state store %s belongs to cluster %s, the log dirs to cluster %s: move %s "+
			"aside and run the rebuild again", ErrRebuildRefused, cfg.StateDir, store.ClusterID(), metaCluster, cfg.StateDir)
	case metaCluster != store.ClusterID():
		if err := store.RestoreClusterID(metaCluster); err != nil {
			return rep, fmt.Errorf("%w: %w", ErrRebuildRefused, err)
		}
		rep.ClusterID, rep.ClusterIDFrom = metaCluster, "restored from meta.properties"
	default:
		rep.ClusterIDFrom = "meta.properties, the same as the state store's"
	}

	registered := map[string]bool{}
	for _, st := range stored {
		registered[st.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(found)) {
		f := found[name]
		if registered[name] {
			rep.Kept = append(rep.Kept, name)
			continue
		}
		if reason := f.refusal(); reason != "" {
			rep.Refused = append(rep.Refused, RefusedTopic{Name: name, Reason: reason})
			continue
		}
		t := RebuiltTopic{Topic: state.Topic{Name: name, ID: f.id, Partitions: f.partitions(),
			Configs: rebuiltConfigs(name)}, NewID: !f.hasID}
		if t.NewID {
			if t.ID, err = partition.NewTopicID(); err != nil {
				return rep, err
			}
		}
		if err := store.PutTopic(t.Topic); err != nil {
			rep.Refused = append(rep.Refused, RefusedTopic{Name: name, Reason: err.Error()})
			continue
		}
		rep.Added = append(rep.Added, t)
	}
	return rep, nil
}

// foundTopic is one topic's partition directories across the log dirs.
type foundTopic struct {
	dirs  map[int32][]string // partition -> the directories holding it
	ids   map[[16]byte][]string
	bad   []string // partition.metadata that does not read
	id    [16]byte // the one id of ids, when hasID
	hasID bool
}

// collectTopics groups the log dirs' partitions by topic.
func collectTopics(dirs []LogDirInfo) map[string]*foundTopic {
	out := map[string]*foundTopic{}
	for _, d := range dirs {
		for _, p := range d.Partitions {
			f := out[p.Topic]
			if f == nil {
				f = &foundTopic{dirs: map[int32][]string{}, ids: map[[16]byte][]string{}}
				out[p.Topic] = f
			}
			path := filepath.Join(d.Dir, p.Name)
			f.dirs[p.Partition] = append(f.dirs[p.Partition], path)
			switch {
			case p.IDErr != nil:
				f.bad = append(f.bad, p.IDErr.Error())
			case p.HasID:
				f.ids[p.ID] = append(f.ids[p.ID], path)
			}
		}
	}
	for _, f := range out {
		if len(f.ids) == 1 {
			for id := range f.ids {
				f.id, f.hasID = id, true
			}
		}
	}
	return out
}

// partitions is the highest partition + 1.
func (f *foundTopic) partitions() int32 {
	return slices.Max(slices.Collect(maps.Keys(f.dirs))) + 1
}

// refusal says why the topic cannot be rebuilt, "" when it can.
func (f *foundTopic) refusal() string {
	if f == nil {
		return "no partition directory"
	}
	if len(f.bad) > 0 {
		return "unreadable partition.metadata: " + strings.Join(f.bad, "; ") + ": restore or remove the file"
	}
	if len(f.ids) > 1 {
		var parts []string
		for id, dirs := range f.ids {
			parts = append(parts, fmt.Sprintf("topic id %s in %s", topicid.String(id), strings.Join(dirs, ", ")))
		}
		slices.Sort(parts)
		return "its partitions name different topic ids (" + strings.Join(parts, "; ") + "): they are not one " +
			"topic's; move aside the directories that are not this topic's"
	}
	var missing, twice []string
	for p := range f.partitions() {
		switch ds := f.dirs[p]; {
		case len(ds) == 0:
			missing = append(missing, strconv.Itoa(int(p)))
		case len(ds) > 1:
			twice = append(twice, strings.Join(ds, " and "))
		}
	}
	if len(twice) > 0 {
		return "a partition is in two log dirs (" + strings.Join(twice, "; ") + "): keep one"
	}
	if len(missing) > 0 {
		return fmt.Sprintf("partition %s of %d missing: is a log dir not in log.dirs, or a disk not mounted? If "+
			"the partition is lost for good, create an empty directory for it and run the rebuild again",
			strings.Join(missing, ", "), f.partitions())
	}
	return ""
}

// describe says what the log dirs hold of the topic, for refusals.
func (f *foundTopic) describe() string {
	if f == nil {
		return "no partition directory"
	}
	s := fmt.Sprintf("%d partitions", f.partitions())
	if f.hasID {
		s += ", id " + topicid.String(f.id)
	}
	if r := f.refusal(); r != "" {
		s += "; " + r
	}
	return s
}
