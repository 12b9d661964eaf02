package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// DeleteShareGroupOffsets: v0
//
// Behavior:
// Deletes an empty share group's start offsets of whole topics
// (kafka-share-groups.sh --delete-offsets); a group with members is
// NON_EMPTY_GROUP, one that is not a share group GROUP_ID_NOT_FOUND.
// Listed with ShareGroupHeartbeat.
//
// Authorization: DELETE on the group, else GROUP_AUTHORIZATION_FAILED;
// then READ on each topic, else TOPIC_AUTHORIZATION_FAILED for it.
func init() { regKey(deleteShareGroupOffsetsKey, 0, 0, (*Broker).handleDeleteShareGroupOffsets) }

const deleteShareGroupOffsetsKey = 92

func (b *Broker) handleDeleteShareGroupOffsets(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if !b.cfg.ShareProtocol() {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp, nil
	}
	az := b.authz(r)
	if !az.group(aclOperationDelete, req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if code := b.coordinatorError(meta.CoordinatorGroup, req.GroupID); code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	var denied []string
	if az.on() {
		var allowed []kmsg.DeleteShareGroupOffsetsRequestTopic
		for _, rt := range req.Topics {
			if az.topic(aclOperationRead, rt.Topic) {
				allowed = append(allowed, rt)
			} else {
				denied = append(denied, rt.Topic)
			}
		}
		one := *req
		one.Topics = allowed
		req = &one
	}
	resp = b.groups.DeleteShareGroupOffsets(req)
	if resp.ErrorCode != 0 {
		return resp, nil // a group-level error stands alone, as in Kafka
	}
	for _, name := range denied {
		resp.Topics = append(resp.Topics, kmsg.DeleteShareGroupOffsetsResponseTopic{Topic: name,
			ErrorCode: kerr.TopicAuthorizationFailed.Code})
	}
	return resp, nil
}
