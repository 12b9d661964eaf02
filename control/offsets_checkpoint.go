package control

import (
	"time"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/state"
)

// The last known source offsets (issue 16 item 7). A fetcher knows its
// partition's source high watermark only in memory, and only while it
// runs; Describe must still show it for a PAUSED, STOPPED or FAILED
// partition, and after a restart before the source answers (a dead source
// broker may not answer for minutes). So it is persisted on the
// partition's state record, never per fetch (the fetch path is hot):
//
//   - stopFetcher writes it when a fetcher is removed (stop, pause, a
//     non-retryable failure), just before the state change that follows;
//   - checkpointLoop writes every running fetcher's every
//     offsetCheckpointInterval, and once more at Close, before the
//     fetchers stop, so a clean restart starts from current values and a
//     crash loses at most one interval (shown with its age, never as
//     current).

// offsetCheckpointInterval is how often the live source offsets are
// persisted. A partition whose offset has not moved is rewritten only
// every offsetCheckpointRefresh: its stored read time then lags by up to
// that much, which Describe shows as an older age, but idle partitions
// cost no write per interval.
const (
	offsetCheckpointInterval = 10 * time.Second
	offsetCheckpointRefresh  = time.Minute
)

// checkpointed is what the checkpoint last wrote for a partition.
type checkpointed struct {
	offset int64
	at     time.Time
}

// checkpointLoop persists the fetchers' source offsets until Close, then
// once more with everything rewritten. Close cancels c.ctx and waits for
// this goroutine before it stops the fetchers, so the last pass still
// reads live values.
func (c *Plane) checkpointLoop() {
	defer c.wg.Done()
	t := time.NewTicker(offsetCheckpointInterval)
	defer t.Stop()
	last := map[partitionKey]checkpointed{}
	for {
		select {
		case <-c.ctx.Done():
			c.checkpointOffsets(last, true)
			return
		case <-t.C:
			c.checkpointOffsets(last, false)
		}
	}
}

// checkpointOffsets writes the source offsets the fetchers read since the
// last pass; with all set, every known one. last is updated. It does not
// take a lock: the store keeps the newest reading of each partition
// whatever the order of writes (state.PutMirrorSourceOffsets and
// PutMirrorPartitionState), and writes none for a partition whose state
// is gone.
func (c *Plane) checkpointOffsets(last map[partitionKey]checkpointed, all bool) {
	byMirror := map[string][]state.MirrorSourceOffset{}
	seen := map[partitionKey]bool{}
	for _, st := range c.fm.Statuses() {
		if st.SourceHighWatermark < 0 || st.SourceUpdated.IsZero() {
			continue
		}
		k := partitionKey{st.Mirror, st.Topic, st.Partition}
		seen[k] = true
		prev, ok := last[k]
		switch {
		case !st.SourceUpdated.After(prev.at):
			continue // nothing read since
		case !all && ok && prev.offset == st.SourceHighWatermark && st.SourceUpdated.Sub(prev.at) < offsetCheckpointRefresh:
			continue
		}
		last[k] = checkpointed{st.SourceHighWatermark, st.SourceUpdated}
		byMirror[st.Mirror] = append(byMirror[st.Mirror], sourceOffset(st))
	}
	for k := range last {
		if !seen[k] {
			delete(last, k) // the fetcher is gone; a new one starts afresh
		}
	}
	for m, offs := range byMirror {
		if err := c.store.PutMirrorSourceOffsets(m, offs); err != nil {
			c.log.Warn("checkpointing source offsets", "mirror", m, "partitions", len(offs), "err", err)
		}
	}
}

// stopFetcher removes a partition's fetcher, persisting first the source
// offset it last read: once the fetcher is gone, Describe has only the
// store. The caller persists the partition's next state right after,
// which fsyncs this write too. REQUIRES: the mirror's lock held.
func (c *Plane) stopFetcher(mirror, topic string, p int32) {
	if st, err := c.fm.Status(mirror, topic, p); err == nil && st.SourceHighWatermark >= 0 && !st.SourceUpdated.IsZero() {
		if err := c.store.PutMirrorSourceOffsets(mirror, []state.MirrorSourceOffset{sourceOffset(st)}); err != nil {
			c.log.Warn("persisting the last source offset", "mirror", mirror, "topic", topic, "partition", p, "err", err)
		}
	}
	_ = c.fm.StopPartition(mirror, topic, p)
}

// stopFetchers is stopFetcher for the partitions of parts (topic:
// partitions), their source offsets persisted in one write. REQUIRES: the
// mirror's lock held.
func (c *Plane) stopFetchers(mirror string, parts map[string][]int32) {
	var offs []state.MirrorSourceOffset
	for topic, ps := range parts {
		for _, p := range ps {
			if st, err := c.fm.Status(mirror, topic, p); err == nil && st.SourceHighWatermark >= 0 && !st.SourceUpdated.IsZero() {
				offs = append(offs, sourceOffset(st))
			}
		}
	}
	if len(offs) > 0 {
		if err := c.store.PutMirrorSourceOffsets(mirror, offs); err != nil {
			c.log.Warn("persisting the last source offsets", "mirror", mirror, "err", err)
		}
	}
	for topic, ps := range parts {
		for _, p := range ps {
			_ = c.fm.StopPartition(mirror, topic, p)
		}
	}
}

func sourceOffset(st fetch.Status) state.MirrorSourceOffset {
	return state.MirrorSourceOffset{Topic: st.Topic, Partition: st.Partition, Offset: st.SourceHighWatermark, Time: st.SourceUpdated}
}
