package broker

import (
	"github.com/kmirror/kmirror/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerID: v0-5
//
// Behavior:
// An idempotent producer (no transactional id) gets a fresh producer id at
// epoch 0, as Kafka's coordinator does for a null transactional id, also
// when it asks to bump an existing id (KIP-360): a new id is always safe.
// A transactional id goes to the transaction coordinator (txn/): its
// producer id, at a new epoch that fences older producers of the id (an
// open transaction of theirs is aborted first); a transaction.timeout.ms
// above transaction.max.timeout.ms (15 min) is INVALID_TRANSACTION_TIMEOUT;
// a v3+ producer's own pair must be the id's current or previous one
// (KIP-360), else PRODUCER_FENCED.
//
// Authorization (as Kafka since 2.8, KIP-679): a transactional id needs
// WRITE on it, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; an idempotent
// producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
// (Kafka's authorizeByResourceType), else CLUSTER_AUTHORIZATION_FAILED.
//
// In a cluster the transactional id's coordinator is the node its hash
// names (meta.Image.Coordinator): it writes the transaction's markers at
// every partition's leader (WriteTxnMarkers to the others) and its group
// offsets through the groups' coordinators (TxnOffsetCommit leaves them
// pending there, the marker on __consumer_offsets decides them).
//
// Version notes:
// v2 flexible, v3 producer id and epoch for KIP-360 bumps, v5 KIP-890.
func init() { regKey(22, 0, 5, (*Broker).handleInitProducerID) }

func (b *Broker) handleInitProducerID(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if az := b.authz(r); az.on() {
		if resp.ErrorCode = az.initProducerIDDenied(req); resp.ErrorCode != 0 {
			return resp, nil
		}
	}
	if req.TransactionalID != nil {
		if resp.ErrorCode = b.coordinatorError(meta.CoordinatorTransaction, *req.TransactionalID); resp.ErrorCode != 0 {
			return resp, nil
		}
		pid, epoch := int64(-1), int16(-1)
		if req.Version >= 3 {
			pid, epoch = req.ProducerID, req.ProducerEpoch
		}
		var err *kerr.Error
		resp.ProducerID, resp.ProducerEpoch, err = b.txns.InitProducerID(*req.TransactionalID,
			req.TransactionTimeoutMillis, pid, epoch)
		resp.ErrorCode = errCode(err)
		return resp, nil
	}
	id, err := b.pids.allocate()
	if err != nil {
		b.log.Error("allocating a producer id", "err", err)
		resp.ErrorCode = kerr.KafkaStorageError.Code
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}
