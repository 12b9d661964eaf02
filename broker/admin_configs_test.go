package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/partition"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func cfgCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// cfgTopic creates a topic directly (no CreateTopics round trip).
func cfgTopic(t *testing.T, b *Broker, name string, partitions int32, configs map[string]string) *partition.Topic {
	t.Helper()
	tp, err := b.partitions.Create(name, partitions, configs, [16]byte{}, "", partition.Placement{RF: 1})
	if err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	return tp
}

// cfgAdmin returns a client and its admin. Batches go uncompressed so
// that their stored size is the size the test produced.
func cfgAdmin(t *testing.T, b *Broker) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl := newTestClient(t, b, kgo.ProducerBatchCompression(kgo.NoCompression()))
	return cl, kadm.NewClient(cl)
}

// rawRequest sends req straight to the broker, so that names kgo cannot
// shard (another node id, a bad name) still reach it.
func rawRequest(t *testing.T, cl *kgo.Client, b *Broker, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := cl.Broker(int(b.cfg.NodeID)).Request(cfgCtx(t), req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

func describeTopicMap(t *testing.T, adm *kadm.Client, name string) map[string]kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(cfgCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("describe %s: %+v", name, rcs)
	}
	out := map[string]kadm.Config{}
	for _, c := range rcs[0].Configs {
		out[c.Key] = c
	}
	return out
}

func mustAltered(t *testing.T, rs kadm.AlterConfigsResponses, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Err != nil {
			t.Fatalf("altering %q: %v (%s)", r.Name, r.Err, r.ErrMessage)
		}
	}
}

func setOp(name, value string) kadm.AlterConfig {
	return kadm.AlterConfig{Op: kadm.SetConfig, Name: name, Value: &value}
}

func str(s string) *string { return &s }

// wantConfig checks a described config's value, source and synonym chain
// (nil syns skips the chain check).
func wantConfig(t *testing.T, c kadm.Config, value string, src kmsg.ConfigSource, syns []kadm.ConfigSynonym) {
	t.Helper()
	if c.MaybeValue() != value || c.Source != src {
		t.Errorf("%s = %q (source %v), want %q (source %v)", c.Key, c.MaybeValue(), c.Source, value, src)
	}
	if syns == nil {
		return
	}
	if len(c.Synonyms) != len(syns) {
		t.Errorf("%s synonyms %+v, want %+v", c.Key, c.Synonyms, syns)
		return
	}
	for i, s := range syns {
		g := c.Synonyms[i]
		if g.Key != s.Key || g.Source != s.Source || (g.Value == nil) != (s.Value == nil) || (g.Value != nil && *g.Value != *s.Value) {
			t.Errorf("%s synonym %d = %s=%v (%v), want %s=%v (%v)", c.Key, i, g.Key, g.Value, g.Source, s.Key, s.Value, s.Source)
		}
	}
}

func TestDescribeTopicConfigs(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, func(c *Config) { c.Log.SegmentBytes = 1 << 20 })
	cfgTopic(t, b, "desc", 1, map[string]string{"retention.ms": "1234"})
	cl, adm := cfgAdmin(t, b)

	got := describeTopicMap(t, adm, "desc")
	if len(got) != len(topicConfigs) {
		t.Errorf("described %d configs, want %d", len(got), len(topicConfigs))
	}
	const (
		topicSrc   = kmsg.ConfigSourceDynamicTopicConfig
		staticSrc  = kmsg.ConfigSourceStaticBrokerConfig
		defaultSrc = kmsg.ConfigSourceDefaultConfig
	)
	wantConfig(t, got["retention.ms"], "1234", topicSrc, []kadm.ConfigSynonym{
		{Key: "retention.ms", Value: str("1234"), Source: topicSrc},
		{Key: "log.retention.ms", Value: str("604800000"), Source: defaultSrc},
	})
	// Set in the broker's static config: differs from the built-in default.
	wantConfig(t, got["segment.bytes"], "1048576", staticSrc, []kadm.ConfigSynonym{
		{Key: "log.segment.bytes", Value: str("1048576"), Source: staticSrc},
	})
	wantConfig(t, got["cleanup.policy"], "delete", defaultSrc, []kadm.ConfigSynonym{
		{Key: "log.cleanup.policy", Value: str("delete"), Source: defaultSrc},
	})
	// No broker synonym: the built-in default, no chain.
	wantConfig(t, got["message.downconversion.enable"], "true", defaultSrc, []kadm.ConfigSynonym{})
	wantConfig(t, got["flush.messages"], "9223372036854775807", defaultSrc, nil)

	t.Run("only requested names, docs and types", func(t *testing.T) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.IncludeDocumentation = true
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "desc"
		rr.ConfigNames = []string{"retention.ms", "cleanup.policy", "no.such.config"}
		req.Resources = append(req.Resources, rr)
		resp := rawRequest(t, cl, b, req).(*kmsg.DescribeConfigsResponse)
		res := resp.Resources[0]
		if res.ErrorCode != 0 || len(res.Configs) != 2 {
			t.Fatalf("got code %d and %d configs, want 0 and 2: %+v", res.ErrorCode, len(res.Configs), res.Configs)
		}
		for i, want := range []struct {
			name string
			typ  kmsg.ConfigType
		}{{"cleanup.policy", kmsg.ConfigTypeList}, {"retention.ms", kmsg.ConfigTypeLong}} {
			c := res.Configs[i]
			if c.Name != want.name || c.ConfigType != want.typ || c.Documentation == nil || *c.Documentation == "" || c.ReadOnly {
				t.Errorf("config %d = %s type %v doc %v read-only %v, want %s type %v with a doc", i, c.Name, c.ConfigType, c.Documentation, c.ReadOnly, want.name, want.typ)
			}
			if len(c.ConfigSynonyms) != 0 {
				t.Errorf("%s: synonyms without IncludeSynonyms: %+v", c.Name, c.ConfigSynonyms)
			}
		}
	})
}

func TestDescribeConfigsRefusals(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	cfgTopic(t, b, "there", 1, nil)
	cl, _ := cfgAdmin(t, b)
	for _, tc := range []struct {
		name    string
		typ     kmsg.ConfigResourceType
		resName string
		want    *kerr.Error
	}{
		{"topic", kmsg.ConfigResourceTypeTopic, "there", nil},
		{"unknown topic", kmsg.ConfigResourceTypeTopic, "nowhere", kerr.UnknownTopicOrPartition},
		{"empty topic name", kmsg.ConfigResourceTypeTopic, "", kerr.InvalidTopicException},
		{"this node", kmsg.ConfigResourceTypeBroker, "1", nil},
		{"cluster default", kmsg.ConfigResourceTypeBroker, "", nil},
		{"another node", kmsg.ConfigResourceTypeBroker, "2", kerr.InvalidRequest},
		{"not a node id", kmsg.ConfigResourceTypeBroker, "one", kerr.InvalidRequest},
		{"broker logger", kmsg.ConfigResourceTypeBrokerLogger, "1", kerr.InvalidRequest},
		{"cluster mirror", configResourceClusterMirror, "m", kerr.InvalidRequest},
		{"group", kmsg.ConfigResourceTypeGroupConfig, "g", nil},
		{"empty group name", kmsg.ConfigResourceTypeGroupConfig, "", kerr.InvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = tc.typ, tc.resName
			req.Resources = append(req.Resources, rr)
			res := rawRequest(t, cl, b, req).(*kmsg.DescribeConfigsResponse).Resources[0]
			if res.ErrorCode != errCode(tc.want) {
				t.Fatalf("code %d (%v), want %v", res.ErrorCode, res.ErrorMessage, tc.want)
			}
			if tc.want != nil && (res.ErrorMessage == nil || len(res.Configs) != 0) {
				t.Errorf("refusal without a message or with configs: %v %+v", res.ErrorMessage, res.Configs)
			}
		})
	}
}

// partitionState is what a topic config change must reach.
type partitionState struct {
	retentionMs int64
	maxMsg      int32
	compact     bool
}

func wantPartitions(t *testing.T, tp *partition.Topic, want partitionState) {
	t.Helper()
	for _, p := range tp.Partitions() {
		got := partitionState{p.Log().Config().RetentionMs, p.MaxMessageBytes(), p.Compact()}
		if got != want || p.Log().Config().Compact != want.compact {
			t.Errorf("%s-%d: %+v (storage compact %v), want %+v", tp.Name(), p.Index(), got, p.Log().Config().Compact, want)
		}
	}
}

func TestIncrementalAlterTopicConfigs(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := cfgTopic(t, b, "inc", 2, nil)
	_, adm := cfgAdmin(t, b)
	op := func(o kadm.IncrementalOp, name, value string) kadm.AlterConfig {
		return kadm.AlterConfig{Op: o, Name: name, Value: &value}
	}
	const defRetention, defMax = 7 * 24 * 3600 * 1000, DefaultMessageMaxBytes
	// The steps run in order on one topic.
	for _, step := range []struct {
		name string
		ops  []kadm.AlterConfig
		want map[string]string
		part partitionState
	}{
		{"set", []kadm.AlterConfig{op(kadm.SetConfig, "retention.ms", "60000"), op(kadm.SetConfig, "max.message.bytes", "2000")},
			map[string]string{"retention.ms": "60000", "max.message.bytes": "2000"}, partitionState{60000, 2000, false}},
		{"delete", []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "max.message.bytes"}},
			map[string]string{"retention.ms": "60000"}, partitionState{60000, defMax, false}},
		{"append to the default", []kadm.AlterConfig{op(kadm.AppendConfig, "cleanup.policy", "compact")},
			map[string]string{"retention.ms": "60000", "cleanup.policy": "delete,compact"}, partitionState{60000, defMax, true}},
		// Compact alone switches time retention off, even an explicit one.
		{"subtract", []kadm.AlterConfig{op(kadm.SubtractConfig, "cleanup.policy", "delete")},
			map[string]string{"retention.ms": "60000", "cleanup.policy": "compact"}, partitionState{-1, defMax, true}},
		{"append present", []kadm.AlterConfig{op(kadm.AppendConfig, "cleanup.policy", "compact")},
			map[string]string{"retention.ms": "60000", "cleanup.policy": "compact"}, partitionState{-1, defMax, true}},
		{"delete unset is fine", []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "segment.ms"}},
			map[string]string{"retention.ms": "60000", "cleanup.policy": "compact"}, partitionState{-1, defMax, true}},
		{"delete all", []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}, {Op: kadm.DeleteConfig, Name: "cleanup.policy"}},
			map[string]string{}, partitionState{defRetention, defMax, false}},
	} {
		rs, err := adm.AlterTopicConfigs(cfgCtx(t), step.ops, "inc")
		mustAltered(t, rs, err)
		if got := tp.Configs(); !maps.Equal(got, step.want) {
			t.Errorf("%s: topic configs %v, want %v", step.name, got, step.want)
		}
		wantPartitions(t, tp, step.part)
		described := describeTopicMap(t, adm, "inc")
		for _, name := range []string{"retention.ms", "cleanup.policy", "max.message.bytes"} {
			v, own := step.want[name]
			if own {
				wantConfig(t, described[name], v, kmsg.ConfigSourceDynamicTopicConfig, nil)
			} else if src := described[name].Source; src != kmsg.ConfigSourceDefaultConfig {
				t.Errorf("%s: %s source %v, want DEFAULT_CONFIG", step.name, name, src)
			}
		}
	}
}

// resourceResult is one resource's answer in an alter response.
type resourceResult struct {
	code int16
	msg  string
}

func alterResults(resp kmsg.Response) []resourceResult {
	var out []resourceResult
	add := func(code int16, msg *string) {
		r := resourceResult{code: code}
		if msg != nil {
			r.msg = *msg
		}
		out = append(out, r)
	}
	switch resp := resp.(type) {
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, r := range resp.Resources {
			add(r.ErrorCode, r.ErrorMessage)
		}
	case *kmsg.AlterConfigsResponse:
		for _, r := range resp.Resources {
			add(r.ErrorCode, r.ErrorMessage)
		}
	}
	return out
}

type incConfig struct {
	op    kmsg.IncrementalAlterConfigOp
	name  string
	value *string
}

func incRequest(validateOnly bool, typ kmsg.ConfigResourceType, name string, cs ...incConfig) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	for _, c := range cs {
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Op, rc.Name, rc.Value = c.op, c.name, c.value
		rr.Configs = append(rr.Configs, rc)
	}
	req.Resources = append(req.Resources, rr)
	return req
}

func legacyRequest(validateOnly bool, typ kmsg.ConfigResourceType, name string, kv ...*string) *kmsg.AlterConfigsRequest {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	for i := 0; i+1 < len(kv); i += 2 {
		rc := kmsg.NewAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value = *kv[i], kv[i+1]
		rr.Configs = append(rr.Configs, rc)
	}
	req.Resources = append(req.Resources, rr)
	return req
}

func TestAlterConfigsRefusals(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := cfgTopic(t, b, "fixed", 1, map[string]string{"retention.ms": "5000"})
	cl, _ := cfgAdmin(t, b)
	const (
		topicT  = kmsg.ConfigResourceTypeTopic
		brokerT = kmsg.ConfigResourceTypeBroker
		set     = kmsg.IncrementalAlterConfigOpSet
		del     = kmsg.IncrementalAlterConfigOpDelete
		appendO = kmsg.IncrementalAlterConfigOpAppend
		subO    = kmsg.IncrementalAlterConfigOpSubtract
	)
	twice := incRequest(false, topicT, "fixed", incConfig{set, "segment.ms", str("1000")})
	twice.Resources = append(twice.Resources, twice.Resources[0])
	for _, tc := range []struct {
		name string
		req  kmsg.Request
		want *kerr.Error
		msg  string
	}{
		{"unknown topic config", incRequest(false, topicT, "fixed", incConfig{set, "no.such", str("1")}), kerr.InvalidConfig, "unknown topic config"},
		{"invalid value", incRequest(false, topicT, "fixed", incConfig{set, "retention.ms", str("soon")}), kerr.InvalidConfig, "invalid value for retention.ms"},
		{"one bad entry changes nothing", incRequest(false, topicT, "fixed",
			incConfig{set, "segment.ms", str("1000")}, incConfig{set, "retention.ms", str("-5")}), kerr.InvalidConfig, "retention.ms"},
		{"append to a non-list", incRequest(false, topicT, "fixed", incConfig{appendO, "retention.ms", str("1")}), kerr.InvalidConfig, "not LIST"},
		{"subtract to an empty policy", incRequest(false, topicT, "fixed", incConfig{subO, "cleanup.policy", str("delete")}), kerr.InvalidConfig, "cleanup.policy"},
		{"delete an unknown config", incRequest(false, topicT, "fixed", incConfig{del, "no.such", nil}), kerr.InvalidConfig, "unknown topic config"},
		{"duplicate names", incRequest(false, topicT, "fixed",
			incConfig{set, "segment.ms", str("1000")}, incConfig{del, "segment.ms", nil}), kerr.InvalidRequest, "duplicate config keys"},
		{"null value", incRequest(false, topicT, "fixed", incConfig{set, "segment.ms", nil}), kerr.InvalidRequest, "Null value"},
		{"unknown op", incRequest(false, topicT, "fixed", incConfig{9, "segment.ms", str("1")}), kerr.InvalidRequest, "Unknown operations type"},
		{"unknown topic", incRequest(false, topicT, "nowhere", incConfig{set, "segment.ms", str("1000")}), kerr.UnknownTopicOrPartition, "nowhere"},
		{"default topic", incRequest(false, topicT, "", incConfig{set, "segment.ms", str("1000")}), kerr.InvalidRequest, "Default topic"},
		{"read-only broker config", incRequest(false, brokerT, "1", incConfig{set, "node.id", str("2")}), kerr.InvalidRequest, "Cannot update these configs dynamically: [node.id]"},
		{"num.partitions is not dynamic", incRequest(false, brokerT, "", incConfig{set, "num.partitions", str("3")}), kerr.InvalidRequest, "Cannot update these configs dynamically: [num.partitions]"},
		{"unknown broker config", incRequest(false, brokerT, "", incConfig{set, "log.cleaner.thread", str("2")}), kerr.InvalidConfig, `unknown broker config "log.cleaner.thread"`},
		{"invalid broker value", incRequest(false, brokerT, "", incConfig{set, "log.retention.ms", str("-7")}), kerr.InvalidConfig, "log.retention.ms"},
		{"another node", incRequest(false, brokerT, "2", incConfig{set, "log.retention.ms", str("1000")}), kerr.InvalidRequest, "Unexpected broker id"},
		{"broker logger", incRequest(false, kmsg.ConfigResourceTypeBrokerLogger, "1", incConfig{set, "kafka", str("DEBUG")}), kerr.InvalidRequest, "BROKER_LOGGER"},
		{"cluster mirror", incRequest(false, configResourceClusterMirror, "m", incConfig{set, "x", str("1")}), kerr.InvalidRequest, "CLUSTER_MIRROR"},
		{"invalid value, validate only", incRequest(true, topicT, "fixed", incConfig{set, "retention.ms", str("soon")}), kerr.InvalidConfig, "retention.ms"},
		{"resource twice", twice, kerr.InvalidRequest, "at most once"},

		{"legacy unknown config", legacyRequest(false, topicT, "fixed", str("no.such"), str("1")), kerr.InvalidConfig, "unknown topic config"},
		{"legacy invalid value", legacyRequest(false, topicT, "fixed", str("segment.bytes"), str("12")), kerr.InvalidConfig, "segment.bytes"},
		{"legacy null value", legacyRequest(false, topicT, "fixed", str("segment.ms"), nil), kerr.InvalidRequest, "Null value"},
		{"legacy duplicate names", legacyRequest(false, topicT, "fixed", str("segment.ms"), str("1000"), str("segment.ms"), str("2000")), kerr.InvalidRequest, "duplicate"},
		{"legacy unknown topic", legacyRequest(false, topicT, "nowhere", str("segment.ms"), str("1000")), kerr.UnknownTopicOrPartition, ""},
		{"legacy read-only broker config", legacyRequest(false, brokerT, "1", str("listeners"), str("PLAINTEXT://:1")), kerr.InvalidRequest, "Cannot update these configs dynamically: [listeners]"},
		{"legacy another node", legacyRequest(false, brokerT, "7", str("log.retention.ms"), str("1000")), kerr.InvalidRequest, "Unexpected broker id"},
		{"legacy broker logger", legacyRequest(false, kmsg.ConfigResourceTypeBrokerLogger, "1", str("kafka"), str("DEBUG")), kerr.InvalidRequest, "BROKER_LOGGER"},
		{"legacy cluster mirror", legacyRequest(false, configResourceClusterMirror, "m"), kerr.InvalidRequest, "CLUSTER_MIRROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := alterResults(rawRequest(t, cl, b, tc.req))
			if len(res) == 0 {
				t.Fatal("no resources answered")
			}
			for _, r := range res {
				if r.code != tc.want.Code || !strings.Contains(r.msg, tc.msg) {
					t.Errorf("got code %d %q, want %s with %q", r.code, r.msg, tc.want.Message, tc.msg)
				}
			}
			if got, want := tp.Configs(), map[string]string{"retention.ms": "5000"}; !maps.Equal(got, want) {
				t.Errorf("topic configs changed to %v", got)
			}
			if dyn := b.dynamicSnapshot(); len(dyn) != 0 {
				t.Errorf("broker configs changed to %v", dyn)
			}
		})
	}
}

func TestAlterConfigsValidateOnly(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := cfgTopic(t, b, "dry", 1, map[string]string{"retention.ms": "5000"})
	_, adm := cfgAdmin(t, b)
	ctx := cfgCtx(t)
	for _, tc := range []struct {
		name string
		run  func() (kadm.AlterConfigsResponses, error)
	}{
		{"incremental topic", func() (kadm.AlterConfigsResponses, error) {
			return adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{setOp("segment.ms", "1"), {Op: kadm.DeleteConfig, Name: "retention.ms"}}, "dry")
		}},
		{"incremental broker", func() (kadm.AlterConfigsResponses, error) {
			return adm.ValidateAlterBrokerConfigs(ctx, []kadm.AlterConfig{setOp("log.retention.ms", "1")})
		}},
		{"legacy topic", func() (kadm.AlterConfigsResponses, error) {
			return adm.ValidateAlterTopicConfigsState(ctx, []kadm.AlterConfig{setOp("segment.ms", "1000")}, "dry")
		}},
		{"legacy broker", func() (kadm.AlterConfigsResponses, error) {
			return adm.ValidateAlterBrokerConfigsState(ctx, []kadm.AlterConfig{setOp("log.segment.bytes", "1048576")}, 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := tc.run()
			mustAltered(t, rs, err)
			if got := tp.Configs(); !maps.Equal(got, map[string]string{"retention.ms": "5000"}) {
				t.Errorf("topic configs changed to %v", got)
			}
			if dyn := b.dynamicSnapshot(); len(dyn) != 0 {
				t.Errorf("broker configs changed to %v", dyn)
			}
			wantPartitions(t, tp, partitionState{5000, DefaultMessageMaxBytes, false})
		})
	}
}

func TestAlterConfigsLegacyReplaces(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := cfgTopic(t, b, "legacy", 1, map[string]string{"retention.ms": "5000", "segment.bytes": "100000"})
	_, adm := cfgAdmin(t, b)
	ctx := cfgCtx(t)

	rs, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{setOp("max.message.bytes", "3000")}, "legacy")
	mustAltered(t, rs, err)
	if got := tp.Configs(); !maps.Equal(got, map[string]string{"max.message.bytes": "3000"}) {
		t.Errorf("topic configs %v, want only max.message.bytes", got)
	}
	wantPartitions(t, tp, partitionState{7 * 24 * 3600 * 1000, 3000, false})
	if sb := tp.Partitions()[0].Log().Config().SegmentBytes; sb != b.cfg.Log.SegmentBytes {
		t.Errorf("segment.bytes %d, want the default %d back", sb, b.cfg.Log.SegmentBytes)
	}

	rs, err = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{setOp("log.retention.ms", "7000"), setOp("log.roll.ms", "9000")})
	mustAltered(t, rs, err)
	rs, err = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{setOp("log.segment.bytes", "2000000")}, 1)
	mustAltered(t, rs, err)
	if got := b.nodeSnapshot(); !maps.Equal(got, map[string]string{"log.segment.bytes": "2000000"}) {
		t.Errorf("node configs %v, want only log.segment.bytes", got)
	}
	// The node's set is replaced, the cluster default's kept.
	if got := b.dynamicSnapshot(); !maps.Equal(got, map[string]string{"log.retention.ms": "7000", "log.roll.ms": "9000"}) {
		t.Errorf("cluster default configs %v", got)
	}
	if sb := tp.Partitions()[0].Log().Config().SegmentBytes; sb != 2000000 {
		t.Errorf("segment.bytes %d, want the new broker default 2000000", sb)
	}
}

func TestConfigRetentionMsReachesStorage(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := cfgTopic(t, b, "ret", 3, nil)
	_, adm := cfgAdmin(t, b)
	for _, v := range []struct {
		value string
		want  int64
	}{{"3600000", 3600000}, {"-1", -1}, {"0", 1}} {
		rs, err := adm.AlterTopicConfigs(cfgCtx(t), []kadm.AlterConfig{setOp("retention.ms", v.value)}, "ret")
		mustAltered(t, rs, err)
		for _, p := range tp.Partitions() {
			if got := p.Log().Config().RetentionMs; got != v.want {
				t.Errorf("retention.ms=%s: partition %d storage has %d, want %d", v.value, p.Index(), got, v.want)
			}
		}
	}
}

func TestConfigRetentionBytesDeletesSegments(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := cfgTopic(t, b, "bytes", 1, map[string]string{"segment.bytes": "1024"})
	cl, adm := cfgAdmin(t, b)
	ctx := cfgCtx(t)
	// One batch per ProduceSync: about three batches per 1 KiB segment.
	for i := range 30 {
		r := &kgo.Record{Topic: "bytes", Value: []byte(strings.Repeat("v", 200) + fmt.Sprint(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p := tp.Partitions()[0]
	if n := p.Log().NumSegments(); n < 5 {
		t.Fatalf("%d segments, want several", n)
	}
	b.maintainOnce(time.Now())
	if start := p.Log().LogStartOffset(); start != 0 {
		t.Fatalf("log start %d before retention.bytes is set", start)
	}
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{setOp("retention.bytes", "2048")}, "bytes")
	mustAltered(t, rs, err)
	b.maintainOnce(time.Now())
	if start := p.Log().LogStartOffset(); start == 0 {
		t.Error("retention.bytes deleted nothing")
	}
	// Deletion stops once the rest fits: below the limit plus one segment.
	if size := p.Log().Size(); size >= 2048+1024 {
		t.Errorf("log size %d after retention.bytes=2048", size)
	}
}

func TestConfigLogAppendTime(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	cfgTopic(t, b, "stamped", 1, nil)
	cl, adm := cfgAdmin(t, b)
	ctx := cfgCtx(t)
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{setOp("message.timestamp.type", "LogAppendTime")}, "stamped")
	mustAltered(t, rs, err)

	before := time.Now().Truncate(time.Millisecond)
	old := time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "stamped", Value: []byte("x"), Timestamp: old}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	after := time.Now()

	c := newTestClient(t, b, kgo.ConsumeTopics("stamped"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got *kgo.Record
	for got == nil {
		fs := c.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = r })
	}
	if got.Attrs.TimestampType() != 1 {
		t.Errorf("timestamp type %d, want 1 (LogAppendTime)", got.Attrs.TimestampType())
	}
	if got.Timestamp.Before(before) || got.Timestamp.After(after) {
		t.Errorf("timestamp %v outside the produce window [%v, %v]", got.Timestamp, before, after)
	}
}

func TestConfigMaxMessageBytes(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	cfgTopic(t, b, "small", 1, nil)
	cl, adm := cfgAdmin(t, b)
	ctx := cfgCtx(t)
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{setOp("max.message.bytes", "512")}, "small")
	mustAltered(t, rs, err)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "small", Value: []byte("fits")}).FirstErr(); err != nil {
		t.Fatalf("small record: %v", err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "small", Value: make([]byte, 2000)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("large record: %v, want MESSAGE_TOO_LARGE", err)
	}
}

// describeBrokerRaw describes the BROKER resource name with read-only
// flags, which kadm does not expose.
func describeBrokerRaw(t *testing.T, cl *kgo.Client, b *Broker, name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, name
	req.Resources = append(req.Resources, rr)
	res := rawRequest(t, cl, b, req).(*kmsg.DescribeConfigsResponse).Resources[0]
	if res.ErrorCode != 0 {
		t.Fatalf("describe broker %q: code %d", name, res.ErrorCode)
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range res.Configs {
		out[c.Name] = c
	}
	return out
}

func TestBrokerDynamicConfigs(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	plain := cfgTopic(t, b, "plain", 2, nil)
	own := cfgTopic(t, b, "own", 1, map[string]string{"retention.ms": "5000"})
	cl, adm := cfgAdmin(t, b)
	ctx := cfgCtx(t)

	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setOp("log.retention.ms", "7200000"), setOp("message.max.bytes", "600")})
	mustAltered(t, rs, err)
	if got := b.dynamicSnapshot(); !maps.Equal(got, map[string]string{"log.retention.ms": "7200000", "message.max.bytes": "600"}) {
		t.Fatalf("dynamic configs %v", got)
	}
	wantPartitions(t, plain, partitionState{7200000, 600, false})
	wantPartitions(t, own, partitionState{5000, 600, false})

	wantConfig(t, describeTopicMap(t, adm, "plain")["retention.ms"], "7200000", kmsg.ConfigSourceDynamicDefaultBrokerConfig, []kadm.ConfigSynonym{
		{Key: "log.retention.ms", Value: str("7200000"), Source: kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		{Key: "log.retention.ms", Value: str("604800000"), Source: kmsg.ConfigSourceDefaultConfig},
	})
	wantConfig(t, describeTopicMap(t, adm, "own")["retention.ms"], "5000", kmsg.ConfigSourceDynamicTopicConfig, nil)

	// The cluster default lists only the dynamic configs.
	def := describeBrokerRaw(t, cl, b, "")
	if len(def) != 2 || def["log.retention.ms"].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("cluster default configs %+v", def)
	}
	node := describeBrokerRaw(t, cl, b, "1")
	for _, want := range []struct {
		name     string
		value    string
		src      kmsg.ConfigSource
		readOnly bool
	}{
		{"log.retention.ms", "7200000", kmsg.ConfigSourceDynamicDefaultBrokerConfig, false},
		{"message.max.bytes", "600", kmsg.ConfigSourceDynamicDefaultBrokerConfig, false},
		{"log.segment.bytes", "1073741824", kmsg.ConfigSourceDefaultConfig, false},
		{"node.id", "1", kmsg.ConfigSourceDefaultConfig, true},
		{"listeners", "PLAINTEXT://127.0.0.1:0", kmsg.ConfigSourceStaticBrokerConfig, true},
		{"num.partitions", "1", kmsg.ConfigSourceDefaultConfig, true},
	} {
		c, ok := node[want.name]
		if !ok || c.Value == nil || *c.Value != want.value || c.Source != want.src || c.ReadOnly != want.readOnly {
			t.Errorf("%s: %+v, want %q source %v read-only %v", want.name, c, want.value, want.src, want.readOnly)
		}
	}
	if n := len(node["log.retention.ms"].ConfigSynonyms); n != 2 {
		t.Errorf("log.retention.ms has %d synonyms, want dynamic and default", n)
	}

	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "plain", Value: make([]byte, 1000)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("produce over the broker's message.max.bytes: %v", err)
	}

	// Named by the node id: this node's own set, which wins over the
	// cluster default.
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "log.cleanup.policy", Value: str("compact")}}, 1)
	mustAltered(t, rs, err)
	if v := b.nodeSnapshot()["log.cleanup.policy"]; v != "delete,compact" {
		t.Errorf("log.cleanup.policy %q after APPEND", v)
	}
	if _, ok := b.dynamicSnapshot()["log.cleanup.policy"]; ok {
		t.Errorf("a per-broker change reached the cluster default")
	}
	wantPartitions(t, plain, partitionState{7200000, 600, true})

	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.DeleteConfig, Name: "log.retention.ms"},
		{Op: kadm.DeleteConfig, Name: "message.max.bytes"},
	})
	mustAltered(t, rs, err)
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.cleanup.policy"}}, 1)
	mustAltered(t, rs, err)
	if got, node := b.dynamicSnapshot(), b.nodeSnapshot(); len(got) != 0 || len(node) != 0 {
		t.Errorf("dynamic configs %v and %v after deleting all", got, node)
	}
	wantPartitions(t, plain, partitionState{7 * 24 * 3600 * 1000, DefaultMessageMaxBytes, false})
	wantPartitions(t, own, partitionState{5000, DefaultMessageMaxBytes, false})
}

func TestAlterConfigsConcurrent(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	tp := cfgTopic(t, b, "busy", 1, nil)
	_, adm := cfgAdmin(t, b)
	ctx := cfgCtx(t)
	names := []string{"retention.ms", "segment.ms", "flush.ms", "delete.retention.ms", "min.compaction.lag.ms", "max.message.bytes"}
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(2)
		go func() {
			defer wg.Done()
			rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{setOp(name, fmt.Sprint(1000+i))}, "busy")
			mustAltered(t, rs, err)
		}()
		go func() {
			defer wg.Done()
			rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setOp("log.roll.ms", fmt.Sprint(5000+i))})
			mustAltered(t, rs, err)
		}()
	}
	wg.Wait()
	got := tp.Configs()
	for i, name := range names {
		if got[name] != fmt.Sprint(1000+i) {
			t.Errorf("%s = %q, lost by a concurrent alteration (configs %v)", name, got[name], got)
		}
	}
	if _, ok := b.dynamicSnapshot()["log.roll.ms"]; !ok {
		t.Error("log.roll.ms lost")
	}
}

func TestConfigsSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sameDir := func(c *Config) { c.LogDirs = []string{dir} }
	b1 := newTestBroker(t, sameDir)
	cfgTopic(t, b1, "kept", 2, nil)
	cl1, adm1 := cfgAdmin(t, b1)
	ctx := cfgCtx(t)
	rs, err := adm1.AlterTopicConfigs(ctx, []kadm.AlterConfig{setOp("retention.ms", "1234"), setOp("cleanup.policy", "compact,delete")}, "kept")
	mustAltered(t, rs, err)
	rs, err = adm1.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setOp("log.segment.bytes", "1048576")})
	mustAltered(t, rs, err)
	cl1.Close()
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}

	b2 := newTestBroker(t, sameDir)
	_, adm2 := cfgAdmin(t, b2)
	got := describeTopicMap(t, adm2, "kept")
	wantConfig(t, got["retention.ms"], "1234", kmsg.ConfigSourceDynamicTopicConfig, nil)
	wantConfig(t, got["cleanup.policy"], "compact,delete", kmsg.ConfigSourceDynamicTopicConfig, nil)
	wantConfig(t, got["segment.bytes"], "1048576", kmsg.ConfigSourceDynamicDefaultBrokerConfig, nil)
	tp := b2.partitions.Topic("kept")
	if tp == nil {
		t.Fatal("topic gone after restart")
	}
	for _, p := range tp.Partitions() {
		c := p.Log().Config()
		if c.RetentionMs != 1234 || c.SegmentBytes != 1048576 || !c.Compact || !p.Compact() {
			t.Errorf("partition %d after restart: retention %d segment %d compact %v/%v", p.Index(), c.RetentionMs, c.SegmentBytes, c.Compact, p.Compact())
		}
	}
}
