package broker

import (
	"github.com/kmirror/kmirror/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddOffsetsToTxn: v0-3
//
// Behavior:
// Adds a consumer group to the producer's transaction: its TxnOffsetCommits
// then commit or abort with it. Producer checks as AddPartitionsToTxn; an
// empty group id is INVALID_GROUP_ID.
//
// Authorization: WRITE on the transactional id, else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group, else
// GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// v3 flexible; v4 (KIP-890 part 2) is not served.
func init() { regKey(25, 0, 3, (*Broker).handleAddOffsetsToTxn) }

func (b *Broker) handleAddOffsetsToTxn(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if az := b.authz(r); az.on() {
		if resp.ErrorCode = az.addOffsetsToTxnDenied(req); resp.ErrorCode != 0 {
			return resp, nil
		}
	}
	if resp.ErrorCode = b.coordinatorError(meta.CoordinatorTransaction, req.TransactionalID); resp.ErrorCode != 0 {
		return resp, nil
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	resp.ErrorCode = errCode(b.txns.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group))
	return resp, nil
}
