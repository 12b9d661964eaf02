package control

import "github.com/kmirror/kmirror/state"

// PartitionStates is one mirror's partitions counted by KIP-1279 state
// (LOG_ALIGNMENT ... FAILED), as persisted: what --describe's STATE column
// shows, for a metric (issue 18 item 5).
type PartitionStates struct {
	Mirror string
	// Counts is indexed by state; StateUnknown is not counted.
	Counts [state.StateFailed + 1]int
}

// PartitionStateCounts reads every mirror's partition states from the
// store (a scan per mirror: for a metrics scrape, not a hot path),
// PAUSED, STOPPED and the others without a fetcher included. A mirror
// whose states cannot be read is left out.
func (c *Plane) PartitionStateCounts() []PartitionStates {
	return c.stateCounts(nil)
}

// FetcherStateCounts is PartitionStateCounts for the partitions the
// fetchers hold (aligning, mirroring, FAILED with the failure kept):
// kmirror_mirror_partitions. Their state is the one this package
// persisted; the fetchers have no state of their own to report.
func (c *Plane) FetcherStateCounts() []PartitionStates {
	held := map[partitionKey]bool{}
	for _, st := range c.fm.Statuses() {
		held[partitionKey{st.Mirror, st.Topic, st.Partition}] = true
	}
	return c.stateCounts(held)
}

// stateCounts counts the partitions in held, or all with held nil.
func (c *Plane) stateCounts(held map[partitionKey]bool) []PartitionStates {
	mirrors, err := c.store.Mirrors()
	if err != nil {
		return nil
	}
	out := make([]PartitionStates, 0, len(mirrors))
	for _, m := range mirrors {
		states, err := c.store.MirrorPartitionStates(m.Name)
		if err != nil {
			continue
		}
		ps := PartitionStates{Mirror: m.Name}
		for _, s := range states {
			if held != nil && !held[partitionKey{s.Mirror, s.Topic, s.Partition}] {
				continue
			}
			if s.State >= 0 && int(s.State) < len(ps.Counts) {
				ps.Counts[s.State]++
			}
		}
		out = append(out, ps)
	}
	return out
}
