package partition

import (
	"slices"
	"sync"
	"time"

	"github.com/kmirror/kmirror/batch"
)

// A partition's replica set, as Kafka's Partition keeps it (DESIGN.md
// "The cluster"): the controller's assignment (leader, epochs, replicas,
// ISR), and on the leader each follower's progress, from which the high
// watermark moves (the smallest log end in the ISR) and the ISR is kept
// (a follower that has not caught up within replica.lag.time.max.ms
// leaves it, one caught up with the high watermark rejoins: ISRChanges).
//
// A partition with no assignment, or whose ISR is this node alone, is
// committed at every append, as on a single node: Appended raises the
// high watermark to the log end. A follower's high watermark is its
// leader's, as far as its own log reaches (AppendReplica).

// Assignment is a partition's replica set as the metadata log holds it.
type Assignment struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
}

// followerProgress is what the leader knows of one follower: its log end
// (the offset of its last fetch, -1 before one in this leadership), when
// it last fetched and the leader's log end then, and when it was last
// caught up with the leader's log end (Kafka's Replica fetch state).
type followerProgress struct {
	// brokerEpoch is the follower's broker epoch its last fetch named
	// (-1: unknown), sent with an ISR change that takes it in (KIP-903:
	// the controller refuses an incarnation that is not the registered one).
	brokerEpoch     int64
	logEnd          int64
	lastFetch       time.Time
	leaderEndAtLast int64
	lastCaughtUp    time.Time
}

// replicaSet is a partition's assignment and, on its leader, its
// followers' progress and the ISR it has asked the controller for;
// guarded by mu. The role changes under transition too (leadership.go).
type replicaSet struct {
	transition sync.RWMutex

	mu sync.Mutex
	// assigned is false for a partition without an assignment (a node
	// alone, or a topic a single node held before its metadata log).
	assigned  bool
	self      int32
	a         Assignment
	followers map[int32]*followerProgress
	// pending is the ISR an AlterPartition under way asks for (nil when
	// none): until the controller answers, the high watermark counts its
	// members too (Kafka's maximal ISR), since the controller may already
	// have made a joining follower electable.
	pending []int32
}

// SetAssignment records p's assignment for node self, from the metadata
// log or an AlterPartition answer. An assignment older than p's (a lower
// leader epoch, or partition epoch at the same leader epoch: a reconcile
// that read the store before the answer applied) is ignored, so a role
// and an ISR never go back. Becoming leader (or a new leader epoch)
// starts the followers' progress afresh: their log ends are unknown until
// they fetch, and the ISR members count as caught up now, so that none
// leaves the ISR before it had replica.lag.time.max.ms to fetch (Kafka's
// makeLeader). A change of role wakes the acks=all waits, which end
// there (AwaitCommitted).
func (p *Partition) SetAssignment(self int32, a Assignment) {
	rs := &p.replicas
	rs.mu.Lock()
	same := rs.assigned && rs.self == self && sameAssignment(rs.a, a)
	rs.mu.Unlock()
	if same {
		return // every reconcile sets every assignment: no role lock for none changed
	}
	rs.transition.Lock()
	defer rs.transition.Unlock()
	rs.mu.Lock()
	if rs.assigned && olderAssignment(a, rs.a) {
		rs.mu.Unlock()
		return
	}
	roleChanged := !rs.assigned || rs.a.Leader != a.Leader || rs.a.LeaderEpoch != a.LeaderEpoch
	newLeadership := a.Leader == self && roleChanged
	if roleChanged || rs.a.PartitionEpoch != a.PartitionEpoch {
		rs.pending = nil
	}
	rs.assigned, rs.self = true, self
	rs.a = Assignment{Leader: a.Leader, LeaderEpoch: a.LeaderEpoch, PartitionEpoch: a.PartitionEpoch,
		Replicas: slices.Clone(a.Replicas), ISR: slices.Clone(a.ISR)}
	switch {
	case a.Leader != self:
		rs.followers = nil
	case !newLeadership:
		// Same leadership, other replicas (a reassignment): new ones are
		// unknown until they fetch, gone ones are forgotten.
		for _, id := range a.Replicas {
			if id != self && rs.followers[id] == nil {
				rs.followers[id] = &followerProgress{brokerEpoch: -1, logEnd: -1, leaderEndAtLast: -1}
			}
		}
		for id := range rs.followers {
			if !slices.Contains(a.Replicas, id) {
				delete(rs.followers, id)
			}
		}
	default:
		now := time.Now()
		rs.followers = map[int32]*followerProgress{}
		for _, id := range a.Replicas {
			if id != self {
				fp := &followerProgress{brokerEpoch: -1, logEnd: -1, leaderEndAtLast: -1}
				if slices.Contains(a.ISR, id) {
					fp.lastCaughtUp = now
				}
				rs.followers[id] = fp
			}
		}
	}
	rs.mu.Unlock()
	p.advanceHighWatermark() // an ISR that shrank may let it move
	if roleChanged {
		p.wake()
	}
}

// sameAssignment reports whether a and b are the same assignment.
func sameAssignment(a, b Assignment) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch &&
		slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR)
}

// olderAssignment reports whether a is older than cur: a lower leader
// epoch, or a lower partition epoch in the same leader epoch (the
// controller raises one or the other at every change).
func olderAssignment(a, cur Assignment) bool {
	return a.LeaderEpoch < cur.LeaderEpoch || a.LeaderEpoch == cur.LeaderEpoch && a.PartitionEpoch < cur.PartitionEpoch
}

// ClearAssignment makes p a partition without an assignment again.
func (p *Partition) ClearAssignment() {
	rs := &p.replicas
	rs.transition.Lock()
	defer rs.transition.Unlock()
	rs.mu.Lock()
	rs.assigned, rs.followers, rs.pending = false, nil, nil
	rs.mu.Unlock()
	p.advanceHighWatermark()
	p.wake()
}

// ProposeISR records the ISR an AlterPartition from ch asks for, until
// the answer's assignment (SetAssignment) or WithdrawISR: the high
// watermark counts its members meanwhile. It reports false, recording
// nothing, when the change must not be sent: p's assignment is no longer
// the one ch was made from, or a follower ch adds no longer holds the
// high watermark (other followers' fetches moved it since ISRChanges
// looked: one taken in now would be electable without committed
// records). Checked and recorded under the lock the high watermark moves
// under, so no advance falls between. The members of a proposal still
// unanswered (a timeout: the controller may have taken it) stay counted.
func (p *Partition) ProposeISR(ch ISRChange) bool {
	rs := &p.replicas
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.assigned || rs.a.LeaderEpoch != ch.LeaderEpoch || rs.a.PartitionEpoch != ch.PartitionEpoch {
		return false
	}
	for _, id := range ch.ISR {
		if id == rs.self || slices.Contains(rs.a.ISR, id) {
			continue
		}
		if fp := rs.followers[id]; fp == nil || fp.logEnd < p.log.HighWatermark() {
			return false
		}
	}
	for _, id := range ch.ISR {
		if !slices.Contains(rs.pending, id) {
			rs.pending = append(rs.pending, id)
		}
	}
	return true
}

// WithdrawISR forgets the ISR proposed from ch: the controller refused it
// for good (the caller decides which answers are final).
func (p *Partition) WithdrawISR(ch ISRChange) {
	rs := &p.replicas
	rs.mu.Lock()
	if rs.a.LeaderEpoch == ch.LeaderEpoch && rs.a.PartitionEpoch == ch.PartitionEpoch {
		rs.pending = nil
	}
	rs.mu.Unlock()
	p.advanceHighWatermark()
}

// inMaximalISR reports whether id is in the ISR or in the one asked for.
// REQUIRES: rs.mu held.
func (rs *replicaSet) inMaximalISR(id int32) bool {
	return slices.Contains(rs.a.ISR, id) || slices.Contains(rs.pending, id)
}

// Assignment is p's assignment, ok false without one.
func (p *Partition) Assignment() (a Assignment, ok bool) {
	rs := &p.replicas
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.assigned {
		return Assignment{}, false
	}
	a = rs.a
	a.Replicas, a.ISR = slices.Clone(a.Replicas), slices.Clone(a.ISR)
	return a, true
}

// ISRSize is the number of in-sync replicas (1 without an assignment):
// acks=all needs min.insync.replicas of them.
func (p *Partition) ISRSize() int {
	rs := &p.replicas
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.assigned {
		return 1
	}
	return len(rs.a.ISR)
}

// ReplicaFetched records a follower's fetch at offset (its log end), from
// its incarnation brokerEpoch (-1 unknown), on the leader, and moves the high watermark when the follower is in the
// ISR. A fetch from a node that is not a follower of p, or on a node
// that does not lead p, is ignored. It reports whether the follower,
// outside the ISR, is now caught up enough to rejoin it (ISRChanges).
func (p *Partition) ReplicaFetched(replica int32, brokerEpoch, offset int64, now time.Time) (rejoin bool) {
	rs := &p.replicas
	rs.mu.Lock()
	fp := rs.followers[replica]
	if fp == nil || !rs.assigned || rs.a.Leader != rs.self {
		rs.mu.Unlock()
		return false
	}
	leaderEnd := p.log.LogEndOffset()
	switch {
	case offset >= leaderEnd:
		fp.lastCaughtUp = later(fp.lastCaughtUp, now)
	case offset >= fp.leaderEndAtLast && fp.leaderEndAtLast >= 0:
		fp.lastCaughtUp = later(fp.lastCaughtUp, fp.lastFetch)
	}
	fp.logEnd, fp.lastFetch, fp.leaderEndAtLast, fp.brokerEpoch = offset, now, leaderEnd, brokerEpoch
	inISR := slices.Contains(rs.a.ISR, replica)
	rejoin = !inISR && p.mayRejoin(offset)
	counts := rs.inMaximalISR(replica)
	rs.mu.Unlock()
	if counts {
		p.advanceHighWatermark()
	}
	return rejoin
}

// mayRejoin reports whether a follower at log end offset may rejoin the
// ISR: it holds the high watermark and everything of the current leader
// epoch before it (Kafka's isFollowerInSync).
func (p *Partition) mayRejoin(offset int64) bool {
	return offset >= p.log.HighWatermark() && offset >= p.epochStart()
}

// epochStart is the first offset of the leader's current epoch in its
// log (its log end when it has appended nothing in that epoch yet).
func (p *Partition) epochStart() int64 {
	if e, ok := p.log.Epochs().Latest(); ok && e.Epoch >= p.replicas.a.LeaderEpoch {
		return e.StartOffset
	}
	return p.log.LogEndOffset()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// advanceHighWatermark raises the high watermark to the smallest log end
// in the maximal ISR (the ISR and the one asked for; the log end itself
// on a partition committed at every append), and wakes the waiters when
// it moved. A follower's is left to AppendReplica.
func (p *Partition) advanceHighWatermark() {
	rs := &p.replicas
	rs.mu.Lock()
	hw := p.log.LogEndOffset()
	if rs.assigned {
		if rs.a.Leader != rs.self {
			rs.mu.Unlock()
			return
		}
		// The ISR and the one asked for, without a slice built per call:
		// this runs at every append and every follower fetch.
		for _, ids := range [2][]int32{rs.a.ISR, rs.pending} {
			for _, id := range ids {
				if id == rs.self {
					continue
				}
				fp := rs.followers[id]
				if fp == nil || fp.logEnd < 0 {
					rs.mu.Unlock()
					return // not heard from yet in this leadership
				}
				hw = min(hw, fp.logEnd)
			}
		}
	}
	// Set under rs.mu: a value computed before a ProposeISR must not be
	// stored after it (rs.mu before the log's lock, never the reverse).
	moved := p.log.SetHighWatermark(hw)
	rs.mu.Unlock()
	if moved {
		p.wake()
	}
}

// ISRChange is an ISR the leader asks the controller for. BrokerEpochs
// are its members' broker epochs, in ISR's order: a joining follower's as
// its last fetch named it, -1 (not checked) for the others.
type ISRChange struct {
	LeaderEpoch, PartitionEpoch int32
	ISR                         []int32
	BrokerEpochs                []int64
}

// ISRChanges is the ISR change p's leader should ask for now, ok false
// when none: the ISR without the followers that have not caught up
// within lagMax (replica.lag.time.max.ms), with the followers outside it
// that are caught up (mayRejoin), fetched within lagMax and eligible
// (registered, unfenced and not shutting down: Kafka's
// isReplicaIsrEligible; the controller refuses the others). The leader
// stays in its ISR.
func (p *Partition) ISRChanges(now time.Time, lagMax time.Duration, eligible func(id int32) bool) (ISRChange, bool) {
	rs := &p.replicas
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.assigned || rs.a.Leader != rs.self {
		return ISRChange{}, false
	}
	var isr []int32
	var epochs []int64
	keep := func(id int32, epoch int64) { isr, epochs = append(isr, id), append(epochs, epoch) }
	changed := false
	for _, id := range rs.a.Replicas {
		fp := rs.followers[id]
		inISR := slices.Contains(rs.a.ISR, id)
		switch {
		case id == rs.self:
			keep(id, -1)
			changed = changed || !inISR
		case fp == nil:
			if inISR {
				keep(id, -1)
			}
		case inISR && now.Sub(fp.lastCaughtUp) > lagMax:
			changed = true // out of sync: leaves
		case inISR:
			keep(id, -1)
		case fp.logEnd >= 0 && p.mayRejoin(fp.logEnd) && now.Sub(fp.lastFetch) <= lagMax && eligible(id):
			keep(id, fp.brokerEpoch)
			changed = true
		}
	}
	if !changed {
		return ISRChange{}, false
	}
	return ISRChange{LeaderEpoch: rs.a.LeaderEpoch, PartitionEpoch: rs.a.PartitionEpoch, ISR: isr, BrokerEpochs: epochs}, true
}

// AppendReplica appends a follower's fetch from its leader: batches
// verified by the caller, at the leader's offsets, then the high
// watermark the leader sent as far as this log reaches, and the leader's
// log start when it moved up. The high watermark goes first (Kafka's
// processPartitionData order): the log start never passes it, and the
// leader's log start is at most the leader's high watermark, which this
// log may not have had yet (a follower's lags one fetch behind).
func (p *Partition) AppendReplica(batches []byte, leaderHW, leaderLogStart int64) error {
	if len(batches) > 0 {
		if _, err := p.log.AppendMirror(batches); err != nil {
			return err
		}
	}
	return p.replicaAppended(len(batches) > 0, leaderHW, leaderLogStart)
}

// AppendReplicaChunk is AppendReplica for batches whose walk collected
// their summary (batch.Iterator.Collect): the log walks no header again.
func (p *Partition) AppendReplicaChunk(c *batch.Chunk, leaderHW, leaderLogStart int64) error {
	if c.Len() > 0 {
		if _, err := p.log.AppendChunk(c); err != nil {
			return err
		}
	}
	return p.replicaAppended(c.Len() > 0, leaderHW, leaderLogStart)
}

// TruncateReplicaTo cuts a follower's log back to offset (a divergence
// from its leader); RestartReplicaAt empties it and restarts it at offset
// (the leader's log start moved past it). A replica fetcher calls them in
// AsFollower, which holds the role; the mirror writes of the same name
// (TruncateTo, RestartAt) are a leader's.
func (p *Partition) TruncateReplicaTo(offset int64) error { return p.log.TruncateTo(offset) }
func (p *Partition) RestartReplicaAt(offset int64) error {
	return p.log.TruncateFullyAndStartAt(offset)
}

// replicaAppended takes the leader's high watermark and log start after
// a follower's append (appended: it wrote batches).
func (p *Partition) replicaAppended(appended bool, leaderHW, leaderLogStart int64) error {
	moved := p.log.SetHighWatermark(min(leaderHW, p.log.LogEndOffset()))
	if moved || appended {
		p.wake()
	}
	if leaderLogStart > p.log.LogStartOffset() && leaderLogStart <= p.log.LogEndOffset() {
		if err := p.log.SetLogStartOffset(leaderLogStart); err != nil {
			return err
		}
	}
	return nil
}
