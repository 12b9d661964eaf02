package control

import "github.com/kmirror/kmirror/state"

// PartitionStates is one mirror's partitions counted by KIP-1279 state
// (LOG_ALIGNMENT ... FAILED), as persisted: what --describe's STATE column
// shows, for a metric (issue 18 item 5). Unlike the fetchers' states
// (fetch.State), it counts the partitions without a fetcher too: PAUSED,
// STOPPED, and FAILED ones waiting for their retry.
type PartitionStates struct {
	Mirror string
	// Counts is indexed by state; StateUnknown is not counted.
	Counts [state.StateFailed + 1]int
}

// PartitionStateCounts reads every mirror's partition states from the
// store (a scan per mirror: for a metrics scrape, not a hot path). A
// mirror whose states cannot be read is left out.
func (c *Controller) PartitionStateCounts() []PartitionStates {
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
			if s.State >= 0 && int(s.State) < len(ps.Counts) {
				ps.Counts[s.State]++
			}
		}
		out = append(out, ps)
	}
	return out
}
