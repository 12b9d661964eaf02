package group

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// Offsets committed inside transactions (TxnOffsetCommit) are held by the
// transaction coordinator (txn/) until the transaction ends; these two
// methods are the group's side of it.

// TxnCommitCheck validates who commits inside a transaction, as
// OffsetCommit does for members (TxnOffsetCommit v3+ carries the member id
// and generation, KIP-447). A commit without member information (v0-2, or
// generation -1) is accepted: the producer's epoch fences zombies.
func (c *Coordinator) TxnCommitCheck(group, memberID string, instanceID *string, generation int32) *kerr.Error {
	if group == "" {
		return kerr.InvalidGroupID
	}
	if generation < 0 && memberID == "" {
		return nil
	}
	g := c.group(group, false)
	if g == nil {
		return kerr.IllegalGeneration
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, err := g.memberCheck(memberID, instanceID, generation)
	return err
}

// CommitTransactional stores the offsets of a committed transaction. The
// group's members do not matter: the commit was checked when it was made
// and the transaction's decision is final.
func (c *Coordinator) CommitTransactional(group string, offs []state.GroupOffset) error {
	g := c.group(group, true)
	if g == nil {
		return kerr.CoordinatorNotAvailable
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := c.cfg.Now().UnixMilli()
	for i := range offs {
		offs[i].CommitTimestamp = now
	}
	if err := c.store.CommitOffsets(group, offs); err != nil {
		return err
	}
	for _, o := range offs {
		g.offsets[topicPartition{o.Topic, o.Partition}] = o
	}
	return nil
}
