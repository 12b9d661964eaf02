// Package control is the mirror control plane of a kmirror node: it owns
// the cluster mirrors (state/), drives every mirror partition through the
// state machine of SPEC.md section 4 (each transition persisted before its
// action runs), runs the fetchers (fetch/) and answers the mirror RPCs the
// broker receives (mirrorapi/).
//
// DESIGN.md puts the transition rules in state/ (state.CanTransition) and
// the RPC handlers in broker/; this package is the driver between them,
// kept apart so the broker does not import the fetchers and the fetchers
// do not import the broker. It does not import the broker either: it
// reads the node's partitions (partition/) and changes the node's topics,
// groups, ACLs and quotas through Node (node.go), which the broker
// implements and node/ wires.
//
// In a cluster (drive.go) the controller's plane answers the mirror RPCs,
// which every other node forwards, and persists their transitions for
// every partition; the actions (a fetcher, a failover) run on each
// partition's leader, whose plane drives the partitions it leads from
// their states in the metadata log, and whose state writes go to the
// controller, fenced by its leader epoch (node's storeReplicator). The
// metadata sync and a stopped topic's release run on the controller.
//
// Partition lifecycle on one node (on its leader, in a cluster):
//
//	Start:    (none) -> LOG_ALIGNMENT -> MIRRORING       fetcher added
//	Pause:    MIRRORING -> PAUSING -> PAUSED             fetcher removed
//	Resume:   PAUSED -> MIRRORING                        from the local log end
//	Stop:     any -> STOPPING -> STOPPED                 failover, below
//	Failure:  a fetcher gives up -> FAILED -> (backoff) -> the state it
//	          failed in (failures.go); not retriable: FAILED until recovered;
//	          source lost records + mirror.unclean.leader.election.enable:
//	          ULE_RECOVERY -> MIRRORING
//
// The fetchers keep no state of the partition's own: they report what
// happens to it as events (the source accepted the fetch position, the
// partition failed; events.go), and this package alone moves it through
// the states above and retries it.
//
// Only LOG_ALIGNMENT and ULE_RECOVERY may cut a local log (fetch.StartAlign);
// every other (re)start is fetch.StartResume, which never does.
//
// Stop (failover, DESIGN.md decision 5), in order: remove the fetcher;
// persist the last mirror epoch and offset; raise the local leader epoch
// above every mirrored epoch; append an ABORT marker for every transaction
// still open; append MIRROR_PID_RESET; persist STOPPED; release the topic
// (writable). After a crash each step is redone from the persisted state:
// the markers are written for the transactions still open, so none is
// written twice for one transaction.
//
// The metadata sync (sync.go, topic_sync.go, group_sync.go, acl_sync.go)
// runs on its own loop every mirror.metadata.refresh.interval.ms. Group
// offsets and ACLs are computed by the sync/ packages, which know nothing
// of the state machine; the topic part (discovery, growth, deleted and
// recreated source topics, excluded topics, configs) lives here because
// each of its actions is a transition this package owns: start, stop,
// FAILED.
//
// DescribeClusterMirrors (describe.go) shows the last known offsets in
// every state, with the source offset's age and whether the partition has
// stalled. A fetcher keeps the source high watermark in memory only, so it
// is persisted on the partition's state when the fetcher is removed and by
// a checkpoint every 10 s and at Close (offsets_checkpoint.go), never per
// fetch.
//
// Failback needs no special path: when the old source mirrors from the new
// primary, the fetcher's OffsetForLeaderEpoch at start truncates the old
// source to where the new primary's own epoch began (the stop raised it),
// and the delta is mirrored from there.
package control
