package broker

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kafkaconfigs"
	"github.com/kmirror/kmirror/internal/settings"
)

// chainOf is a described config's synonyms as "SOURCE=value" strings
// ("SOURCE=null" for a hidden value), for compact comparisons.
func chainOf(c kmsg.DescribeConfigsResponseResourceConfig) []string {
	var out []string
	for _, s := range c.ConfigSynonyms {
		v := "null"
		if s.Value != nil {
			v = *s.Value
		}
		out = append(out, s.Source.String()+"="+v)
	}
	return out
}

// Kafka's dynamic broker configs that kmirror does not apply are stored
// per broker and at the cluster default and described with their sources
// in Kafka's order: this node's, the cluster default (unless Kafka ignores
// the config there), server.properties, Kafka's default.
func TestDynamicKafkaBrokerConfigs(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, func(c *Config) {
		c.KafkaSettings = map[string]string{"num.io.threads": "16", "zookeeper.connect": "zk:2181"}
	})
	cl, adm := cfgAdmin(t, b)
	ctx := cfgCtx(t)

	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setOp("sasl.kerberos.min.time.before.relogin", "30000"),
		setOp("num.io.threads", "4"), setOp("leader.replication.throttled.rate", "1000000")})
	mustAltered(t, rs, err)
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setOp("sasl.kerberos.min.time.before.relogin", "45000"),
		setOp("listener.name.external.ssl.keystore.location", "/etc/k.pem"),
		setOp("listener.name.external.ssl.keystore.password", "secret")}, 1)
	mustAltered(t, rs, err)

	def := describeBrokerRaw(t, cl, b, "")
	if len(def) != 3 {
		t.Errorf("cluster default lists %d configs, want the 3 set there", len(def))
	}
	for _, name := range []string{"sasl.kerberos.min.time.before.relogin", "num.io.threads", "leader.replication.throttled.rate"} {
		if c := def[name]; c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || c.ReadOnly {
			t.Errorf("default %s: %+v", name, c)
		}
	}

	node := describeBrokerRaw(t, cl, b, "1")
	tests := []struct {
		name     string
		value    *string
		src      kmsg.ConfigSource
		typ      kmsg.ConfigType
		readOnly bool
		chain    []string
	}{
		// Per-broker only: Kafka ignores it at the cluster default.
		{"sasl.kerberos.min.time.before.relogin", str("45000"), kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigTypeLong, false,
			[]string{"DYNAMIC_BROKER_CONFIG=45000", "DEFAULT_CONFIG=60000"}},
		{"num.io.threads", str("4"), kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigTypeInt, false,
			[]string{"DYNAMIC_DEFAULT_BROKER_CONFIG=4", "STATIC_BROKER_CONFIG=16"}},
		{"leader.replication.throttled.rate", str("1000000"), kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigTypeLong, false,
			[]string{"DYNAMIC_DEFAULT_BROKER_CONFIG=1000000", "DEFAULT_CONFIG=9223372036854775807"}},
		{"listener.name.external.ssl.keystore.location", str("/etc/k.pem"), kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigTypeString, false,
			[]string{"DYNAMIC_BROKER_CONFIG=/etc/k.pem"}},
		{"listener.name.external.ssl.keystore.password", nil, kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigTypePassword, false,
			[]string{"DYNAMIC_BROKER_CONFIG=null"}},
		{"num.network.threads", str("3"), kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeInt, false, []string{"DEFAULT_CONFIG=3"}},
		{"broker.id", str("-1"), kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeInt, true, []string{"DEFAULT_CONFIG=-1"}},
		// Known to 3.9 only, set in server.properties: static.
		{"zookeeper.connect", str("zk:2181"), kmsg.ConfigSourceStaticBrokerConfig, kmsg.ConfigTypeString, true, []string{"STATIC_BROKER_CONFIG=zk:2181"}},
		{"node.id", str("1"), kmsg.ConfigSourceDefaultConfig, kmsg.ConfigTypeInt, true, []string{"DEFAULT_CONFIG=1"}},
	}
	for _, tt := range tests {
		c, ok := node[tt.name]
		if !ok {
			t.Errorf("%s: not described", tt.name)
			continue
		}
		if (c.Value == nil) != (tt.value == nil) || c.Value != nil && *c.Value != *tt.value || c.Source != tt.src ||
			c.ConfigType != tt.typ || c.ReadOnly != tt.readOnly || c.IsSensitive != (tt.typ == kmsg.ConfigTypePassword) {
			t.Errorf("%s: %+v, want %v source %v type %v read-only %v", tt.name, c, tt.value, tt.src, tt.typ, tt.readOnly)
		}
		if got := chainOf(c); !slices.Equal(got, tt.chain) {
			t.Errorf("%s: synonyms %q, want %q", tt.name, got, tt.chain)
		}
	}
	if len(node) < 350 {
		t.Errorf("this node describes %d configs; want every config of Kafka 4.4", len(node))
	}

	// The node's value beats the default, and deleting it uncovers it.
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setOp("num.io.threads", "6")}, 1)
	mustAltered(t, rs, err)
	if got := chainOf(describeBrokerRaw(t, cl, b, "1")["num.io.threads"]); !slices.Equal(got,
		[]string{"DYNAMIC_BROKER_CONFIG=6", "DYNAMIC_DEFAULT_BROKER_CONFIG=4", "STATIC_BROKER_CONFIG=16"}) {
		t.Errorf("num.io.threads synonyms %q", got)
	}
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "num.io.threads"}}, 1)
	mustAltered(t, rs, err)
	if c := describeBrokerRaw(t, cl, b, "1")["num.io.threads"]; c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("after deleting the node's value: %+v", c)
	}
}

// A per-broker log default beats the cluster default in the topics too.
func TestDynamicBrokerConfigPerBrokerWins(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	plain := cfgTopic(t, b, "plain", 1, nil)
	_, adm := cfgAdmin(t, b)
	ctx := cfgCtx(t)
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setOp("log.retention.ms", "7200000")})
	mustAltered(t, rs, err)
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setOp("log.retention.ms", "3600000")}, 1)
	mustAltered(t, rs, err)
	wantPartitions(t, plain, partitionState{3600000, DefaultMessageMaxBytes, false})
	wantConfig(t, describeTopicMap(t, adm, "plain")["retention.ms"], "3600000", kmsg.ConfigSourceDynamicBrokerConfig, []kadm.ConfigSynonym{
		{Key: "log.retention.ms", Value: str("3600000"), Source: kmsg.ConfigSourceDynamicBrokerConfig},
		{Key: "log.retention.ms", Value: str("7200000"), Source: kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		{Key: "log.retention.ms", Value: str("604800000"), Source: kmsg.ConfigSourceDefaultConfig},
	})
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.retention.ms"}}, 1)
	mustAltered(t, rs, err)
	wantPartitions(t, plain, partitionState{7200000, DefaultMessageMaxBytes, false})
}

// What Kafka 4.4 refuses at runtime is refused with its code and message
// (DynamicBrokerConfig.validateConfigs, as INVALID_REQUEST), and nothing
// changes.
func TestDynamicBrokerConfigRefusals(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	cl, _ := cfgAdmin(t, b)
	const set = kmsg.IncrementalAlterConfigOpSet
	brokerT := kmsg.ConfigResourceTypeBroker
	for _, tc := range []struct {
		name, resource, config, value string
		code                          *kerr.Error
		msg                           string
	}{
		{"broker.id", "1", "broker.id", "2", kerr.InvalidRequest, "Cannot update these configs dynamically: [broker.id]"},
		{"broker.id at the default", "", "broker.id", "2", kerr.InvalidRequest, "Cannot update these configs dynamically: [broker.id]"},
		{"log.dirs", "1", "log.dirs", "/x", kerr.InvalidRequest, "Cannot update these configs dynamically: [log.dirs]"},
		{"a 3.9 name", "1", "zookeeper.connect", "zk:2181", kerr.InvalidRequest, "Cannot update these configs dynamically: [zookeeper.connect]"},
		{"keystore without a listener", "1", "ssl.keystore.location", "/k", kerr.InvalidRequest,
			"These security configs can be dynamically updated only per-listener using the listener prefix: [ssl.keystore.location]"},
		{"not an INT", "1", "num.io.threads", "abc", kerr.InvalidRequest, "Invalid value abc for configuration num.io.threads: Not a number of type INT"},
		{"not a LONG", "", "leader.replication.throttled.rate", "1.5", kerr.InvalidRequest,
			"Invalid value 1.5 for configuration leader.replication.throttled.rate: Not a number of type LONG"},
		{"not a boolean", "", "unclean.leader.election.enable", "yes", kerr.InvalidRequest,
			"Invalid value yes for configuration unclean.leader.election.enable: Expected value to be either true or false"},
		{"listener override type", "1", "listener.name.external.max.connections", "many", kerr.InvalidRequest,
			"Invalid value many for configuration listener.name.external.max.connections: Not a number of type INT"},
		{"no Kafka release knows it", "1", "num.io.thread", "4", kerr.InvalidConfig, `unknown broker config "num.io.thread"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := alterResults(rawRequest(t, cl, b, incRequest(false, brokerT, tc.resource, incConfig{set, tc.config, str(tc.value)})))
			if len(res) != 1 || res[0].code != tc.code.Code || !strings.Contains(res[0].msg, tc.msg) {
				t.Fatalf("got %+v, want %s with %q", res, tc.code, tc.msg)
			}
			if len(b.dynamicSnapshot()) != 0 || len(b.nodeSnapshot()) != 0 {
				t.Fatalf("configs changed: %v %v", b.dynamicSnapshot(), b.nodeSnapshot())
			}
		})
	}
}

// Both sets of dynamic broker configs survive a restart.
func TestDynamicBrokerConfigsSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sameDir := func(c *Config) { c.LogDirs = []string{dir} }
	b1 := newTestBroker(t, sameDir)
	cl1, adm1 := cfgAdmin(t, b1)
	ctx := cfgCtx(t)
	rs, err := adm1.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setOp("sasl.kerberos.min.time.before.relogin", "30000")})
	mustAltered(t, rs, err)
	rs, err = adm1.AlterBrokerConfigs(ctx, []kadm.AlterConfig{setOp("sasl.kerberos.min.time.before.relogin", "45000"), setOp("num.io.threads", "5")}, 1)
	mustAltered(t, rs, err)
	cl1.Close()
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}

	b2 := newTestBroker(t, sameDir)
	cl2, _ := cfgAdmin(t, b2)
	if c := describeBrokerRaw(t, cl2, b2, "")["sasl.kerberos.min.time.before.relogin"]; c.Value == nil || *c.Value != "30000" {
		t.Errorf("cluster default after restart: %+v", c)
	}
	node := describeBrokerRaw(t, cl2, b2, "1")
	for name, want := range map[string]string{"sasl.kerberos.min.time.before.relogin": "45000", "num.io.threads": "5"} {
		if c := node[name]; c.Value == nil || *c.Value != want || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
			t.Errorf("%s after restart: %+v, want %s", name, c, want)
		}
	}
}

func TestCheckKafkaType(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		typ   kafkaconfigs.Type
		value string
		want  string
	}{
		{kafkaconfigs.TypeInt, " 42 ", ""},
		{kafkaconfigs.TypeInt, "2147483648", "Not a number of type INT"},
		{kafkaconfigs.TypeShort, "32768", "Not a number of type SHORT"},
		{kafkaconfigs.TypeShort, "-3", ""},
		{kafkaconfigs.TypeLong, "9223372036854775807", ""},
		{kafkaconfigs.TypeLong, "1e3", "Not a number of type LONG"},
		{kafkaconfigs.TypeDouble, "0.5", ""},
		{kafkaconfigs.TypeDouble, "half", "Not a number of type DOUBLE"},
		{kafkaconfigs.TypeBoolean, "TRUE", ""},
		{kafkaconfigs.TypeBoolean, "1", "Expected value to be either true or false"},
		{kafkaconfigs.TypeString, "anything", ""},
		{kafkaconfigs.TypeList, "a,b", ""},
	} {
		if got := settings.TypeError(kafkaConfigType(tt.typ), tt.value); got != tt.want {
			t.Errorf("TypeError(%d, %q) = %q, want %q", tt.typ, tt.value, got, tt.want)
		}
	}
}
