package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/storage"
)

// deleteRecordsHighWatermark is DeleteRecords' offset meaning "up to the
// high watermark" (DeleteRecordsRequest.HIGH_WATERMARK).
const deleteRecordsHighWatermark = -1

// DeleteRecords: v0-2
//
// Behavior:
// Each partition's log start offset moves up to the requested offset (-1
// means the high watermark); LowWatermark answers the log start after the
// call. An offset at or below the current log start changes nothing. An
// offset above the high watermark, or below -1, is OFFSET_OUT_OF_RANGE,
// a topic whose cleanup.policy lacks "delete" is POLICY_VIOLATION, and an
// internal topic (__consumer_offsets, __transaction_state: the
// coordinators' state) INVALID_TOPIC_EXCEPTION whatever its policy, as in
// Kafka. Whole segments below the new start are removed at once, the
// rest of the prefix becomes unreadable: a fetch below the log start gets
// OFFSET_OUT_OF_RANGE and consumers that reset to the earliest offset
// begin at it. The new log start is persisted before the answer.
//
// Mirror topics are accepted: SPEC.md refuses only appends, and moving the
// log start never changes the offsets the mirror appends at. A partition
// the metadata image gives to another node answers NOT_LEADER_OR_FOLLOWER
// (Kafka's order: before the cleanup.policy check).
//
// One node differs from Kafka: there are no followers to wait for, so the
// low watermark is this log's start and TimeoutMillis is ignored.
//
// Authorization: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED for
// its partitions, before the topic is looked up.
//
// Version notes:
// v0-1 are the same; v2 flexible.
func init() { regKey(21, 0, 2, (*Broker).handleDeleteRecords) }

func (b *Broker) handleDeleteRecords(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	az := b.authz(r)
	im := b.image()
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := b.partitions.Topic(rt.Topic)
		it := imageTopic(im, t)
		denied := !az.topic(aclOperationDelete, rt.Topic)
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		var parts []*partition.Partition
		if t != nil {
			parts = t.Partitions()
		}
		deletable := t != nil && b.topicDeletesRecords(t)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			switch {
			case denied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case rp.Partition < 0 || int(rp.Partition) >= len(parts):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case isInternalTopic(rt.Topic):
				sp.ErrorCode = kerr.InvalidTopicException.Code
			case otherLeader(im, it, rp.Partition) != nil:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			case !deletable:
				sp.ErrorCode = kerr.PolicyViolation.Code
			default:
				b.deleteRecords(parts[rp.Partition], rp.Offset, &sp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// topicDeletesRecords reports whether t's cleanup.policy includes delete:
// Kafka refuses DeleteRecords on compact-only topics.
func (b *Broker) topicDeletesRecords(t *partition.Topic) bool {
	v, ok := t.Config("cleanup.policy")
	if !ok {
		tc, _ := lookupTopicConfig("cleanup.policy")
		v, _ = b.topicConfigDefault(tc)
	}
	return cleanupDeletes(v)
}

func (b *Broker) deleteRecords(p *partition.Partition, offset int64, sp *kmsg.DeleteRecordsResponseTopicPartition) {
	l := p.Log()
	if offset == deleteRecordsHighWatermark {
		offset = l.HighWatermark()
	}
	if offset < 0 {
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
		return
	}
	if err := l.SetLogStartOffset(offset); err != nil {
		if errors.Is(err, storage.ErrOffsetOutOfRange) {
			sp.ErrorCode = kerr.OffsetOutOfRange.Code
			return
		}
		b.log.Warn("delete records failed", "topic", p.Topic().Name(), "partition", p.Index(), "offset", offset, "err", err)
		sp.ErrorCode = kerr.KafkaStorageError.Code
		return
	}
	sp.LowWatermark = l.LogStartOffset()
}
