package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// ListPartitionReassignments: v0
//
// Behavior:
// The reassignments under way, each with the partition's replicas (the
// target then the leaving ones), the replicas being added and those
// leaving (kafka-reassign-partitions.sh --verify, kafka-topics
// --describe's "Adding Replicas"), of the named partitions or of every
// partition when Topics is null. Read from this node's store, which
// follows the metadata log: a partition named that is not being
// reassigned (or does not exist) is left out, as Kafka does.
//
// Authorization: DESCRIBE on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED (top level).
func init() { regKey(46, 0, 0, (*Broker).handleListPartitionReassignments) }

func (b *Broker) handleListPartitionReassignments(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if az := b.authz(r); !az.cluster(aclOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	parts, err := b.store.PartitionAssignments()
	if err != nil {
		return nil, err
	}
	var wanted map[[16]byte][]int32
	if req.Topics != nil {
		wanted = map[[16]byte][]int32{}
		for _, rt := range req.Topics {
			if t := b.partitions.Topic(rt.Topic); t != nil {
				wanted[t.ID()] = append(wanted[t.ID()], rt.Partitions...)
			}
		}
	}
	topicAt := map[[16]byte]int{}
	for _, a := range parts {
		if !a.Reassigning() || wanted != nil && !slices.Contains(wanted[a.TopicID], a.Partition) {
			continue
		}
		t := b.partitions.TopicByID(a.TopicID)
		if t == nil {
			continue
		}
		i, ok := topicAt[a.TopicID]
		if !ok {
			st := kmsg.NewListPartitionReassignmentsResponseTopic()
			st.Topic = t.Name()
			resp.Topics = append(resp.Topics, st)
			i = len(resp.Topics) - 1
			topicAt[a.TopicID] = i
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, reassignmentOf(a))
	}
	return resp, nil
}

func reassignmentOf(a state.PartitionAssignment) kmsg.ListPartitionReassignmentsResponseTopicPartition {
	sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
	sp.Partition, sp.Replicas, sp.AddingReplicas, sp.RemovingReplicas = a.Partition, a.Replicas, a.Adding, a.Removing
	if sp.AddingReplicas == nil {
		sp.AddingReplicas = []int32{}
	}
	if sp.RemovingReplicas == nil {
		sp.RemovingReplicas = []int32{}
	}
	return sp
}
