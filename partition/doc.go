// Package partition is the node's replica manager (Kafka's ReplicaManager):
// the partitions this node hosts, their logs, their leader epochs and high
// watermarks, the fetches and produces waiting on them, and the
// retention and compaction runs over them.
//
// A Manager owns the topics of the node: for each topic its registry entry
// in state/ (name, topic ID, partition count, configs, owning mirror) and
// one storage.Log per partition under a log directory, named
// <topic>-<partition> as in Kafka. The Kafka API handlers (broker/) look
// partitions up here and read and write their logs directly on the hot
// paths; the mirror fetchers (fetch/) and the mirror control plane
// (control/) see a partition only as a Follower, which appends verified
// batches at their own offsets, truncates, restarts and advances the log
// start, and reads the bounds and epochs.
//
// WHY a package of its own: this is the code the cluster changes. There a
// partition's role (leader or follower) comes from the metadata image
// (meta/), a leader raises its high watermark to the minimum log end of
// its in-sync replicas and acks=all produces wait for it
// (AwaitHighWatermark), and followers append their leader's batches
// through the same Follower path the mirror fetchers use. On one node
// every append is committed at once: Appended raises the high watermark
// to the log end, and the node leads every partition it hosts. Keeping
// that in one place leaves the handlers untouched when it changes.
//
// Mirror topics (a topic whose mirror is set: every mirror state but
// STOPPED) belong to their mirror: the maintenance pass runs neither
// compaction nor retention on them, because the copy must stay
// byte-identical to the source (see Partition.maintain).
//
// Locking: Topic.maintainMu, then Manager.mu (RLock for lookups, Lock for
// create, delete, growth and config changes; the TopicsChanged and
// LogConfig hooks run under it), then a partition's locks: its log's (see
// storage) and waitMu, which guards the waiters. Topics' partition lists
// are published whole, so handlers read them without a lock.
package partition
