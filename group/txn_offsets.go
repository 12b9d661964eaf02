package group

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// Offsets committed inside a transaction (TxnOffsetCommit) are pending in
// the group, by producer id, until the transaction's marker reaches the
// group's partition of __consumer_offsets (Kafka's
// pendingTransactionalOffsetCommits): a COMMIT marker makes them the
// group's committed offsets, an ABORT drops them. The store writes them
// as a transactional batch of the producer, so a leader that replays the
// partition finds them pending, or decided by the marker after them
// (GroupsState); the marker is written by the transaction coordinator,
// wherever it runs, as to any partition of the transaction.

// TxnCommitCheck validates who commits inside a transaction, as
// OffsetCommit does for members (TxnOffsetCommit v3+ carries the member id
// and generation, KIP-447). A commit without member information (v0-2, or
// generation -1) is accepted: the producer's epoch fences zombies.
func (c *Coordinator) TxnCommitCheck(group, memberID string, instanceID *string, generation int32) *kerr.Error {
	if group == "" {
		return kerr.InvalidGroupID
	}
	g := c.group(group, false)
	if g == nil {
		if generation < 0 && memberID == "" {
			return nil
		}
		return kerr.IllegalGeneration
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.share != nil:
		return kerr.GroupIDNotFound // a share group keeps no committed offsets
	case generation < 0 && memberID == "":
		return nil
	}
	if g.consumer.active() {
		// Kafka's rule for transactional commits: the epoch matches.
		_, err := g.consumerMemberCheck(memberID, generation, false)
		return err
	}
	_, err := g.memberCheck(memberID, instanceID, generation)
	return err
}

// CommitPending records offs as group's offsets pending in the
// transaction of producer pid at epoch; a later commit of the same
// partition in the transaction replaces the earlier one. A failed write
// answers as OffsetCommit's (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE).
func (c *Coordinator) CommitPending(group string, pid int64, epoch int16, offs []state.GroupOffset) *kerr.Error {
	g := c.lockForCommit(group, offs)
	if g == nil {
		return kerr.CoordinatorNotAvailable
	}
	defer g.mu.Unlock()
	if err := c.store.CommitPendingOffsets(group, pid, epoch, offs); err != nil {
		c.log.Warn("storing offsets committed in a transaction", "group", group, "producer_id", pid, "err", err)
		return kerr.ErrorForCode(storeErrorCode(err)).(*kerr.Error)
	}
	g.addPending(pid, offs)
	return nil
}

// lockForCommit returns group name (created when new) locked, with offs
// stamped with the commit time; nil when the coordinator is closed.
func (c *Coordinator) lockForCommit(name string, offs []state.GroupOffset) *Group {
	g := c.group(name, true)
	if g == nil {
		return nil
	}
	g.mu.Lock()
	now := c.cfg.Now().UnixMilli()
	for i := range offs {
		offs[i].CommitTimestamp = now
	}
	return g
}

// addPending adds offs to producer pid's pending offsets. REQUIRES: g.mu
// held.
func (g *Group) addPending(pid int64, offs []state.GroupOffset) {
	if g.txnOffsets == nil {
		g.txnOffsets = map[int64]map[topicPartition]state.GroupOffset{}
	}
	m := g.txnOffsets[pid]
	if m == nil {
		m = map[topicPartition]state.GroupOffset{}
		g.txnOffsets[pid] = m
	}
	for _, o := range offs {
		m[topicPartition{o.Topic, o.Partition}] = o
	}
}

// supersedePending drops tp from every open transaction's pending
// offsets: a plain commit after a transactional one wins whatever the
// transaction decides later, as in Kafka (the record appended last is the
// partition's offset). REQUIRES: g.mu held.
func (g *Group) supersedePending(tp topicPartition) {
	for _, offs := range g.txnOffsets {
		delete(offs, tp)
	}
}

// CompleteTxn ends producer pid's transaction in the groups belongs
// selects (those of the __consumer_offsets partition its marker was just
// written to): on commit their pending offsets become committed (and are
// written to the store's copy, the log holds the decision already),
// else they are dropped.
func (c *Coordinator) CompleteTxn(belongs func(group string) bool, pid int64, commit bool) error {
	c.mu.Lock()
	var gs []*Group
	for name, g := range c.groups {
		if belongs(name) {
			gs = append(gs, g)
		}
	}
	c.mu.Unlock()
	var first error
	for _, g := range gs {
		g.mu.Lock()
		offs, ok := g.txnOffsets[pid]
		delete(g.txnOffsets, pid)
		if ok && commit {
			for tp, o := range offs {
				g.offsets[tp] = o
			}
			if err := c.store.MaterializeOffsets(g.name, slices.Collect(maps.Values(offs))); err != nil && first == nil {
				first = err
			}
		}
		g.mu.Unlock()
	}
	return first
}

// PendingPartitions lists the partitions of group that an undecided
// transaction has offsets for (OffsetFetch with RequireStable answers them
// UNSTABLE_OFFSET_COMMIT, KIP-447).
func (c *Coordinator) PendingPartitions(group string) map[state.TxnPartition]bool {
	g := c.group(group, false)
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var out map[state.TxnPartition]bool
	for _, offs := range g.txnOffsets {
		for tp := range offs {
			if out == nil {
				out = map[state.TxnPartition]bool{}
			}
			out[state.TxnPartition{Topic: tp.topic, Partition: tp.partition}] = true
		}
	}
	return out
}

// CommitTransactional stores the offsets of a transaction decided before
// the node kept them pending in the group (a transaction record of an
// older kmirror holds them; txn.Coordinator commits them when it finishes
// the transaction). The group's members do not matter: the commit was
// checked when it was made and the transaction's decision is final.
func (c *Coordinator) CommitTransactional(group string, offs []state.GroupOffset) error {
	g := c.lockForCommit(group, offs)
	if g == nil {
		return kerr.CoordinatorNotAvailable
	}
	defer g.mu.Unlock()
	if err := c.store.CommitOffsets(group, offs); err != nil {
		return err
	}
	for _, o := range offs {
		g.offsets[topicPartition{o.Topic, o.Partition}] = o
	}
	return nil
}
