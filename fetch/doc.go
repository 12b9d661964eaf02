// Package fetch owns the mirror fetchers: the hot path that copies source
// partitions into local logs byte for byte, at the source's offsets
// (DESIGN.md decisions 1-4, SPEC.md section 5).
//
// A Manager holds the mirrors. Each mirror has a kgo client for the slow
// calls (Metadata, ListOffsets, OffsetForLeaderEpoch) and, per source broker
// that leads one of its partitions, mirror.num.replica.fetchers fetchers.
// A fetcher is one goroutine with its own connection (source_conn.go, no
// kgo on the hot path) that sends READ_UNCOMMITTED Fetch requests, in a
// fetch session, for the partitions it owns, and for each answered
// partition:
//
//   - checks every batch's CRC32C once (batch.Iterator), keeps whole
//     batches only (a partial trailing batch is fetched again), and
//     optionally rewrites producer ids in place (producer.id.rewrite);
//     the same walk collects the batches' summary (batch.Chunk);
//   - appends them to the local partition (a partition.Follower: appends
//     at their own offsets, truncation, restarts, the log start; never the
//     log itself) with AppendChunk, which walks no header again, gaps
//     kept, never decompressing;
//   - follows the source log start, keeps the local leader epoch above the
//     appended source epochs (bumped by 10 when the gap falls under 3), and
//     reacts to the errors SPEC.md section 5 lists: FENCED_LEADER_EPOCH and
//     NOT_LEADER_OR_FOLLOWER re-home the partition, OFFSET_OUT_OF_RANGE
//     below the source log start restarts there, UNKNOWN_LEADER_EPOCH
//     backs off, a broken connection sends the fetcher's partitions back to
//     the resolver (their leader may have died).
//
// The copy is never cut while a partition mirrors (identity.go,
// errors.go). Fetchers fetch by topic id from sources that have ids, and
// check a source without ids by comparing batches, so a topic recreated at
// the source fails the partition (ErrNotRetriable) instead of truncating
// the copy or filling it with another topic's records. A source that ends
// below the copy (a diverging epoch, OFFSET_OUT_OF_RANGE above its end)
// fails the partition with a SourceTruncatedError; only a partition
// started with StartAlign (LOG_ALIGNMENT, ULE_RECOVERY) is cut to the
// source, until the source first accepts its fetch position.
//
// A corrupt or malformed batch, or one whose offsets do not follow the
// batch before it or lie past the source high watermark, is never
// appended: the partition stops in the failed state with an error naming
// the offset, and waits to be restarted. Everything the fetchers do per
// batch is allocation-free; buffers in flight are bounded by fetchers x the
// response max bytes.
//
// The control plane (control/) starts and stops partitions with
// StartPartition and StopPartition, learns what happened to them from
// their events (events.go) and reads their Status; their KIP-1279 states
// and the retries of failed partitions are its own.
package fetch
