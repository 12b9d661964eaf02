package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// WriteShareGroupState: v0-1
//
// Behavior:
// Between nodes: a share partition's leader writes its start offset and
// in-flight state batches at every acknowledgement to the group's
// coordinator (share_partitions.go), which keeps them with the group in
// __consumer_offsets.
//
// Authorization: CLUSTER_ACTION on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED for every partition.
//
// Version notes:
// v1 DeliveryCompleteCount (ignored).
func init() { regKey(writeShareGroupStateKey, 0, 1, (*Broker).handleWriteShareGroupState) }

const writeShareGroupStateKey = 85

func (b *Broker) handleWriteShareGroupState(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.WriteShareGroupStateRequest)
	code := int16(0)
	if az := b.authz(r); !b.cfg.ShareProtocol() {
		code = kerr.UnsupportedVersion.Code
	} else if !az.cluster(aclOperationClusterAction) {
		code = kerr.ClusterAuthorizationFailed.Code
	} else {
		code = b.coordinatorError(meta.CoordinatorGroup, req.GroupID)
	}
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewWriteShareGroupStateResponseTopic()
			st.TopicID = rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	return b.writeShareGroupState(req), nil
}
