package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeProducers: v0
//
// Behavior:
// Lists each partition's active producers from its log's producer state
// (what kafka-transactions.sh describe-producers prints): producer id and
// epoch, last sequence and timestamp, coordinator epoch of the last
// marker, and the first offset of its open transaction (-1 if none). This
// shows mirrored producers too, and the transactions a failover aborted
// are no longer open. An unknown partition is UNKNOWN_TOPIC_OR_PARTITION.
//
// Authorization: READ on each topic, else TOPIC_AUTHORIZATION_FAILED for
// its partitions, before the topic is looked up.
//
// Version notes:
// v0 is the only version (flexible).
func init() { regKey(61, 0, 0, (*Broker).handleDescribeProducers) }

func (b *Broker) handleDescribeProducers(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	az := b.authz(r)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		t := b.partitions.Topic(rt.Topic)
		denied := !az.topic(aclOperationRead, rt.Topic)
		for _, p := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = p
			if denied {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if t == nil || p < 0 || int(p) >= len(t.Partitions()) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, e := range t.Partitions()[p].Log().Producers().Entries() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = e.ProducerID, int32(e.Epoch)
				ap.LastSequence, ap.LastTimestamp = e.LastSequence, e.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = e.CoordinatorEpoch, e.CurrentTxnFirstOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
