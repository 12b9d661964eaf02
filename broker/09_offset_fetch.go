package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// OffsetFetch: v1-9
//
// Behavior:
// Committed offsets of one group (v0-7) or several (v8+); unknown groups and partitions answer offset -1. With RequireStable (v7+, KIP-447), a partition that an undecided transaction holds offsets for answers UNSTABLE_OFFSET_COMMIT (offset -1), so a member taking it over in a rebalance waits (the client retries) instead of starting from offsets the transaction is about to replace.
//
// Authorization: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED (per group from v8); then DESCRIBE on each topic asked for, else its partitions answer TOPIC_AUTHORIZATION_FAILED; a request for every offset silently leaves out the topics without DESCRIBE.
//
// Version notes:
// v1 is the floor (Kafka 4.0); v5 leader epochs; v6 flexible; v8 several groups; v9 member id and epoch (KIP-848, ignored).
func init() { regKey(9, 1, 9, (*Broker).handleOffsetFetch) }

func (b *Broker) handleOffsetFetch(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetFetchRequest)
	az := b.authz(r)
	if req.Version < 8 {
		if code := b.groupCoordinatorError(&az, aclOperationDescribe, req.Group); code != 0 {
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = code
			if req.Version < 2 { // no top-level code
				resp.Topics = offsetFetchErrors(req.Topics, code)
			}
			return resp, nil
		}
	}
	var away []kmsg.OffsetFetchRequestGroup
	var codes []int16
	req.Groups, away, codes = splitCoordinated(req.Groups, func(g kmsg.OffsetFetchRequestGroup) string { return g.Group },
		func(g string) int16 { return b.groupCoordinatorError(&az, aclOperationDescribe, g) })
	var resp *kmsg.OffsetFetchResponse
	if az.on() {
		resp = b.offsetFetch(&az, req)
	} else {
		resp = b.groups.OffsetFetch(req)
	}
	for i, g := range away {
		og := kmsg.NewOffsetFetchResponseGroup()
		og.Group, og.ErrorCode = g.Group, codes[i]
		resp.Groups = append(resp.Groups, og)
	}
	if req.RequireStable {
		b.markUnstableOffsets(req, resp)
	}
	return resp, nil
}

// markUnstableOffsets answers UNSTABLE_OFFSET_COMMIT for the partitions an
// undecided transaction holds offsets for.
func (b *Broker) markUnstableOffsets(req *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse) {
	if req.Version < 8 {
		pending := b.pendingOffsets(req.Group)
		for i := range resp.Topics {
			rt := &resp.Topics[i]
			for j := range rt.Partitions {
				if pending[state.TxnPartition{Topic: rt.Topic, Partition: rt.Partitions[j].Partition}] {
					rt.Partitions[j].Offset, rt.Partitions[j].ErrorCode = -1, kerr.UnstableOffsetCommit.Code
				}
			}
		}
		return
	}
	for i := range resp.Groups {
		g := &resp.Groups[i]
		pending := b.pendingOffsets(g.Group)
		for j := range g.Topics {
			rt := &g.Topics[j]
			for k := range rt.Partitions {
				if pending[state.TxnPartition{Topic: rt.Topic, Partition: rt.Partitions[k].Partition}] {
					rt.Partitions[k].Offset, rt.Partitions[k].ErrorCode = -1, kerr.UnstableOffsetCommit.Code
				}
			}
		}
	}
}

// pendingOffsets lists the partitions of group with offsets pending in
// open transactions: in the group, and in the transaction records of an
// older kmirror that kept them there.
func (b *Broker) pendingOffsets(group string) map[state.TxnPartition]bool {
	pending := b.groups.PendingPartitions(group)
	for tp := range b.txns.PendingOffsets(group) {
		if pending == nil {
			pending = map[state.TxnPartition]bool{}
		}
		pending[tp] = true
	}
	return pending
}
