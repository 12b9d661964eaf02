package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// AlterShareGroupOffsets: v0
//
// Behavior:
// Sets start offsets of an empty share group (kafka-share-groups.sh
// --reset-offsets; the mirror's share group sync), creating the group if
// it does not exist; a group with members is NON_EMPTY_GROUP, a classic or
// consumer group GROUP_ID_NOT_FOUND. Listed with ShareGroupHeartbeat.
//
// Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED; then
// READ on each topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED.
func init() { regKey(alterShareGroupOffsetsKey, 0, 0, (*Broker).handleAlterShareGroupOffsets) }

const alterShareGroupOffsetsKey = 91

func (b *Broker) handleAlterShareGroupOffsets(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if !b.cfg.ShareProtocol() {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp, nil
	}
	az := b.authz(r)
	if !az.group(aclOperationRead, req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if code := b.coordinatorError(meta.CoordinatorGroup, req.GroupID); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	var denied []kmsg.AlterShareGroupOffsetsRequestTopic
	if az.on() {
		allowed := req.Topics[:0:0]
		for _, rt := range req.Topics {
			if az.topic(aclOperationRead, rt.Topic) {
				allowed = append(allowed, rt)
			} else {
				denied = append(denied, rt)
			}
		}
		one := *req
		one.Topics = allowed
		req = &one
	}
	resp = b.groups.AlterShareGroupOffsets(req)
	if resp.ErrorCode != 0 {
		return resp, nil // a group-level error stands alone, as in Kafka
	}
	for _, rt := range denied {
		at := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		at.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			at.Partitions = append(at.Partitions, kmsg.AlterShareGroupOffsetsResponseTopicPartition{Partition: rp.Partition,
				ErrorCode: kerr.TopicAuthorizationFailed.Code})
		}
		resp.Topics = append(resp.Topics, at)
	}
	return resp, nil
}
