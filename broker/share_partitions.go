package broker

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/group"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/share"
)

// Share partitions (KIP-932) live on their partition's leader, one per
// share group and partition (package share): ShareFetch acquires their
// records and ShareAcknowledge settles them. Their start offset and
// in-flight window (share.StateBatch) are kept by the group's coordinator
// (group/share_offsets.go): read when a leadership begins, written at
// every acknowledgement, before it is answered. A record acquired and not
// settled under an earlier leadership is delivered again by the next.
//
// A share session (a member's ShareFetch and ShareAcknowledge requests to
// this node) names the partitions the member fetches and numbers its
// requests: epoch 0 opens it, each answer moves it on, -1 closes it and
// releases what the member still holds.

// shareKey names a share partition.
type shareKey struct {
	group     string
	topic     [16]byte
	partition int32
}

// sharePart is a share partition in one leadership of its partition.
type sharePart struct {
	mu        sync.Mutex
	p         *share.Partition
	lead      partition.Leadership
	persisted int64 // the start offset the coordinator holds
	// persistedState is the in-flight window the coordinator holds.
	persistedState []share.StateBatch
	// stateEpoch is the coordinator's state epoch of the partition when
	// it was loaded: writes carry it, and an admin's reset since fences
	// them (the partition is then loaded again).
	stateEpoch int32
	// lockWake wakes the partition's waiting share fetches when its
	// earliest lock ends (armLockWake); at most one runs, due at wakeAt.
	lockWake *time.Timer
	wakeAt   time.Time
}

type shareSessionKey struct{ group, member string }

// shareSession is a member's share session on this node.
type shareSession struct {
	epoch int32
	parts map[shareKey]bool
	used  uint64 // the order of its last request, for eviction
}

// lockWakeSlack is how long after a lock's end its partition's waiters
// are woken: past the deadline, so that the records are available.
const lockWakeSlack = 10 * time.Millisecond

// maxShareSessions bounds the node's share sessions (Kafka's
// group.share.max.share.sessions default): opening one more evicts the
// least recently used, whose member's next request is then
// SHARE_SESSION_NOT_FOUND and opens a new one. A member that vanished
// without closing its session would otherwise keep it forever; the
// records it held are released when their locks end.
const maxShareSessions = 2000

// shares holds the node's share partitions and sessions.
type shares struct {
	mu       sync.Mutex
	parts    map[shareKey]*sharePart
	sessions map[shareSessionKey]*shareSession
	requests uint64 // session requests so far: shareSession.used
}

func newShares() *shares {
	return &shares{parts: map[shareKey]*sharePart{}, sessions: map[shareSessionKey]*shareSession{}}
}

// nextShareEpoch is the session epoch after e (it wraps to 1: 0 opens and
// -1 closes).
func nextShareEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// openSession applies a request's session epoch, checking and moving it
// at once (two requests at one epoch cannot both pass): 0 opens a new
// session (replacing the member's), -1 closes the member's, any other
// must be the session's and moves it on.
func (s *shares) openSession(group, member string, epoch int32) (*shareSession, *kerr.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := shareSessionKey{group, member}
	cur := s.sessions[k]
	s.requests++
	now := s.requests
	switch {
	case epoch == 0:
		if cur == nil && len(s.sessions) >= maxShareSessions {
			s.evictOldest()
		}
		cur = &shareSession{epoch: 1, parts: map[shareKey]bool{}, used: now}
		s.sessions[k] = cur
		return cur, nil
	case cur == nil:
		return nil, kerr.ShareSessionNotFound
	case epoch == -1:
		delete(s.sessions, k)
		return cur, nil
	case epoch != cur.epoch:
		return nil, kerr.InvalidShareSessionEpoch
	}
	cur.epoch, cur.used = nextShareEpoch(epoch), now
	return cur, nil
}

// evictOldest drops the least recently used session. REQUIRES: s.mu held.
func (s *shares) evictOldest() {
	var oldest shareSessionKey
	at := uint64(1<<64 - 1)
	for k, sess := range s.sessions {
		if sess.used < at {
			oldest, at = k, sess.used
		}
	}
	delete(s.sessions, oldest)
}

// track adds k to the session's partitions (or, add false, forgets it).
func (s *shares) track(sess *shareSession, k shareKey, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		sess.parts[k] = true
	} else {
		delete(sess.parts, k)
	}
}

// keys lists the session's partitions, in a stable order.
func (s *shares) keys(sess *shareSession) []shareKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]shareKey, 0, len(sess.parts))
	for k := range sess.parts {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b shareKey) int {
		if c := bytes.Compare(a.topic[:], b.topic[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	return out
}

// shareRequest is what a ShareFetch or ShareAcknowledge is for: its member
// of its group, the sender's authorization, and the group's share
// partition settings, read once for the whole request.
type shareRequest struct {
	group, member string
	az            authzCtx
	cfg           share.Config
}

// shareRequester checks what ShareFetch and ShareAcknowledge share: share
// groups on, a group and a member named, READ on the group.
func (b *Broker) shareRequester(r *request, groupID, memberID *string) (*shareRequest, *kerr.Error) {
	switch {
	case !b.cfg.ShareProtocol():
		return nil, kerr.UnsupportedVersion
	case groupID == nil || *groupID == "" || memberID == nil || *memberID == "":
		return nil, kerr.InvalidRequest
	}
	rq := &shareRequest{group: *groupID, member: *memberID, az: b.authz(r)}
	if !rq.az.group(aclOperationRead, rq.group) {
		return nil, kerr.GroupAuthorizationFailed
	}
	rq.cfg = b.shareConfig(rq.group)
	return rq, nil
}

// shareConfig is the settings of group's share partitions.
func (b *Broker) shareConfig(group string) share.Config {
	return share.Config{LockDuration: b.shareLockDuration(group), DeliveryLimit: int16(b.cfg.GroupShareDeliveryCountLimit),
		MaxLocks: b.cfg.GroupSharePartitionMaxRecordLocks}
}

// sharePartition returns k's share partition, which this node leads as
// p's leader, with the group's settings cfg; a leadership that changed
// since it was made starts it over from the coordinator's state.
func (b *Broker) sharePartition(ctx context.Context, k shareKey, p *partition.Partition, cfg share.Config) (*sharePart, *kerr.Error) {
	lead, ok := p.Leadership()
	if !ok {
		return nil, kerr.NotLeaderForPartition
	}
	b.shares.mu.Lock()
	sp := b.shares.parts[k]
	if sp == nil || sp.lead != lead {
		sp = &sharePart{lead: lead}
		b.shares.parts[k] = sp
	}
	b.shares.mu.Unlock()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.p != nil {
		sp.p.SetConfig(cfg)
		return sp, nil
	}
	o, err := b.readShareStart(ctx, k)
	if err != nil {
		return nil, err
	}
	start, logStart, hw := o.StartOffset, p.LogStartOffset(), p.HighWatermark()
	if start < 0 {
		start = hw
		if b.shareAutoOffsetReset(k.group) == "earliest" {
			start = logStart
		}
	}
	start = max(logStart, min(start, hw))
	// The previous leader's in-flight window goes on: what it accepted
	// is not delivered again, and delivery counts hold.
	sp.p, sp.persisted, sp.persistedState, sp.stateEpoch = share.Restore(cfg, start, o.Batches), -1, nil,
		o.StateEpoch
	// Where it starts is durable before anything is delivered: a new
	// leader must not start later (share.auto.offset.reset=latest
	// moves on) and skip what this one delivered.
	if err := b.persistShareStart(ctx, k, sp); err != nil {
		sp.p = nil
		return nil, err
	}
	return sp, nil
}

// refreshSharePart drops k's share partition when the coordinator's
// state moved past what it was loaded from (an admin reset or deleted its
// start offset, or deleted the group, while it was idle): a member opening
// a session must start where the coordinator says.
func (b *Broker) refreshSharePart(ctx context.Context, k shareKey) {
	b.shares.mu.Lock()
	sp := b.shares.parts[k]
	b.shares.mu.Unlock()
	if sp == nil {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.p == nil {
		return
	}
	o, err := b.readShareStart(ctx, k)
	if err == nil && o.StateEpoch == sp.stateEpoch && (o.StartOffset >= 0 || sp.persisted < 0) {
		return
	}
	b.dropSharePart(k, sp)
}

// dropSharePart forgets sp, k's share partition, so that the next request
// loads it again from the coordinator. REQUIRES: sp.mu held.
func (b *Broker) dropSharePart(k shareKey, sp *sharePart) {
	sp.p = nil
	b.shares.mu.Lock()
	if b.shares.parts[k] == sp {
		delete(b.shares.parts, k)
	}
	b.shares.mu.Unlock()
}

// readShareStart asks the group's coordinator for k's start offset (-1:
// none) and state epoch: at this node, or with ReadShareGroupState at
// another.
func (b *Broker) readShareStart(ctx context.Context, k shareKey) (group.ShareOffset, *kerr.Error) {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.group
	req.Topics = []kmsg.ReadShareGroupStateRequestTopic{{TopicID: k.topic,
		Partitions: []kmsg.ReadShareGroupStateRequestTopicPartition{{Partition: k.partition, LeaderEpoch: -1}}}}
	r, err := b.atGroupCoordinator(ctx, k.group, req, func() kmsg.Response { return b.readShareGroupState(req) })
	if err != nil {
		b.log.Warn("reading a share partition's start offset from its group's coordinator", "group", k.group, "err", err)
		return group.ShareOffset{}, kerr.CoordinatorNotAvailable
	}
	for _, t := range r.(*kmsg.ReadShareGroupStateResponse).Topics {
		for _, p := range t.Partitions {
			if p.Partition != k.partition {
				continue
			}
			if p.ErrorCode != 0 {
				return group.ShareOffset{}, kerr.ErrorForCode(p.ErrorCode).(*kerr.Error)
			}
			o := group.ShareOffset{StartOffset: p.StartOffset, LeaderEpoch: -1, StateEpoch: p.StateEpoch}
			for _, sb := range p.StateBatches {
				o.Batches = append(o.Batches, share.StateBatch{First: sb.FirstOffset, Last: sb.LastOffset, State: sb.DeliveryState,
					DeliveryCount: sb.DeliveryCount})
			}
			return o, nil
		}
	}
	return group.ShareOffset{}, kerr.UnknownServerError
}

// readShareGroupState is ReadShareGroupState at this node's coordinator.
func (b *Broker) readShareGroupState(req *kmsg.ReadShareGroupStateRequest) *kmsg.ReadShareGroupStateResponse {
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewReadShareGroupStateResponseTopic()
		st.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			sp.Partition = rp.Partition
			o, ok, code := b.groups.ShareStart(req.GroupID, rt.TopicID, rp.Partition)
			switch {
			case code != nil:
				sp.ErrorCode = code.Code
			case !ok:
				sp.StartOffset, sp.StateEpoch = -1, 0
			default:
				sp.StartOffset, sp.StateEpoch = o.StartOffset, o.StateEpoch
				for _, b := range o.Batches {
					sp.StateBatches = append(sp.StateBatches, kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch{
						FirstOffset: b.First, LastOffset: b.Last, DeliveryState: b.State, DeliveryCount: b.DeliveryCount})
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// persistShareStart writes sp's start offset and in-flight window to the
// group's coordinator when either changed. REQUIRES: sp.mu held.
func (b *Broker) persistShareStart(ctx context.Context, k shareKey, sp *sharePart) *kerr.Error {
	start, state := sp.p.Start(), sp.p.State()
	if start == sp.persisted && slices.Equal(state, sp.persistedState) {
		return nil
	}
	o := group.ShareOffset{StartOffset: start, LeaderEpoch: sp.lead.LeaderEpoch(), StateEpoch: sp.stateEpoch, Batches: state}
	var code *kerr.Error
	if b.coordinatorError(meta.CoordinatorGroup, k.group) == 0 {
		code = b.groups.SetShareStart(k.group, k.topic, k.partition, o)
	} else {
		code = b.writeShareStartRemote(ctx, k, o)
	}
	switch code {
	case nil:
	case kerr.FencedStateEpoch, kerr.FencedLeaderEpoch, kerr.GroupIDNotFound:
		// Reset, deleted or led elsewhere since: what this node holds
		// is stale, and the next request loads the partition again.
		b.dropSharePart(k, sp)
		return code
	default:
		return code
	}
	sp.persisted, sp.persistedState = start, state
	return nil
}

// writeShareStartRemote is persistShareStart's WriteShareGroupState to
// another node's coordinator.
func (b *Broker) writeShareStartRemote(ctx context.Context, k shareKey, o group.ShareOffset) *kerr.Error {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = k.group
	rp := kmsg.WriteShareGroupStateRequestTopicPartition{Partition: k.partition, LeaderEpoch: o.LeaderEpoch,
		StartOffset: o.StartOffset, StateEpoch: o.StateEpoch}
	for _, b := range o.Batches {
		rp.StateBatches = append(rp.StateBatches, kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{
			FirstOffset: b.First, LastOffset: b.Last, DeliveryState: b.State, DeliveryCount: b.DeliveryCount})
	}
	req.Topics = []kmsg.WriteShareGroupStateRequestTopic{{TopicID: k.topic, Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{rp}}}
	r, err := b.atGroupCoordinator(ctx, k.group, req, func() kmsg.Response { return b.writeShareGroupState(req) })
	if err != nil {
		b.log.Warn("writing a share partition's start offset to its group's coordinator", "group", k.group, "err", err)
		return kerr.CoordinatorNotAvailable
	}
	for _, t := range r.(*kmsg.WriteShareGroupStateResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return kerr.ErrorForCode(p.ErrorCode).(*kerr.Error)
			}
		}
	}
	return nil
}

// acquire reads k's next records for member and acquires up to
// maxRecords of them: the batches that hold them, whole, and the runs of
// offsets acquired.
func (b *Broker) acquire(sp *sharePart, p *partition.Partition, member string, maxRecords, maxBytes int) ([]byte, []share.Acquired, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.p == nil {
		return nil, nil, nil // dropped meanwhile: the next request loads it again
	}
	now := time.Now()
	if ls := p.LogStartOffset(); ls > sp.p.Start() {
		sp.p.SkipTo(ls) // retention took records nobody settled
	}
	from, ok := sp.p.NextRead(now)
	hw := p.HighWatermark()
	if !ok || from >= hw {
		return nil, nil, nil
	}
	raw, _, err := p.Read(from, max(maxBytes, 1), hw, nil)
	if err != nil {
		return nil, nil, err
	}
	var views []batch.Batch
	var bs []share.Batch
	it := batch.NewIterator(raw)
	it.SkipCRC() // the consumer checks what it reads
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		views = append(views, v)
		bs = append(bs, share.Batch{Base: v.BaseOffset(), Last: v.LastOffset(), Control: v.IsControl()})
	}
	if err := it.Err(); err != nil {
		return nil, nil, err
	}
	runs, used := sp.p.Acquire(member, from, bs, maxRecords, now)
	if len(runs) > 0 {
		b.armLockWake(sp, p)
	}
	var records []byte
	for _, i := range used {
		records = append(records, views[i]...)
	}
	return records, runs, nil
}

// armLockWake has p's waiting share fetches woken when sp's earliest lock
// ends: the records are then there to acquire again, and other members'
// long polls take them at once, not at their end. One timer a partition,
// moved earlier when a lock ends sooner, and armed again for the next
// lock when it fires. REQUIRES: sp.mu held.
func (b *Broker) armLockWake(sp *sharePart, p *partition.Partition) {
	end, ok := sp.p.NextLockEnd(time.Now())
	if !ok || (sp.lockWake != nil && !end.Before(sp.wakeAt)) {
		return
	}
	if sp.lockWake != nil {
		sp.lockWake.Stop()
	}
	sp.wakeAt = end
	var t *time.Timer
	t = time.AfterFunc(time.Until(end)+lockWakeSlack, func() {
		sp.mu.Lock() // after armLockWake's caller let go: t is set
		if sp.lockWake == t {
			sp.lockWake = nil
		}
		if sp.p != nil && sp.lockWake == nil {
			b.armLockWake(sp, p)
		}
		sp.mu.Unlock()
		p.WakeWaiters()
	})
	sp.lockWake = t
}

// acknowledge applies one partition's acknowledgement batches for member
// and persists the start offset they moved.
func (b *Broker) acknowledge(ctx context.Context, k shareKey, sp *sharePart, p *partition.Partition, member string,
	acks []shareAck) *kerr.Error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.p == nil {
		return kerr.InvalidRecordState // dropped meanwhile: what the member held is gone
	}
	now := time.Now()
	var first *kerr.Error
	released := false
	for _, a := range acks {
		released = released || slices.Contains(a.types, share.AckRelease)
		if _, err := sp.p.Acknowledge(member, a.first, a.last, a.types, now); err != nil && first == nil {
			first = kerr.InvalidRecordState
			if !errors.Is(err, share.ErrInvalidRecordState) {
				first = kerr.InvalidRequest
			}
		}
	}
	if err := b.persistShareStart(ctx, k, sp); err != nil {
		return err
	}
	if released {
		p.WakeWaiters() // other members' long polls may acquire them now
	}
	return first
}

// shareAck is one acknowledgement batch.
type shareAck struct {
	first, last int64
	types       []int8
}

// releaseShares releases what member holds in the session's partitions
// (the session closed, or forgot them) and persists what moved.
func (b *Broker) releaseShares(ctx context.Context, group, member string, keys []shareKey) {
	for _, k := range keys {
		b.shares.mu.Lock()
		sp := b.shares.parts[k]
		b.shares.mu.Unlock()
		if sp == nil {
			continue
		}
		sp.mu.Lock()
		if sp.p != nil {
			sp.p.ReleaseMember(member)
			if err := b.persistShareStart(ctx, k, sp); err != nil {
				b.log.Warn("persisting a share partition's start offset", "group", group, "partition", k.partition, "err", err)
			}
		}
		sp.mu.Unlock()
		if t := b.partitions.TopicByID(k.topic); t != nil {
			if p := t.Partition(k.partition); p != nil {
				p.WakeWaiters() // what the member held may be acquired by others now
			}
		}
	}
}

// writeShareGroupState is WriteShareGroupState at this node's
// coordinator: the start offsets other nodes' share partitions moved to.
func (b *Broker) writeShareGroupState(req *kmsg.WriteShareGroupStateRequest) *kmsg.WriteShareGroupStateResponse {
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewWriteShareGroupStateResponseTopic()
		st.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			sp.Partition = rp.Partition
			o := group.ShareOffset{StartOffset: rp.StartOffset, LeaderEpoch: rp.LeaderEpoch, StateEpoch: rp.StateEpoch}
			for _, sb := range rp.StateBatches {
				o.Batches = append(o.Batches, share.StateBatch{First: sb.FirstOffset, Last: sb.LastOffset, State: sb.DeliveryState,
					DeliveryCount: sb.DeliveryCount})
			}
			if code := b.groups.SetShareStart(req.GroupID, rt.TopicID, rp.Partition, o); code != nil {
				msg := fmt.Sprintf("setting the start offset of partition %d: %v", rp.Partition, code)
				sp.ErrorCode, sp.ErrorMessage = code.Code, &msg
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
