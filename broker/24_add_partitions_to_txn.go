package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/state"
)

// AddPartitionsToTxn: v0-3
//
// Behavior:
// Adds partitions to the producer's transaction (txn/), starting it if
// none is open. As Kafka: a partition that does not exist is
// UNKNOWN_TOPIC_OR_PARTITION and then every other partition of the request
// is OPERATION_NOT_ATTEMPTED; a producer id or epoch that is not the
// transactional id's current one is INVALID_PRODUCER_ID_MAPPING or
// PRODUCER_FENCED; a transaction being committed or aborted
// CONCURRENT_TRANSACTIONS (the client retries). A mirror topic is
// POLICY_VIOLATION (errReadOnlyTopic), as its Produce would be.
//
// Authorization: WRITE on the transactional id, else every partition
// answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED; WRITE on each topic, else
// TOPIC_AUTHORIZATION_FAILED for it and OPERATION_NOT_ATTEMPTED (or
// UNKNOWN_TOPIC_OR_PARTITION) for the others, nothing added.
//
// Version notes:
// v3 flexible. v4+ (KIP-890, the broker-to-coordinator batch form) is not
// served: clients use v3 or older.
func init() { regKey(24, 0, 3, (*Broker).handleAddPartitionsToTxn) }

func (b *Broker) handleAddPartitionsToTxn(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AddPartitionsToTxnRequest)
	if az := b.authz(r); az.on() {
		if denied := b.addPartitionsToTxnDenied(&az, req); denied != nil {
			return denied, nil
		}
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	codes := map[state.TxnPartition]int16{}
	var ps []state.TxnPartition
	failed := false
	for _, rt := range req.Topics {
		t := b.partitions.Topic(rt.Topic)
		for _, p := range rt.Partitions {
			tp := state.TxnPartition{Topic: rt.Topic, Partition: p}
			ps = append(ps, tp)
			switch {
			case t == nil || p < 0 || int(p) >= len(t.Partitions()):
				codes[tp], failed = kerr.UnknownTopicOrPartition.Code, true
			case t.ReadOnly():
				codes[tp], failed = errReadOnlyTopic, true
			}
		}
	}
	var all int16
	switch coord := b.coordinatorError(meta.CoordinatorTransaction, req.TransactionalID); {
	case coord != 0:
		all, codes = coord, nil // the whole request goes to the coordinator
	case failed:
		all = kerr.OperationNotAttempted.Code
	default:
		all = errCode(b.txns.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, ps))
	}
	for _, rt := range req.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition = p
			code, ok := codes[state.TxnPartition{Topic: rt.Topic, Partition: p}]
			if !ok {
				code = all
			}
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
