package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/share"
)

// ShareFetch: v1-2
//
// Behavior:
// A share group member's fetch (KIP-932, share_partitions.go): it opens
// (epoch 0), continues or closes (-1) its share session with this node,
// adds and forgets partitions, settles what it acknowledges (each
// partition's AcknowledgeErrorCode), then acquires up to MaxRecords
// records of the session's partitions under an acquisition lock
// (group.share.record.lock.duration.ms) and answers the batches that hold
// them, byte for byte, with the acquired offsets and delivery counts.
// With nothing to acquire it waits up to MaxWaitMillis for an append.
// Listed with ShareGroupHeartbeat.
//
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED; READ
// on each topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED.
//
// Version notes:
// v1 (Kafka 4.1) MaxRecords, BatchSize and the lock timeout; v2 (Kafka
// 4.2) acquire modes (both acquire whole batches here) and renew
// acknowledgements (type 4, IsRenewAck: settle, fetch nothing).
func init() { regKey(shareFetchKey, 1, 2, (*Broker).handleShareFetch) }

const shareFetchKey = 78

func (b *Broker) handleShareFetch(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	fail := func(err *kerr.Error) (kmsg.Response, error) {
		resp.ErrorCode = err.Code
		return resp, nil
	}
	rq, code := b.shareRequester(r, req.GroupID, req.MemberID)
	if code != nil {
		return fail(code)
	}
	group, member := rq.group, rq.member
	resp.AcquisitionLockTimeoutMillis = int32(rq.cfg.LockDuration / time.Millisecond)
	if req.ShareSessionEpoch == 0 {
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				if len(rp.AcknowledgementBatches) > 0 {
					return fail(kerr.InvalidRequest) // a new session holds nothing to settle
				}
			}
		}
	}
	sess, code := b.shares.openSession(group, member, req.ShareSessionEpoch)
	if code != nil {
		return fail(code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupRPCTimeout)
	defer cancel()
	if req.ShareSessionEpoch == 0 {
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				b.refreshSharePart(ctx, shareKey{group, rt.TopicID, rp.Partition})
			}
		}
	}
	out := newShareAnswer(b, &rq.az)
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			k := shareKey{group, rt.TopicID, rp.Partition}
			if req.ShareSessionEpoch != -1 {
				b.shares.track(sess, k, true)
			}
			if len(rp.AcknowledgementBatches) == 0 {
				continue
			}
			acks := make([]shareAck, len(rp.AcknowledgementBatches))
			for i, a := range rp.AcknowledgementBatches {
				acks[i] = shareAck{a.FirstOffset, a.LastOffset, a.AcknowledgeTypes}
			}
			out.part(k).ackCode = b.settle(ctx, rq, k, acks)
		}
	}
	var forgot []shareKey
	for _, ft := range req.ForgottenTopicsData {
		for _, p := range ft.Partitions {
			k := shareKey{group, ft.TopicID, p}
			b.shares.track(sess, k, false)
			forgot = append(forgot, k)
		}
	}
	if req.ShareSessionEpoch == -1 {
		forgot = append(forgot, b.shares.keys(sess)...)
	}
	b.releaseShares(ctx, group, member, forgot)
	if req.ShareSessionEpoch != -1 && !req.IsRenewAck {
		b.shareFetchRecords(ctx, r, req, sess, rq, out)
	}
	out.fill(resp)
	return resp, nil
}

// settle is one partition's acknowledgements (ShareFetch's or
// ShareAcknowledge's): its error code, 0 when every batch was settled.
func (b *Broker) settle(ctx context.Context, rq *shareRequest, k shareKey, acks []shareAck) int16 {
	p, pcode := b.sharePartitionFor(&rq.az, k)
	if pcode != 0 {
		return pcode
	}
	sp, code := b.sharePartition(ctx, k, p, rq.cfg)
	if code != nil {
		return code.Code
	}
	if err := b.acknowledge(ctx, k, sp, p, rq.member, acks); err != nil {
		return err.Code
	}
	return 0
}

// shareFetchRecords acquires records of the session's partitions into
// out, waiting up to the request's MaxWaitMillis when there are none.
func (b *Broker) shareFetchRecords(ctx context.Context, r *request, req *kmsg.ShareFetchRequest, sess *shareSession,
	rq *shareRequest, out *shareAnswer) {
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = 500
	}
	keys := b.shares.keys(sess)
	var wake chan struct{}
	for {
		left, budget := maxRecords, int(req.MaxBytes)
		var waitOn []*partition.Partition
		var wakes []uint64 // each partition's appends before its read
		for _, k := range keys {
			if left <= 0 || budget <= 0 {
				break
			}
			p, code := b.sharePartitionFor(out.az, k)
			if code != 0 {
				out.part(k).code = code
				continue
			}
			sp, kcode := b.sharePartition(ctx, k, p, rq.cfg)
			if kcode != nil {
				out.part(k).code = kcode.Code
				continue
			}
			waitOn, wakes = append(waitOn, p), append(wakes, p.Wakes())
			records, runs, err := b.acquire(sp, p, rq.member, left, budget)
			if err != nil {
				b.log.Warn("share fetch read failed", "topic", p.Topic().Name(), "partition", p.Index(), "err", err)
				out.part(k).code = kerr.KafkaStorageError.Code
				continue
			}
			if len(runs) > 0 {
				a := out.part(k)
				a.records, a.runs = append(a.records, records...), append(a.runs, runs...)
				for _, run := range runs {
					left -= int(run.Last - run.First + 1)
				}
				budget -= len(records)
			}
		}
		if left < maxRecords || time.Now().After(deadline) || len(waitOn) == 0 {
			break
		}
		if wake == nil {
			wake = make(chan struct{}, 1)
		}
		missed := false
		for i, p := range waitOn {
			p.Wait(wake)
			// An append between the read and the Wait has woken no one.
			missed = missed || p.Wakes() != wakes[i]
		}
		waited, closing := time.Now(), false
		if !missed {
			t := time.NewTimer(time.Until(deadline))
			select {
			case <-wake:
			case <-t.C:
			case <-b.closing:
				closing = true
			}
			t.Stop()
		}
		for _, p := range waitOn {
			p.Unwait(wake)
		}
		r.parked += time.Since(waited) // a long poll is not request time (quotas)
		if closing {
			return
		}
	}
}

// sharePartitionFor is k's partition when this node leads it and the
// member may read its topic, else the partition's error code.
func (b *Broker) sharePartitionFor(az *authzCtx, k shareKey) (*partition.Partition, int16) {
	t := b.partitions.TopicByID(k.topic)
	switch {
	case t == nil:
		return nil, kerr.UnknownTopicID.Code
	case !az.topic(aclOperationRead, t.Name()):
		return nil, kerr.TopicAuthorizationFailed.Code
	}
	p := t.Partition(k.partition)
	if p == nil {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	if _, leads := p.Leadership(); !leads {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return p, 0
}

// shareAnswer gathers a share request's partitions for its response.
type shareAnswer struct {
	b     *Broker
	az    *authzCtx
	order []shareKey
	parts map[shareKey]*shareAnswerPart
}

type shareAnswerPart struct {
	code, ackCode int16
	records       []byte
	runs          []share.Acquired
}

func newShareAnswer(b *Broker, az *authzCtx) *shareAnswer {
	return &shareAnswer{b: b, az: az, parts: map[shareKey]*shareAnswerPart{}}
}

func (a *shareAnswer) part(k shareKey) *shareAnswerPart {
	p := a.parts[k]
	if p == nil {
		p = &shareAnswerPart{}
		a.parts[k] = p
		a.order = append(a.order, k)
	}
	return p
}

// fill writes the gathered partitions into a ShareFetch response, by
// topic in the order first seen.
func (a *shareAnswer) fill(resp *kmsg.ShareFetchResponse) {
	topics := map[[16]byte]int{}
	im := a.b.image()
	for _, k := range a.order {
		ap := a.parts[k]
		i, ok := topics[k.topic]
		if !ok {
			i = len(resp.Topics)
			topics[k.topic] = i
			resp.Topics = append(resp.Topics, kmsg.ShareFetchResponseTopic{TopicID: k.topic})
		}
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.AcknowledgeErrorCode, rp.Records = k.partition, ap.code, ap.ackCode, ap.records
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		if t := a.b.partitions.TopicByID(k.topic); t != nil && im != nil {
			if ip := im.Partition(t.Name(), k.partition); ip != nil {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = ip.Leader, ip.LeaderEpoch
			}
		}
		for _, run := range ap.runs {
			rp.AcquiredRecords = append(rp.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{
				FirstOffset: run.First, LastOffset: run.Last, DeliveryCount: run.DeliveryCount})
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
}
