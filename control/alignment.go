package control

import (
	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/state"
)

// Alignment in progress. LOG_ALIGNMENT (and ULE_RECOVERY) stay the
// persisted state of a partition while its fetcher, started with
// fetch.StartAlign, may still cut the local log: until the source first
// accepts the fetch position. Only then is MIRRORING persisted. A node
// that stops in between (a crash, a restart) finds LOG_ALIGNMENT and
// aligns again; had MIRRORING been persisted at the start, it would
// resume unaligned and fail on the first divergence instead of finishing
// the failback. A pause in between stops the fetcher but leaves the
// partition in its alignment (PAUSING is entered from MIRRORING only), and
// the resume aligns.

// aligningState reports whether s is a state whose fetcher aligns.
func aligningState(s state.PartitionState) bool {
	return s == state.StateLogAlignment || s == state.StateULERecovery
}

// fetchingState reports whether a partition in state s has a fetcher.
func fetchingState(s state.PartitionState) bool {
	return s == state.StateMirroring || aligningState(s)
}

// finishAlignments persists MIRRORING for the aligning partitions whose
// fetchers the source has accepted, and forgets those that no longer
// fetch (stopped, paused, failed: their own paths persist their state).
// REQUIRES: the mirror's lock held.
func (c *Controller) finishAlignments(mirror string) {
	aligning := c.ctl(mirror).aligning
	for key := range aligning {
		st, err := c.fm.Status(key.mirror, key.topic, key.partition)
		if err != nil || st.State == fetch.StateFailed {
			delete(aligning, key)
			continue
		}
		if st.State != fetch.StateFetching || st.Aligning {
			continue
		}
		delete(aligning, key)
		ps := c.partitionState(key.mirror, key.topic, key.partition)
		if !aligningState(ps.State) {
			continue
		}
		if err := c.setState(ps, state.StateMirroring, ""); err != nil {
			aligning[key] = struct{}{} // try again at the next tick
			c.log.Warn("persisting MIRRORING after the alignment", "mirror", key.mirror, "topic", key.topic,
				"partition", key.partition, "err", err)
		}
	}
}
