package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// AlterPartitionReassignments: v0-1
//
// Behavior:
// Each partition's Replicas become its reassignment's target, null
// cancels the one under way (meta.Controller.AlterReassignments;
// kafka-reassign-partitions.sh --execute and --cancel): the new replicas
// copy the partition from its leader and join its ISR, and only then do
// the leaving ones leave (reassign.go). Per partition:
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (an empty
// target, a broker twice or not registered), NO_REASSIGNMENT_IN_PROGRESS
// (a cancel of nothing), and from v1 INVALID_REPLICATION_FACTOR for a
// target of another size when AllowReplicationFactorChange is false
// (KIP-860). The request goes to the controller (forward.go); a node
// without one (a bare broker) answers INVALID_REPLICA_ASSIGNMENT: it has
// no other broker.
//
// Authorization: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED
// (top level).
//
// Version notes:
// v1 AllowReplicationFactorChange.
func init() { regKey(45, 0, 1, (*Broker).handleAlterPartitionReassignments) }

func (b *Broker) handleAlterPartitionReassignments(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	if az := b.authz(r); !az.cluster(aclOperationAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	type slot struct{ topic, partition int }
	var reqs []meta.Reassignment
	var at []slot // where each of reqs answers
	answer := func(i, j int, e *kerr.Error, msg string) {
		sp := &resp.Topics[i].Partitions[j]
		if e != nil {
			sp.ErrorCode = e.Code
			if msg == "" {
				msg = e.Message
			}
			sp.ErrorMessage = kmsg.StringPtr(msg)
		}
	}
	for i, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		t := b.partitions.Topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
		for j, rp := range rt.Partitions {
			if t == nil || t.Partition(rp.Partition) == nil {
				answer(i, j, kerr.UnknownTopicOrPartition, "")
				continue
			}
			if !req.AllowReplicationFactorChange && rp.Replicas != nil {
				rf, err := b.partitionReplicationFactor(t.ID(), rp.Partition)
				if err != nil {
					return nil, err
				}
				if rf != len(rp.Replicas) {
					answer(i, j, kerr.InvalidReplicationFactor, "The replication factor is changed but AllowReplicationFactorChange is false.")
					continue
				}
			}
			reqs = append(reqs, meta.Reassignment{PartitionRef: meta.PartitionRef{TopicID: t.ID(), Partition: rp.Partition},
				Target: rp.Replicas})
			at = append(at, slot{i, j})
		}
	}
	if len(reqs) == 0 {
		return resp, nil
	}
	c := b.cfg.Controller
	if c == nil {
		for _, s := range at {
			answer(s.topic, s.partition, kerr.InvalidReplicaAssignment, "This node is alone: there is no other broker to move a replica to.")
		}
		return resp, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(max(req.TimeoutMillis, 1000))*time.Millisecond)
	defer cancel()
	results, err := c.AlterReassignments(ctx, reqs)
	if err != nil {
		resp.ErrorCode = controllerErrorCode(err)
		return resp, nil
	}
	for k, res := range results {
		answer(at[k].topic, at[k].partition, res.Err, res.Msg)
	}
	return resp, nil
}

// partitionReplicationFactor is a partition's replica count before any
// reassignment under way (1 without an assignment).
func (b *Broker) partitionReplicationFactor(id [16]byte, p int32) (int, error) {
	parts, err := b.store.PartitionAssignments()
	if err != nil {
		return 0, err
	}
	for _, a := range parts {
		if a.TopicID == id && a.Partition == p {
			return len(a.Replicas) - len(a.Adding), nil
		}
	}
	return 1, nil
}
