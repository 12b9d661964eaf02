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

// finishAlignment persists MIRRORING for an aligning partition whose
// fetcher the source has accepted (fetch.EventFetching).
// REQUIRES: the mirror's lock held.
func (c *Plane) finishAlignment(key partitionKey) {
	aligning := c.ctl(key.mirror).aligning
	if _, ok := aligning[key]; !ok {
		return
	}
	delete(aligning, key)
	ps := c.partitionState(key.mirror, key.topic, key.partition)
	if !aligningState(ps.State) {
		return
	}
	if err := c.setState(ps, state.StateMirroring, ""); err != nil {
		// Asked again in a while (the store may recover); a node that
		// stops meanwhile aligns again at its next start.
		aligning[key] = struct{}{}
		c.requeue(key, fetch.EventFetching)
		c.log.Warn("persisting MIRRORING after the alignment", "mirror", key.mirror, "topic", key.topic,
			"partition", key.partition, "err", err)
	}
}
