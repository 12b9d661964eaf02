package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// ElectLeaders: v0-2
//
// Behavior:
// A preferred election (ElectionType 0, and all of v0) moves each named
// partition's leadership to its first replica when that one is live and
// in the ISR; an unclean one (1) gives a partition without a live leader
// its first live in-sync replica, else its first live replica, out of
// sync (meta.Controller.ElectLeaders; kafka-leader-election.sh). Per
// partition: no error when the leader changed, ELECTION_NOT_NEEDED,
// PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, or
// UNKNOWN_TOPIC_OR_PARTITION. Null topics elect every partition, and the
// answer leaves out those that needed no election, as Kafka's. The
// request goes to the controller (forward.go). A node without a
// controller (a bare broker) leads every partition it has: each needs no
// election.
//
// Authorization: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED
// for every partition (and the top-level error from v1).
//
// Version notes:
// v1 ElectionType and the top-level error code, v2 flexible.
func init() { regKey(43, 0, 2, (*Broker).handleElectLeaders) }

func (b *Broker) handleElectLeaders(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	topicAt := map[string]int{}
	answer := func(topic string, p int32, e *kerr.Error) {
		i, ok := topicAt[topic]
		if !ok {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = topic
			resp.Topics = append(resp.Topics, st)
			i = len(resp.Topics) - 1
			topicAt[topic] = i
		}
		sp := kmsg.NewElectLeadersResponseTopicPartition()
		sp.Partition = p
		if e != nil {
			sp.ErrorCode, sp.ErrorMessage = e.Code, kmsg.StringPtr(e.Message)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
	}
	if az := b.authz(r); !az.cluster(aclOperationAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				answer(rt.Topic, p, kerr.ClusterAuthorizationFailed)
			}
		}
		return resp, nil
	}
	var refs []meta.PartitionRef
	names := map[[16]byte]string{}
	for _, rt := range req.Topics {
		t := b.partitions.Topic(rt.Topic)
		for _, p := range rt.Partitions {
			if t == nil || t.Partition(p) == nil {
				answer(rt.Topic, p, kerr.UnknownTopicOrPartition)
				continue
			}
			names[t.ID()] = t.Name()
			refs = append(refs, meta.PartitionRef{TopicID: t.ID(), Partition: p})
		}
	}
	if req.Topics != nil && len(refs) == 0 {
		return resp, nil
	}
	c := b.cfg.Controller
	if c == nil {
		for _, ref := range refs {
			answer(names[ref.TopicID], ref.Partition, kerr.ElectionNotNeeded)
		}
		return resp, nil
	}
	if req.Topics == nil {
		refs = nil // every partition
		for _, t := range b.partitions.Topics() {
			names[t.ID()] = t.Name()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(max(req.TimeoutMillis, 1000))*time.Millisecond)
	defer cancel()
	results, err := c.ElectLeaders(ctx, req.ElectionType == 1, refs)
	if err != nil {
		code := kerr.ErrorForCode(controllerErrorCode(err)).(*kerr.Error)
		resp.ErrorCode = code.Code
		for _, ref := range refs {
			answer(names[ref.TopicID], ref.Partition, code)
		}
		return resp, nil
	}
	for _, res := range results {
		answer(names[res.TopicID], res.Partition, res.Err)
	}
	return resp, nil
}
