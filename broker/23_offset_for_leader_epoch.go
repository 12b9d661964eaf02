package broker

import (
	"github.com/kmirror/kmirror/partition"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch: v2-4
//
// Behavior:
// For each partition, the largest epoch at or below the requested one and
// the offset where it ended (the start of the next epoch), or the log end
// for the current epoch, exactly as Kafka's leader-epoch cache answers
// (the clients use it to detect truncation after a leader change). An
// epoch above the current one, or -1, answers epoch -1 and offset -1.
// CurrentLeaderEpoch is checked as in Fetch and ListOffsets: older than
// ours is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. A partition
// the metadata image gives to another node answers NOT_LEADER_OR_FOLLOWER,
// to followers too (Kafka answers from the leader only).
//
// One node differs from Kafka: there are no followers, so ReplicaID is
// ignored (Kafka answers followers from any replica, consumers from the
// leader, and this node is both). A log with no batches yet has no epoch
// entry; it answers its current epoch with the log end, as Kafka's cache
// does from the entry its leader election writes.
//
// Authorization: CLUSTER_ACTION on the cluster (a follower) allows every
// topic; otherwise each topic needs DESCRIBE (KIP-320 consumers), else
// its partitions answer TOPIC_AUTHORIZATION_FAILED.
//
// Version notes:
// v2 is the floor (Kafka 4.0); v3 replica ID; v4 flexible.
func init() { regKey(23, 2, 4, (*Broker).handleOffsetForLeaderEpoch) }

func (b *Broker) handleOffsetForLeaderEpoch(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	az := b.authz(r)
	replica := az.clusterQuietly(aclOperationClusterAction)
	im := b.image()
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := b.partitions.Topic(rt.Topic)
		it := imageTopic(im, t)
		denied := !replica && !az.topic(aclOperationDescribe, rt.Topic)
		var parts []*partition.Partition
		if t != nil {
			parts = t.Partitions()
		}
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			switch {
			case denied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case rp.Partition < 0 || int(rp.Partition) >= len(parts):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case otherLeader(im, it, rp.Partition) != nil:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				endOffsetForEpoch(partitionEpoch(it, parts[rp.Partition]), parts[rp.Partition], rp, &sp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// endOffsetForEpoch answers one partition whose leader epoch (the image's)
// is epoch.
func endOffsetForEpoch(epoch int32, p *partition.Partition, rp *kmsg.OffsetForLeaderEpochRequestTopicPartition, sp *kmsg.OffsetForLeaderEpochResponseTopicPartition) {
	if sp.ErrorCode = checkLeaderEpoch(rp.CurrentLeaderEpoch, epoch); sp.ErrorCode != 0 {
		return
	}
	if rp.LeaderEpoch == epoch {
		// Kafka's cache always holds the current epoch (written at
		// election); ours only once a batch was appended in it.
		sp.LeaderEpoch, sp.EndOffset = epoch, p.Log().LogEndOffset()
		return
	}
	sp.LeaderEpoch, sp.EndOffset = p.Log().EndOffsetForEpoch(rp.LeaderEpoch)
}
