package broker

import (
	"github.com/kmirror/kmirror/meta"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn: v0-4
//
// Behavior:
// Commits or aborts the producer's transaction: the decision is persisted,
// then COMMIT or ABORT markers are written to every partition of the
// transaction and the offsets committed in it reach their groups (commit)
// or are dropped (abort); then the answer. A retried EndTxn whose decision
// was carried out answers success; the opposite decision, or EndTxn with no
// transaction, INVALID_TXN_STATE. Producer checks as AddPartitionsToTxn.
//
// Authorization: WRITE on the transactional id, else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
//
// Version notes:
// v3 flexible. v5 (KIP-890 part 2: an epoch bump on every EndTxn) is not
// served: kmirror's ApiVersions advertise no transaction.version feature,
// so clients keep the classic protocol.
func init() { regKey(26, 0, 4, (*Broker).handleEndTxn) }

func (b *Broker) handleEndTxn(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if az := b.authz(r); az.on() {
		if resp.ErrorCode = az.endTxnDenied(req); resp.ErrorCode != 0 {
			return resp, nil
		}
	}
	if resp.ErrorCode = b.coordinatorError(meta.CoordinatorTransaction, req.TransactionalID); resp.ErrorCode != 0 {
		return resp, nil
	}
	resp.ErrorCode = errCode(b.txns.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit))
	return resp, nil
}
