package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerID: v0-5
//
// Behavior:
// An idempotent producer (no transactional id) gets a fresh producer id at
// epoch 0, as Kafka's coordinator does for a null transactional id, also
// when it asks to bump an existing id (KIP-360): a new id is always safe.
// Transactional ids need the transaction coordinator, which kmirror does
// not have yet. They get UNSUPPORTED_VERSION, which clients treat as fatal;
// a retriable code such as COORDINATOR_NOT_AVAILABLE would make them retry
// forever.
//
// Version notes:
// v2 flexible, v3 producer id and epoch for KIP-360 bumps, v5 KIP-890.
func init() { regKey(22, 0, 5, (*Broker).handleInitProducerID) }

func (b *Broker) handleInitProducerID(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
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
