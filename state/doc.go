// Package state is the embedded store of a kmirror node: everything the node
// must remember that is not log data. Today that is the topic registry
// (name, topic id, partition count, dynamic topic configs, owning mirror),
// the dynamic broker configs, the cluster id, the producer-id allocator and
// the consumer groups' metadata and committed offsets (Kafka's
// __consumer_offsets), the local leader epochs of mirrored partitions, the
// cluster mirrors (configs, patterns, topics' desired states) and the
// mirror partition states with their last mirror epochs and offsets and
// their last known source offsets (the prototype's __mirror_state), ACLs
// and SCRAM credentials, client quotas, transactions, and what each
// mirror's metadata sync created here (the keys below).
//
// # Why a Badger directory
//
// The prototype kept this state in a compacted __mirror_state topic, which
// needs a working log, a replay on start and a consumer of its own. A single
// node has a simpler, stronger tool: one Badger directory per node
// (DESIGN.md decision 6). Keys are versioned ("v1/...") and
// grouped by record family, so a later multi-node design can move a family
// (say, the topic registry into a Raft log) or migrate it to a "v2/" layout
// without touching the others.
//
// # Durability
//
// Badger runs without SyncWrites; the store decides per write instead.
// Every method that writes fsyncs (DB.Sync) before it returns, so a change
// reported as done survives kill -9 and power loss, except CommitOffsets
// (and PutMirrorSourceOffsets, a checkpoint whose loss only leaves an
// older source offset, shown with its time):
// committed offsets reach the OS before it returns (Badger's write-ahead
// log is an mmap), so they survive kill -9 of the process but not
// necessarily a power loss or an OS crash. That is Kafka's own guarantee
// for __consumer_offsets, which it does not fsync either, and it allows
// commit rates far above what an fsync per commit allows (compare
// BenchmarkCommitOffsets with BenchmarkPutGroupMeta). Offsets become
// durable at Close or when their memtable is flushed to an SSTable. An
// fsynced write keeps offset commits out while it syncs (Store.syncMu
// explains why), so it stalls them for one fsync.
//
// # Blocking
//
// Writes may wait for an fsync and reads may touch disk, so no method may
// run on a network event loop (STYLE.md item 15): broker handlers call the
// Store from their worker goroutines. All methods are safe for concurrent
// use.
//
// # Key layout
//
// Every family prefix ends with '/' and family names contain no '/', so one
// family's prefix scan never sees another family's keys ("v1/topic/" does
// not match "v1/topic-id/...", "v1/group/" not "v1/group-offset/...").
//
//	v1/meta/cluster-id                   the cluster id
//	v1/meta/next-producer-id             first producer id not yet handed out
//	v1/topic/<topic name>                a topic (Topic)
//	v1/topic-id/<32 lowercase hex>       topic id -> topic name index
//	v1/broker-config/<config name>       one cluster-default dynamic broker config
//	v1/node-config/<node id>/<config name>
//	                                     one per-broker dynamic config
//	v1/group/<group n>                   a group's meta (GroupMeta)
//	v1/group-offset/<group n><topic n><partition be32>
//	                                     one committed offset (GroupOffset)
//	v1/leader-epoch/<32 lowercase hex>   local leader epochs of a mirrored
//	                                     topic's partitions (leader_epochs.go)
//	v1/mirror/<mirror name>              a cluster mirror (Mirror)
//	v1/mirror-partition/<mirror name>/<topic n><partition be32>
//	                                     a mirror partition's state
//	                                     (MirrorPartitionState)
//	v1/acl/<type i8><name n><pattern i8><principal n><host n><op i8><perm i8>
//	                                     one ACL binding (ACL; acls.go)
//	v1/scram/<mechanism i8><user n>      one SCRAM credential (scram.go)
//	v1/quota/<user><client-id><ip>       one entity's client quotas
//	                                     (ClientQuota; quotas.go)
//	v1/meta/secret-salt                  salt of the credential sealing key
//	                                     (secrets.go)
//	v1/meta/metadata-applied             index of the last metadata log entry
//	                                     applied (replicated.go)
//	v1/broker/<id 8 hex>                 a registered broker (cluster.go)
//	v1/partition/<32 hex>/<partition 8 hex>
//	                                     a partition's replicas, ISR, leader
//	                                     and epochs (cluster.go)
//	v1/mirror-acl/<mirror name>/<acl key fields>
//	                                     one binding a mirror's ACL sync
//	                                     created (mirror_sync.go)
//	v1/mirror-quota/<mirror name>/<entity>
//	                                     the client quota keys a mirror's
//	                                     sync set (mirror_quotas.go)
//	v1/mirror-sync/<mirror name>         when a mirror's group offsets were
//	                                     last synced (mirror_sync.go)
//
// Keys are ASCII strings but for the group families and the fields after
// the mirror name of a partition state key. A group name is any
// bytes, '/' and NUL included (Kafka allows them), so a name field "x n" is
// the byte length of x as a minimal uvarint (encoding/binary) followed by
// the bytes of x; the topic field uses the same form. A uvarint is
// self-delimiting, so two names differ within their uvarints if their
// lengths differ and within their bytes if not: no group's field is a
// prefix of another's, and the prefix scan of group "a" sees neither "ab"
// nor "a\x00b". Partitions are big endian and never negative, so one
// topic's offsets sort by partition. Group names have 1 to 32767 bytes (an
// int16 string length), which keeps keys far below Badger's 65000-byte
// limit.
//
// Mirror names follow the topic name rules (1 to 249 characters of
// [A-Za-z0-9._-]), so "v1/mirror/<name>" is plain ASCII like a topic key,
// and a name never holds the '/' that ends the name field of a partition
// state key: the prefix scan of mirror "a" sees neither "ab" nor "a.b".
// The topic field that follows is "x n" like the group keys', so the scan
// of one topic's partition states never sees a longer topic's.
//
// # Value layouts
//
// These layouts are part of the on-disk format: changing one means a new
// format version byte (or a new key version) and a reader for the old one.
//
// Every value starts with a one-byte format version, 1 today. Integers are
// big endian. A string "s" is a u32 byte length followed by that many bytes.
// A value ends exactly where its layout ends; trailing bytes, a short value,
// an unknown version or a field that breaks the record's rules (an all-zero
// id, zero partitions, an illegal topic name, unsorted config keys) is
// corruption, reported as an error wrapping ErrCorrupt that names the key.
// The encodings are canonical: a value that decodes re-encodes to the very
// same bytes.
//
//	v1/topic/<name>
//	+------+---------+----------------+--------+----------+---------+
//	| 0x01 | id [16] | partitions i32 | name s | mirror s | configs |
//	+------+---------+----------------+--------+----------+---------+
//	configs = count u32, then count pairs (key s, value s) with keys
//	          non-empty and strictly ascending (no duplicates).
//	name repeats the key's suffix, so a value is self-describing and a value
//	stored under the wrong key is caught.
//
//	v1/topic-id/<hex id>       v1/broker-config/<name>
//	+------+--------+          +------+---------+
//	| 0x01 | name s |          | 0x01 | value s |
//	+------+--------+          +------+---------+
//
//	v1/meta/cluster-id         v1/meta/next-producer-id
//	+------+---------+         +------+----------+
//	| 0x01 | id [16] |         | 0x01 | next i64 |
//	+------+---------+         +------+----------+
//
//	v1/group/<group n>
//	+------+----------------+-----------------+---------+
//	| 0x01 | generation i32 | protocol type s | group s |
//	+------+----------------+-----------------+---------+
//	generation >= 0; protocol type "" for a group that only commits offsets;
//	group repeats the key's name, which must not be empty.
//
//	v1/group-offset/<group n><topic n><partition be32>
//	+------+------------+------------------+---------------+------------+
//	| 0x01 | offset i64 | leader epoch i32 | commit ts i64 | metadata s |
//	+------+------------+------------------+---------------+------------+
//	offset >= -1, leader epoch >= -1 (-1: unknown), commit ts (ms since the
//	epoch) >= 0. The key holds group, topic and partition, and they are not
//	repeated: offsets are the store's most numerous and most written
//	records. A key whose topic is not a legal topic name, or whose fields
//	leave bytes over, is corrupt like a value.
//
//	v1/mirror/<mirror name>
//	+------+--------+---------------------+
//	| 0x01 | name s | source cluster id s |  ...
//	+------+--------+---------------------+
//	   +---------+---------+---------+--------+
//	...| configs | include | exclude | topics |
//	   +---------+---------+---------+--------+
//	configs = as in the topic record.
//	include, exclude = count u32, then count patterns s, each non-empty,
//	          in the order they were added.
//	topics  = count u32, then count pairs (topic s, desired state i8) with
//	          legal topic names strictly ascending and states MIRRORING (3),
//	          PAUSED (5) or STOPPED (7).
//	name repeats the key's suffix, as in the topic record. One record holds
//	all of a mirror's topics: a desired-state change rewrites it, which
//	suits the rate of admin requests.
//
//	v1/mirror-partition/<mirror name>/<topic n><partition be32>
//	+------+----------+-------------+-------------------+
//	| 0x01 | state i8 | previous i8 | retry attempt i32 |  ...
//	+------+----------+-------------+-------------------+
//	   +-----------------------+------------------------+-----------------+
//	...| last mirror epoch i32 | last mirror offset i64 | error message s |
//	   +-----------------------+------------------------+-----------------+
//	states as PartitionState (LOG_ALIGNMENT 0 ... FAILED 8, UNKNOWN -1);
//	state is never UNKNOWN (a partition without a record is UNKNOWN). For
//	FAILED: previous is any state but FAILED, retry attempt >= 1 or -1
//	(not retried). Otherwise previous is UNKNOWN and retry attempt 0. Last
//	mirror epoch and offset >= -1 (-1: unknown). The key holds mirror,
//	topic and partition; a key whose fields break their rules or leave
//	bytes over is corrupt like a value.
//
// The string records carry a length although the value's end would do: every
// record is then self-delimiting, so a torn value is always detected rather
// than read as a shorter string.
//
// # Producer ids
//
// Local producer ids start at 0 (like Kafka's first block) and are handed out
// in blocks; the end of the last block is persisted before the block is
// returned, so no id is reissued after a restart or a crash. Ids never reach
// 1<<62: that range belongs to mirrored producers whose ids were rewritten
// with producer.id.rewrite (DESIGN.md decision 2, batch.MirrorPIDOffset).
package state
