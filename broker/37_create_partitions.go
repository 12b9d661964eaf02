package broker

import (
	"fmt"

	"github.com/kmirror/kmirror/partition"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions: v0-3
//
// Behavior:
// Count is the topic's new total. As in Kafka's controller: a name given
// twice is INVALID_REQUEST (one answer), an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION, a count equal to or below the current one
// INVALID_PARTITIONS with Kafka's messages, and an assignment list whose
// length is not the number of new partitions, or a list that names a
// broker not registered, one twice, or not the topic's replication factor
// of brokers, INVALID_REPLICA_ASSIGNMENT. Without an assignment the new
// partitions get the topic's replication factor (its first partition's
// replica count), placed like those of a new topic, which fails with
// INVALID_REPLICATION_FACTOR when fewer brokers are usable; with one, they
// are placed as given. They are empty logs with the topic's configs,
// usable as soon as the answer is sent. ValidateOnly runs every check and
// adds nothing. Growing past 10000 new partitions in one request is
// POLICY_VIOLATION (Kafka's per-operation record bound).
//
// An internal topic (__consumer_offsets, __transaction_state) answers
// INVALID_TOPIC_EXCEPTION: a key's partition is its hash modulo the count,
// so growing it would strand every group's offsets and every
// transaction's state (kafka-topics.sh refuses it on the client side).
//
// A mirror topic answers POLICY_VIOLATION (errReadOnlyTopic) naming its
// mirror: its partition count follows the source topic and only the sync
// loop grows it (SPEC.md).
//
// One node differs from Kafka: growth is synchronous, so TimeoutMillis is
// ignored.
//
// Authorization: ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED,
// checked after the duplicate check and before the topic is looked up.
//
// Version notes:
// v0-1 are the same; v2 flexible; v3 changes nothing we answer.
func init() { regKey(37, 0, 3, (*Broker).handleCreatePartitions) }

func (b *Broker) handleCreatePartitions(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)

	uses := make(map[string]int, len(req.Topics))
	for i := range req.Topics {
		uses[req.Topics[i].Topic]++
	}
	az := b.authz(r)
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	added := 0 // partitions added (or validated) so far in this request
	for i := range req.Topics {
		rt := &req.Topics[i]
		n := uses[rt.Topic]
		if n == 0 {
			continue // a duplicate already answered
		}
		uses[rt.Topic] = 0
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		code, msg := kerr.InvalidRequest.Code, "Duplicate topic name."
		switch {
		case n > 1:
		case !az.topic(aclOperationAlter, rt.Topic):
			code, msg = kerr.TopicAuthorizationFailed.Code, ""
		default:
			code, msg = b.growPartitions(rt, req.ValidateOnly, &added)
		}
		st.ErrorCode = code
		if msg != "" {
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// growPartitions checks one topic's request and, unless validateOnly,
// grows the topic. REQUIRES: b.adminMu held.
func (b *Broker) growPartitions(rt *kmsg.CreatePartitionsRequestTopic, validateOnly bool, added *int) (code int16, msg string) {
	t := b.partitions.Topic(rt.Topic)
	if t == nil {
		return kerr.UnknownTopicOrPartition.Code, ""
	}
	if isInternalTopic(t.Name()) {
		// Kafka's kafka-topics.sh refuses it; the broker does too, for
		// every client: a group or transactional id's partition is its
		// hash modulo the count, so a new count moves every key to a
		// partition that does not hold its state.
		return kerr.InvalidTopicException.Code, fmt.Sprintf("The number of partitions of the internal topic %s cannot be "+
			"changed: its coordinators' keys would move to partitions that do not hold their state.", t.Name())
	}
	if t.ReadOnly() {
		return errReadOnlyTopic,
			fmt.Sprintf("topic %s is mirrored by cluster mirror %s: its partitions follow the source topic", t.Name(), t.Mirror())
	}
	cur := int32(len(t.Partitions()))
	switch {
	case rt.Count == cur:
		return kerr.InvalidPartitions.Code, fmt.Sprintf("Topic already has %d partition(s).", cur)
	case rt.Count < cur:
		return kerr.InvalidPartitions.Code,
			fmt.Sprintf("The topic %s currently has %d partition(s); %d would not be an increase.", t.Name(), cur, rt.Count)
	}
	more := rt.Count - cur
	pl := partition.Placement{RF: b.replicationFactor(t)}
	if rt.Assignment != nil {
		if len(rt.Assignment) != int(more) {
			return kerr.InvalidReplicaAssignment.Code,
				fmt.Sprintf("Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", more, len(rt.Assignment))
		}
		for _, a := range rt.Assignment {
			if msg := b.checkReplicaAssignment(a.Replicas, pl.RF); msg != "" {
				return kerr.InvalidReplicaAssignment.Code, msg
			}
			pl.Replicas = append(pl.Replicas, a.Replicas)
		}
	} else if err, msg := b.checkReplicationFactor(pl.RF); err != nil {
		return err.Code, msg
	}
	if *added+int(more) > adminOpMaxRecords {
		return kerr.PolicyViolation.Code, errBatchTooLargeMsg
	}
	*added += int(more)
	if validateOnly {
		return 0, ""
	}
	if err := b.partitions.Grow(t, rt.Count, pl); err != nil {
		b.log.Warn("adding partitions failed", "topic", t.Name(), "partitions", rt.Count, "err", err)
		return metadataWriteError(err).Code, err.Error()
	}
	b.log.Info("partitions added", "topic", t.Name(), "partitions", rt.Count)
	return 0, ""
}

// replicationFactor is t's replica count as Kafka's controller reads it
// for new partitions: its first partition's, from the image; 1 when the
// image does not have it yet.
func (b *Broker) replicationFactor(t *partition.Topic) int {
	if it := imageTopic(b.image(), t); it != nil && len(it.Partitions) > 0 && len(it.Partitions[0].Replicas) > 0 {
		return len(it.Partitions[0].Replicas)
	}
	return 1
}
