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
// WHY a package of its own: this is the code the cluster changes. A
// partition's role (leader or follower) comes from its assignment in the
// metadata log (SetAssignment, replicas.go); a leader raises its high
// watermark to the minimum log end of its in-sync replicas as they fetch
// (ReplicaFetched) and acks=all produces wait for it
// (AwaitCommitted); it tells which followers should leave or rejoin
// the ISR (ISRChanges); followers append their leader's batches through
// the same append path the mirror fetchers use (AppendReplica). A
// partition without an assignment, or whose ISR is this node alone, is
// committed at every append: Appended raises the high watermark to the
// log end. Keeping that in one place leaves the handlers untouched.
//
// A role changes only under the replica set's transition lock, Kafka's
// leaderIsrUpdateLock (leadership.go): a leader's append (AppendAsLeader)
// and a replica fetcher's write (AsFollower) each check, under its read
// side, the role they were made for; an acks=all wait holds only while
// the leadership it appended in lasts. While the leader asks the
// controller to add a follower to the ISR, the high watermark counts that
// follower too (ProposeISR: Kafka's maximal ISR).
//
// Mirror topics (a topic whose mirror is set: every mirror state but
// STOPPED) belong to their mirror: the maintenance pass runs neither
// compaction nor retention on them, because the copy must stay
// byte-identical to the source (see Partition.maintain).
//
// Locking: Topic.maintainMu, then Manager.mu (RLock for lookups, Lock for
// create, delete, growth and config changes; the TopicsChanged and
// LogConfig hooks run under it), then a partition's locks: the replica
// set's transition lock, then its mu, then the log's (see storage), then
// waitMu, which guards the waiters. Topics' partition lists
// are published whole, so handlers read them without a lock.
package partition
