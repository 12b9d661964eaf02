// Package broker is kmirror's Kafka API: the handlers clients, admin tools
// and the `kmirror mirrors` commands talk to, one file per API key in the
// kfake manner (00_produce.go, 01_fetch.go, ...), on top of the partition
// logs of storage/ and the registry of state/, served by netio/.
//
// A Broker owns the topics of the node: for each topic its registry entry
// in state/ (name, topic ID, partition count, configs) and one storage.Log
// per partition under a log directory, named <topic>-<partition> as in
// Kafka. Handlers run on netio's per-connection workers, so they may block
// on fsync, Badger or a long-poll Fetch; they never run on an event loop.
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
// the other writes answer POLICY_VIOLATION (00_produce.go), and the maintenance pass runs
// neither compaction nor retention on them, because the copy must stay
// byte-identical to the source; their log start follows the source's
// (the fetcher moves it). After failover they are ordinary topics.
//
// Locking: Broker.mu guards the topic maps (RLock for lookups, Lock for
// create, delete and partition growth). A partition's log has its own
// locks (see storage); partition.waitMu guards long-poll waiters. Never take
// Broker.mu while holding a partition lock.
package broker
