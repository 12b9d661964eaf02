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
//   - appends them with storage.Log.AppendMirror at their own offsets,
//     gaps kept, never decompressing;
//   - follows the source log start, keeps the local leader epoch above the
//     appended source epochs (bumped by 10 when the gap falls under 3), and
//     reacts to the errors SPEC.md section 5 lists: FENCED_LEADER_EPOCH and
//     NOT_LEADER_OR_FOLLOWER re-home the partition, OFFSET_OUT_OF_RANGE
//     truncates or restarts at the source log start, UNKNOWN_LEADER_EPOCH
//     backs off, a diverging epoch (Fetch v12+) truncates to the divergence
//     point (OffsetForLeaderEpoch on start for sources without it).
//
// A corrupt or malformed batch is never appended: the partition stops in
// the failed state with an error naming the offset, and waits to be
// restarted. Everything the fetchers do per batch is allocation-free;
// buffers in flight are bounded by fetchers x the response max bytes.
//
// Until the control plane exists, StartPartition and StopPartition are the
// Go API that starts and stops mirroring a partition.
package fetch
