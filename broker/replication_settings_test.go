package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
)

// Validate gives zero replication settings Kafka's defaults and refuses
// negative ones, naming the Kafka property.
func TestConfigValidateReplication(t *testing.T) {
	t.Parallel()
	valid := func() Config {
		c := DefaultConfig()
		c.LogDirs = []string{t.TempDir()}
		return c
	}
	c := valid()
	c.DefaultReplicationFactor, c.MinInsyncReplicas, c.Replication = 0, 0, ReplicationConfig{}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := ReplicationConfig{LagTimeMax: 30 * time.Second, NumFetchers: 1, FetchMaxBytes: 1048576,
		FetchWaitMax: 500 * time.Millisecond, FetchMinBytes: 1, FetchResponseMaxBytes: 10485760}
	if c.Replication != want || c.DefaultReplicationFactor != 1 || c.MinInsyncReplicas != 1 {
		t.Fatalf("filled: rf %d, min.insync.replicas %d, %+v", c.DefaultReplicationFactor, c.MinInsyncReplicas, c.Replication)
	}
	for _, tc := range []struct {
		prop string
		edit func(*Config)
	}{
		{"default.replication.factor", func(c *Config) { c.DefaultReplicationFactor = -1 }},
		{"min.insync.replicas", func(c *Config) { c.MinInsyncReplicas = -1 }},
		{"replica.lag.time.max.ms", func(c *Config) { c.Replication.LagTimeMax = -time.Millisecond }},
		{"num.replica.fetchers", func(c *Config) { c.Replication.NumFetchers = -1 }},
		{"replica.fetch.max.bytes", func(c *Config) { c.Replication.FetchMaxBytes = -1 }},
		{"replica.fetch.wait.max.ms", func(c *Config) { c.Replication.FetchWaitMax = -time.Millisecond }},
		{"replica.fetch.min.bytes", func(c *Config) { c.Replication.FetchMinBytes = -1 }},
		{"replica.fetch.response.max.bytes", func(c *Config) { c.Replication.FetchResponseMaxBytes = -1 }},
	} {
		t.Run(tc.prop, func(t *testing.T) {
			t.Parallel()
			c := valid()
			tc.edit(&c)
			if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.prop+": must be >= 1") {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

// MinInsyncReplicas resolves a topic's min.insync.replicas as its log
// configs are: the topic's own, else the dynamic broker default, else the
// node's configuration; the topic configs describe the same values.
func TestMinInsyncReplicas(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, func(c *Config) { c.MinInsyncReplicas, c.UncleanLeaderElection = 2, true })
	cfgTopic(t, b, "plain", 1, nil)
	cfgTopic(t, b, "own", 1, map[string]string{"min.insync.replicas": "3"})
	_, adm := cfgAdmin(t, b)
	for _, want := range []struct {
		topic string
		n     int
	}{{"plain", 2}, {"own", 3}, {"unknown", 2}} {
		if got := b.MinInsyncReplicas(want.topic); got != want.n {
			t.Errorf("%s: min.insync.replicas %d, want %d", want.topic, got, want.n)
		}
	}
	plain := describeTopicMap(t, adm, "plain")
	if c := plain["min.insync.replicas"]; c.Value == nil || *c.Value != "2" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("described min.insync.replicas %+v", c)
	}
	if c := plain["unclean.leader.election.enable"]; c.Value == nil || *c.Value != "true" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("described unclean.leader.election.enable %+v", c)
	}

	rs, err := adm.AlterBrokerConfigs(cfgCtx(t), []kadm.AlterConfig{setOp("min.insync.replicas", "4")})
	mustAltered(t, rs, err)
	if got, own := b.MinInsyncReplicas("plain"), b.MinInsyncReplicas("own"); got != 4 || own != 3 {
		t.Errorf("after a dynamic default of 4: plain %d, own %d", got, own)
	}
	rs, err = adm.AlterBrokerConfigs(cfgCtx(t), []kadm.AlterConfig{setOp("min.insync.replicas", "0")})
	if err == nil && rs[0].Err == nil {
		t.Errorf("a dynamic min.insync.replicas of 0 was accepted")
	}
}

// The topic configs of replication are checked where every topic config
// is: min.insync.replicas an int >= 1, unclean.leader.election.enable a
// boolean.
func TestReplicationTopicConfigs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, value, err string }{
		{"min.insync.replicas", "2", ""},
		{"min.insync.replicas", "0", `invalid value for min.insync.replicas: want an integer >= 1 (got "0")`},
		{"min.insync.replicas", "two", `invalid value for min.insync.replicas: want an integer >= 1 (got "two")`},
		{"unclean.leader.election.enable", "TRUE", ""},
		{"unclean.leader.election.enable", "yes", `invalid value for unclean.leader.election.enable: want true or false (got "yes")`},
	} {
		err := validateTopicConfig(tc.name, tc.value)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s=%s: %v, want %q", tc.name, tc.value, err, tc.err)
		}
	}
}

// inter.broker.listener.name picks the listener followers fetch from
// their leaders on (the first by default), must be one of listeners, and
// in a cluster must be one the replica fetchers speak: PLAINTEXT or SSL,
// whose TLS trusts the node's truststore and presents its certificate.
func TestConfigValidateInterBrokerListener(t *testing.T) {
	t.Parallel()
	cert := tls.Certificate{Certificate: [][]byte{{1}}}
	roots := x509.NewCertPool()
	valid := func(name string, cluster bool) Config {
		c := DefaultConfig()
		c.LogDirs = []string{t.TempDir()}
		c.Listeners = []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1"}, {Name: "SSL", Host: "127.0.0.1", Port: 1},
			{Name: "SASL_PLAINTEXT", Host: "127.0.0.1", Port: 2}}
		c.Security.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: roots}
		c.Security.PlainUsers = map[string]string{"u": "p"}
		c.InterBrokerListenerName = name
		if cluster {
			c.Cluster = ClusterConfig{BrokerOnly: true, Voters: []meta.Voter{{ID: 5, Addr: "h:1"}, {ID: 6, Addr: "h:2"}}}
		}
		return c
	}
	for _, tt := range []struct {
		name    string
		cluster bool
		want    string // the listener, or the error's text
	}{
		{"", true, "PLAINTEXT"},
		{"SSL", true, "SSL"},
		{"SASL_PLAINTEXT", false, "SASL_PLAINTEXT"}, // a node alone fetches from no one
		{"SASL_PLAINTEXT", true, "inter.broker.listener.name: the inter-broker listener SASL_PLAINTEXT is SASL_PLAINTEXT"},
		{"NOPE", false, "inter.broker.listener.name: NOPE is not one of listeners"},
	} {
		c := valid(tt.name, tt.cluster)
		err := c.Validate()
		switch {
		case strings.Contains(tt.want, ":"):
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%q (cluster %v): %v, want %q", tt.name, tt.cluster, err, tt.want)
			}
		case err != nil:
			t.Errorf("%q (cluster %v): %v", tt.name, tt.cluster, err)
		case c.InterBrokerListener().Name != tt.want:
			t.Errorf("%q: the inter-broker listener is %s, want %s", tt.name, c.InterBrokerListener().Name, tt.want)
		}
	}
	plain, ssl := valid("", true), valid("SSL", true)
	for _, c := range []*Config{&plain, &ssl} {
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	if got := interBrokerTLS(plain); got != nil {
		t.Fatalf("TLS to a PLAINTEXT inter-broker listener: %+v", got)
	}
	if got := interBrokerTLS(ssl); got == nil || got.RootCAs != roots || len(got.Certificates) != 1 {
		t.Fatalf("TLS to an SSL inter-broker listener: %+v, want the truststore and the node's certificate", got)
	}
}
