package control

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// stopPartitions runs the failover of the partitions of parts (topic:
// partitions; see the package doc) in three steps, each persisted before
// it acts, and each one write for all the partitions of all the topics,
// so that a stop of a thousand partitions costs a few writes (each an
// entry of the metadata log, and in a cluster a reconcile on every node),
// not a few per topic or partition: every partition's fetcher is removed
// and its STOPPING, with where mirroring stopped, persisted; then the
// partitions' leader epochs are raised above the mirrored ones (one
// write) and each one's markers appended (an ABORT for each open
// transaction, then MIRROR_PID_RESET); then every partition that got that
// far is STOPPED. A partition whose markers fail stays STOPPING, without
// a fetcher, and the stop says which, by topic: running it again (a
// restart, or a cluster's drive, runs it) finishes it. Idempotent.
// In a cluster, a partition led elsewhere is only persisted STOPPING (by
// the controller): its leader fails it over (drive.go), filling in where
// mirroring stopped, which only its log knows. failed is by topic; err
// is a failure of the whole step. REQUIRES: m's lock held.
func (c *Plane) stopPartitions(m state.Mirror, parts map[string][]int32) (failed map[string]error, err error) {
	toPersist := c.remoteStopping(m, parts)
	var stopping []state.MirrorPartitionState
	led := map[string][]int32{}
	var ledStates []state.MirrorPartitionState
	for topic, ps := range parts {
		for _, p := range ps {
			st := c.partitionState(m.Name, topic, p)
			switch {
			case st.State == state.StateStopped, !c.leads(topic, p):
			default:
				led[topic] = append(led[topic], p)
				ledStates = append(ledStates, st)
			}
		}
	}
	// The fetchers first: from then on each log end is final.
	c.stopFetchers(m.Name, led)
	for _, st := range ledStates {
		local, err := c.parts.MirrorPartition(st.Topic, st.Partition)
		if err != nil {
			return nil, err
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
		return nil, err
	}
	// Every batch this node writes from now on carries an epoch above
	// the mirrored ones: consumers see the change, and a failback finds
	// where this node's own writes begin.
	raise := map[string]map[int32]int32{}
	for _, st := range stopping {
		if st.LastMirrorEpoch >= 0 {
			local, err := c.parts.MirrorPartition(st.Topic, st.Partition)
			if err != nil {
				return nil, err
			}
			if raise[st.Topic] == nil {
				raise[st.Topic] = map[int32]int32{}
			}
			raise[st.Topic][st.Partition] = max(st.LastMirrorEpoch+1, local.LeaderEpoch())
		}
	}
	if len(raise) > 0 {
		if err := c.parts.RaiseLeaderEpochsOfTopics(raise); err != nil {
			return nil, err
		}
	}
	errs := c.failOverAll(m, stopping)
	var stopped []state.MirrorPartitionState
	failed = map[string]error{}
	for i, st := range stopping {
		if errs[i] != nil {
			failed[st.Topic] = errors.Join(failed[st.Topic], fmt.Errorf("partition %d: %w", st.Partition, errs[i]))
			continue
		}
		stopped = append(stopped, withState(st, state.StateStopped, ""))
	}
	return failed, c.store.PutMirrorPartitionStates(stopped)
}

// failOverConcurrency bounds how many partitions' markers failOverAll
// appends at once. WHY: a partition's first append at its raised epoch
// writes its leader-epoch checkpoint (an fsync and a rename), about a
// millisecond, so 1,000 partitions one after another took a second;
// the partitions' logs are independent and the disk overlaps their
// syncs, while the bound keeps a stop of many thousands from opening as
// many goroutines and files at once.
const failOverConcurrency = 32

// markersCommitWait bounds how long failOverAll waits for the in-sync
// replicas to hold a partition's markers. WHY 10 s: below stopWait, so a
// Stop answers in time; a follower that died is out of the ISR within
// the broker session timeout, after which the wait ends; a partition
// whose wait ran out stays STOPPING, and the drive waits again (its
// markers are not appended twice: failOver).
var markersCommitWait = 10 * time.Second

// failOverAll runs failOver for each of states, failOverConcurrency at
// a time, then waits until the in-sync replicas hold each one's markers
// (on a node alone at once): a partition becomes STOPPED, and its topic
// writable, only with markers a new leader would have too. It returns
// each one's error at its index.
func (c *Plane) failOverAll(m state.Mirror, states []state.MirrorPartitionState) []error {
	type appended struct {
		local partition.Follower
		end   int64
		lead  partition.Leadership
	}
	done := make([]appended, len(states))
	errs := make([]error, len(states))
	sem := make(chan struct{}, failOverConcurrency)
	var wg sync.WaitGroup
	for i, st := range states {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			done[i].local, done[i].end, done[i].lead, errs[i] = c.failOver(m, st)
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(markersCommitWait)
	for i, a := range done {
		if errs[i] != nil {
			continue
		}
		switch a.local.AwaitCommitted(a.end, a.lead, time.Until(deadline), c.ctx.Done()) {
		case partition.CommitTimedOut:
			errs[i] = fmt.Errorf("the in-sync replicas did not hold the failover markers (up to offset %d) within %v; "+
				"the partition stays STOPPING and its leader waits again", a.end, markersCommitWait)
		case partition.CommitLostLeadership:
			errs[i] = errors.New("this node stopped leading the partition before its in-sync replicas held the failover " +
				"markers; the new leader fails it over")
		}
	}
	return errs
}

// remoteStopping returns, on the controller, the STOPPING states to
// persist for the partitions of parts that other nodes lead and that are
// neither STOPPING nor STOPPED yet; where mirroring stopped is left
// unknown (-1), for the leader to fill in from its log. Elsewhere none.
func (c *Plane) remoteStopping(m state.Mirror, parts map[string][]int32) []state.MirrorPartitionState {
	if !c.b.IsController() {
		return nil
	}
	var states []state.MirrorPartitionState
	for topic, ps := range parts {
		for _, p := range ps {
			st := c.partitionState(m.Name, topic, p)
			if st.State == state.StateStopped || st.State == state.StateStopping || c.leads(topic, p) {
				continue
			}
			st = withState(st, state.StateStopping, "")
			st.LastMirrorEpoch, st.LastMirrorOffset = -1, -1
			states = append(states, st)
		}
	}
	return states
}

// persistRemoteStopping persists STOPPING for every partition of topics
// that another node leads (remoteStopping), in one write: their leaders
// start failing them over at their next drive. REQUIRES: m's lock held.
func (c *Plane) persistRemoteStopping(m state.Mirror, topics []string) error {
	parts := map[string][]int32{}
	for _, t := range topics {
		info, ok := c.parts.Info(t)
		if !ok {
			continue
		}
		for p := int32(0); p < info.Partitions; p++ {
			parts[t] = append(parts[t], p)
		}
	}
	return c.store.PutMirrorPartitionStates(c.remoteStopping(m, parts))
}

// logStopFailures runs stopPartitions for parts outside an RPC (a restart,
// a cluster's drive) and logs what failed; a failed partition stays
// STOPPING, to be run again. REQUIRES: m's lock held.
func (c *Plane) logStopFailures(m state.Mirror, what string, parts map[string][]int32) {
	failed, err := c.stopPartitions(m, parts)
	if err != nil {
		c.log.Error(what, "mirror", m.Name, "err", err)
	}
	for topic, err := range failed {
		c.log.Error(what, "mirror", m.Name, "topic", topic, "err", err)
	}
}

// failOver appends a STOPPING partition's markers, its epoch raised: an
// ABORT for each open transaction, then MIRROR_PID_RESET, which marks
// where the mirrored producer ids end. It returns the partition, the log
// end after its markers and the leadership they were appended in. Run
// again (a retry, the markers appended but not committed yet), it
// appends no second MIRROR_PID_RESET in the same epoch: the log ends with
// it already (nothing else appends to a STOPPING partition: no fetcher,
// and the topic takes no writes).
func (c *Plane) failOver(m state.Mirror, st state.MirrorPartitionState) (partition.Follower, int64, partition.Leadership, error) {
	local, err := c.parts.MirrorPartition(st.Topic, st.Partition)
	if err != nil {
		return nil, 0, partition.Leadership{}, err
	}
	now := time.Now().UnixMilli()
	for _, txn := range local.OngoingTxns() {
		if _, _, err := local.AppendControl(func(base int64, epoch int32) []byte {
			return batch.AppendTxnMarker(nil, batch.TxnMarker{BaseOffset: base, PartitionLeaderEpoch: epoch,
				Timestamp: now, ProducerID: txn.ProducerID, ProducerEpoch: txn.ProducerEpoch,
				CoordinatorEpoch: max(0, txn.CoordinatorEpoch)})
		}); err != nil {
			return nil, 0, partition.Leadership{}, fmt.Errorf("aborting the open transaction of producer %d: %w", txn.ProducerID, err)
		}
	}
	if end, lead, ok := endsWithPIDReset(local); ok {
		return local, end, lead, nil
	}
	end, lead, err := local.AppendControl(func(base int64, epoch int32) []byte {
		return batch.AppendMirrorPIDReset(nil, batch.PIDReset{BaseOffset: base, PartitionLeaderEpoch: epoch,
			Timestamp: now, SourceClusterID: m.SourceClusterID})
	})
	if err != nil {
		return nil, 0, partition.Leadership{}, fmt.Errorf("appending MIRROR_PID_RESET: %w", err)
	}
	return local, end, lead, nil
}

// endsWithPIDReset reports whether local's last batch is a
// MIRROR_PID_RESET of its current leader epoch that this node leads in,
// and if so the log end and that leadership.
func endsWithPIDReset(local partition.Follower) (int64, partition.Leadership, bool) {
	end := local.LogEndOffset()
	lead, leads := local.Leadership()
	if end <= local.LogStartOffset() || !leads {
		return 0, lead, false
	}
	data, _, err := local.Read(end-1, 1, end, nil)
	if err != nil {
		return 0, lead, false
	}
	b, err := batch.Parse(data)
	if err != nil || !b.IsControl() || b.PartitionLeaderEpoch() != local.LeaderEpoch() {
		return 0, lead, false
	}
	typ, err := b.ControlType()
	return end, lead, err == nil && typ == batch.ControlMirrorPIDReset
}

// stopWait bounds how long a Stop runs before it answers (below Kafka's
// admin clients' 30 s request.timeout.ms; `kmirror mirrors` waits for
// --timeout, 60 s), its final sync (up to 10 s) and its
// own partitions' markers (up to markersCommitWait) included: the rest
// is how long it waits for the partitions other nodes lead to be failed
// over.
// A leader that died meanwhile is replaced once the controller fences it
// (broker.session.timeout.ms), and the new leader fails its partitions
// over.
var stopWait = 25 * time.Second

// awaitStops waits, in a cluster, until every partition of each topic a
// Stop answered for without error is STOPPED (the partitions other nodes
// lead are failed over by those leaders, drive.go), then makes those
// topics writable, all in one write; a topic still STOPPING at deadline
// (stopWait after the Stop came) is answered REQUEST_TIMED_OUT, naming
// the partitions, and its leaders go on: the controller's drive releases
// it once they are done.
// On a node alone every partition is STOPPED already. REQUIRES: the
// mirror's stopMu held, its lock not.
func (c *Plane) awaitStops(mirror string, resp *mirrorapi.StopMirrorTopicsResponse, deadline time.Time) {
	waiting := map[int][]int32{} // index in resp.Topics: partitions not STOPPED
	for i, rt := range resp.Topics {
		if rt.ErrorCode == 0 {
			waiting[i] = nil
		}
	}
	var done []string
	for len(waiting) > 0 {
		for i := range waiting {
			if left := c.notStopped(mirror, resp.Topics[i].Name); len(left) > 0 {
				waiting[i] = left
				continue
			}
			done = append(done, resp.Topics[i].Name)
			c.reportFinalEnds(mirror, &resp.Topics[i])
			delete(waiting, i)
		}
		if len(waiting) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	for i, left := range waiting {
		rt := &resp.Topics[i]
		rt.ErrorCode = kerr.RequestTimedOut.Code
		rt.ErrorMessage = strp(fmt.Sprintf("partitions %v of %s are still STOPPING after %v: their leaders go on "+
			"failing them over, and the topic becomes writable when they are done (--describe shows their states)",
			left, rt.Name, stopWait))
	}
	unlock := c.lockMirror(mirror)
	defer unlock()
	if m, err := c.store.GetMirror(mirror); err == nil {
		c.releaseStopped(m, done)
	}
}

// reportFinalEnds sets a stopped topic's report to where each partition's
// copy ended, as its leader persisted it at the stop (LastMirrorOffset,
// what Describe shows from then on), and the lag from it. WHY: the final
// sync noted the log ends of this node's replicas, and of a partition led
// elsewhere that is a follower's, a fetch behind a leader whose fetcher
// ran on until it failed the partition over: the report said the copy was
// further behind than it was, and disagreed with the next Describe.
func (c *Plane) reportFinalEnds(mirror string, rt *mirrorapi.MirrorTopicsResponseTopic) {
	for i := range rt.Partitions {
		sp := &rt.Partitions[i]
		ps := c.partitionState(mirror, rt.Name, sp.PartitionIndex)
		if ps.State != state.StateStopped || ps.LastMirrorOffset < 0 {
			continue
		}
		sp.DestinationOffset = ps.LastMirrorOffset
		if sp.SourceOffset >= 0 {
			sp.Lag = max(sp.SourceOffset-sp.DestinationOffset, 0)
		}
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
