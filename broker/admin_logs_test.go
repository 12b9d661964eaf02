package broker

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// Admin APIs on partition logs: records, log dirs, epochs, the cluster, restarts.

func TestAdminDeleteRecords(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	ctx := adminCtx(t)
	cl, adm := adminClient(t, b)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "trim"); err != nil {
		t.Fatal(err)
	}
	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	if _, err := adm.CreateTopic(ctx, 1, 1, compact, "trim-compact"); err != nil {
		t.Fatal(err)
	}
	// An internal topic: its policy aside, DeleteRecords would cut the
	// coordinator's state.
	if co := adm.FindGroupCoordinators(ctx, "g")["g"]; co.Err != nil {
		t.Fatal(co.Err)
	}
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: kadm.StringPtr("delete")}},
		meta.GroupTopic); err != nil {
		t.Fatal(err)
	}
	prod := adminProducer(t, b)
	adminProduce(t, ctx, prod, "trim", 0, 20)
	adminProduce(t, ctx, prod, "trim", 1, 5)

	for i, st := range []struct {
		topic string
		p     int32
		at    int64
		err   error
		low   int64 // the answer, and the earliest offset after it
	}{
		{"trim", 0, 8, nil, 8},
		{"trim", 0, 3, nil, 8}, // below the log start: nothing moves
		{"trim", 0, 21, kerr.OffsetOutOfRange, -1},
		{"trim", 1, -1, nil, 5}, // -1: the high watermark
		{"trim-compact", 0, 0, kerr.PolicyViolation, -1},
		{meta.GroupTopic, 0, -1, kerr.InvalidTopicException, -1},
	} {
		var os kadm.Offsets
		os.AddOffset(st.topic, st.p, st.at, -1)
		rs, err := adm.DeleteRecords(ctx, os)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := rs.Lookup(st.topic, st.p)
		if !errors.Is(r.Err, st.err) || r.LowWatermark != st.low {
			t.Fatalf("step %d %+v: answered %+v", i, st, r)
		}
		if st.err != nil {
			continue
		}
		lo, err := adm.ListStartOffsets(ctx, st.topic)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := lo.Lookup(st.topic, st.p); o.Offset != st.low {
			t.Fatalf("step %d: earliest offset %d, want %d", i, o.Offset, st.low)
		}
	}
	recs := adminConsume(t, ctx, b, "trim", 0, 12)
	if recs[0].Offset != 8 || string(recs[0].Value) != "trim/0/8" {
		t.Fatalf("consumer from start began at %d %q", recs[0].Offset, recs[0].Value)
	}
	if offs := adminProduce(t, ctx, prod, "trim", 1, 1); offs[0] != 5 {
		t.Fatalf("produce after emptying the partition landed at %d", offs[0])
	}

	// Unknown partitions, sent straight to the broker: kgo would refuse
	// them before sending.
	req := kmsg.NewPtrDeleteRecordsRequest()
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"trim", 7}, {"nope", 0}} {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = tp.topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = tp.p, 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	kr, err := cl.Broker(int(b.cfg.NodeID)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range kr.(*kmsg.DeleteRecordsResponse).Topics {
		if p := rt.Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.LowWatermark != -1 {
			t.Errorf("%s-%d: %+v", rt.Topic, p.Partition, p)
		}
	}
}

func TestAdminDescribeLogDirs(t *testing.T) {
	t.Parallel()
	var dirs []string
	b := newTestBroker(t, func(c *Config) {
		c.LogDirs = []string{t.TempDir(), t.TempDir()}
		dirs = c.LogDirs
	})
	ctx := adminCtx(t)
	_, adm := adminClient(t, b)
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "dirs"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "dirs-other"); err != nil {
		t.Fatal(err)
	}

	describe := func(s kadm.TopicsSet) kadm.DescribedLogDirs {
		t.Helper()
		all, err := adm.DescribeAllLogDirs(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		ds, ok := all[b.cfg.NodeID]
		if !ok || len(ds) != len(dirs) {
			t.Fatalf("described %+v, want %d dirs of node %d", all, len(dirs), b.cfg.NodeID)
		}
		for _, d := range dirs {
			abs, _ := filepath.Abs(d)
			ld, ok := ds[abs]
			if !ok || ld.Err != nil {
				t.Fatalf("dir %s: %+v", abs, ld)
			}
			if ld.TotalBytes <= 0 || ld.UsableBytes < 0 || ld.UsableBytes > ld.TotalBytes {
				t.Errorf("dir %s: total %d usable %d", abs, ld.TotalBytes, ld.UsableBytes)
			}
		}
		return ds
	}
	sizes := func(ds kadm.DescribedLogDirs, topic string, wantDirs int) map[int32]int64 {
		out := map[int32]int64{}
		perDir := map[string]int{}
		for dir, ld := range ds {
			for p, dp := range ld.Topics[topic] {
				if _, dup := out[p]; dup {
					t.Fatalf("%s-%d listed in two dirs", topic, p)
				}
				out[p] = dp.Size
				perDir[dir]++
				if dp.OffsetLag != 0 || dp.IsFuture {
					t.Errorf("%s-%d: %+v", topic, p, dp)
				}
			}
		}
		if len(perDir) != wantDirs {
			t.Errorf("partitions of %s by dir: %v, want %d dirs used", topic, perDir, wantDirs)
		}
		return out
	}

	before := sizes(describe(nil), "dirs", 2)
	if len(before) != 4 {
		t.Fatalf("sizes %v, want 4 partitions", before)
	}
	prod := adminProducer(t, b)
	adminProduce(t, ctx, prod, "dirs", 2, 10)
	after := sizes(describe(nil), "dirs", 2)
	if after[2] <= before[2] || after[0] != before[0] {
		t.Fatalf("sizes before %v after %v: partition 2 should grow alone", before, after)
	}

	var only kadm.TopicsSet
	only.Add("dirs", 2)
	ds := describe(only)
	if got := sizes(ds, "dirs", 1); len(got) != 1 || got[2] != after[2] {
		t.Fatalf("filtered sizes %v", got)
	}
	if got := sizes(ds, "dirs-other", 0); len(got) != 0 {
		t.Fatalf("filtered request listed dirs-other: %v", got)
	}
}

func TestAdminOffsetForLeaderEpoch(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	ctx := adminCtx(t)
	cl, adm := adminClient(t, b)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "epochs"); err != nil {
		t.Fatal(err)
	}
	adminProduce(t, ctx, adminProducer(t, b), "epochs", 0, 7)

	cases := []struct {
		p, current, epoch int32
		code              int16
		wantEpoch         int32
		wantOffset        int64
	}{
		{0, -1, 0, 0, 0, 7},
		{0, 0, 0, 0, 0, 7},
		{1, -1, 0, 0, 0, 0},   // empty log: the current epoch ends at the log end
		{0, -1, 3, 0, -1, -1}, // above the current epoch
		{0, -1, -1, 0, -1, -1},
		{0, 1, 0, kerr.UnknownLeaderEpoch.Code, -1, -1}, // a client ahead of us
		{9, -1, 0, kerr.UnknownTopicOrPartition.Code, -1, -1},
	}
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "epochs"
	for _, c := range cases {
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = c.p, c.current, c.epoch
		rt.Partitions = append(rt.Partitions, rp)
	}
	missing := kmsg.NewOffsetForLeaderEpochRequestTopic()
	missing.Topic, missing.Partitions = "no-such-topic", rt.Partitions[:1]
	req.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{rt, missing}
	kr, err := cl.Broker(int(b.cfg.NodeID)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kr.(*kmsg.OffsetForLeaderEpochResponse)
	if len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != len(cases) {
		t.Fatalf("answer %+v", resp.Topics)
	}
	for i, c := range cases {
		p := resp.Topics[0].Partitions[i]
		if p.ErrorCode != c.code || p.LeaderEpoch != c.wantEpoch || p.EndOffset != c.wantOffset {
			t.Errorf("case %d %+v: got code %d epoch %d offset %d", i, c, p.ErrorCode, p.LeaderEpoch, p.EndOffset)
		}
	}
	if p := resp.Topics[1].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.EndOffset != -1 {
		t.Errorf("unknown topic: %+v", p)
	}

	// The same through kadm, as clients use it.
	var r kadm.OffsetForLeaderEpochRequest
	r.Add("epochs", 0, 0)
	got, err := adm.OffsetForLeaderEpoch(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if e := got["epochs"][0]; e.Err != nil || e.LeaderEpoch != 0 || e.EndOffset != 7 {
		t.Fatalf("kadm: %+v", e)
	}
}

func TestAdminDescribeCluster(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	ctx := adminCtx(t)
	cl := newTestClient(t, b)

	tests := []struct {
		name    string
		ops     bool
		typ     int8
		code    int16
		wantOps int32
	}{
		{name: "brokers", typ: 1, wantOps: math.MinInt32},
		{name: "with operations", ops: true, typ: 1, wantOps: 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12},
		{name: "controllers", typ: 2, code: kerr.MismatchedEndpointType.Code},
		{name: "unknown endpoint", typ: 9, code: kerr.UnsupportedEndpointType.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrDescribeClusterRequest()
			req.IncludeClusterAuthorizedOperations = tt.ops
			req.EndpointType = tt.typ
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode != tt.code {
				t.Fatalf("code %d, want %d", resp.ErrorCode, tt.code)
			}
			if tt.code != 0 {
				if resp.ErrorMessage == nil {
					t.Error("no error message")
				}
				return
			}
			if resp.ClusterID != b.ClusterID() || resp.ControllerID != b.cfg.NodeID || resp.EndpointType != 1 {
				t.Errorf("cluster %q controller %d type %d", resp.ClusterID, resp.ControllerID, resp.EndpointType)
			}
			adv := b.Listeners()[0]
			if len(resp.Brokers) != 1 {
				t.Fatalf("brokers %+v", resp.Brokers)
			}
			if br := resp.Brokers[0]; br.NodeID != b.cfg.NodeID || br.Host != adv.Host || int(br.Port) != adv.Port || br.IsFenced {
				t.Errorf("broker %+v, want node %d at %s", br, b.cfg.NodeID, adv.Addr())
			}
			if resp.ClusterAuthorizedOperations != tt.wantOps {
				t.Errorf("authorized operations %d, want %d", resp.ClusterAuthorizedOperations, tt.wantOps)
			}
		})
	}
}

// TestAdminRestartPersistence restarts a node on the same directories:
// topics, IDs, partition counts, configs, offsets and records survive. A
// mirror topic, registered as the sync loop would, comes back read-only for
// growth (the sync loop grows it) but may be trimmed and deleted (SPEC.md
// refuses only writes).
func TestAdminRestartPersistence(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, func(c *Config) { c.LogDirs = append(c.LogDirs, t.TempDir()) })
	ctx := adminCtx(t)
	_, adm := adminClient(t, b)

	configs := map[string]map[string]*string{
		"keep-a": {"retention.ms": kadm.StringPtr("86400000"), "max.message.bytes": kadm.StringPtr("2000000")},
		"keep-b": {"segment.bytes": kadm.StringPtr("1048576")},
		"gone":   nil,
	}
	ids := map[string]kadm.TopicID{}
	for name, cfgs := range configs {
		r, err := adm.CreateTopic(ctx, 2, 1, cfgs, name)
		if err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
		ids[name] = r.ID
	}
	if rs, err := adm.UpdatePartitions(ctx, 3, "keep-b"); err != nil || rs["keep-b"].Err != nil {
		t.Fatalf("growing keep-b: %v %+v", err, rs)
	}
	parts := map[string]int32{"keep-a": 2, "keep-b": 3}
	prod := adminProducer(t, b)
	for name, n := range parts {
		for p := range n {
			adminProduce(t, ctx, prod, name, p, 10+int(p))
		}
	}
	var os kadm.Offsets
	os.AddOffset("keep-a", 1, 4, -1)
	if rs, err := adm.DeleteRecords(ctx, os); err != nil || rs.Error() != nil {
		t.Fatalf("delete records: %v %v", err, rs.Error())
	}
	if rs, err := adm.DeleteTopics(ctx, "gone"); err != nil || rs.Error() != nil {
		t.Fatalf("delete gone: %v %v", err, rs.Error())
	}
	prod.Close()
	mirrorID, err := partition.NewTopicID()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.PutTopic(state.Topic{Name: "mirrored", ID: mirrorID, Partitions: 2,
		Configs: map[string]string{}, Mirror: "source-a"}); err != nil {
		t.Fatal(err)
	}

	b = reopenTestBroker(t, b)
	cl, adm := adminClient(t, b)
	md, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := md["gone"]; ok || len(md) != len(parts)+1 || md["mirrored"].ID != kadm.TopicID(mirrorID) {
		t.Fatalf("topics after restart: %v", md.Names())
	}
	starts, err := adm.ListStartOffsets(ctx, "keep-a", "keep-b")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, "keep-a", "keep-b")
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range parts {
		td := md[name]
		if td.ID != ids[name] || int32(len(td.Partitions)) != n {
			t.Errorf("%s: ID %v partitions %d, want %v and %d", name, td.ID, len(td.Partitions), ids[name], n)
		}
		for k, v := range configs[name] {
			if got, ok := b.partitions.Topic(name).Config(k); !ok || got != *v {
				t.Errorf("%s: %s=%q after restart, want %q", name, k, got, *v)
			}
		}
		for p := range n {
			wantStart := int64(0)
			if name == "keep-a" && p == 1 {
				wantStart = 4
			}
			s, _ := starts.Lookup(name, p)
			e, _ := ends.Lookup(name, p)
			if s.Offset != wantStart || e.Offset != int64(10+p) {
				t.Errorf("%s-%d: offsets [%d, %d), want [%d, %d)", name, p, s.Offset, e.Offset, wantStart, 10+p)
			}
			recs := adminConsume(t, ctx, b, name, p, int(int64(10+p)-wantStart))
			for i, r := range recs {
				off := wantStart + int64(i)
				if r.Offset != off || string(r.Value) != fmt.Sprintf("%s/%d/%d", name, p, off) {
					t.Fatalf("%s-%d record %d: offset %d value %q", name, p, i, r.Offset, r.Value)
				}
			}
		}
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "mirrored", 3
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Topics[0]; r.ErrorCode != kerr.PolicyViolation.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "source-a") {
		t.Fatalf("grow a mirror topic: code %d message %v", r.ErrorCode, r.ErrorMessage)
	}
	var trim kadm.Offsets
	trim.AddOffset("mirrored", 0, 0, -1)
	if rs, err := adm.DeleteRecords(ctx, trim); err != nil || rs.Error() != nil {
		t.Fatalf("delete records of a mirror topic: %v %v", err, rs.Error())
	}
	if rs, err := adm.DeleteTopics(ctx, "mirrored"); err != nil || rs.Error() != nil {
		t.Fatalf("delete a mirror topic: %v %v", err, rs.Error())
	}
	// The restarted node keeps serving admin requests and the deleted
	// name is free again.
	r, err := adm.CreateTopic(ctx, 1, 1, nil, "gone")
	if err != nil || r.ID == ids["gone"] {
		t.Fatalf("re-creating gone: %v, ID %v (old %v)", err, r.ID, ids["gone"])
	}
}
