package broker

import (
	"github.com/kmirror/kmirror/meta"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v2-9
//
// Behavior:
// The group coordinator (group/) stores the offsets in state/. Members commit within their generation; generation -1 without a member id is a simple commit, refused while the group has members.
//
// Authorization: READ on the group, else every partition answers
// GROUP_AUTHORIZATION_FAILED; then READ on each topic, else its partitions
// answer TOPIC_AUTHORIZATION_FAILED and only the other topics are
// committed.
//
// Version notes:
// v2 is the floor (Kafka 4.0); v6 leader epochs; v7 static members; v8 flexible. v10 (topic IDs) is not served yet.
func init() { regKey(8, 2, 9, (*Broker).handleOffsetCommit) }

func (b *Broker) handleOffsetCommit(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetCommitRequest)
	az := b.authz(r)
	denied, skip := az.offsetCommitDenied(req)
	if skip {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = denied
		return resp, nil
	}
	if code := b.coordinatorError(meta.CoordinatorGroup, req.Group); code != 0 {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = append(offsetCommitErrors(req.Topics, code), denied...)
		return resp, nil
	}
	resp := b.groups.OffsetCommit(req)
	resp.Topics = append(resp.Topics, denied...)
	return resp, nil
}
