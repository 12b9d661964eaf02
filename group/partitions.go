package group

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// In a node that keeps group state in __consumer_offsets, the owner (the
// broker) loads a partition's groups when this node becomes its leader and
// unloads them when it stops leading it; a group's partition is Kafka's
// hash of its name (meta.CoordinatorPartition). Between the two the
// coordinator serves those groups from memory and writes their changes
// through Store, which appends them to the partition.

// Load installs the groups of one partition from st, the state its log
// left: the groups belongs selects are dropped first, as Unload, so that
// nothing of an earlier leadership survives.
func (c *Coordinator) Load(belongs func(group string) bool, st *GroupsState) {
	c.Unload(belongs)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	install := func(name string) *Group {
		g := c.groups[name]
		if g == nil {
			g = c.newGroup(name)
			c.groups[name] = g
		}
		return g
	}
	for name, m := range st.Metas {
		g := install(name)
		g.protocolType, g.generation = m.ProtocolType, m.Generation
		g.restoreMembers(m)
	}
	for name, cs := range st.Consumer {
		install(name).restoreConsumer(cs)
	}
	for name, ss := range st.Share {
		install(name).restoreShare(ss)
	}
	for name, offs := range st.ShareOffsets {
		if g := c.groups[name]; g != nil && g.share != nil {
			maps.Copy(g.shareOffsets, offs)
		}
	}
	for name, offs := range st.Offsets {
		if len(offs) == 0 {
			continue
		}
		g := install(name)
		for tp, o := range offs {
			g.offsets[tp] = o
		}
	}
	for pid, groups := range st.Pending {
		for name, offs := range groups {
			if len(offs) > 0 {
				install(name).addPending(pid, slices.Collect(maps.Values(offs)))
			}
		}
	}
}

// Unload drops the groups belongs selects: their timers stop and their
// waiting joins and syncs answer NOT_COORDINATOR, so that the members find
// the partition's new leader.
func (c *Coordinator) Unload(belongs func(group string) bool) {
	c.mu.Lock()
	var gone []*Group
	for name, g := range c.groups {
		if belongs(name) {
			gone = append(gone, g)
			delete(c.groups, name)
		}
	}
	c.mu.Unlock()
	for _, g := range gone {
		g.mu.Lock()
		g.state = stateDead
		g.shutdownWith(kerr.NotCoordinator)
		g.mu.Unlock()
	}
}
