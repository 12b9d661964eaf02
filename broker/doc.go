// Package broker is kmirror's Kafka API: the handlers clients, admin tools
// and the `kmirror mirrors` commands talk to, one file per API key in the
// kfake manner (00_produce.go, 01_fetch.go, ...), on top of the partitions
// of partition/ and the store of state/, served by netio/.
//
// The partitions the node hosts, their logs, leader epochs, high
// watermarks, waiters and maintenance belong to partition.Manager (the
// replica manager); a Broker looks them up there and answers from them and
// from the metadata image (image.go). Handlers run on netio's
// per-connection workers, so they may block on fsync, Badger or a
// long-poll Fetch; they never run on an event loop.
//
// Failures are Kafka error codes in the response (STYLE.md item 19). A
// handler returns a Go error only when the connection must close: a request
// it cannot decode, an API key or version it does not serve (Kafka's answer
// to those is to close the connection, except for ApiVersions, which
// answers UNSUPPORTED_VERSION with the supported ranges, KIP-511).
//
// Fetch is the serving hot path: its response is encoded here, by hand, as
// a small header per partition followed by the stored batch bytes read
// straight into the response buffer, never decoded or re-encoded. Every
// other response is a kmsg struct encoded with AppendTo.
//
// Mirror topics (a topic whose mirror is set: every mirror state but
// STOPPED) are read-only to clients and to the node itself: Produce and
// the other writes answer POLICY_VIOLATION (00_produce.go), and the
// maintenance pass (partition/) runs neither compaction nor retention on
// them, because the copy must stay byte-identical to the source; their log
// start follows the source's (the fetcher moves it). After failover they
// are ordinary topics.
//
// Locking: Broker.adminMu first (admin requests that read, check, then
// change), then the partition registry's locks (partition.Topic's
// maintainMu, then partition.Manager's, under which topic configs are
// resolved and the image is rebuilt: dynMu and imgMu come after it), then
// a partition's own (its log's, see storage, and its waiters'). Never take
// the registry's lock while holding a partition lock.
package broker
