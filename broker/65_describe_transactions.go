package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/txn"
)

// DescribeTransactions: v0
//
// Behavior:
// Describes transactional ids as the coordinator holds them (what
// kafka-transactions.sh describe prints): state (Empty, Ongoing,
// PrepareCommit, ...), timeout, start time of the open transaction (-1 if
// none), producer id and epoch, and the partitions added. An unknown id is
// TRANSACTIONAL_ID_NOT_FOUND.
//
// Authorization: DESCRIBE on each transactional id, else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it (checked before it is
// looked up); the partitions of topics without DESCRIBE are left out.
//
// Version notes:
// v0 is the only version (flexible).
func init() { regKey(65, 0, 0, (*Broker).handleDescribeTransactions) }

func (b *Broker) handleDescribeTransactions(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	az := b.authz(r)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		if az.describeTransactionDenied(&st) {
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		if st.ErrorCode = b.coordinatorError(meta.CoordinatorTransaction, id); st.ErrorCode != 0 {
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		t, ok := b.txns.Describe(id)
		if !ok {
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State = txn.State(t.State).String()
		st.TimeoutMillis, st.ProducerID, st.ProducerEpoch = t.TimeoutMs, t.ProducerID, t.Epoch
		st.StartTimestamp = -1
		if txn.State(t.State) == txn.Ongoing {
			st.StartTimestamp = t.StartMs
		}
		byTopic := map[string]int{}
		for _, p := range t.Partitions {
			i, ok := byTopic[p.Topic]
			if !ok {
				i = len(st.Topics)
				byTopic[p.Topic] = i
				tt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				tt.Topic = p.Topic
				st.Topics = append(st.Topics, tt)
			}
			st.Topics[i].Partitions = append(st.Topics[i].Partitions, p.Partition)
		}
		for i := range st.Topics {
			slices.Sort(st.Topics[i].Partitions)
		}
		az.describeTransactionTopics(&st)
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
