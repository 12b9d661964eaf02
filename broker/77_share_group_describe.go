package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareGroupDescribe: v1
//
// Behavior:
// A share group's state (Empty or Stable), epochs, assignor ("simple")
// and members with their subscriptions and assignments; any other group,
// or none, is GROUP_ID_NOT_FOUND, as Kafka answers. Listed with
// ShareGroupHeartbeat.
//
// Authorization: DESCRIBE on each group, else an entry with only
// GROUP_AUTHORIZATION_FAILED; a group whose members subscribe to or are
// assigned a topic the caller may not describe is
// TOPIC_AUTHORIZATION_FAILED, as in Kafka.
//
// Version notes:
// v1 (Kafka 4.1) is the first version Kafka serves.
func init() { regKey(shareGroupDescribeKey, 1, 1, (*Broker).handleShareGroupDescribe) }

const shareGroupDescribeKey = 77

func (b *Broker) handleShareGroupDescribe(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	az := b.authz(r)
	for _, name := range req.GroupIDs {
		code := kerr.GroupAuthorizationFailed.Code
		switch {
		case !b.cfg.ShareProtocol():
			code = kerr.UnsupportedVersion.Code
		case az.group(aclOperationDescribe, name):
			code = b.groupCoordinatorError(&az, aclOperationDescribe, name)
		}
		if code != 0 {
			dg := kmsg.NewShareGroupDescribeResponseGroup()
			dg.GroupID, dg.ErrorCode = name, code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		one := *req
		one.GroupIDs = []string{name}
		dg := b.groups.ShareGroupDescribe(&one).Groups[0]
		if denied := shareTopicDenied(&az, dg); denied != "" {
			// As Kafka: the group's members would show a topic the
			// caller may not describe.
			msg := "not authorized to describe topic " + denied
			dg = kmsg.NewShareGroupDescribeResponseGroup()
			dg.GroupID, dg.ErrorCode, dg.ErrorMessage = name, kerr.TopicAuthorizationFailed.Code, &msg
		}
		if req.IncludeAuthorizedOperations && az.on() {
			dg.AuthorizedOperations = az.operations(aclResourceGroup, name, groupOperations)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}

// shareTopicDenied is a topic that a member of dg subscribes to or is
// assigned and the caller may not describe, or "".
func shareTopicDenied(az *authzCtx, dg kmsg.ShareGroupDescribeResponseGroup) string {
	if !az.on() {
		return ""
	}
	for _, m := range dg.Members {
		for _, name := range m.SubscribedTopicNames {
			if !az.topicQuietly(aclOperationDescribe, name) {
				return name
			}
		}
		for _, tp := range m.Assignment.TopicPartitions {
			if !az.topicQuietly(aclOperationDescribe, tp.Topic) {
				return tp.Topic
			}
		}
	}
	return ""
}
