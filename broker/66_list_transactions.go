package broker

import (
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/txn"
)

// ListTransactions: v0-2
//
// Behavior:
// Lists the transactional ids the coordinator knows with their producer id
// and state, filtered by state names, producer ids (v0), the age of an
// open transaction (v1: DurationFilterMillis, only transactions running
// longer) and a regular expression on the id (v2). Unknown state names are
// echoed in UnknownStateFilters and match nothing; an invalid regular
// expression is INVALID_REGULAR_EXPRESSION.
//
// Authorization: the transactional ids without DESCRIBE are left out,
// silently.
//
// Version notes:
// v0 flexible; v1 duration filter (KIP-994); v2 id pattern (KIP-1152).
func init() { regKey(66, 0, 2, (*Broker).handleListTransactions) }

func (b *Broker) handleListTransactions(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	states := map[txn.State]bool{}
	for _, name := range req.StateFilters {
		if s, ok := txn.ParseState(name); ok {
			states[s] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	var pattern *regexp.Regexp
	if req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile(*req.TransactionalIDPattern)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp, nil
		}
		pattern = re
	}
	nowMs := time.Now().UnixMilli()
	for _, t := range b.txns.List() {
		s := txn.State(t.State)
		switch {
		case len(req.StateFilters) > 0 && !states[s],
			len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, t.ProducerID),
			req.DurationFilterMillis >= 0 && req.Version >= 1 && (s != txn.Ongoing || nowMs-t.StartMs < req.DurationFilterMillis),
			pattern != nil && !pattern.MatchString(t.ID):
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = t.ID, t.ProducerID, s.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	az := b.authz(r)
	az.listTransactionsFilter(resp)
	return resp, nil
}
