package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/state"
)

// AlterPartition: v0-3
//
// Behavior:
// A partition's leader asks the controller to change the partition's ISR
// (meta.Controller's AlterPartition), naming the leader epoch and the
// partition epoch of the assignment it holds. Per partition the answer is
// the assignment after the change (LeaderID, LeaderEpoch, ISR,
// PartitionEpoch, bumped when the ISR changed), or, as Kafka's
// controller answers: UNKNOWN_TOPIC_ID or UNKNOWN_TOPIC_OR_PARTITION;
// FENCED_LEADER_EPOCH for an older leader epoch, NOT_LEADER_OR_FOLLOWER
// when the sender is not the leader (or names a leader epoch the
// controller never wrote); INVALID_UPDATE_VERSION for another partition
// epoch; INVALID_REQUEST for an ISR empty, without the leader or with a
// member twice, and for LeaderRecoveryState RECOVERING (kmirror elects no
// leader uncleanly into recovery: every partition is RECOVERED);
// INELIGIBLE_REPLICA for a member that is not a replica, or that the ISR
// adds and is not registered, fenced or shutting down. The accepted
// changes of a request are one metadata log entry. A sender not
// registered at BrokerEpoch fails the whole request with
// STALE_BROKER_EPOCH (top-level ErrorCode, no topics); a node that is
// not the controller answers NOT_CONTROLLER.
//
// Authorization: CLUSTER_ACTION on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// v0-1 name topics, v2+ by topic id (Kafka's AlterPartition v2). v1
// adds LeaderRecoveryState. v3 names the ISR's members with the broker
// epochs the leader saw them at (KIP-903): a member whose epoch is not
// its registration is INELIGIBLE_REPLICA (-1 is not checked).
func init() { regKey(56, 0, 3, (*Broker).handleAlterPartition) }

// ISRChanger changes a partition's ISR through the controller, as a
// partition's leader does (node.Lifecycle's AlterISR: AlterPartition
// over the controller channel, or the controller's own call), and tells
// this node's broker epoch (-1 while unregistered), which its replica
// fetches name. AlterISR takes the members' broker epochs in isr's order
// (-1: not checked) and returns the partition's assignment after the
// change, or an error wrapping the *kerr.Error of a refusal.
type ISRChanger interface {
	AlterISR(ctx context.Context, topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, isr []int32, brokerEpochs []int64) (state.PartitionAssignment, error)
	Epoch() int64
}

func (b *Broker) handleAlterPartition(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterPartitionRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	if az := b.authz(r); !az.cluster(aclOperationClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	// The changes the controller decides, and where each answer goes.
	var changes []meta.ISRChange
	type slot struct{ topic, partition int }
	var slots []slot
	resp.Topics = make([]kmsg.AlterPartitionResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewAlterPartitionResponseTopic()
		st.Topic, st.TopidID = rt.Topic, rt.TopicID
		id, code := rt.TopicID, int16(0)
		if req.Version < 2 {
			id, code = b.topicIDOf(rt.Topic)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionResponseTopicPartition()
			sp.Partition, sp.LeaderID, sp.ErrorCode = rp.Partition, -1, code
			if code == 0 && rp.LeaderRecoveryState != 0 {
				sp.ErrorCode = kerr.InvalidRequest.Code
			}
			st.Partitions = append(st.Partitions, sp)
			if sp.ErrorCode != 0 {
				continue
			}
			ch := meta.ISRChange{TopicID: id, Partition: rp.Partition, LeaderEpoch: rp.LeaderEpoch,
				PartitionEpoch: rp.PartitionEpoch, NewISR: rp.NewISR}
			if req.Version >= 3 {
				ch.NewISR, ch.BrokerEpochs = make([]int32, 0, len(rp.NewEpochISR)), make([]int64, 0, len(rp.NewEpochISR))
				for _, m := range rp.NewEpochISR {
					ch.NewISR, ch.BrokerEpochs = append(ch.NewISR, m.BrokerID), append(ch.BrokerEpochs, m.BrokerEpoch)
				}
			}
			changes = append(changes, ch)
			slots = append(slots, slot{ti, len(st.Partitions) - 1})
		}
	}
	resp.ErrorCode = b.controllerCall("AlterPartition", func(ctx context.Context, c *meta.Controller) error {
		results, err := c.AlterPartition(ctx, req.BrokerID, req.BrokerEpoch, changes)
		if err != nil {
			return err
		}
		for i, res := range results {
			sp := &resp.Topics[slots[i].topic].Partitions[slots[i].partition]
			if res.Err != nil {
				sp.ErrorCode = res.Err.Code
				continue
			}
			p := res.Assignment
			sp.LeaderID, sp.LeaderEpoch, sp.ISR, sp.PartitionEpoch = p.Leader, p.LeaderEpoch, p.ISR, p.PartitionEpoch
		}
		return nil
	})
	if resp.ErrorCode != 0 {
		resp.Topics = nil // Kafka answers a request-level error alone
	}
	return resp, nil
}

// topicIDOf is the id of the topic named name (AlterPartition v0-1), or
// the error code of its partitions: UNKNOWN_TOPIC_OR_PARTITION when no
// topic has that name.
func (b *Broker) topicIDOf(name string) ([16]byte, int16) {
	t, err := b.store.Topic(name)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return [16]byte{}, kerr.UnknownTopicOrPartition.Code
	case err != nil:
		b.log.Error("AlterPartition: reading a topic", "topic", name, "err", err)
		return [16]byte{}, kerr.UnknownServerError.Code
	}
	return t.ID, 0
}
