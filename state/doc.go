// Package state is the embedded store of a kmirror node: everything the node
// must remember that is not log data. Today that is the topic registry
// (name, topic id, partition count, dynamic topic configs, owning mirror),
// the dynamic broker configs, the cluster id and the producer-id allocator.
// Later steps add mirrors and their configs, mirror partition states and
// last-mirror epochs, group offsets and ACLs, each under its own key prefix.
//
// # Why a Badger directory
//
// The prototype kept this state in a compacted __mirror_state topic, which
// needs a working log, a replay on start and a consumer of its own. A single
// node has a simpler, stronger tool: one Badger directory per node
// (DESIGN.md decision 6), written with SyncWrites so that a change reported
// as done survives kill -9 and power loss. Keys are versioned ("v1/...") and
// grouped by record family, so a later multi-node design can move a family
// (say, the topic registry into a Raft log) or migrate it to a "v2/" layout
// without touching the others.
//
// # Blocking
//
// Every write waits for an fsync and reads may touch disk, so no method may
// run on a network event loop (STYLE.md item 15): broker handlers call the
// Store from their worker goroutines. All methods are safe for concurrent
// use.
//
// # Key layout
//
// Keys are ASCII strings. Every family prefix ends with '/' and family names
// contain no '/', so one family's prefix scan never sees another family's
// keys ("v1/topic/" does not match "v1/topic-id/...").
//
//	v1/meta/cluster-id                   the cluster id
//	v1/meta/next-producer-id             first producer id not yet handed out
//	v1/topic/<topic name>                a topic (Topic)
//	v1/topic-id/<32 lowercase hex>       topic id -> topic name index
//	v1/broker-config/<config name>       one dynamic broker config
//
// Reserved for later steps (not written yet): v1/mirror/, v1/mirror-partition/,
// v1/group-offset/, v1/acl/.
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
