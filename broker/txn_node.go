package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
	"github.com/kmirror/kmirror/storage"
	"github.com/kmirror/kmirror/txn"
)

// txnNode is the broker as the transaction coordinator (txn/) sees it:
// where markers go, where committed transactional offsets go, and where
// producer ids come from.
type txnNode struct{ b *Broker }

var _ txn.Node = txnNode{}

// WriteMarker appends a COMMIT or ABORT control batch for pid/epoch at the
// partition's log end and wakes its consumers (read_committed ones see
// the last stable offset move).
func (n txnNode) WriteMarker(tp state.TxnPartition, pid int64, epoch int16, commit bool) error {
	t := n.b.partitions.Topic(tp.Topic)
	if t == nil {
		return txn.ErrNoPartition
	}
	return n.writeMarkerOn(t, tp, pid, epoch, commit)
}

// writeMarkerOn is WriteMarker on topic t as looked up. A topic deleted
// since (its logs closed under the marker) is a partition that no longer
// exists, as for Kafka: the marker is dropped, not retried, or the
// transaction would never complete.
func (n txnNode) writeMarkerOn(t *partition.Topic, tp state.TxnPartition, pid int64, epoch int16, commit bool) error {
	parts := t.Partitions()
	if tp.Partition < 0 || int(tp.Partition) >= len(parts) {
		return txn.ErrNoPartition
	}
	p := parts[tp.Partition]
	// As a leader's append (the role checked under the role lock): a
	// marker a follower took would be cut at the next divergence.
	_, err := p.AppendAsLeader(func(le int32) error {
		raw := batch.AppendTxnMarker(nil, batch.TxnMarker{BaseOffset: p.Log().LogEndOffset(), PartitionLeaderEpoch: le,
			Timestamp: time.Now().UnixMilli(), ProducerID: pid, ProducerEpoch: epoch, Commit: commit})
		_, err := p.Log().AppendControl(raw, le)
		return err
	})
	if err != nil {
		if errors.Is(err, storage.ErrClosed) && n.b.partitions.Topic(tp.Topic) != t {
			return fmt.Errorf("%w: %s was deleted", txn.ErrNoPartition, tp.Topic)
		}
		return fmt.Errorf("broker: transaction marker on %s-%d: %w", tp.Topic, tp.Partition, err)
	}
	p.Appended()
	return nil
}

// CommitOffsets stores a committed transaction's offsets for a group.
func (n txnNode) CommitOffsets(group string, offs []state.TxnOffset) error {
	out := make([]state.GroupOffset, len(offs))
	for i, o := range offs {
		out[i] = state.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	return n.b.groups.CommitTransactional(group, out)
}

// AllocateProducerID shares the idempotent producers' allocator.
func (n txnNode) AllocateProducerID() (int64, error) { return n.b.pids.allocate() }

// repairTxns resolves the transactions writable partitions hold open that
// the coordinator is not going to end (txn.Coordinator.Resolve), so
// read_committed consumers never wait on them: a marker lost after its
// decision was fsynced is written again; an orphaned transaction (no
// transactional id owns its producer id any more) is aborted once it has
// been open longer than transaction.max.timeout.ms, the longest any live
// transaction may run. Mirror topics are skipped: their open transactions
// are the source's until the failover aborts them.
func (b *Broker) repairTxns(now time.Time) {
	seen := map[orphanKey]bool{}
	for _, p := range b.partitions.Partitions() {
		if p.Topic().ReadOnly() {
			continue
		}
		tp := state.TxnPartition{Topic: p.Topic().Name(), Partition: p.Index()}
		for _, o := range p.Log().Producers().OngoingTxns() {
			key := orphanKey{tp, o.ProducerID, o.FirstOffset}
			var commit bool
			switch b.txns.Resolve(tp, o.ProducerID, o.ProducerEpoch) {
			case txn.Keep:
				continue
			case txn.Commit:
				commit = true
			case txn.Abort:
			case txn.Unknown:
				seen[key] = true
				first, ok := b.orphans[key]
				if !ok {
					b.orphans[key] = now
					continue
				}
				if now.Sub(first) < b.cfg.Transactions.MaxTimeout {
					continue
				}
			}
			b.log.Info("ending a transaction the coordinator will not end", "topic", tp.Topic, "partition", tp.Partition,
				"producer_id", o.ProducerID, "first_offset", o.FirstOffset, "commit", commit)
			if err := (txnNode{b}).WriteMarker(tp, o.ProducerID, o.ProducerEpoch, commit); err != nil {
				b.log.Warn("ending an orphaned transaction", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
		}
	}
	for k := range b.orphans {
		if !seen[k] {
			delete(b.orphans, k)
		}
	}
}

// orphanKey names one open transaction of one partition.
type orphanKey struct {
	tp          state.TxnPartition
	pid         int64
	firstOffset int64
}
