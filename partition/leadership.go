package partition

import (
	"errors"
	"slices"
	"time"

	"github.com/kmirror/kmirror/storage"
)

// A partition's role changes only under its replica set's transition lock
// (Kafka's leaderIsrUpdateLock): SetAssignment takes it for writing, and
// the writes of each role take it for reading, so a write checks the role
// it was made for and the role cannot change under it. A leader's append
// (AppendProduce) records the leadership it was made in; an acks=all wait
// for it (AwaitCommitted) holds only while the node still leads at that
// epoch, because a node that stopped leading meanwhile may have truncated
// the record away as a follower and then taken the new leader's records
// up to the same offsets. A replica fetcher's append or truncation
// (AsFollower) holds only while the partition is still a follower of the
// leader and epoch it fetched from, so an answer that arrives after the
// node became leader (or followed another leader) writes nothing.

// ErrNotLeader is a leader's write (a produce) to a partition this node
// does not lead: its assignment names another leader, or none.
var ErrNotLeader = errors.New("partition: this node does not lead the partition")

// ErrNotFollowing is a replica fetcher's write to a partition that no
// longer follows the leader and epoch the fetch was for.
var ErrNotFollowing = errors.New("partition: the partition no longer follows that leader at that epoch")

// Leadership is the role a leader's append was made in: the assignment's
// leader epoch, or none for a partition without an assignment (committed
// at every append, on a node alone).
type Leadership struct {
	assigned bool
	epoch    int32
}

// LeaderEpoch is the leader epoch of l, -1 for a partition without an
// assignment.
func (l Leadership) LeaderEpoch() int32 {
	if !l.assigned {
		return -1
	}
	return l.epoch
}

// AppendAsLeader runs write, a leader's append (a produce, a transaction
// marker) stamped with epoch, p's leader epoch, when this node leads p,
// and returns the leadership it ran in; ErrNotLeader when another node
// leads p, or when p's epoch is still below its assignment's (the floor
// is raised at the reconcile that brings the assignment: a batch stamped
// below it would hide the divergence from the previous leader). The
// caller calls Appended after a new (not duplicate) batch.
func (p *Partition) AppendAsLeader(write func(epoch int32) error) (Leadership, error) {
	rs := &p.replicas
	rs.transition.RLock()
	defer rs.transition.RUnlock()
	lead, ok := p.Leadership()
	epoch := p.LeaderEpoch()
	if !ok || lead.assigned && epoch < lead.epoch {
		return lead, ErrNotLeader
	}
	return lead, write(epoch)
}

// AppendProduce appends one client batch (storage.Log.AppendProduce) as
// the leader (AppendAsLeader).
func (p *Partition) AppendProduce(raw []byte) (storage.AppendResult, Leadership, error) {
	var res storage.AppendResult
	lead, err := p.AppendAsLeader(func(epoch int32) (err error) {
		res, err = p.log.AppendProduce(raw, epoch)
		return err
	})
	return res, lead, err
}

// AppendCoordinator appends a batch a coordinator of this node wrote
// (storage.Log.AppendCoordinator) as the leader (AppendAsLeader).
func (p *Partition) AppendCoordinator(raw []byte) (storage.AppendResult, Leadership, error) {
	var res storage.AppendResult
	lead, err := p.AppendAsLeader(func(epoch int32) (err error) {
		res, err = p.log.AppendCoordinator(raw, epoch)
		return err
	})
	return res, lead, err
}

// Leadership is p's current leadership, ok false when another node leads.
func (p *Partition) Leadership() (Leadership, bool) {
	rs := &p.replicas
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.assigned {
		return Leadership{}, true
	}
	return Leadership{assigned: true, epoch: rs.a.LeaderEpoch}, rs.a.Leader == rs.self
}

// Leads reports whether this node leads p and the assignment's leader
// epoch it leads at (the controller's, which a write to the controller
// for p names); -1 and true for a partition without an assignment (a
// node alone leads all of its own).
func (p *Partition) Leads() (leaderEpoch int32, ok bool) {
	lead, ok := p.Leadership()
	if !lead.assigned {
		return -1, true
	}
	return lead.epoch, ok
}

// leads reports whether p is still led here in lead.
func (p *Partition) leads(lead Leadership) bool {
	now, ok := p.Leadership()
	return ok && now == lead
}

// AsFollower runs fn, a replica fetcher's write (AppendReplica,
// TruncateTo, RestartAt), while p follows leader at leaderEpoch and
// cannot change its role; ErrNotFollowing without running it otherwise.
func (p *Partition) AsFollower(leader, leaderEpoch int32, fn func() error) error {
	rs := &p.replicas
	rs.transition.RLock()
	defer rs.transition.RUnlock()
	rs.mu.Lock()
	following := rs.assigned && leader != rs.self && rs.a.Leader == leader && rs.a.LeaderEpoch == leaderEpoch &&
		slices.Contains(rs.a.Replicas, rs.self)
	rs.mu.Unlock()
	if !following {
		return ErrNotFollowing
	}
	return fn()
}

// DropIfNotReplica empties p's log when its assignment no longer lists
// this node among the replicas (a reassignment moved it away), as Kafka
// deletes a removed replica's log; it reports whether it did. The log
// restarts at 0: should the partition come back here, its follower copies
// it from the leader's log start again. Done under the role lock, so no
// write of either role runs meanwhile (neither is allowed a non-replica).
func (p *Partition) DropIfNotReplica() (bool, error) {
	if !p.removedReplica() || p.log.Size() == 0 && p.log.LogEndOffset() == 0 {
		return false, nil // checked without the role lock first: every reconcile asks
	}
	rs := &p.replicas
	rs.transition.Lock()
	defer rs.transition.Unlock()
	if !p.removedReplica() {
		return false, nil
	}
	return true, p.log.TruncateFullyAndStartAt(0)
}

// removedReplica reports whether p's assignment leaves this node out: not
// among the replicas, and neither its leader nor in its ISR (an assignment
// that still names this node there, whatever its replicas say, keeps the
// log: it may be the only copy).
func (p *Partition) removedReplica() bool {
	rs := &p.replicas
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.assigned && !slices.Contains(rs.a.Replicas, rs.self) && rs.a.Leader != rs.self &&
		!slices.Contains(rs.a.ISR, rs.self)
}

// Commit is how an acks=all wait ended.
type Commit int

const (
	// Committed: the high watermark covers the batch, in the leadership
	// it was appended in.
	Committed Commit = iota
	// CommitTimedOut: the timeout (or stop) came first.
	CommitTimedOut
	// CommitLostLeadership: the node stopped leading the partition (or
	// leads it in a newer epoch) before the high watermark covered the
	// batch; it may be gone from the log.
	CommitLostLeadership
)

// AwaitCommitted waits until p's high watermark covers end (an acks=all
// produce of a batch ending before end, appended in lead), the timeout or
// stop, as Kafka's DelayedProduce. On one node Appended ran before, so it
// returns at once; a replicated leader waits here for its in-sync
// replicas. A change of role wakes it (SetAssignment), and it answers
// CommitLostLeadership once p is no longer led here in lead, even when
// the high watermark reached end: those may be another leader's records.
func (p *Partition) AwaitCommitted(end int64, lead Leadership, timeout time.Duration, stop <-chan struct{}) Commit {
	// The high watermark is read before the role: a role still lead
	// after a covering read held all along (an epoch is never led twice,
	// SetAssignment takes no older assignment), so the covering high
	// watermark is this leadership's.
	check := func() (Commit, bool) {
		covered := p.log.HighWatermark() >= end
		switch {
		case !p.leads(lead):
			return CommitLostLeadership, true
		case covered:
			return Committed, true
		}
		return 0, false
	}
	if c, done := check(); done {
		return c
	}
	ch := make(chan struct{}, 1)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		p.Wait(ch)
		// Registered before the check: a raise between the check and the
		// wait signals ch.
		if c, done := check(); done {
			p.Unwait(ch)
			return c
		}
		select {
		case <-ch:
		case <-timer.C:
			p.Unwait(ch)
			if c, done := check(); done {
				return c
			}
			return CommitTimedOut
		case <-stop:
			p.Unwait(ch)
			return CommitTimedOut
		}
	}
}
