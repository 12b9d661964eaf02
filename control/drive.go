package control

import (
	"errors"
	"maps"
	"time"

	"github.com/kmirror/kmirror/state"
)

// Mirroring in a cluster (DESIGN.md "Mirroring"). A mirror partition's
// fetcher and failover run on the partition's leader; its state is a
// record of the metadata log, which every node holds. The controller's
// plane answers the mirror RPCs (every other node forwards them) and
// persists their transitions for every partition; it acts on the ones it
// leads itself. Every node's plane then drives the partitions it leads
// from their persisted states (drive): a partition whose state calls for
// a fetcher and has none gets one (resume: LOG_ALIGNMENT aligns,
// MIRRORING resumes from this node's log end, whose bytes and offsets are
// the old leader's), a STOPPING partition is failed over here, a PAUSING
// one settles in PAUSED. A partition this node no longer leads loses its
// fetcher, its state left to the new leader. A leader's state writes go
// to the controller (node's storeReplicator), fenced there by its leader
// epoch.
//
// drive runs after each change of leaderships or topics this node applied
// and after each change of mirror states (Nudge, from node's reconciler),
// and every driveInterval, which retries what failed (a failover whose
// markers could not be appended, a state write the controller refused
// while it moved). On a node alone every partition is led here and the
// RPCs act at once: drive finds nothing to do but those retries.

// driveInterval is how often drive runs without a nudge.
const driveInterval = 5 * time.Second

// Nudge asks for a drive of every mirror's partitions; it never blocks.
func (c *Plane) Nudge() {
	select {
	case c.nudges <- struct{}{}:
	default:
	}
}

// driveLoop runs drive at each nudge and every driveInterval until Close.
func (c *Plane) driveLoop() {
	defer c.wg.Done()
	t := time.NewTicker(driveInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.nudges:
		case <-t.C:
		}
		c.drive()
	}
}

// drive brings every mirror partition in line with its persisted state
// and this node's leaderships.
func (c *Plane) drive() {
	mirrors, err := c.store.Mirrors()
	if err != nil {
		c.log.Warn("driving the mirror partitions: reading the mirrors", "err", err)
		return
	}
	names := map[string]bool{}
	for _, m := range mirrors {
		names[m.Name] = true
		c.driveMirror(m.Name)
	}
	// A mirror deleted through the controller: its fetchers stop here.
	c.locksMu.Lock()
	var gone []string
	for name := range c.locks {
		if !names[name] {
			gone = append(gone, name)
		}
	}
	c.locksMu.Unlock()
	for _, name := range gone {
		unlock := c.lockMirror(name)
		if c.ctl(name).registered {
			if _, err := c.store.GetMirror(name); errors.Is(err, state.ErrNotFound) {
				c.removeFetchers(name)
				c.dropSource(name)
			}
		}
		unlock()
	}
}

// driveMirror drives one mirror's partitions, under its lock.
func (c *Plane) driveMirror(name string) {
	defer c.lockMirror(name)()
	m, err := c.store.GetMirror(name)
	if err != nil {
		return // deleted meanwhile
	}
	// A mirror another node created, or whose configs changed there:
	// (re)registered with the configs stored, its fetchers restarted
	// below.
	if mc := c.ctl(name); !mc.registered || !maps.Equal(mc.fetchConfigs, m.Configs) {
		if mc.registered {
			c.removeFetchers(name)
			c.dropSource(name)
		}
		if err := c.addFetchers(m); err != nil {
			c.log.Error("mirror not started", "mirror", name, "err", err)
			return
		}
	}
	states, err := c.store.MirrorPartitionStates(name)
	if err != nil {
		c.log.Warn("driving a mirror's partitions: reading their states", "mirror", name, "err", err)
		return
	}
	stops := map[string][]int32{}
	for _, ps := range states {
		if _, in := m.Topics[ps.Topic]; !in || c.beingStopped(name, ps.Topic) {
			continue
		}
		_, err := c.fm.Status(name, ps.Topic, ps.Partition)
		fetching := err == nil
		if !c.leads(ps.Topic, ps.Partition) {
			if fetching {
				// Not stopFetcher: the state is the new leader's to write.
				_ = c.fm.StopPartition(name, ps.Topic, ps.Partition)
				c.log.Info("mirror partition led elsewhere now: its fetcher stopped here", "mirror", name,
					"topic", ps.Topic, "partition", ps.Partition)
			}
			continue
		}
		switch ps.State {
		case state.StateStopping:
			// Failed over below, all at once: a few writes for all the
			// partitions, not a few per partition.
			stops[ps.Topic] = append(stops[ps.Topic], ps.Partition)
		case state.StatePausing, state.StatePaused, state.StateStopped:
			if fetching {
				// The controller paused or stopped it (its RPC) while
				// the fetcher runs here.
				c.stopFetcher(name, ps.Topic, ps.Partition)
			}
			if ps.State == state.StatePausing {
				c.resume(m, ps) // settles in PAUSED
			}
		case state.StateLogAlignment, state.StateULERecovery, state.StateEpochFencing, state.StateMirroring:
			if !fetching {
				c.resume(m, ps)
			}
		case state.StateFailed:
			// A running fetcher is the retry's attempt.
			_, waiting := c.ctl(name).retries[partitionKey{name, ps.Topic, ps.Partition}]
			if !fetching && !waiting && ps.RetryAttempt > 0 {
				c.scheduleRetry(ps, ps.RetryAttempt)
			}
		}
	}
	if len(stops) > 0 {
		c.logStopFailures(m, "failing over mirror partitions led here (retried)", stops)
	}
	var stopped []string
	for topic, desired := range m.Topics {
		if desired == state.StateStopped {
			stopped = append(stopped, topic)
		}
	}
	c.releaseStopped(m, stopped)
}

// leads reports whether this node leads partition p of topic (a node
// alone leads every partition it has; in a cluster, a partition whose
// assignment has not reached this node yet is led by none).
func (c *Plane) leads(topic string, p int32) bool {
	t := c.parts.Topic(topic)
	if t == nil || t.Partition(p) == nil {
		return false
	}
	part := t.Partition(p)
	if _, assigned := part.Assignment(); !assigned && c.b.InCluster() {
		return false
	}
	_, ok := part.Leads()
	return ok
}
