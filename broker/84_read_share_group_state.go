package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// ReadShareGroupState: v0
//
// Behavior:
// Between nodes: a share partition's leader reads the start offset (-1:
// none), state epoch and in-flight state batches the group's coordinator
// holds (share_partitions.go): when it loads the partition, to restore
// what the previous leader wrote, and when a member opens a session, to
// see an admin's reset.
//
// Authorization: CLUSTER_ACTION on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED for every partition.
func init() { regKey(readShareGroupStateKey, 0, 0, (*Broker).handleReadShareGroupState) }

const readShareGroupStateKey = 84

func (b *Broker) handleReadShareGroupState(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ReadShareGroupStateRequest)
	code := int16(0)
	if az := b.authz(r); !b.cfg.ShareProtocol() {
		code = kerr.UnsupportedVersion.Code
	} else if !az.cluster(aclOperationClusterAction) {
		code = kerr.ClusterAuthorizationFailed.Code
	} else {
		code = b.coordinatorError(meta.CoordinatorGroup, req.GroupID)
	}
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewReadShareGroupStateResponseTopic()
			st.TopicID = rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewReadShareGroupStateResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	return b.readShareGroupState(req), nil
}
