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
// records and ShareAcknowledge settles them. Their start offset is kept
// by the group's coordinator (group/share_offsets.go): read when a
// leadership begins, written whenever an acknowledgement moves it, before
// the acknowledgement is answered. Records past the start offset that
// were acquired or settled under an earlier leadership are delivered
// again by the next one.
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
}

type shareSessionKey struct{ group, member string }

// shareSession is a member's share session on this node.
type shareSession struct {
	epoch int32
	parts map[shareKey]bool
	used  uint64 // the order of its last request, for eviction
}

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

// openSession applies a request's session epoch: 0 opens a new session
// (replacing the member's), -1 and others must match the session's.
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
		cur = &shareSession{epoch: 0, parts: map[shareKey]bool{}, used: now}
		s.sessions[k] = cur
		return cur, nil
	case cur == nil:
		return nil, kerr.ShareSessionNotFound
	case epoch != -1 && epoch != cur.epoch:
		return nil, kerr.InvalidShareSessionEpoch
	}
	cur.used = now
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

// closeOrAdvance ends a request of the session: -1 removes it, any other
// epoch moves it on.
func (s *shares) closeOrAdvance(group, member string, sess *shareSession, epoch int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch == -1 {
		delete(s.sessions, shareSessionKey{group, member})
		return
	}
	sess.epoch = nextShareEpoch(epoch)
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

// shareConfig is the settings of group's share partitions.
func (b *Broker) shareConfig(group string) share.Config {
	return share.Config{LockDuration: b.shareLockDuration(group), DeliveryLimit: int16(b.cfg.GroupShareDeliveryCountLimit),
		MaxLocks: b.cfg.GroupSharePartitionMaxRecordLocks}
}

// sharePartition returns k's share partition, which this node leads as
// p's leader; a leadership that changed since it was made starts it over
// from the coordinator's start offset.
func (b *Broker) sharePartition(ctx context.Context, k shareKey, p *partition.Partition) (*sharePart, *kerr.Error) {
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
		sp.p.SetConfig(b.shareConfig(k.group))
		return sp, nil
	}
	start, found, err := b.readShareStart(ctx, k, p.Topic().Name())
	if err != nil {
		return nil, err
	}
	logStart, hw := p.LogStartOffset(), p.HighWatermark()
	if !found {
		start = hw
		if b.shareAutoOffsetReset(k.group) == "earliest" {
			start = logStart
		}
	}
	start = max(logStart, min(start, hw))
	sp.p, sp.persisted = share.New(b.shareConfig(k.group), start), -1
	if err := b.persistShareStart(ctx, k, sp); err != nil {
		sp.p = nil
		return nil, err
	}
	return sp, nil
}

// readShareStart asks the group's coordinator for k's start offset.
func (b *Broker) readShareStart(ctx context.Context, k shareKey, topic string) (int64, bool, *kerr.Error) {
	if b.coordinatorError(meta.CoordinatorGroup, k.group) == 0 {
		o, ok, err := b.groups.ShareStart(k.group, k.topic, k.partition)
		return o.StartOffset, ok, err
	}
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	req.Version = 1
	req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: k.group,
		Topics: []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: topic, Partitions: []int32{k.partition}}}}}
	r, err := b.atGroupCoordinator(ctx, k.group, req, func() kmsg.Response { return b.groups.DescribeShareGroupOffsets(req) })
	if err != nil {
		b.log.Warn("reading a share partition's start offset from its group's coordinator", "group", k.group, "err", err)
		return 0, false, kerr.CoordinatorNotAvailable
	}
	g := r.(*kmsg.DescribeShareGroupOffsetsResponse).Groups
	if len(g) != 1 {
		return 0, false, kerr.UnknownServerError
	}
	if g[0].ErrorCode != 0 {
		return 0, false, kerr.ErrorForCode(g[0].ErrorCode).(*kerr.Error)
	}
	for _, t := range g[0].Topics {
		for _, p := range t.Partitions {
			if p.Partition == k.partition && p.ErrorCode == 0 && p.StartOffset >= 0 {
				return p.StartOffset, true, nil
			}
		}
	}
	return 0, false, nil
}

// persistShareStart writes sp's start offset to the group's coordinator
// when it moved. REQUIRES: sp.mu held.
func (b *Broker) persistShareStart(ctx context.Context, k shareKey, sp *sharePart) *kerr.Error {
	start := sp.p.Start()
	if start == sp.persisted {
		return nil
	}
	o := group.ShareOffset{StartOffset: start, LeaderEpoch: sp.lead.LeaderEpoch()}
	var code *kerr.Error
	if b.coordinatorError(meta.CoordinatorGroup, k.group) == 0 {
		code = b.groups.SetShareStart(k.group, k.topic, k.partition, o)
	} else {
		code = b.writeShareStartRemote(ctx, k, o)
	}
	if code != nil {
		return code
	}
	sp.persisted = start
	return nil
}

// writeShareStartRemote is persistShareStart's WriteShareGroupState to
// another node's coordinator.
func (b *Broker) writeShareStartRemote(ctx context.Context, k shareKey, o group.ShareOffset) *kerr.Error {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = k.group
	req.Topics = []kmsg.WriteShareGroupStateRequestTopic{{TopicID: k.topic,
		Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{{Partition: k.partition, LeaderEpoch: o.LeaderEpoch,
			StartOffset: o.StartOffset}}}}
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
	runs, used := sp.p.Acquire(member, bs, maxRecords, now)
	var records []byte
	for _, i := range used {
		records = append(records, views[i]...)
	}
	return records, runs, nil
}

// acknowledge applies one partition's acknowledgement batches for member
// and persists the start offset they moved.
func (b *Broker) acknowledge(ctx context.Context, k shareKey, sp *sharePart, member string, acks []shareAck) *kerr.Error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	now := time.Now()
	var first *kerr.Error
	for _, a := range acks {
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
			if code := b.groups.SetShareStart(req.GroupID, rt.TopicID, rp.Partition,
				group.ShareOffset{StartOffset: rp.StartOffset, LeaderEpoch: rp.LeaderEpoch}); code != nil {
				msg := fmt.Sprintf("setting the start offset of partition %d: %v", rp.Partition, code)
				sp.ErrorCode, sp.ErrorMessage = code.Code, &msg
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
