package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/group"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/state"
)

// TxnOffsetCommit: v0-3
//
// Behavior:
// Commits a consumer group's offsets inside the producer's transaction
// (consume-transform-produce): the group's coordinator holds them pending
// (written to the group's partition of __consumer_offsets as the
// producer's transactional batch, once the in-sync replicas hold it)
// until the transaction's marker there commits or aborts them
// (group/txn_offsets.go). When this node also coordinates the
// transactional id, the group must have been added with AddOffsetsToTxn
// (else INVALID_TXN_STATE) and the producer's pair is checked; a
// transaction coordinated elsewhere is not asked, as Kafka's group
// coordinator does not ask it (before KIP-890's verification).
// v3+ carries the member id and generation (KIP-447): a member that is
// not the group's current one is UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or
// FENCED_INSTANCE_ID, as for OffsetCommit. A partition that does not exist
// is UNKNOWN_TOPIC_OR_PARTITION and metadata over 4 KiB
// OFFSET_METADATA_TOO_LARGE, for that partition alone. Producer checks as
// AddPartitionsToTxn.
//
// Authorization: WRITE on the transactional id, else every partition
// answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group, else
// GROUP_AUTHORIZATION_FAILED; READ on each topic, else
// TOPIC_AUTHORIZATION_FAILED for its partitions and only the other topics
// are committed.
//
// Version notes:
// v2 adds the committed leader epoch; v3 flexible, member and generation.
// v4+ (KIP-890 part 2) is not served.
func init() { regKey(28, 0, 3, (*Broker).handleTxnOffsetCommit) }

func (b *Broker) handleTxnOffsetCommit(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	az := b.authz(r)
	denied, skip := az.txnOffsetCommitDenied(req)
	// The refused topics (none without an authorizer) join the answer
	// whichever way the handler returns.
	defer func() { resp.Topics = append(resp.Topics, denied...) }()
	if skip {
		return resp, nil
	}
	if code := b.coordinatorError(meta.CoordinatorGroup, req.Group); code != 0 {
		resp.Topics = txnOffsetCommitErrors(req.Topics, code)
		return resp, nil
	}
	codes := make([][]int16, len(req.Topics))
	var offs []state.GroupOffset
	for i, rt := range req.Topics {
		codes[i] = make([]int16, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			meta := ""
			if rp.Metadata != nil {
				meta = *rp.Metadata
			}
			epoch := rp.LeaderEpoch
			if req.Version < 2 {
				epoch = -1
			}
			switch {
			case !b.partitionExists(rt.Topic, rp.Partition):
				codes[i][j] = kerr.UnknownTopicOrPartition.Code
			case len(meta) > group.DefaultMaxMetadataBytes:
				codes[i][j] = kerr.OffsetMetadataTooLarge.Code
			default:
				offs = append(offs, state.GroupOffset{Topic: rt.Topic, Partition: rp.Partition, Offset: rp.Offset,
					LeaderEpoch: epoch, Metadata: meta})
			}
		}
	}
	var all *kerr.Error
	if req.Version >= 3 {
		all = b.groups.TxnCommitCheck(req.Group, req.MemberID, req.InstanceID, req.Generation)
	} else if req.Group == "" {
		all = kerr.InvalidGroupID
	}
	if all == nil && len(offs) > 0 && b.coordinatorError(meta.CoordinatorTransaction, req.TransactionalID) == 0 {
		all = b.txns.CheckOffsetCommit(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
	}
	if all == nil && len(offs) > 0 {
		all = b.groups.CommitPending(req.Group, req.ProducerID, req.ProducerEpoch, offs)
	}
	for i, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for j, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, codes[i][j]
			if sp.ErrorCode == 0 {
				sp.ErrorCode = errCode(all)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
