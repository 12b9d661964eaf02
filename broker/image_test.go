package broker

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// The other broker of the two-broker images below.
const (
	node2Host  = "node2.example"
	node2Port  = 19092
	node2Epoch = 7 // leader epoch of node 2's partitions
)

var node2Rack = "r2"

// installTwoBrokerImage installs (the test hook) an image of two brokers,
// this node and node 2, the controller, in which node 2 leads the listed
// partitions of the node's topics at epoch node2Epoch, replicas {2, self},
// and this node the others as before. extra topics exist in the image only.
// A later topic change rebuilds the one-node image: install last.
func installTwoBrokerImage(t testing.TB, b *Broker, theirs map[string][]int32, extra ...*meta.Topic) *meta.Image {
	t.Helper()
	b.imgMu.Lock()
	defer b.imgMu.Unlock()
	self := b.cfg.NodeID
	bd := meta.NewBuilder(b.store.ClusterID(), self, 2)
	var ls []meta.Listener
	for _, l := range b.advertised {
		ls = append(ls, meta.Listener{Name: l.Name, Host: l.Host, Port: int32(l.Port)})
	}
	bd.AddBroker(meta.Broker{ID: self, Listeners: ls})
	bd.AddBroker(meta.Broker{ID: 2, Rack: &node2Rack, Listeners: []meta.Listener{{Name: "PLAINTEXT", Host: node2Host, Port: node2Port}}})
	for _, tp := range b.partitions.Topics() {
		mt := &meta.Topic{Name: tp.Name(), ID: tp.ID()}
		for _, p := range tp.Partitions() {
			mp := meta.Partition{Leader: self, LeaderEpoch: p.LeaderEpoch(), Replicas: []int32{self, 2}, ISR: []int32{self, 2}}
			for _, q := range theirs[tp.Name()] {
				if q == p.Index() {
					mp = meta.Partition{Leader: 2, LeaderEpoch: node2Epoch, Replicas: []int32{2, self}, ISR: []int32{2}}
				}
			}
			mt.Partitions = append(mt.Partitions, mp)
		}
		bd.AddTopic(mt)
	}
	for _, mt := range extra {
		bd.AddTopic(mt)
	}
	im := bd.Build()
	b.img.Store(im)
	return im
}

func TestImageOneNode(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "one-node", 2)
	mustAppend(t, tp.Partitions()[1], plainBatch(1, 10), 4)
	im := b.image()
	if len(im.Brokers()) != 1 || im.Brokers()[0].ID != b.cfg.NodeID || im.Controller() != b.cfg.NodeID ||
		im.ClusterID() != b.ClusterID() {
		t.Fatalf("brokers %+v, controller %d, cluster %q", im.Brokers(), im.Controller(), im.ClusterID())
	}
	if l, _ := im.Broker(b.cfg.NodeID).Listener("PLAINTEXT"); fmt.Sprintf("%s:%d", l.Host, l.Port) != b.Addr() {
		t.Fatalf("listener %+v, want %s", l, b.Addr())
	}
	for i, want := range []int32{0, 4} { // the append in epoch 4 published it
		p := im.Partition("one-node", int32(i))
		if p == nil || p.Leader != b.cfg.NodeID || p.LeaderEpoch != want ||
			!reflect.DeepEqual(p.Replicas, []int32{b.cfg.NodeID}) || !reflect.DeepEqual(p.ISR, []int32{b.cfg.NodeID}) {
			t.Fatalf("partition %d: %+v, want led by %d at epoch %d", i, p, b.cfg.NodeID, want)
		}
	}
	if c, ok := im.Coordinator(meta.CoordinatorGroup, "g"); !ok || c.ID != b.cfg.NodeID {
		t.Fatalf("coordinator %+v", c)
	}
	if err := b.deleteTopic(tp); err != nil {
		t.Fatal(err)
	}
	if b.image().Topic("one-node") != nil {
		t.Fatal("a deleted topic is still in the image")
	}
}

func TestImageTwoBrokersDescribe(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "two-md", 2)
	offsets := &meta.Topic{Name: meta.GroupTopic, Partitions: []meta.Partition{{Leader: 2, Replicas: []int32{2}, ISR: []int32{2}}}}
	installTwoBrokerImage(t, b, map[string][]int32{"two-md": {1}}, offsets)
	rc := dialRaw(t, b)
	self := b.cfg.NodeID
	wantBrokers := []kmsg.MetadataResponseBroker{
		{NodeID: self, Host: b.Listeners()[0].Host, Port: int32(b.Listeners()[0].Port)},
		{NodeID: 2, Host: node2Host, Port: node2Port, Rack: &node2Rack},
	}

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	name := tp.Name()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
	mresp := rc.roundTrip(md).(*kmsg.MetadataResponse)
	if !reflect.DeepEqual(mresp.Brokers, wantBrokers) || mresp.ControllerID != 2 {
		t.Fatalf("Metadata brokers %+v controller %d, want %+v controller 2", mresp.Brokers, mresp.ControllerID, wantBrokers)
	}
	if len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) != 2 {
		t.Fatalf("Metadata topics %+v", mresp.Topics)
	}
	for _, mp := range mresp.Topics[0].Partitions {
		leader, epoch, replicas, isr := self, int32(0), []int32{self, 2}, []int32{self, 2}
		if mp.Partition == 1 {
			leader, epoch, replicas, isr = 2, node2Epoch, []int32{2, self}, []int32{2}
		}
		if mp.ErrorCode != 0 || mp.Leader != leader || mp.LeaderEpoch != epoch ||
			!reflect.DeepEqual(mp.Replicas, replicas) || !reflect.DeepEqual(mp.ISR, isr) {
			t.Fatalf("Metadata partition %+v, want leader %d epoch %d replicas %v isr %v", mp, leader, epoch, replicas, isr)
		}
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.Version = 1
	dresp := rc.roundTrip(dc).(*kmsg.DescribeClusterResponse)
	if dresp.ControllerID != 2 || len(dresp.Brokers) != 2 || dresp.Brokers[1].NodeID != 2 ||
		dresp.Brokers[1].Host != node2Host || dresp.Brokers[1].Port != node2Port || dresp.Brokers[1].Rack == nil ||
		*dresp.Brokers[1].Rack != node2Rack || dresp.Brokers[0].NodeID != self {
		t.Fatalf("DescribeCluster %+v", dresp)
	}

	// The group coordinator is the leader of the group's partition of
	// __consumer_offsets (node 2); the transaction coordinator the leader
	// of the id's partition of __transaction_state, which this image
	// lacks: the FindCoordinator creates it here, on this node (asked
	// last: the creation replaces the image).
	for _, kind := range []int8{coordinatorGroup, coordinatorTransaction} {
		want := int32(2)
		if kind == coordinatorTransaction {
			want = self
		}
		for _, v := range []int16{3, 4} {
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.Version, fc.CoordinatorType = v, kind
			fc.CoordinatorKey, fc.CoordinatorKeys = "g", []string{"g"}
			fresp := rc.roundTrip(fc).(*kmsg.FindCoordinatorResponse)
			node, port, code := fresp.NodeID, fresp.Port, fresp.ErrorCode
			if v >= 4 {
				c := fresp.Coordinators[0]
				node, port, code = c.NodeID, c.Port, c.ErrorCode
			}
			if code != 0 || node != want || want == 2 && port != node2Port {
				t.Fatalf("FindCoordinator v%d, type %d: %+v, want node %d", v, kind, fresp, want)
			}
		}
	}
}

// TestImageNotLeader: with node 2 leading partition 1, every data API
// answers it NOT_LEADER_OR_FOLLOWER and serves partition 0 as before.
func TestImageNotLeader(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := mustTopic(t, b, "two-data", 2)
	mustAppend(t, tp.Partitions()[0], plainBatch(3, 10), 0)
	mustAppend(t, tp.Partitions()[1], plainBatch(3, 10), 0)
	installTwoBrokerImage(t, b, map[string][]int32{"two-data": {1}})
	rc := dialRaw(t, b)
	notLeader := kerr.NotLeaderForPartition.Code
	wantLeader := kmsg.ProduceResponseTopicPartitionCurrentLeader{LeaderID: 2, LeaderEpoch: node2Epoch}

	t.Run("Produce", func(t *testing.T) {
		for _, v := range []int16{9, 10, 13} {
			req := produceReq(v, -1, tp, 0, plainBatch(1, 10))
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = 1, plainBatch(1, 10)
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
			resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
			ours, theirs := resp.Topics[0].Partitions[0], resp.Topics[0].Partitions[1]
			if ours.ErrorCode != 0 || ours.BaseOffset < 3 {
				t.Fatalf("v%d, own partition: %+v", v, ours)
			}
			if theirs.ErrorCode != notLeader || theirs.BaseOffset != -1 {
				t.Fatalf("v%d, node 2's partition: %+v", v, theirs)
			}
			leader := kmsg.NewProduceResponseTopicPartitionCurrentLeader()
			var brokers []kmsg.ProduceResponseBroker
			if v >= 10 {
				leader = wantLeader
				brokers = []kmsg.ProduceResponseBroker{{NodeID: 2, Host: node2Host, Port: node2Port, Rack: &node2Rack}}
			}
			if theirs.CurrentLeader.LeaderID != leader.LeaderID || theirs.CurrentLeader.LeaderEpoch != leader.LeaderEpoch ||
				!reflect.DeepEqual(resp.Brokers, brokers) {
				t.Fatalf("v%d: current leader %+v, brokers %+v; want %+v, %+v", v, theirs.CurrentLeader, resp.Brokers, leader, brokers)
			}
		}
		if end := tp.Partitions()[1].Log().LogEndOffset(); end != 3 {
			t.Fatalf("node 2's partition was appended to: log end %d, want 3", end)
		}
	})

	t.Run("Fetch", func(t *testing.T) {
		for _, v := range []int16{11, 12, 15, 16, 17} {
			req := newFetchReq(v)
			addPart(req, tp, 0, 0)
			addPart(req, tp, 1, 0).CurrentLeaderEpoch = node2Epoch
			resp := rc.roundTrip(req).(*kmsg.FetchResponse)
			ours, theirs := mustPart(t, resp, tp, 0), mustPart(t, resp, tp, 1)
			if ours.ErrorCode != 0 || len(offsetsIn(t, ours.RecordBatches)) < 3 {
				t.Fatalf("v%d, own partition: error %d, offsets %v", v, ours.ErrorCode, offsetsIn(t, ours.RecordBatches))
			}
			if theirs.ErrorCode != notLeader || len(theirs.RecordBatches) != 0 {
				t.Fatalf("v%d, node 2's partition: %+v", v, theirs)
			}
			leader := [2]int32{-1, -1}
			if v >= 12 {
				leader = [2]int32{2, node2Epoch}
			}
			var brokers []kmsg.FetchResponseBroker
			if v >= 16 {
				brokers = []kmsg.FetchResponseBroker{{NodeID: 2, Host: node2Host, Port: node2Port, Rack: &node2Rack}}
			}
			if got := [2]int32{theirs.CurrentLeader.LeaderID, theirs.CurrentLeader.LeaderEpoch}; got != leader ||
				!reflect.DeepEqual(resp.Brokers, brokers) {
				t.Fatalf("v%d: current leader %v, brokers %+v; want %v, %+v", v, got, resp.Brokers, leader, brokers)
			}
		}
	})

	// The other APIs answer partitions 0 and 1 of tp in one list.
	for _, c := range []struct {
		api      string
		versions []int16
		req      func(v int16) kmsg.Request
		ok       func(resp kmsg.Response) bool
	}{
		{"ListOffsets", []int16{1, 4, 7}, func(v int16) kmsg.Request {
			rt := kmsg.ListOffsetsRequestTopic{Topic: tp.Name(), Partitions: bothParts(func(p int32) kmsg.ListOffsetsRequestTopicPartition {
				return kmsg.ListOffsetsRequestTopicPartition{Partition: p, Timestamp: listLatest, CurrentLeaderEpoch: -1}
			})}
			return &kmsg.ListOffsetsRequest{Version: v, ReplicaID: -1, Topics: []kmsg.ListOffsetsRequestTopic{rt}}
		}, func(resp kmsg.Response) bool {
			ps := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions
			return ps[0].ErrorCode == 0 && ps[0].Offset == tp.Partitions()[0].Log().HighWatermark() && ps[1].ErrorCode == notLeader
		}},
		{"OffsetForLeaderEpoch", []int16{2, 3, 4}, func(v int16) kmsg.Request {
			rt := kmsg.OffsetForLeaderEpochRequestTopic{Topic: tp.Name(), Partitions: bothParts(func(p int32) kmsg.OffsetForLeaderEpochRequestTopicPartition {
				return kmsg.OffsetForLeaderEpochRequestTopicPartition{Partition: p, CurrentLeaderEpoch: -1}
			})}
			return &kmsg.OffsetForLeaderEpochRequest{Version: v, ReplicaID: -1, Topics: []kmsg.OffsetForLeaderEpochRequestTopic{rt}}
		}, func(resp kmsg.Response) bool {
			ps := resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions
			return ps[0].ErrorCode == 0 && ps[0].LeaderEpoch == 0 && ps[1].ErrorCode == notLeader && ps[1].EndOffset == -1
		}},
		{"DeleteRecords", []int16{0, 2}, func(v int16) kmsg.Request {
			rt := kmsg.DeleteRecordsRequestTopic{Topic: tp.Name(), Partitions: bothParts(func(p int32) kmsg.DeleteRecordsRequestTopicPartition {
				return kmsg.DeleteRecordsRequestTopicPartition{Partition: p, Offset: 1}
			})}
			return &kmsg.DeleteRecordsRequest{Version: v, Topics: []kmsg.DeleteRecordsRequestTopic{rt}}
		}, func(resp kmsg.Response) bool {
			ps := resp.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions
			return ps[0].ErrorCode == 0 && ps[0].LowWatermark == 1 && ps[1].ErrorCode == notLeader && ps[1].LowWatermark == -1
		}},
	} {
		t.Run(c.api, func(t *testing.T) {
			for _, v := range c.versions {
				if resp := rc.roundTrip(c.req(v)); !c.ok(resp) {
					t.Fatalf("v%d: %+v", v, resp)
				}
			}
		})
	}
	if start := tp.Partitions()[1].Log().LogStartOffset(); start != 0 {
		t.Fatalf("node 2's partition moved its log start to %d", start)
	}
}

// bothParts is partitions 0 and 1 of a request topic.
func bothParts[P any](mk func(p int32) P) []P { return []P{mk(0), mk(1)} }

// TestImageNotLeaderAllocs: answering a partition another node leads costs
// the Fetch path no allocation (its lookups are the image's maps and
// slices, read in place).
func TestImageNotLeaderAllocs(t *testing.T) {
	b := newTestBroker(t)
	tp := mustTopic(t, b, "two-allocs", 2)
	fillPartition(t, tp.Partitions()[0], 64<<10, 4<<10)
	installTwoBrokerImage(t, b, map[string][]int32{"two-allocs": {1}})
	req := fullFetchReq(17, tp, 1<<20) // v17: CurrentLeader and NodeEndpoints
	s := &fetchServer{b: b, req: req}
	s.serve(t)
	if allocs := testing.AllocsPerRun(100, func() { s.serve(t) }); allocs > 0 && !raceEnabled {
		t.Fatalf("a Fetch with a NOT_LEADER partition allocates %v times", allocs)
	}
}

// A topic the loaded image does not hold (opened since) is served on a
// node alone, and answered NOT_LEADER_OR_FOLLOWER in a cluster: another
// node may lead it.
func TestOtherLeaderOfATopicNewerThanTheImage(t *testing.T) {
	t.Parallel()
	alone := meta.NewBuilder("c", 1, 1).AddBroker(meta.Broker{ID: 1}).Build()
	if ip := otherLeader(alone, nil, 0); ip != nil {
		t.Fatalf("a node alone: %+v, want nil (served here)", ip)
	}
	two := meta.NewBuilder("c", 1, 1).AddBroker(meta.Broker{ID: 1}).AddBroker(meta.Broker{ID: 2}).Build()
	if ip := otherLeader(two, nil, 0); ip == nil || ip.Leader != -1 {
		t.Fatalf("a cluster: %+v, want an unknown leader", ip)
	}
}
