package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
	"github.com/kmirror/kmirror/storage"
)

// WriteTxnMarkers: v0-1
//
// Behavior:
// A transaction coordinator (another node's, or `kafka-transactions.sh
// abort`) has this node, the partitions' leader, write COMMIT or ABORT
// markers: each is appended as the partition's leader and answered once
// its in-sync replicas hold it, as Kafka writes markers with acks=all; a
// marker on __consumer_offsets then commits or drops the producer's
// pending group offsets there. Per partition: UNKNOWN_TOPIC_OR_PARTITION
// for one that does not exist, NOT_LEADER_OR_FOLLOWER when this node does
// not lead it, INVALID_REQUEST for a mirror topic (read-only until its
// failover, which ends the source's transactions itself),
// INVALID_PRODUCER_EPOCH for a marker below the producer's epoch in the
// partition, TRANSACTION_COORDINATOR_FENCED for a coordinator epoch below
// the partition's last, REQUEST_TIMED_OUT when the in-sync replicas did
// not take it in time (the coordinator writes it again).
//
// Authorization: CLUSTER_ACTION on the cluster, else every partition
// answers CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// v1 flexible. v2 (KIP-890's transaction version) is not served.
func init() { regKey(27, 0, 1, (*Broker).handleWriteTxnMarkers) }

func (b *Broker) handleWriteTxnMarkers(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	az := b.authz(r)
	allowed := az.cluster(aclOperationClusterAction)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, mt := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = mt.Topic
			for _, idx := range mt.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = idx
				switch t := b.partitions.Topic(mt.Topic); {
				case !allowed:
					rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				case t == nil:
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case t.ReadOnly():
					rp.ErrorCode = kerr.InvalidRequest.Code
				default:
					tp := state.TxnPartition{Topic: mt.Topic, Partition: idx}
					err := txnNode{b}.writeMarkerOn(t, tp, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed)
					rp.ErrorCode = markerErrorCode(err)
					if rp.ErrorCode != 0 && rp.ErrorCode != kerr.NotLeaderForPartition.Code {
						b.log.Warn("writing a transaction marker", "topic", mt.Topic, "partition", idx,
							"producer_id", m.ProducerID, "err", err)
					}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}

// markerErrorCode is the WriteTxnMarkers code of a marker's write.
func markerErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errNoPartition):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, partition.ErrNotLeader):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, errMarkerNotReplicated):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, storage.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, storage.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.Is(err, storage.ErrClosed):
		return kerr.NotLeaderForPartition.Code
	}
	return kerr.KafkaStorageError.Code
}
