package control

import "sync"

// Locking. Each mirror has its own lock (mirrorCtl.mu), held by every
// transition of that mirror's partitions and every change to its stored
// record: its RPCs (Create, Start, Stop, Pause, Resume, Recover, Delete,
// its configs), its metadata sync's local changes and its failure
// handling. So the persisted states of a mirror and its fetchers never
// disagree, while the operations of two mirrors never wait on each other.
// List and Describe take no lock at all: they read the store and the
// fetchers' statuses, each safe on its own, so a failback peer's
// DescribeClusterMirrors is answered whatever a mirror is waiting on.
//
// Source I/O runs outside the lock. Where what it reads does not depend
// on the transition it runs before it (a Start's topic lookups and loop
// check, a Create's cluster id, a sync cycle's reads). A Stop's final
// sync reads the source between two steps of the stop (the fetchers
// removed, then the source read, then the stop proper): the stop drops
// the lock in between and marks its topics as being stopped
// (mirrorCtl.stopping), so no other path restarts their fetchers or
// changes them meanwhile (startPartitionFrom refuses, Pause answers
// MIRROR_TOPIC_BEING_STOPPED, the sync skips them), and it holds the
// mirror's stopMu throughout, which Delete and a config change take too:
// they would pull the mirror or its source client from under the final
// sync. A Start's last-mirror-epoch lookup and its dry run still read the
// source under the lock, bounded by the source timeout: they are part of
// the start of topics of that mirror alone.
//
// Lock order: mirrorCtl.stopMu, then mirrorCtl.mu, then topicsMu, then the
// short locks (locksMu, evMu, srcMu, localMu, syncRec.mu); never two
// mirrors' locks at once.

// mirrorCtl is one mirror's lock and the in-memory bookkeeping of its
// partitions, guarded by mu.
type mirrorCtl struct {
	// stopMu is held by a Stop, a Delete and a config change of the
	// mirror, across the Stop's final sync.
	stopMu sync.Mutex
	mu     sync.Mutex
	// stopping are the topics a Stop is failing over: their final sync
	// runs without mu.
	stopping map[string]bool
	// retries are the failed partitions' retry schedules (failures.go).
	retries map[partitionKey]*retrySchedule
	// aligning are the partitions started with fetch.StartAlign whose
	// LOG_ALIGNMENT or ULE_RECOVERY is persisted until the source first
	// accepts their fetch position (alignment.go).
	aligning map[partitionKey]struct{}
	// events are the mirror's fetch events and due retries, in order,
	// and draining is set while drain handles them (events.go); both are
	// guarded by Plane.evMu, not mu: a fetcher queues without
	// waiting on a transition.
	events   []queued
	draining bool
	// registered is set while the mirror is registered with the fetch
	// manager (addFetchers), with fetchConfigs, the configs its fetchers
	// run with: in a cluster, drive (drive.go) registers a mirror another
	// node created, and again when the configs in the store change.
	registered   bool
	fetchConfigs map[string]string
}

// ctl returns the named mirror's lock and bookkeeping, made on first use.
// An entry outlives a deleted mirror: a caller may hold it while the
// mirror is deleted and recreated, and two entries for one name would let
// two transitions of that mirror run at once. Each is a few words.
func (c *Plane) ctl(mirror string) *mirrorCtl {
	c.locksMu.Lock()
	defer c.locksMu.Unlock()
	mc := c.locks[mirror]
	if mc == nil {
		mc = &mirrorCtl{retries: map[partitionKey]*retrySchedule{}, aligning: map[partitionKey]struct{}{},
			stopping: map[string]bool{}}
		c.locks[mirror] = mc
	}
	return mc
}

// lockStops takes the named mirror's stopMu and returns its unlock.
func (c *Plane) lockStops(mirror string) (unlock func()) {
	mc := c.ctl(mirror)
	mc.stopMu.Lock()
	return mc.stopMu.Unlock
}

// beingStopped reports whether a Stop is failing topic over.
// REQUIRES: the mirror's lock held.
func (c *Plane) beingStopped(mirror, topic string) bool { return c.ctl(mirror).stopping[topic] }

// lockMirror takes the named mirror's lock and returns its unlock.
func (c *Plane) lockMirror(mirror string) (unlock func()) {
	mc := c.ctl(mirror)
	mc.mu.Lock()
	return mc.mu.Unlock
}
