package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// A group or transactional id is coordinated by the node the metadata
// image names (meta.Image.Coordinator); a request for a key coordinated
// elsewhere is answered NOT_COORDINATOR, as Kafka's coordinators answer it,
// and the client finds the coordinator again with FindCoordinator. A key
// no node coordinates (its partition has no leader) is
// COORDINATOR_NOT_AVAILABLE. Authorization comes first, as in Kafka's
// KafkaApis: a sender who may not see a group learns nothing about where
// it lives. On a single node every key is coordinated here.

// coordinatorError is the error code of a request on key: 0 when this
// node coordinates it.
func (b *Broker) coordinatorError(kind meta.CoordinatorKind, key string) int16 {
	if !b.coordinatorTopicReady(kind) {
		// Until the kind's topic is here no node coordinates its keys:
		// state kept in one node's store alone would not survive it.
		return kerr.CoordinatorNotAvailable.Code
	}
	im := b.image()
	c, ok := im.Coordinator(kind, key)
	switch {
	case !ok:
		return kerr.CoordinatorNotAvailable.Code
	case c.ID != im.Self():
		return kerr.NotCoordinator.Code
	case kind == meta.CoordinatorGroup:
		return b.groupLog.loadCode(key)
	}
	return b.txnLog.loadCode(key)
}

// coordinatorTopicReady is offsetsTopicReady or txnTopicReady, by kind.
func (b *Broker) coordinatorTopicReady(kind meta.CoordinatorKind) bool {
	if kind == meta.CoordinatorGroup {
		return b.offsetsTopicReady()
	}
	return b.txnTopicReady()
}

// groupCoordinatorError is coordinatorError for a group the sender may
// access with op: 0 when the sender may not, so that the handler's own
// authorization check answers it.
func (b *Broker) groupCoordinatorError(az *authzCtx, op int8, group string) int16 {
	code := b.coordinatorError(meta.CoordinatorGroup, group)
	if code != 0 && !az.check(op, aclResourceGroup, group, false) {
		return 0
	}
	return code
}

// txnCoordinatorError is groupCoordinatorError for a transactional id.
func (b *Broker) txnCoordinatorError(az *authzCtx, op int8, id string) int16 {
	code := b.coordinatorError(meta.CoordinatorTransaction, id)
	if code != 0 && !az.check(op, aclResourceTransactionalID, id, false) {
		return 0
	}
	return code
}

// splitCoordinated splits items, keyed by key, into those the handler
// serves (coordinated here, or refused by its authorization check) and
// the others, answered with codes[i] for away[i].
func splitCoordinated[T any](items []T, key func(T) string, codeOf func(key string) int16) (here, away []T, codes []int16) {
	for _, it := range items {
		if code := codeOf(key(it)); code != 0 {
			away, codes = append(away, it), append(codes, code)
			continue
		}
		here = append(here, it)
	}
	if len(away) == 0 {
		return items, nil, nil // no copy on a single node
	}
	return here, away, codes
}

// offsetCommitErrors answers every partition of topics with code.
func offsetCommitErrors(topics []kmsg.OffsetCommitRequestTopic, code int16) []kmsg.OffsetCommitResponseTopic {
	out := make([]kmsg.OffsetCommitResponseTopic, 0, len(topics))
	for _, rt := range topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		out = append(out, st)
	}
	return out
}

// txnOffsetCommitErrors answers every partition of topics with code.
func txnOffsetCommitErrors(topics []kmsg.TxnOffsetCommitRequestTopic, code int16) []kmsg.TxnOffsetCommitResponseTopic {
	out := make([]kmsg.TxnOffsetCommitResponseTopic, 0, len(topics))
	for _, rt := range topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		out = append(out, st)
	}
	return out
}
