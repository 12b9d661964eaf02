package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/meta"
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

// errNoPartition is what a marker's write answers for a partition that no
// longer exists (its topic was deleted): there is nothing to mark, and
// the coordinator moves on, as Kafka drops markers of deleted partitions.
var errNoPartition = errors.New("broker: no such partition")

// errMarkerNotReplicated is a marker the in-sync replicas did not all
// take within txnMarkerTimeout: the coordinator writes it again.
var errMarkerNotReplicated = errors.New("broker: transaction marker not replicated in time")

// txnMarkerTimeout bounds a marker's wait for the in-sync replicas, and
// (with a margin) a WriteTxnMarkers request to another node. The
// coordinator holds its transactions while it writes a transaction's
// markers, and retries what failed at its next check.
const txnMarkerTimeout = 5 * time.Second

// WriteMarkers writes the markers of a transaction's partitions: those
// led here in turn, those led by other nodes with one WriteTxnMarkers
// request to each (at once), as Kafka's TransactionMarkerChannelManager.
func (n txnNode) WriteMarkers(ps []state.TxnPartition, pid int64, epoch int16, commit bool) error {
	b := n.b
	var local []state.TxnPartition
	remote := map[int32][]state.TxnPartition{}
	im := b.image()
	for _, tp := range ps {
		if !b.cfg.Cluster.Several() || im == nil {
			local = append(local, tp)
			continue
		}
		t := im.Topic(tp.Topic)
		switch ip := im.Partition(tp.Topic, tp.Partition); {
		case t == nil && b.partitions.Topic(tp.Topic) == nil, t != nil && ip == nil:
			// Deleted (or never had the partition): nothing to mark.
		case ip == nil || ip.Leader == im.Self():
			local = append(local, tp)
		default:
			remote[ip.Leader] = append(remote[ip.Leader], tp)
		}
	}
	errs := make([]error, 0, len(remote)+1)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id, tps := range remote {
		wg.Go(func() {
			err := n.writeMarkersAt(id, tps, pid, epoch, commit)
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	for _, tp := range local {
		if err := n.writeMarker(tp, pid, epoch, 0, commit); err != nil && !errors.Is(err, errNoPartition) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writeMarkersAt asks node id, the leader of tps, to write their markers.
func (n txnNode) writeMarkersAt(id int32, tps []state.TxnPartition, pid int64, epoch int16, commit bool) error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, commit
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(m.Topics)
			byTopic[tp.Topic] = i
			rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			rt.Topic = tp.Topic
			m.Topics = append(m.Topics, rt)
		}
		m.Topics[i].Partitions = append(m.Topics[i].Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, m)
	ctx, cancel := context.WithTimeout(context.Background(), txnMarkerTimeout+time.Second)
	defer cancel()
	kresp, err := n.b.askNode(ctx, id, "kmirror-txn-markers", txnMarkerTimeout+time.Second, req)
	if err != nil {
		return fmt.Errorf("transaction markers at node %d: %w", id, err)
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	var errs []error
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				switch {
				case rp.ErrorCode == 0:
				case rp.ErrorCode == kerr.UnknownTopicOrPartition.Code && n.b.image().Topic(rt.Topic) == nil:
					// Deleted since: nothing to mark.
				default:
					errs = append(errs, fmt.Errorf("transaction marker on %s-%d at node %d: %w", rt.Topic, rp.Partition, id,
						kerr.ErrorForCode(rp.ErrorCode)))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// writeMarker writes tp's marker here, as its leader.
func (n txnNode) writeMarker(tp state.TxnPartition, pid int64, epoch int16, coordinatorEpoch int32, commit bool) error {
	t := n.b.partitions.Topic(tp.Topic)
	if t == nil {
		return errNoPartition
	}
	return n.writeMarkerOn(t, tp, pid, epoch, coordinatorEpoch, commit)
}

// writeMarkerOn is writeMarker on topic t as looked up: it appends a
// COMMIT or ABORT control batch for pid/epoch at the partition's log end,
// wakes its consumers (read_committed ones see the last stable offset
// move) and waits until the in-sync replicas hold it, as Kafka writes
// markers with acks=all: a marker only the leader held could be lost at
// a leader change after the coordinator counted it written. A marker on
// __consumer_offsets then decides the producer's pending group offsets.
// A topic deleted since (its logs closed under the marker) is a
// partition that no longer exists, as for Kafka: the marker is dropped,
// not retried, or the transaction would never complete.
func (n txnNode) writeMarkerOn(t *partition.Topic, tp state.TxnPartition, pid int64, epoch int16, coordinatorEpoch int32,
	commit bool) error {
	parts := t.Partitions()
	if tp.Partition < 0 || int(tp.Partition) >= len(parts) {
		return errNoPartition
	}
	p := parts[tp.Partition]
	// As a leader's append (the role checked under the role lock): a
	// marker a follower took would be cut at the next divergence.
	var res storage.AppendResult
	lead, err := p.AppendAsLeader(func(le int32) (err error) {
		raw := batch.AppendTxnMarker(nil, batch.TxnMarker{BaseOffset: p.Log().LogEndOffset(), PartitionLeaderEpoch: le,
			Timestamp: time.Now().UnixMilli(), ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coordinatorEpoch,
			Commit: commit})
		// The producer's fencing (its epoch, the coordinator epoch);
		// the one coordinator of the producer writes its markers one
		// at a time, so nothing moves the state in between.
		if _, err := p.Log().Producers().CheckProduce(raw); err != nil {
			return err
		}
		res, err = p.Log().AppendControl(raw, le)
		return err
	})
	if err != nil {
		if errors.Is(err, storage.ErrClosed) && n.b.partitions.Topic(tp.Topic) != t {
			return fmt.Errorf("%w: %s was deleted", errNoPartition, tp.Topic)
		}
		return fmt.Errorf("broker: transaction marker on %s-%d: %w", tp.Topic, tp.Partition, err)
	}
	p.Appended()
	switch p.AwaitCommitted(res.LastOffset+1, lead, txnMarkerTimeout, n.b.closing) {
	case partition.CommitTimedOut:
		return fmt.Errorf("%w: %s-%d", errMarkerNotReplicated, tp.Topic, tp.Partition)
	case partition.CommitLostLeadership:
		return fmt.Errorf("broker: transaction marker on %s-%d: %w", tp.Topic, tp.Partition, partition.ErrNotLeader)
	}
	if tp.Topic == meta.GroupTopic {
		if err := n.b.groupLog.completeTxn(tp.Partition, pid, commit); err != nil {
			return fmt.Errorf("broker: deciding the transaction's offsets in %s-%d: %w", tp.Topic, tp.Partition, err)
		}
	}
	return nil
}

// OffsetsPartition is group's partition of __consumer_offsets: of the
// topic's partitions, or offsets.topic.num.partitions before it exists.
func (n txnNode) OffsetsPartition(group string) state.TxnPartition {
	count := int(n.b.cfg.OffsetsTopicPartitions)
	if t := n.b.image().Topic(meta.GroupTopic); t != nil && len(t.Partitions) > 0 {
		count = len(t.Partitions)
	} else if t := n.b.partitions.Topic(meta.GroupTopic); t != nil && len(t.Partitions()) > 0 {
		count = len(t.Partitions())
	}
	return state.TxnPartition{Topic: meta.GroupTopic, Partition: int32(meta.CoordinatorPartition(group, count))}
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
// are the source's until the failover aborts them. In a cluster only the
// partitions led here are looked at, and a transaction the coordinator
// here does not know is left alone: its coordinator may be another node.
func (b *Broker) repairTxns(now time.Time) {
	seen := map[orphanKey]bool{}
	several := b.cfg.Cluster.Several()
	for _, p := range b.partitions.Partitions() {
		if p.Topic().ReadOnly() {
			continue
		}
		if _, leads := p.Leads(); !leads {
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
				if several {
					continue
				}
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
			if err := (txnNode{b}).writeMarker(tp, o.ProducerID, o.ProducerEpoch, 0, commit); err != nil {
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
