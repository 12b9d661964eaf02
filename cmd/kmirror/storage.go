package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/topicid"
	"github.com/kmirror/kmirror/state"
)

// This file is `kmirror storage`, in the spirit of Kafka's
// kafka-storage.sh: `info` shows what a node's log dirs and state store
// hold, `rebuild` registers the topics of the log dirs again in a state
// store that was lost. Both read the node's settings as `kmirror serve`
// does (loadServeConfig), so they look at the directories serve would use.

const storageUsage = `Usage: kmirror storage <info|rebuild|format> [--config server.properties] [--log-dirs DIRS] [--state-dir DIR] [--override key=value]...
       kmirror storage format --cluster-id ID [--ignore-formatted] [the flags above]
       kmirror storage random-uuid

Commands:
  format   give the node's new state store and log dirs the cluster id ID before the node
           first starts, as kafka-storage.sh format does: every node of a cluster formatted
           with one id belongs to it. Refuses dirs already formatted (--ignore-formatted
           accepts those of the same cluster), dirs of another cluster or node, and log dirs
           holding partitions. A node started on dirs nobody formatted picks an id itself.
  random-uuid
           print a new cluster id
  info     for each log dir: its meta.properties (cluster id, node id), the partition
           directories it holds with their topic ids, and whether the state store names them
  rebuild  register again, in the state store, the topics whose partition directories the
           log dirs hold and the store does not name (after the store was lost or damaged):
           names, topic ids, partition counts and the cluster id come back; topic configs,
           mirrors, group offsets and ACLs do not. The node must be stopped. It writes to
           the state store only: partition data is never created, changed or removed.

The directories are the ones kmirror serve would use with the same --config and
--override; --log-dirs is log.dirs, --state-dir is metadata.log.dir. Run
'kmirror storage info --help' for the flags.
`

// runStorage is `kmirror storage`.
func runStorage(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(stderr, storageUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return 0
		}
		return 2
	}
	sub := args[0]
	if sub == "random-uuid" {
		fmt.Fprintln(stdout, broker.RandomClusterID())
		return 0
	}
	if sub != "info" && sub != "rebuild" && sub != "format" {
		fmt.Fprintf(stderr, "kmirror storage: unknown command %q\n\n%s", sub, storageUsage)
		return 2
	}
	fs := flag.NewFlagSet("storage "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", "", "Kafka-style server.properties `file` of the node (optional)")
	logDirs := fs.String("log-dirs", "", "comma list of the node's log `dirs` (log.dirs)")
	stateDir := fs.String("state-dir", "", "the node's state store `dir` (metadata.log.dir)")
	var overrides overrideFlags
	fs.Var(&overrides, "override", "a setting as `key=value`, repeatable; wins over the file")
	var clusterID *string
	var ignoreFormatted *bool
	if sub == "format" {
		clusterID = fs.String("cluster-id", "", "the cluster `id` to format with (kmirror storage random-uuid prints one)")
		ignoreFormatted = fs.Bool("ignore-formatted", false, "accept dirs already formatted with this cluster id")
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\nFlags:\n", storageUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kmirror storage %s: unexpected argument %q\n", sub, fs.Arg(0))
		return 2
	}
	if *logDirs != "" {
		overrides = append(overrides, "log.dirs="+*logDirs)
	}
	if *stateDir != "" {
		overrides = append(overrides, "metadata.log.dir="+*stateDir)
	}
	cfg, _, err := loadServeConfig(*file, overrides)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror storage %s: %v\n", sub, err)
		return 2
	}
	// Badger's warnings only: the store's own start-up line is noise here.
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	switch sub {
	case "info":
		return storageInfo(cfg, stdout, stderr)
	case "format":
		if *clusterID == "" {
			fmt.Fprintln(stderr, "kmirror storage format: --cluster-id is required (kmirror storage random-uuid prints one)")
			return 2
		}
		return storageFormat(cfg, *clusterID, *ignoreFormatted, stdout, stderr)
	}
	return storageRebuild(cfg, stdout, stderr)
}

// storageFormat runs broker.FormatStorage and lists the dirs it formatted.
func storageFormat(cfg broker.Config, clusterID string, ignoreFormatted bool, stdout, stderr io.Writer) int {
	rep, err := broker.FormatStorage(cfg, clusterID, ignoreFormatted)
	if errors.Is(err, state.ErrLocked) {
		fmt.Fprintf(stderr, "kmirror storage format: the state store %s is in use: stop the node first (%v)\n", cfg.StateDir, err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "kmirror storage format: %v\nNothing was changed.\n", err)
		return 1
	}
	for _, d := range rep.Formatted {
		fmt.Fprintf(stdout, "formatted %s with cluster id %s\n", d, rep.ClusterID)
	}
	for _, d := range rep.Already {
		fmt.Fprintf(stdout, "%s already has cluster id %s\n", d, rep.ClusterID)
	}
	return 0
}

// storageInfo prints broker.InspectStorage's findings.
func storageInfo(cfg broker.Config, stdout, stderr io.Writer) int {
	info, err := broker.InspectStorage(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror storage info: %v\n", err)
		return 1
	}
	switch {
	case info.StoreMissing:
		fmt.Fprintf(stdout, "state store %s: none (the directory does not exist)\n", info.StateDir)
	case errors.Is(info.StoreErr, state.ErrLocked):
		fmt.Fprintf(stdout, "state store %s: in use by a running node; stop it to compare the store with the log dirs\n",
			info.StateDir)
	case info.StoreErr != nil:
		fmt.Fprintf(stdout, "state store %s: cannot be read: %v\n", info.StateDir, info.StoreErr)
	default:
		fmt.Fprintf(stdout, "state store %s: cluster id %s, %d topics\n", info.StateDir, info.ClusterID, len(info.Topics))
	}
	unnamed, total := 0, 0
	for _, d := range info.LogDirs {
		fmt.Fprintf(stdout, "\nlog dir %s\n", d.Dir)
		switch {
		case d.Missing:
			fmt.Fprintln(stdout, "  missing: the directory does not exist")
			continue
		case d.Meta == nil:
			fmt.Fprintln(stdout, "  meta.properties: none (written at the next start)")
		default:
			var kv []string
			for _, k := range slices.Sorted(maps.Keys(d.Meta)) {
				kv = append(kv, k+"="+d.Meta[k])
			}
			fmt.Fprintf(stdout, "  meta.properties: %s\n", strings.Join(kv, " "))
			if !info.StoreMissing && info.StoreErr == nil && d.Meta["cluster.id"] != info.ClusterID {
				fmt.Fprintf(stdout, "  cluster id %s is not the state store's %s: a node refuses to start on it\n",
					d.Meta["cluster.id"], info.ClusterID)
			}
			if d.Meta["node.id"] != strconv.Itoa(int(cfg.NodeID)) {
				fmt.Fprintf(stdout, "  node.id %s is not the configured node.id %d: a node refuses to start on it\n",
					d.Meta["node.id"], cfg.NodeID)
			}
		}
		if len(d.Partitions) == 0 {
			fmt.Fprintln(stdout, "  no partition directories")
			continue
		}
		tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  PARTITION\tTOPIC ID (partition.metadata)\tSTATE STORE")
		for _, p := range d.Partitions {
			total++
			id := "none"
			switch {
			case p.IDErr != nil:
				id = "unreadable: " + p.IDErr.Error()
			case p.HasID:
				id = topicid.String(p.ID)
			}
			named := "names it"
			switch {
			case info.StoreMissing:
				named = "no store"
			case info.StoreErr != nil:
				named = "unknown"
			case !p.Registered:
				named = "DOES NOT NAME IT"
				unnamed++
			case p.HasID && p.RegisteredID != p.ID:
				named = "names it with topic id " + topicid.String(p.RegisteredID)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", p.Name, id, named)
		}
		tw.Flush()
	}
	fmt.Fprintf(stdout, "\n%d partition directories", total)
	if unnamed > 0 {
		fmt.Fprintf(stdout, ", %d not named by the state store: stop the node and run `kmirror storage rebuild` "+
			"with the same settings to register their topics", unnamed)
	}
	fmt.Fprintln(stdout)
	if len(info.Unbacked) > 0 {
		fmt.Fprintf(stdout, "topics the state store names without a partition directory in these log dirs: %s\n",
			strings.Join(info.Unbacked, ", "))
	}
	return 0
}

// storageRebuild runs broker.RebuildTopics and says what it restored and
// what the operator must create again. Exit code 1 when any topic was
// refused, so that a script does not go on as if all were back.
func storageRebuild(cfg broker.Config, stdout, stderr io.Writer) int {
	rep, err := broker.RebuildTopics(cfg)
	if errors.Is(err, state.ErrLocked) {
		fmt.Fprintf(stderr, "kmirror storage rebuild: the state store %s is in use: stop the node first (%v)\n", cfg.StateDir, err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "kmirror storage rebuild: %v\nNothing was changed.\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "state store %s\ncluster id %s (%s)\n", rep.StateDir, rep.ClusterID, rep.ClusterIDFrom)
	if rep.NodeID != "" && rep.NodeID != strconv.Itoa(int(cfg.NodeID)) {
		fmt.Fprintf(stdout, "node.id: the log dirs are node %s's, the settings say node.id=%d: serve this node with node.id=%s\n",
			rep.NodeID, cfg.NodeID, rep.NodeID)
	}
	fmt.Fprintf(stdout, "\nregistered %d topics:\n", len(rep.Added))
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	for _, t := range rep.Added {
		from := "from partition.metadata"
		if t.NewID {
			from = "NEW: no partition.metadata names one; clients and mirrors that knew the old id will not find it"
		}
		fmt.Fprintf(tw, "  %s\t%d partitions\ttopic id %s (%s)\n", t.Name, t.Partitions, topicid.String(t.ID), from)
	}
	tw.Flush()
	if len(rep.Kept) > 0 {
		fmt.Fprintf(stdout, "already registered as the log dirs hold them, kept: %s\n", strings.Join(rep.Kept, ", "))
	}
	if len(rep.Refused) > 0 {
		fmt.Fprintf(stdout, "\nNOT registered (%d topics; their partition directories are untouched, and a node does not "+
			"serve them until they are):\n", len(rep.Refused))
		for _, r := range rep.Refused {
			fmt.Fprintf(stdout, "  %s: %s\n", r.Name, r.Reason)
		}
	}
	var cfgs []string
	for _, k := range slices.Sorted(maps.Keys(broker.RebuiltTopicConfigs)) {
		cfgs = append(cfgs, k+"="+broker.RebuiltTopicConfigs[k])
	}
	// The coordinators' state is in their internal topics, registered
	// again with their own (compacted) configs.
	coordinators := ""
	groups := "  - consumer group offsets: no __consumer_offsets in the log dirs; groups start again from\n" +
		"    their auto.offset.reset\n"
	for _, t := range rep.Added {
		if t.Name == "__consumer_offsets" {
			coordinators = "\nGroup offsets and transactions: __consumer_offsets and __transaction_state are registered\n" +
				"again as compacted internal topics (not with the configs below), and the node reads them back.\n"
			groups = ""
		}
	}
	fmt.Fprintf(stdout, `
Restored: topic names, topic ids, partition counts and the cluster id; the records are
untouched. Partition directories without a partition.metadata get one at the next start.
%s
Not restored: they were only in the lost state store. Create them again:
  - topic configs: every registered topic has
      %s
    so that nothing is deleted or compacted until you set its real configs
    (kafka-configs.sh --alter --entity-type topics --entity-name <topic> --add-config ...)
  - cluster mirrors: the registered topics are plain, writable topics. Create each mirror
    again (kmirror mirrors --create) and add its topics to it (kmirror mirrors --start
    --topics ...), which makes them read-only and aligns them with the source (their
    topic ids must be the source's)
%s  - ACLs, SCRAM users and dynamic broker configs
`, coordinators, strings.Join(cfgs, ", "), groups)
	if len(rep.Refused) > 0 {
		return 1
	}
	return 0
}
