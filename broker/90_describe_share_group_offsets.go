package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeShareGroupOffsets: v0-1
//
// Behavior:
// The start offsets of share groups (group/share_offsets.go): of the
// partitions asked for, -1 where there is none, or (v1, no topics) of
// every partition that has one; a group that is not a share group is
// GROUP_ID_NOT_FOUND. Lag (v1) is -1. Listed with ShareGroupHeartbeat.
//
// Authorization: DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED;
// then DESCRIBE on each topic asked for, else its partitions answer
// TOPIC_AUTHORIZATION_FAILED; a request for every topic silently leaves
// out the topics without DESCRIBE.
//
// Version notes:
// v1 (Kafka 4.1) every topic when none is named, and Lag.
func init() {
	regKey(describeShareGroupOffsetsKey, 0, 1, (*Broker).handleDescribeShareGroupOffsets)
}

const describeShareGroupOffsetsKey = 90

func (b *Broker) handleDescribeShareGroupOffsets(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	az := b.authz(r)
	for _, rg := range req.Groups {
		code := kerr.GroupAuthorizationFailed.Code
		switch {
		case !b.cfg.ShareProtocol():
			code = kerr.UnsupportedVersion.Code
		case az.group(aclOperationDescribe, rg.GroupID):
			code = b.groupCoordinatorError(&az, aclOperationDescribe, rg.GroupID)
		}
		if code != 0 {
			dg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			dg.GroupID, dg.ErrorCode = rg.GroupID, code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		var denied []kmsg.DescribeShareGroupOffsetsRequestGroupTopic
		if az.on() && rg.Topics != nil {
			var allowed []kmsg.DescribeShareGroupOffsetsRequestGroupTopic
			for _, rt := range rg.Topics {
				if az.topic(aclOperationDescribe, rt.Topic) {
					allowed = append(allowed, rt)
				} else {
					denied = append(denied, rt)
				}
			}
			rg.Topics = allowed
			if rg.Topics == nil {
				rg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{}
			}
		}
		one := *req
		one.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{rg}
		dg := b.groups.DescribeShareGroupOffsets(&one).Groups[0]
		if az.on() && rg.Topics == nil {
			kept := dg.Topics[:0]
			for _, t := range dg.Topics {
				if az.topicQuietly(aclOperationDescribe, t.Topic) {
					kept = append(kept, t)
				}
			}
			dg.Topics = kept
		}
		for _, rt := range denied {
			dt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			dt.Topic = rt.Topic
			for _, p := range rt.Partitions {
				dp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				dp.Partition, dp.StartOffset, dp.LeaderEpoch, dp.Lag = p, -1, -1, -1
				dp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				dt.Partitions = append(dt.Partitions, dp)
			}
			dg.Topics = append(dg.Topics, dt)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}
