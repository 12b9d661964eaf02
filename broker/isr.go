package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// The ISRs of the partitions this node leads (Kafka's Partition.maybeShrinkIsr
// and maybeExpandIsr): a follower that has not caught up within
// replica.lag.time.max.ms leaves its partition's ISR, one that has caught
// up with the high watermark rejoins it. The leader asks the controller
// (AlterPartition, through cfg.ISR), which fences a stale leader by the
// partition epoch; the answer is the partition's new assignment, in
// force here at once and everywhere once the metadata log applied it.
// While the change is under way the high watermark also waits for the
// followers it adds (Partition.ProposeISR). A dead node leaves the ISRs
// without this: the controller fences it.

// isrChangeWanted asks the ISR loop for a pass now (a follower caught
// up); it never blocks (the fetch path calls it).
func (b *Broker) isrChangeWanted() {
	select {
	case b.isrWake <- struct{}{}:
	default:
	}
}

// isrLoop checks the ISRs every half replica.lag.time.max.ms, as Kafka's
// isr-expiration task, and when a follower caught up, until the broker
// closes.
func (b *Broker) isrLoop() {
	defer b.bg.Done()
	t := time.NewTicker(b.cfg.Replication.LagTimeMax / 2)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // a closing broker gives up the changes under way
		select {
		case <-b.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	refused := map[*partition.Partition]int32{}
	for {
		fromWake := false
		select {
		case <-b.closing:
			return
		case <-t.C:
			clear(refused)
		case <-b.isrWake:
			fromWake = true
		}
		b.checkISRs(ctx, fromWake, refused)
	}
}

// checkISRs asks the controller for every ISR change the partitions this
// node leads want.
//
// A change refused at a partition epoch is not asked again at that epoch
// on a wake (every fetch of a caught-up follower wakes the loop), only at
// the next tick: refused records them.
func (b *Broker) checkISRs(ctx context.Context, fromWake bool, refused map[*partition.Partition]int32) {
	if b.cfg.ISR == nil {
		return
	}
	now, lagMax := time.Now(), b.cfg.Replication.LagTimeMax
	brokers, err := b.store.Brokers()
	if err != nil {
		return
	}
	eligible := map[int32]bool{}
	for _, br := range brokers {
		eligible[br.ID] = !br.Fenced && !br.ShuttingDown
	}
	for _, t := range b.partitions.Topics() {
		for _, p := range t.Partitions() {
			if ctx.Err() != nil {
				return
			}
			ch, ok := p.ISRChanges(now, lagMax, func(id int32) bool { return eligible[id] })
			if e, was := refused[p]; ok && fromWake && was && e == ch.PartitionEpoch {
				continue // refused at this partition epoch: the next assignment, or the next tick
			}
			if !ok {
				continue
			}
			before, _ := p.Assignment() // the ISR the change is from (a reconcile may apply it before the answer)
			if !p.ProposeISR(ch) {      // counted by the high watermark until the answer
				continue // moved on since ISRChanges looked: the next pass
			}
			cctx, cancel := context.WithTimeout(ctx, controllerRPCTimeout)
			a, err := b.cfg.ISR.AlterISR(cctx, t.ID(), p.Index(), ch.LeaderEpoch, ch.PartitionEpoch, ch.ISR, ch.BrokerEpochs)
			cancel()
			if err != nil {
				// Only a refusal that says the change was not made ends
				// the proposal (Kafka's handleAlterPartitionError). Any
				// other answer may follow a change the controller took
				// (a retry after a lost answer meets INVALID_UPDATE_VERSION),
				// so the proposal is counted until the next assignment.
				if isrChangeNotMade(err) {
					p.WithdrawISR(ch)
				}
				refused[p] = ch.PartitionEpoch
				if ok, held := b.warnings.allow("alter-isr", time.Now()); ok {
					b.log.Warn("changing a partition's ISR", "topic", t.Name(), "partition", p.Index(), "isr", ch.ISR,
						"held_back", held, "err", err)
				}
				continue
			}
			b.log.Info("partition ISR changed", "topic", t.Name(), "partition", p.Index(), "isr", a.ISR,
				"partition_epoch", a.PartitionEpoch)
			if a.Replicas == nil {
				cur, _ := p.Assignment()
				a.Replicas = cur.Replicas // AlterPartition's answer does not carry them
			}
			switch {
			case len(a.ISR) < len(before.ISR):
				b.stats.ISRShrinks.Add(1)
			case len(a.ISR) > len(before.ISR):
				b.stats.ISRExpands.Add(1)
			}
			p.SetAssignment(b.cfg.NodeID, assignmentOf(a))
		}
	}
}

// isrChangeNotMade reports the AlterPartition refusals that mean the
// controller did not change the ISR: INELIGIBLE_REPLICA,
// OPERATION_NOT_ATTEMPTED, INVALID_REQUEST.
func isrChangeNotMade(err error) bool {
	return errors.Is(err, kerr.IneligibleReplica) || errors.Is(err, kerr.OperationNotAttempted) ||
		errors.Is(err, kerr.InvalidRequest)
}

// assignmentOf is a's replica set as a partition keeps it.
func assignmentOf(a state.PartitionAssignment) partition.Assignment {
	return partition.Assignment{Leader: a.Leader, LeaderEpoch: a.LeaderEpoch, PartitionEpoch: a.PartitionEpoch,
		Replicas: a.Replicas, ISR: a.ISR}
}
