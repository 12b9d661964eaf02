package node

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// A share group keeps its members across the loss of its coordinator
// (KIP-932): their epochs and assignments are in __consumer_offsets, so
// the partition's new leader serves them as they were and their next
// heartbeat goes on, with no rejoin.
func TestClusterShareGroupKeepsItsMembersAcrossTheCoordinator(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, logsOnFailure(t), func(cfg *broker.Config) {
		cfg.GroupRebalanceProtocols = []string{"classic", "consumer", "share"}
	})
	ctx := t.Context()
	if _, err := c.client(0).CreateTopic(ctx, 3, 3, nil, "work"); err != nil {
		t.Fatal(err)
	}
	epochs := map[string]int32{}
	heartbeat := func(member string, join bool) *kmsg.ShareGroupHeartbeatResponse {
		t.Helper()
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.Version, req.GroupID, req.MemberID, req.MemberEpoch = 1, "workers", member, epochs[member]
		if join {
			req.MemberEpoch, req.SubscribedTopicNames = 0, []string{"work"}
		}
		// Retried as a client retries: while __consumer_offsets is
		// created, and while its partition moves and loads.
		var resp *kmsg.ShareGroupHeartbeatResponse
		testutil.CheckFor(t, 30*time.Second, func() (err error) {
			if resp, err = req.RequestWith(ctx, nodetest.Client(t, c.addrs())); err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			if err != nil && !kerr.IsRetriable(err) {
				t.Fatalf("%s's heartbeat at epoch %d: %v", member, req.MemberEpoch, err)
			}
			return err
		})
		epochs[member] = resp.MemberEpoch
		return resp
	}
	describe := func() string {
		t.Helper()
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.Version, req.GroupIDs = 1, []string{"workers"}
		var resp *kmsg.ShareGroupDescribeResponse
		testutil.CheckFor(t, 30*time.Second, func() (err error) {
			if resp, err = req.RequestWith(ctx, nodetest.Client(t, c.addrs())); err == nil {
				err = kerr.ErrorForCode(resp.Groups[0].ErrorCode)
			}
			if err != nil && !kerr.IsRetriable(err) {
				t.Fatalf("ShareGroupDescribe: %v", err)
			}
			return err
		})
		js, _ := json.Marshal(resp.Groups[0])
		return string(js)
	}
	heartbeat("m1", true)
	heartbeat("m2", true)
	heartbeat("m1", false) // takes its share of the epoch m2 joined at
	before := describe()
	coordinator, err := groupCoordinator(ctx, nodetest.Client(t, []string{c.nodes[0].Addr()}).SeedBrokers()[0], "workers")
	if err != nil {
		t.Fatal(err)
	}
	c.stop(int(coordinator - 1))
	if after := describe(); after != before {
		t.Fatalf("after node %d (the coordinator) stopped:\n%s\nbefore:\n%s", coordinator, after, before)
	}
	for _, m := range []string{"m1", "m2"} {
		was := epochs[m]
		if resp := heartbeat(m, false); resp.MemberEpoch != was {
			t.Fatalf("%s at epoch %d after the move, was %d", m, resp.MemberEpoch, was)
		}
	}
	if fmt.Sprint(epochs) != "map[m1:2 m2:2]" {
		t.Fatalf("epochs %v, want both members at the group's epoch 2", epochs)
	}
}
