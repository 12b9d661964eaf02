package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
	"github.com/kmirror/kmirror/txn"
)

// Transaction state lives in __transaction_state, as in Kafka: the
// coordinator of a transactional id is the leader of the partition the id
// hashes to (coordinator_log.go); every change of an id's record is
// appended there as Kafka's record (txn/records.go) and waits until the
// partition's in-sync replicas hold it, then is written to the node's
// Badger store too. A node that starts leading a partition reads it and
// hands its records to the coordinator (txn.Coordinator.Load), which
// finishes the transactions decided there and not completed; one that
// stops leading it drops them.
//
// The topic is created by the first FindCoordinator (or request) for a
// transactional id: transaction.state.log.num.partitions (50),
// transaction.state.log.replication.factor (3, fewer while fewer brokers
// are usable), min.insync.replicas transaction.state.log.min.isr (2,
// capped by the replication factor), compacted. The first load of each
// partition moves the Badger records the log does not hold into it (a
// node upgraded in place keeps its transactions).
//
// Kafka's record has no place for the groups and offsets an older
// kmirror kept in a transaction's record; a Badger record holding them
// lends them to the log's record of the same producer, epoch and state,
// so that such a transaction still commits its offsets after a restart.

// Kafka's defaults for the transaction state topic.
const (
	DefaultTransactionTopicPartitions        = 50
	DefaultTransactionTopicReplicationFactor = 3
	DefaultTransactionTopicMinISR            = 2
)

// txnLog is the transaction coordinator's txn.Store on
// __transaction_state, and what it does with the partitions its
// coordinatorLog follows.
type txnLog struct {
	*coordinatorLog
	store *state.Store
	// stored reads the records in Badger once per follow pass.
	stored func() ([]state.Txn, error)
}

var _ txn.Store = (*txnLog)(nil)

func newTxnLog(b *Broker, store *state.Store) *txnLog {
	tl := &txnLog{store: store}
	tl.coordinatorLog = newCoordinatorLog(b, meta.TransactionTopic, tl)
	return tl
}

// pass reads the records in Badger once, at their first use in the pass.
func (tl *txnLog) pass() { tl.stored = readOnce(tl.store.Txns) }

// load reads partition p and hands its records to the coordinator.
func (tl *txnLog) load(p *partition.Partition, n int, lead partition.Leadership) error {
	recs := txn.Records{}
	end, err := replay(p, recs.ApplyBatch)
	if err != nil {
		return err
	}
	stored, err := tl.stored()
	if err != nil {
		return err
	}
	belongs := belongsTo(p.Index(), n)
	var moved []batch.Record
	for _, s := range stored {
		if !belongs(s.ID) {
			continue
		}
		t, ok := recs[s.ID]
		switch {
		case !ok:
			moved = append(moved, txn.Record(s))
			recs[s.ID] = s
		case len(s.Groups)+len(s.Offsets) > 0 && t.ProducerID == s.ProducerID && t.Epoch == s.Epoch && t.State == s.State:
			t.Groups, t.Offsets = s.Groups, s.Offsets
			recs[s.ID] = t
		}
	}
	if len(moved) > 0 {
		if err := tl.write(p, lead, batch.AppendRecords(nil, time.Now().UnixMilli(), moved), p.AppendProduce,
			kerr.CoordinatorNotAvailable); err != nil {
			return err
		}
		tl.b.log.Info("moved transactional ids kept by this node alone into __transaction_state", "partition", p.Index(),
			"ids", len(moved), "from_offset", end)
	}
	// Badger holds exactly the partition's records.
	list := make([]state.Txn, 0, len(recs))
	for _, s := range stored {
		if _, ok := recs[s.ID]; belongs(s.ID) && !ok {
			if err := tl.store.DeleteTxn(s.ID); err != nil {
				return err
			}
		}
	}
	for _, t := range recs {
		if err := tl.store.PutTxnLazy(t); err != nil {
			return err
		}
		list = append(list, t)
	}
	// Served from here on: the coordinator's Load completes decided
	// transactions, and their completion is a write to the partition.
	tl.setLoaded(p.Index(), lead)
	tl.b.txns.Load(belongs, list)
	if end > 0 {
		tl.b.log.Info("loaded the transactional ids of a __transaction_state partition", "partition", p.Index(),
			"ids", len(list), "log_end", end)
	}
	return nil
}

func (tl *txnLog) unload(idx int32, n int) { tl.unloadIDs(belongsTo(idx, n)) }

func (tl *txnLog) unloadAll() { tl.unloadIDs(func(string) bool { return true }) }

// unloadIDs drops the ids belongs selects from the coordinator and from
// Badger (they stay in the log).
func (tl *txnLog) unloadIDs(belongs func(string) bool) {
	tl.b.txns.Unload(belongs)
	recs, err := tl.stored()
	for _, t := range recs {
		if err == nil && belongs(t.ID) {
			err = tl.store.DeleteTxn(t.ID)
		}
	}
	if err != nil {
		tl.b.log.Warn("dropping the transactional ids of __transaction_state partitions not led here from the store", "err", err)
	}
}

// The txn.Store methods: to the log first for a write, then Badger (a
// deletion the other way round).

func (tl *txnLog) put(t state.Txn, badger func(state.Txn) error) error {
	p, lead, err := tl.partitionOf(t.ID)
	if err != nil {
		return err
	}
	if p == nil {
		return kerr.CoordinatorNotAvailable // the coordinator answers so until the topic exists
	}
	raw := batch.AppendRecords(nil, time.Now().UnixMilli(), []batch.Record{txn.Record(t)})
	if err := tl.write(p, lead, raw, p.AppendProduce, kerr.CoordinatorNotAvailable); err != nil {
		return err
	}
	return badger(t)
}

func (tl *txnLog) PutTxn(t state.Txn) error     { return tl.put(t, tl.store.PutTxn) }
func (tl *txnLog) PutTxnLazy(t state.Txn) error { return tl.put(t, tl.store.PutTxnLazy) }

func (tl *txnLog) DeleteTxn(id string) error {
	p, lead, err := tl.partitionOf(id)
	if err != nil {
		return err
	}
	if err := tl.store.DeleteTxn(id); err != nil || p == nil {
		return err
	}
	raw := batch.AppendRecords(nil, time.Now().UnixMilli(), []batch.Record{txn.Tombstone(id)})
	return tl.write(p, lead, raw, p.AppendProduce, kerr.CoordinatorNotAvailable)
}

// Txns returns nothing: the records reach the coordinator through Load,
// as this node comes to lead their partitions.
func (tl *txnLog) Txns() ([]state.Txn, error) { return nil, nil }

// txnTopicReady reports whether __transaction_state exists here, and when
// it does not, has it created (createCoordinatorTopic).
func (b *Broker) txnTopicReady() bool {
	return b.txnLog.ready(func() error {
		return b.createCoordinatorTopic(meta.TransactionTopic, b.cfg.TransactionTopicPartitions,
			int(b.cfg.TransactionTopicReplicationFactor), int(b.cfg.TransactionTopicMinISR),
			map[string]string{"unclean.leader.election.enable": "false"})
	})
}
