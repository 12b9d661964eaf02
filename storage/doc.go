// Package storage owns the partition logs of a kmirror node: segments of raw
// RecordBatch bytes, their offset and time indexes, the leader-epoch cache,
// producer state, the offsets a partition exposes (log start, log end, high
// watermark, last stable offset), truncation, retention and crash recovery.
//
// Batches are stored exactly as they arrived (DESIGN.md decisions 1 and 2):
// a mirror append keeps the source's base offsets, gaps included, and a
// produce append only restamps the base offset and the partition leader
// epoch, which lie outside the CRC. Reads hand out the stored bytes, either
// copied into the caller's buffer or as file regions for sendfile/writev, so
// the serving path never re-encodes.
//
// # On-disk layout of one partition directory
//
//	00000000000000000000.log        raw batches, appended back to back
//	00000000000000000000.index      sparse offset index: (relOffset u32, position u32)
//	00000000000000000000.timeindex  sparse time index: (maxTimestamp i64, relOffset u32)
//	00000000000000052173.log        next segment, named by its base offset
//	...
//	leader-epoch-checkpoint         epoch -> start offset (text, Kafka's format)
//	00000000000000052173.snapshot   producer state as of an offset
//	partition.meta                  log start offset and recovery point
//	partition.metadata              the topic id, Kafka's format (partition_metadata.go)
//	.clean                          present only after a clean close
//
// Index files are a cache: each is rebuilt from its segment when missing or
// damaged, and the active segment's indexes are always rebuilt at open. The
// segment files are the truth; the recovery point says up to where they were
// fsynced. After an unclean shutdown every batch from the recovery point on
// is re-validated (structure and CRC32C) and a torn or corrupt tail is cut.
// The leader-epoch checkpoint follows the same rule: an append at a new
// epoch replaces it without an fsync, a flush fsyncs it before moving the
// recovery point, and recovery re-assigns the epochs of the batches after
// that point, so a crash never leaves an epoch the batches hold unknown.
//
// One file lives beside the partition directories, in the log directory,
// written by the log's owner rather than by a Log:
//
//	replication-offset-checkpoint   every partition's high watermark (text,
//	                                Kafka's format: offset_checkpoint.go)
//
// # High watermark
//
// The high watermark is a value of its own in [log start, log end]: reads
// for consumers stop at it, the last stable offset never exceeds it,
// retention never deletes past it. With Config.ExternalHighWatermark the
// owner moves it (SetHighWatermark, upward only; a truncation below it or
// a log start above it move it too), as a Kafka partition leader does from
// its in-sync replicas, and Open starts it at the log start for the owner
// to restore from its checkpoint. Without it (tools, tests) every append
// raises it to the log end and Open starts it there.
//
// # Concurrency
//
// A Log has one writer at a time (appends, truncation, retention take
// Log.mu) and any number of concurrent readers: readers take a snapshot of
// the segment list under a read lock and then read with ReadAt, which never
// conflicts with appends past their end.
package storage
