// Package group is kmirror's consumer group coordinator: the classic group
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) with rebalances,
// session and rebalance timeouts, static membership and protocol selection,
// and committed offsets (OffsetCommit, OffsetFetch, OffsetDelete), written
// through its Store before they are answered. On a node that Store is
// __consumer_offsets (broker/group_log.go, Kafka's records of records.go,
// copied into state/); the coordinator serves the groups of the
// partitions the broker loaded into it (Load, Unload: partitions.go), and
// knows nothing of logs or replicas itself. After a failover, applications move their
// consumers to kmirror with the same group id and resume from the offsets the
// mirror's sync loop committed; before it, read-only consumers may use the
// mirror with groups of their own.
//
// The coordinator speaks in kmsg request and response types: the broker's
// handlers decode, call one method and encode, so every Kafka rule about a
// field lives here, next to the state it guards.
//
// # Group states (Kafka's names)
//
//	Empty ----join----> PreparingRebalance ---all joined or timeout---> CompletingRebalance
//	  ^                      ^        |                                      |
//	  |                      |        +--no members left--> Empty            | leader's SyncGroup
//	  +--last member leaves--+---- join, leave, expiry, new protocols -------+
//	                         |                                               v
//	                         +------------------------------------------- Stable
//
// Dead is a deleted group. A join in PreparingRebalance waits (on the
// caller's goroutine: a broker worker, never an event loop) until every
// known member has rejoined or the rebalance timeout passes; members that
// did not rejoin are removed. The first rebalance of an empty group waits
// group.initial.rebalance.delay.ms for more members to arrive.
//
// # Concurrency
//
// Coordinator.mu guards the group map; each Group has its own mutex. A
// group mutex may be held while taking Coordinator.mu (deleting a group),
// never the reverse. Timers (session expiry, rebalance and
// sync deadlines) run on their own goroutines and take the group mutex.
// Store calls (Badger) happen under the group mutex: a group's offsets and
// generation are written in the order they change.
package group
