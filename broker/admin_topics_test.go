package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// reopenTestBroker closes b and starts a new broker on the same log and
// state directories (a restart), on a fresh port.
func reopenTestBroker(t testing.TB, b *Broker) *Broker {
	t.Helper()
	if err := b.Close(); err != nil {
		t.Fatalf("closing broker: %v", err)
	}
	b2, err := New(b.cfg)
	if err != nil {
		t.Fatalf("restarting broker: %v", err)
	}
	t.Cleanup(func() { b2.Close() })
	return b2
}

func adminCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func adminClient(t *testing.T, b *Broker, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	cl := newTestClient(t, b, opts...)
	return cl, kadm.NewClient(cl)
}

// adminProduce writes n records "<topic>/<partition>/<i>" to one
// partition, one batch per record, and returns the offsets.
func adminProduce(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partition int32, n int) []int64 {
	t.Helper()
	offsets := make([]int64, 0, n)
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(fmt.Sprintf("%s/%d/%d", topic, partition, i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("producing to %s-%d: %v", topic, partition, err)
		}
		offsets = append(offsets, r.Offset)
	}
	return offsets
}

func adminProducer(t *testing.T, b *Broker) *kgo.Client {
	return newTestClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

// adminConsume reads one partition from its start until it has n records.
// The consumer is closed at once: an idle long poll holds its fetch session
// and would slow a later DeleteTopics (it waits for every session).
func adminConsume(t *testing.T, ctx context.Context, b *Broker, topic string, partition int32, n int) []*kgo.Record {
	t.Helper()
	c := newTestClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {partition: kgo.NewOffset().AtStart()},
	}))
	defer c.Close()
	var out []*kgo.Record
	for len(out) < n {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consuming %s-%d: got %d of %d records: %v", topic, partition, len(out), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consuming %s-%d: %v", topic, partition, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if !errors.Is(got, want) {
		t.Fatalf("%s: got error %v, want %v", what, got, want)
	}
}

func TestAdminCreateTopics(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, func(c *Config) { c.NumPartitions = 3 })
	ctx := adminCtx(t)
	cl, adm := adminClient(t, b)

	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "exists.dotted"); err != nil {
		t.Fatal(err)
	}
	str := kadm.StringPtr
	tests := []struct {
		name       string
		topic      string
		partitions int32
		rf         int16
		configs    map[string]*string
		validate   bool
		wantErr    error
		wantParts  int32
	}{
		{name: "explicit", topic: "explicit", partitions: 4, rf: 1, wantParts: 4},
		{name: "default partitions and rf", topic: "defaults", partitions: -1, rf: -1, wantParts: 3},
		{name: "with configs", topic: "configured", partitions: 2, rf: 1,
			configs: map[string]*string{"retention.ms": str("1234"), "cleanup.policy": str("compact")}, wantParts: 2},
		{name: "validate only", topic: "validated", partitions: 5, rf: 1, validate: true, wantParts: 5},
		{name: "empty name", topic: "", partitions: 1, rf: 1, wantErr: kerr.InvalidTopicException},
		{name: "space in name", topic: "bad name", partitions: 1, rf: 1, wantErr: kerr.InvalidTopicException},
		{name: "dot dot", topic: "..", partitions: 1, rf: 1, wantErr: kerr.InvalidTopicException},
		{name: "too long", topic: strings.Repeat("x", 250), partitions: 1, rf: 1, wantErr: kerr.InvalidTopicException},
		{name: "collides", topic: "exists_dotted", partitions: 1, rf: 1, wantErr: kerr.InvalidTopicException},
		{name: "exists", topic: "exists.dotted", partitions: 1, rf: 1, wantErr: kerr.TopicAlreadyExists},
		{name: "metadata log", topic: "__cluster_metadata", partitions: 1, rf: 1, wantErr: kerr.InvalidRequest},
		{name: "zero partitions", topic: "p0", partitions: 0, rf: 1, wantErr: kerr.InvalidPartitions},
		{name: "negative partitions", topic: "pneg", partitions: -2, rf: 1, wantErr: kerr.InvalidPartitions},
		{name: "rf 0", topic: "rf0", partitions: 1, rf: 0, wantErr: kerr.InvalidReplicationFactor},
		{name: "rf -2", topic: "rfneg", partitions: 1, rf: -2, wantErr: kerr.InvalidReplicationFactor},
		{name: "unknown config", topic: "c1", partitions: 1, rf: 1,
			configs: map[string]*string{"no.such.config": str("1")}, wantErr: kerr.InvalidConfig},
		{name: "bad config value", topic: "c2", partitions: 1, rf: 1,
			configs: map[string]*string{"retention.ms": str("soon")}, wantErr: kerr.InvalidConfig},
		{name: "null config value", topic: "c3", partitions: 1, rf: 1,
			configs: map[string]*string{"retention.ms": nil}, wantErr: kerr.InvalidConfig},
		{name: "too many partitions", topic: "huge", partitions: adminOpMaxRecords + 1, rf: 1, validate: true,
			wantErr: kerr.PolicyViolation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			create := adm.CreateTopics
			if tt.validate {
				create = adm.ValidateCreateTopics
			}
			rs, err := create(ctx, tt.partitions, tt.rf, tt.configs, tt.topic)
			if err != nil {
				t.Fatal(err)
			}
			r, ok := rs[tt.topic]
			if !ok {
				t.Fatalf("no answer for %q in %v", tt.topic, rs)
			}
			if tt.wantErr != nil {
				wantErr(t, "create", r.Err, tt.wantErr)
				if r.ErrMessage == "" {
					t.Errorf("no error message with %v", r.Err)
				}
				return
			}
			if r.Err != nil {
				t.Fatalf("create: %v (%s)", r.Err, r.ErrMessage)
			}
			if r.NumPartitions != tt.wantParts || r.ReplicationFactor != 1 {
				t.Errorf("answered %d partitions rf %d, want %d rf 1", r.NumPartitions, r.ReplicationFactor, tt.wantParts)
			}
			if len(r.Configs) != len(topicConfigs) {
				t.Errorf("answered %d configs, want every topic config (%d)", len(r.Configs), len(topicConfigs))
			}
			for k, v := range tt.configs {
				c := r.Configs[k]
				if c.Value == nil || *c.Value != *v || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
					t.Errorf("config %s answered %+v, want %q from the topic", k, c, *v)
				}
			}
			if c := r.Configs["segment.ms"]; c.Source != kmsg.ConfigSourceDefaultConfig || c.Value == nil {
				t.Errorf("segment.ms answered %+v, want the default", c)
			}
			md, err := adm.ListTopics(ctx, tt.topic)
			if err != nil {
				t.Fatal(err)
			}
			td := md[tt.topic]
			if tt.validate {
				if !errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
					t.Fatalf("validate-only created the topic: %+v", td)
				}
				if r.ID != (kadm.TopicID{}) {
					t.Errorf("validate-only answered topic ID %v", r.ID)
				}
				return
			}
			if td.Err != nil || int32(len(td.Partitions)) != tt.wantParts {
				t.Fatalf("metadata: %+v, want %d partitions", td, tt.wantParts)
			}
			if r.ID == (kadm.TopicID{}) || r.ID != td.ID {
				t.Errorf("created with ID %v, metadata says %v", r.ID, td.ID)
			}
			for k, v := range tt.configs {
				if got := b.partitions.Topic(tt.topic).Configs()[k]; got != *v {
					t.Errorf("stored %s=%q, want %q", k, got, *v)
				}
			}
		})
	}

	t.Run("raw: manual assignment and duplicates", func(t *testing.T) {
		node := b.cfg.NodeID
		req := kmsg.NewPtrCreateTopicsRequest()
		add := func(name string, parts int32, replicas ...[]int32) {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, -1
			for i, rs := range replicas {
				a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				a.Partition, a.Replicas = int32(i), rs
				rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
			}
			req.Topics = append(req.Topics, rt)
		}
		add("assigned", -1, []int32{node}, []int32{node})
		add("dup", 1)
		add("assigned-other-node", -1, []int32{node + 1})
		add("dup", 1)
		add("assigned-twice", -1, []int32{node, node})
		add("assigned-empty", -1, []int32{})
		add("assigned-with-count", 2, []int32{node})
		want := []struct {
			topic string
			code  int16
		}{
			{"assigned", 0}, {"dup", kerr.InvalidRequest.Code},
			{"assigned-other-node", kerr.InvalidReplicaAssignment.Code},
			{"assigned-twice", kerr.InvalidReplicaAssignment.Code},
			{"assigned-empty", kerr.InvalidReplicaAssignment.Code},
			{"assigned-with-count", kerr.InvalidRequest.Code},
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != len(want) {
			t.Fatalf("answers %+v, want %+v", resp.Topics, want)
		}
		for i, w := range want {
			if got := resp.Topics[i]; got.Topic != w.topic || got.ErrorCode != w.code {
				t.Errorf("answer %d: %s code %d, want %+v", i, got.Topic, got.ErrorCode, w)
			}
		}
		if tp := b.partitions.Topic("assigned"); tp == nil || len(tp.Partitions()) != 2 || b.partitions.Topic("dup") != nil {
			t.Fatalf("assigned %+v, dup %+v", tp, b.partitions.Topic("dup"))
		}
	})
}

func TestAdminDeleteTopics(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	ctx := adminCtx(t)
	cl, adm := adminClient(t, b)
	prod := adminProducer(t, b)

	created := func(name string) kadm.TopicID {
		t.Helper()
		r, err := adm.CreateTopic(ctx, 1, 1, nil, name)
		if err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
		return r.ID
	}

	t.Run("by name, then recreate", func(t *testing.T) {
		oldID := created("del-name")
		adminProduce(t, ctx, prod, "del-name", 0, 5)
		rs, err := adm.DeleteTopics(ctx, "del-name")
		if err != nil || rs["del-name"].Err != nil {
			t.Fatalf("delete: %v %+v", err, rs)
		}
		if rs["del-name"].ID != oldID {
			t.Errorf("delete answered ID %v, want %v", rs["del-name"].ID, oldID)
		}
		if b.partitions.Topic("del-name") != nil {
			t.Fatal("topic still registered")
		}
		rs, err = adm.DeleteTopics(ctx, "del-name")
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, "second delete", rs["del-name"].Err, kerr.UnknownTopicOrPartition)

		newID := created("del-name")
		if newID == oldID {
			t.Fatal("re-created topic kept its ID")
		}
		end, err := adm.ListEndOffsets(ctx, "del-name")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := end.Lookup("del-name", 0); o.Err != nil || o.Offset != 0 {
			t.Fatalf("re-created topic's end offset: %+v, want 0", o)
		}
		// A new client: one that produced to the old topic holds its ID
		// and gets UNKNOWN_TOPIC_ID until its metadata refreshes, as with
		// Kafka.
		if offs := adminProduce(t, ctx, adminProducer(t, b), "del-name", 0, 1); offs[0] != 0 {
			t.Fatalf("first record of the re-created topic at offset %d", offs[0])
		}
	})

	t.Run("old version by name", func(t *testing.T) {
		created("del-old")
		old := newTestClient(t, b, kgo.MaxVersions(kversion.V2_7_0()))
		rs, err := kadm.NewClient(old).DeleteTopics(ctx, "del-old", "del-old-missing")
		if err != nil {
			t.Fatal(err)
		}
		if rs["del-old"].Err != nil {
			t.Fatalf("delete: %v", rs["del-old"].Err)
		}
		wantErr(t, "missing", rs["del-old-missing"].Err, kerr.UnknownTopicOrPartition)
		if b.partitions.Topic("del-old") != nil {
			t.Fatal("topic still registered")
		}
	})

	t.Run("raw by ID and refusals", func(t *testing.T) {
		id, both, twice := created("del-id"), created("del-both"), created("del-twice")
		bothName, twiceName := "del-both", "del-twice"
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Topics = []kmsg.DeleteTopicsRequestTopic{
			{TopicID: id},
			{TopicID: [16]byte{1, 2, 3}},          // unknown
			{},                                    // neither name nor ID
			{Topic: &bothName, TopicID: both},     // both
			{Topic: &twiceName}, {TopicID: twice}, // one topic twice
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		bad := kerr.InvalidRequest.Code
		want := []int16{0, kerr.UnknownTopicID.Code, bad, bad, bad, bad}
		if len(resp.Topics) != len(want) {
			t.Fatalf("answers: %+v", resp.Topics)
		}
		for i, w := range want {
			if resp.Topics[i].ErrorCode != w {
				t.Errorf("entry %d: code %d, want %d", i, resp.Topics[i].ErrorCode, w)
			}
		}
		if got := resp.Topics[0]; got.Topic == nil || *got.Topic != "del-id" || got.TopicID != id {
			t.Errorf("deleted entry answered %v %v", got.Topic, got.TopicID)
		}
		if b.partitions.Topic("del-id") != nil || b.partitions.Topic("del-both") == nil || b.partitions.Topic("del-twice") == nil {
			t.Fatal("wrong topics deleted")
		}
	})
}

func TestAdminCreatePartitions(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	ctx := adminCtx(t)
	cl, adm := adminClient(t, b)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "grow"); err != nil {
		t.Fatal(err)
	}

	rs, err := adm.CreatePartitions(ctx, 2, "grow")
	if err != nil || rs["grow"].Err != nil {
		t.Fatalf("grow: %v %+v", err, rs)
	}
	md, err := adm.ListTopics(ctx, "grow")
	if err != nil || len(md["grow"].Partitions) != 4 {
		t.Fatalf("after growing: %v %+v", err, md)
	}

	tests := []struct {
		name     string
		set      int
		validate bool
		want     error
		msg      string
	}{
		{name: "shrink", set: 3, want: kerr.InvalidPartitions, msg: "currently has 4 partition(s); 3 would not be an increase"},
		{name: "same", set: 4, want: kerr.InvalidPartitions, msg: "already has 4 partition(s)"},
		{name: "validate only", set: 10, validate: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			update := adm.UpdatePartitions
			if tt.validate {
				update = adm.ValidateUpdatePartitions
			}
			rs, err := update(ctx, tt.set, "grow")
			if err != nil {
				t.Fatal(err)
			}
			wantErr(t, "update", rs["grow"].Err, tt.want)
			if !strings.Contains(rs["grow"].ErrMessage, tt.msg) {
				t.Errorf("message %q, want it to contain %q", rs["grow"].ErrMessage, tt.msg)
			}
			if n := len(b.partitions.Topic("grow").Partitions()); n != 4 {
				t.Fatalf("topic has %d partitions, want 4", n)
			}
		})
	}

	t.Run("raw checks", func(t *testing.T) {
		node, other := []int32{b.cfg.NodeID}, []int32{b.cfg.NodeID + 1}
		topic := func(name string, count int32, assign ...[]int32) kmsg.CreatePartitionsRequestTopic {
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = name, count
			for _, rs := range assign {
				a := kmsg.NewCreatePartitionsRequestTopicAssignment()
				a.Replicas = rs
				rt.Assignment = append(rt.Assignment, a)
			}
			return rt
		}
		type topics = []kmsg.CreatePartitionsRequestTopic
		for _, c := range []struct {
			name   string
			topics topics
			want   map[string]int16
		}{
			{"unknown and duplicate", topics{topic("missing", 3), topic("grow", 6, node), topic("grow", 6, node, node)},
				map[string]int16{"missing": kerr.UnknownTopicOrPartition.Code, "grow": kerr.InvalidRequest.Code}},
			{"too few assignments", topics{topic("grow", 6, node)}, map[string]int16{"grow": kerr.InvalidReplicaAssignment.Code}},
			{"another node", topics{topic("grow", 6, other, node)}, map[string]int16{"grow": kerr.InvalidReplicaAssignment.Code}},
			{"this node", topics{topic("grow", 6, node, node)}, map[string]int16{"grow": 0}},
			{"too many", topics{topic("grow", adminOpMaxRecords+10)}, map[string]int16{"grow": kerr.PolicyViolation.Code}},
		} {
			req := kmsg.NewPtrCreatePartitionsRequest()
			req.ValidateOnly, req.Topics = true, c.topics
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Topics) != len(c.want) {
				t.Fatalf("%s: answers %+v", c.name, resp.Topics)
			}
			for _, rt := range resp.Topics {
				if rt.ErrorCode != c.want[rt.Topic] {
					t.Errorf("%s: %s code %d, want %d", c.name, rt.Topic, rt.ErrorCode, c.want[rt.Topic])
				}
			}
		}
	})

	t.Run("produce to a new partition", func(t *testing.T) {
		prod := adminProducer(t, b)
		offs := adminProduce(t, ctx, prod, "grow", 3, 3)
		if offs[0] != 0 || offs[2] != 2 {
			t.Fatalf("offsets %v", offs)
		}
		recs := adminConsume(t, ctx, b, "grow", 3, 3)
		if string(recs[2].Value) != "grow/3/2" {
			t.Fatalf("read %q", recs[2].Value)
		}
	})
}
