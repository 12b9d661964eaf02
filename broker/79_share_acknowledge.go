package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareAcknowledge: v1-2
//
// Behavior:
// Settles records a member acquired (KIP-932: accept, release, reject,
// and from v2 renew its lock) in its share session with this node, which
// must exist at the request's epoch (0 opens nothing here:
// INVALID_SHARE_SESSION_EPOCH); -1 closes the session after settling and
// releases what the member still holds. A record the member does not hold
// is INVALID_RECORD_STATE for its batch. An acknowledgement that moves a
// share partition's start offset is answered once the group's
// coordinator holds the new one. Listed with ShareGroupHeartbeat.
//
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED; READ
// on each topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED.
//
// Version notes:
// v1 (Kafka 4.1) is the first version Kafka serves; v2 (Kafka 4.2) renew
// and the lock timeout in the answer.
func init() { regKey(shareAcknowledgeKey, 1, 2, (*Broker).handleShareAcknowledge) }

const shareAcknowledgeKey = 79

func (b *Broker) handleShareAcknowledge(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
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
		return fail(kerr.InvalidShareSessionEpoch)
	}
	sess, code := b.shares.openSession(group, member, req.ShareSessionEpoch)
	if code != nil {
		return fail(code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), groupRPCTimeout)
	defer cancel()
	for _, rt := range req.Topics {
		at := kmsg.NewShareAcknowledgeResponseTopic()
		at.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			k := shareKey{group, rt.TopicID, rp.Partition}
			acks := make([]shareAck, len(rp.AcknowledgementBatches))
			for i, a := range rp.AcknowledgementBatches {
				acks[i] = shareAck{a.FirstOffset, a.LastOffset, a.AcknowledgeTypes}
			}
			ap := kmsg.NewShareAcknowledgeResponseTopicPartition()
			ap.Partition = rp.Partition
			ap.ErrorCode = b.settle(ctx, rq, k, acks)
			ap.CurrentLeader.LeaderID, ap.CurrentLeader.LeaderEpoch = -1, -1
			at.Partitions = append(at.Partitions, ap)
		}
		resp.Topics = append(resp.Topics, at)
	}
	if req.ShareSessionEpoch == -1 {
		b.releaseShares(ctx, group, member, b.shares.keys(sess))
	}
	return resp, nil
}
