package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/storage"
)

// Special ListOffsets timestamps.
const (
	listLatest        = -1
	listEarliest      = -2
	listMaxTimestamp  = -3 // v7+
	listEarliestLocal = -4 // v8+: no tiered storage, so the log start
)

// ListOffsets: v1-10
//
// Behavior:
// Latest is the high watermark (the last stable offset for read_committed),
// earliest the log start, max timestamp the record with the largest
// timestamp, and a timestamp the first record whose timestamp is at or
// after it (storage reads the records of the batch the time index finds);
// a record past the high watermark is not found, as in Kafka.
// CurrentLeaderEpoch is checked as in Fetch. A partition the metadata
// image gives to another node answers NOT_LEADER_OR_FOLLOWER.
//
// Authorization: DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED
// for its partitions, before the topic is looked up.
//
// Version notes:
// v1 is the floor (Kafka 4.0); v2 isolation level; v4 leader epochs; v6
// flexible; v7 max timestamp; v8 earliest local; v9-10 change nothing we
// answer.
func init() { regKey(2, 1, 10, (*Broker).handleListOffsets) }

func (b *Broker) handleListOffsets(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	az := b.authz(r)
	im := b.image()
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := b.partitions.Topic(rt.Topic)
		it := imageTopic(im, t)
		denied := !az.topic(aclOperationDescribe, rt.Topic)
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			switch {
			case denied:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions()):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case otherLeader(im, it, rp.Partition) != nil:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				b.listOffset(it, t.Partitions()[rp.Partition], rp, req.IsolationLevel == 1, &sp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// listOffset answers one partition; it is p's topic in the image (nil
// when the image does not hold it yet).
func (b *Broker) listOffset(it *meta.Topic, p *partition.Partition, rp *kmsg.ListOffsetsRequestTopicPartition, committed bool, sp *kmsg.ListOffsetsResponseTopicPartition) {
	if sp.ErrorCode = checkLeaderEpoch(rp.CurrentLeaderEpoch, partitionEpoch(it, p)); sp.ErrorCode != 0 {
		return
	}
	l := p.Log()
	var (
		offset, ts int64 = -1, -1
		found            = true
		err        error
	)
	switch rp.Timestamp {
	case listLatest:
		offset = l.HighWatermark()
		if committed {
			offset = l.LastStableOffset()
		}
	case listEarliest, listEarliestLocal:
		offset = l.LogStartOffset()
	case listMaxTimestamp:
		offset, ts, found, err = l.MaxTimestamp()
		found = found && offset < l.HighWatermark()
	default:
		if rp.Timestamp < 0 {
			sp.ErrorCode = kerr.InvalidRequest.Code
			return
		}
		offset, ts, found, err = l.OffsetForTimestamp(rp.Timestamp)
		// As Kafka's fetchOffsetForTimestamp: a consumer is never told of
		// a record past the high watermark (on one node it is the log
		// end, so this never hides one). Kafka also stops read_committed
		// lookups at the last stable offset; we do not, as before.
		found = found && offset < l.HighWatermark()
	}
	if err != nil {
		b.log.Warn("list offsets failed", "topic", p.Topic().Name(), "partition", p.Index(), "err", err)
		sp.ErrorCode = kerr.KafkaStorageError.Code
		return
	}
	if !found {
		return // no such record: offset and timestamp -1, as Kafka answers
	}
	sp.Offset, sp.Timestamp = offset, ts
	sp.LeaderEpoch = offsetEpoch(l, offset)
}

// offsetEpoch is the leader epoch of the batch at offset, or the latest
// epoch at the log end; -1 when unknown.
func offsetEpoch(l *storage.Log, offset int64) int32 {
	if offset >= l.LogEndOffset() {
		if e, ok := l.Epochs().Latest(); ok {
			return e.Epoch
		}
		return -1
	}
	if e, ok := l.Epochs().EpochForOffset(offset); ok {
		return e
	}
	return -1
}
