package control

import (
	"errors"
	"fmt"
	"time"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/state"
)

// stopPartitions runs the failover of partitions ps of topic (see the
// package doc) in three steps, each persisted before it acts, and each
// one write for all the partitions, so that a stop of a thousand
// partitions costs a few writes (each an entry of the metadata log), not
// two thousand: every partition's fetcher is removed and its STOPPING,
// with where mirroring stopped, persisted; then the partitions' leader
// epochs are raised above the mirrored ones (one write) and each one's
// markers appended (an ABORT for each open transaction, then
// MIRROR_PID_RESET); then every partition that got that far is STOPPED. A partition whose markers fail
// stays STOPPING, without a fetcher, and the stop says which: running it
// again (a restart runs it) finishes it. Idempotent. REQUIRES: m's lock
// held.
func (c *Plane) stopPartitions(m state.Mirror, topic string, ps []int32) error {
	var toPersist, stopping []state.MirrorPartitionState
	for _, p := range ps {
		st := c.partitionState(m.Name, topic, p)
		if st.State == state.StateStopped {
			continue
		}
		c.stopFetcher(m.Name, topic, p)
		local, err := c.parts.MirrorPartition(topic, p)
		if err != nil {
			return err
		}
		if st.State != state.StateStopping {
			st.LastMirrorEpoch, st.LastMirrorOffset = -1, local.LogEndOffset()
			if e, ok := local.LatestEpoch(); ok {
				st.LastMirrorEpoch = e
			}
			st = withState(st, state.StateStopping, "")
			toPersist = append(toPersist, st)
		}
		stopping = append(stopping, st)
	}
	if err := c.store.PutMirrorPartitionStates(toPersist); err != nil {
		return err
	}
	// Every batch this node writes from now on carries an epoch above
	// the mirrored ones: consumers see the change, and a failback finds
	// where this node's own writes begin.
	raise := map[int32]int32{}
	for _, st := range stopping {
		if st.LastMirrorEpoch >= 0 {
			local, err := c.parts.MirrorPartition(topic, st.Partition)
			if err != nil {
				return err
			}
			raise[st.Partition] = max(st.LastMirrorEpoch+1, local.LeaderEpoch())
		}
	}
	if len(raise) > 0 {
		if err := c.parts.RaiseLeaderEpochs(topic, raise); err != nil {
			return err
		}
	}
	var stopped []state.MirrorPartitionState
	var failed error
	for _, st := range stopping {
		if err := c.failOver(m, st); err != nil {
			failed = errors.Join(failed, fmt.Errorf("partition %d: %w", st.Partition, err))
			continue
		}
		stopped = append(stopped, withState(st, state.StateStopped, ""))
	}
	return errors.Join(c.store.PutMirrorPartitionStates(stopped), failed)
}

// failOver appends a STOPPING partition's markers, its epoch raised: an
// ABORT for each open transaction, then MIRROR_PID_RESET, which marks
// where the mirrored producer ids end.
func (c *Plane) failOver(m state.Mirror, st state.MirrorPartitionState) error {
	local, err := c.parts.MirrorPartition(st.Topic, st.Partition)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	for _, txn := range local.OngoingTxns() {
		if err := local.AppendControl(func(base int64, epoch int32) []byte {
			return batch.AppendTxnMarker(nil, batch.TxnMarker{BaseOffset: base, PartitionLeaderEpoch: epoch,
				Timestamp: now, ProducerID: txn.ProducerID, ProducerEpoch: txn.ProducerEpoch,
				CoordinatorEpoch: max(0, txn.CoordinatorEpoch)})
		}); err != nil {
			return fmt.Errorf("aborting the open transaction of producer %d: %w", txn.ProducerID, err)
		}
	}
	if err := local.AppendControl(func(base int64, epoch int32) []byte {
		return batch.AppendMirrorPIDReset(nil, batch.PIDReset{BaseOffset: base, PartitionLeaderEpoch: epoch,
			Timestamp: now, SourceClusterID: m.SourceClusterID})
	}); err != nil {
		return fmt.Errorf("appending MIRROR_PID_RESET: %w", err)
	}
	return nil
}
