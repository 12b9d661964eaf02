package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// alterPartitionRequest is an AlterPartition v version from broker id at
// epoch, for one partition of topic "orders" (by name before v2, by id
// from v2); epochs, at v3, are the members' broker epochs.
func alterPartitionRequest(version int16, id int32, epoch int64, topic state.Topic, p, leaderEpoch, partitionEpoch int32, isr []int32, epochs []int64) *kmsg.AlterPartitionRequest {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version, req.BrokerID, req.BrokerEpoch = version, id, epoch
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.Topic, rt.TopicID = topic.Name, topic.ID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch, rp.NewISR = p, leaderEpoch, partitionEpoch, isr
	for i, m := range isr {
		e := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		e.BrokerID, e.BrokerEpoch = m, -1
		if epochs != nil {
			e.BrokerEpoch = epochs[i]
		}
		rp.NewEpochISR = append(rp.NewEpochISR, e)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// AlterPartition over the CONTROLLER listener at each version: a
// partition of replicas [2 3] led by broker 2 expands and shrinks its
// ISR, and the refusals carry Kafka's codes.
func TestAlterPartitionOverTheWire(t *testing.T) {
	t.Parallel()
	b, rc, l := newControllerBroker(t)
	epochs := map[int32]int64{}
	for _, id := range []int32{2, 3} {
		reg := rc.roundTrip(registrationRequest(b, id, 1)).(*kmsg.BrokerRegistrationResponse)
		if reg.ErrorCode != 0 {
			t.Fatalf("registering %d: %+v", id, reg)
		}
		epochs[id] = reg.BrokerEpoch
	}
	for _, id := range []int32{2, 3} {
		if hb := rc.roundTrip(heartbeatRequest(id, epochs[id], int64(l.Applied()), false)).(*kmsg.BrokerHeartbeatResponse); hb.ErrorCode != 0 || hb.IsFenced {
			t.Fatalf("heartbeat of %d: %+v", id, hb)
		}
	}
	orders := state.Topic{Name: "orders", ID: [16]byte{5}, Partitions: 1}
	ops, err := state.TopicOps(orders)
	if err != nil {
		t.Fatal(err)
	}
	op, err := state.PartitionOp(state.PartitionAssignment{TopicID: orders.ID, Replicas: []int32{2, 3}, ISR: []int32{2},
		Leader: 2, LeaderEpoch: 1, PartitionEpoch: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Apply(t.Context(), append(ops, op)); err != nil {
		t.Fatal(err)
	}
	unknown := state.Topic{Name: "nope", ID: [16]byte{6}}
	recovering := alterPartitionRequest(1, 2, epochs[2], orders, 0, 1, 5, []int32{2, 3}, nil)
	recovering.Topics[0].Partitions[0].LeaderRecoveryState = 1
	for _, tc := range []struct {
		name     string
		req      *kmsg.AlterPartitionRequest
		top      *kerr.Error
		want     *kerr.Error
		isr      []int32
		pe       int32
		wantName bool
	}{
		{"v0 expands by name", alterPartitionRequest(0, 2, epochs[2], orders, 0, 1, 4, []int32{2, 3}, nil), nil, nil, []int32{2, 3}, 5, true},
		{"v2 from the stale partition epoch", alterPartitionRequest(2, 2, epochs[2], orders, 0, 1, 4, []int32{2}, nil), nil, kerr.InvalidUpdateVersion, nil, 0, false},
		{"v3 shrinks with epochs", alterPartitionRequest(3, 2, epochs[2], orders, 0, 1, 5, []int32{2}, []int64{epochs[2]}), nil, nil, []int32{2}, 6, false},
		{"v3 unchanged", alterPartitionRequest(3, 2, epochs[2], orders, 0, 1, 6, []int32{2}, nil), nil, nil, []int32{2}, 6, false},
		{"v3 adds a member at another epoch", alterPartitionRequest(3, 2, epochs[2], orders, 0, 1, 6, []int32{2, 3}, []int64{epochs[2], epochs[3] - 1}), nil, kerr.IneligibleReplica, nil, 0, false},
		{"v2 from a follower", alterPartitionRequest(2, 3, epochs[3], orders, 0, 1, 6, []int32{2, 3}, nil), nil, kerr.NotLeaderForPartition, nil, 0, false},
		{"v2 from an older leader epoch", alterPartitionRequest(2, 2, epochs[2], orders, 0, 0, 6, []int32{2, 3}, nil), nil, kerr.FencedLeaderEpoch, nil, 0, false},
		{"v1 into recovery", recovering, nil, kerr.InvalidRequest, nil, 0, true},
		{"v0 an unknown topic name", alterPartitionRequest(0, 2, epochs[2], unknown, 0, 1, 6, []int32{2}, nil), nil, kerr.UnknownTopicOrPartition, nil, 0, true},
		{"v2 an unknown topic id", alterPartitionRequest(2, 2, epochs[2], unknown, 0, 1, 6, []int32{2}, nil), nil, kerr.UnknownTopicID, nil, 0, false},
		{"v2 an unknown partition", alterPartitionRequest(2, 2, epochs[2], orders, 1, 1, 6, []int32{2}, nil), nil, kerr.UnknownTopicOrPartition, nil, 0, false},
		{"v3 a stale broker epoch", alterPartitionRequest(3, 2, epochs[2]-1, orders, 0, 1, 6, []int32{2, 3}, nil), kerr.StaleBrokerEpoch, nil, nil, 0, false},
	} {
		before := l.Applied()
		resp := rc.roundTrip(tc.req).(*kmsg.AlterPartitionResponse)
		if tc.top != nil {
			if resp.ErrorCode != tc.top.Code || len(resp.Topics) != 0 {
				t.Fatalf("%s: %+v, want %s alone", tc.name, resp, tc.top.Message)
			}
			continue
		}
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("%s: %+v", tc.name, resp)
		}
		rt := resp.Topics[0]
		if tc.wantName && rt.Topic != tc.req.Topics[0].Topic || !tc.wantName && rt.TopidID != tc.req.Topics[0].TopicID {
			t.Fatalf("%s: the answer names topic %q %x", tc.name, rt.Topic, rt.TopidID)
		}
		got := rt.Partitions[0]
		if tc.want != nil {
			if got.ErrorCode != tc.want.Code || l.Applied() != before {
				t.Fatalf("%s: error %d (applied %d -> %d), want %s and no entry", tc.name, got.ErrorCode, before, l.Applied(), tc.want.Message)
			}
			continue
		}
		if got.ErrorCode != 0 || got.LeaderID != 2 || got.LeaderEpoch != 1 || !slices.Equal(got.ISR, tc.isr) || got.PartitionEpoch != tc.pe || got.LeaderRecoveryState != 0 {
			t.Fatalf("%s: %+v, want ISR %v at partition epoch %d", tc.name, got, tc.isr, tc.pe)
		}
	}
	parts, err := b.store.PartitionAssignments()
	if err != nil || len(parts) != 1 || !slices.Equal(parts[0].ISR, []int32{2}) || parts[0].PartitionEpoch != 6 {
		t.Fatalf("stored %+v, %v", parts, err)
	}
}
