package control

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/mirrorapi"
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
	var led []state.MirrorPartitionState
	for _, p := range ps {
		st := c.partitionState(m.Name, topic, p)
		switch {
		case st.State == state.StateStopped:
		case !c.leads(topic, p):
			// In a cluster: the controller persists STOPPING, and the
			// partition's leader fails it over (drive.go), filling in
			// where mirroring stopped, which only its log knows.
			if st.State != state.StateStopping && c.b.IsController() {
				st = withState(st, state.StateStopping, "")
				st.LastMirrorEpoch, st.LastMirrorOffset = -1, -1
				toPersist = append(toPersist, st)
			}
		default:
			led = append(led, st)
		}
	}
	// The fetchers first: from then on each log end is final.
	parts := make([]int32, len(led))
	for i, st := range led {
		parts[i] = st.Partition
	}
	c.stopFetchers(m.Name, topic, parts)
	for _, st := range led {
		local, err := c.parts.MirrorPartition(topic, st.Partition)
		if err != nil {
			return err
		}
		if st.State != state.StateStopping || st.LastMirrorOffset < 0 {
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

// stopWait bounds how long a Stop waits for the partitions other nodes
// lead to be failed over (below an admin client's 30 s request timeout).
// A leader that died meanwhile is replaced once the controller fences it
// (broker.session.timeout.ms), and the new leader fails its partitions
// over.
var stopWait = 25 * time.Second

// awaitStops waits, in a cluster, until every partition of each topic a
// Stop answered for without error is STOPPED (the partitions other nodes
// lead are failed over by those leaders, drive.go), then makes the topic
// writable; a topic still STOPPING after stopWait is answered
// REQUEST_TIMED_OUT, naming the partitions, and its leaders go on: the
// controller's drive releases it once they are done. On a node alone
// every partition is STOPPED already. REQUIRES: the mirror's stopMu held,
// its lock not.
func (c *Plane) awaitStops(mirror string, resp *mirrorapi.StopMirrorTopicsResponse) {
	deadline := time.Now().Add(stopWait)
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		if rt.ErrorCode != 0 {
			continue
		}
		var left []int32
		for {
			left = c.notStopped(mirror, rt.Name)
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
			select {
			case <-c.ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		if len(left) > 0 {
			rt.ErrorCode = kerr.RequestTimedOut.Code
			rt.ErrorMessage = strp(fmt.Sprintf("partitions %v of %s are still STOPPING after %v: their leaders go on "+
				"failing them over, and the topic becomes writable when they are done (--describe shows their states)",
				left, rt.Name, stopWait))
			continue
		}
		unlock := c.lockMirror(mirror)
		if m, err := c.store.GetMirror(mirror); err == nil {
			c.releaseIfStopped(m, rt.Name)
		}
		unlock()
	}
}

// notStopped lists the partitions of a mirror topic that are not STOPPED.
func (c *Plane) notStopped(mirror, topic string) []int32 {
	info, ok := c.parts.Info(topic)
	if !ok {
		return nil
	}
	var left []int32
	for p := int32(0); p < info.Partitions; p++ {
		if c.partitionState(mirror, topic, p).State != state.StateStopped {
			left = append(left, p)
		}
	}
	return left
}
