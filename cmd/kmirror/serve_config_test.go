package main

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/kafkaconfigs"
	"github.com/kmirror/kmirror/internal/settings"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/storage"
)

// writeConfig writes contents to a fresh server.properties and returns its
// path; "" stays "" (no file).
func writeConfig(t *testing.T, contents string) string {
	t.Helper()
	if contents == "" {
		return ""
	}
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte(contents), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantConfig is DefaultConfig changed by edit and validated, as
// loadServeConfig returns it.
func wantConfig(t *testing.T, edit func(*broker.Config)) broker.Config {
	t.Helper()
	c := broker.DefaultConfig()
	if edit != nil {
		edit(&c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("expected config invalid: %v", err)
	}
	return c
}

func TestLoadServeConfig(t *testing.T) {
	t.Parallel()
	plain := func(host string, port int) []broker.Listener {
		return []broker.Listener{{Name: "PLAINTEXT", Host: host, Port: port}}
	}
	tests := []struct {
		name      string
		path      string // an existing file, used as is
		contents  string // else a file written with these contents, if any
		overrides []string
		edit      func(*broker.Config) // applied to DefaultConfig for the expected result
	}{
		{name: "defaults"},
		{name: "sample file", path: "testdata/server.properties", edit: func(c *broker.Config) {
			c.NodeID = 3
			c.Cluster.Voters = []meta.Voter{{ID: 3, Addr: "localhost:19093"}}
			c.Cluster.ControllerListener = &broker.Listener{Name: "CONTROLLER", Host: "0.0.0.0", Port: 19093, Protocol: "PLAINTEXT"}
			c.LogRetentionCheckInterval = 5 * time.Minute
			c.OffsetsTopicReplicationFactor = 1
			c.TransactionTopicReplicationFactor, c.TransactionTopicMinISR = 1, 1
			c.Listeners = plain("0.0.0.0", 19092)
			c.AdvertisedListeners = plain("broker.example.com", 19092)
			c.InterBrokerListenerName = "PLAINTEXT"
			c.SocketRequestMaxBytes = 52428800
			c.MessageMaxBytes = 2097152
			c.MetricsListener = "127.0.0.1:19308"
			c.GroupInitialRebalanceDelay = 0
			c.LogDirs = []string{"/var/lib/kmirror/data-0", "/var/lib/kmirror/data-1"}
			c.StateDir = "/var/lib/kmirror/meta"
			c.NumPartitions = 3
			c.AutoCreateTopics = false
			c.Log.FlushMessages = 10000
			c.Log.FlushMs = 1000
			c.Log.RetentionMs = 2 * 24 * msPerHour
			c.Log.RetentionBytes = 1 << 30
			c.Log.SegmentBytes = 512 << 20
			c.Log.SegmentMs = 12 * msPerHour
			c.Log.IndexIntervalBytes = 8192
			c.LogCleanupPolicy = "compact,delete"
			c.Log.Compact = true
			c.Log.DeleteRetentionMs = msPerHour
			c.Log.MinCompactionLagMs = msPerMinute
			c.Log.ProducerIDExpirationMs = msPerHour
		}},
		{name: "overrides beat the file", contents: "num.partitions=3\nlog.dirs=/a\n", overrides: []string{"num.partitions=7", "log.dir=/ignored"},
			edit: func(c *broker.Config) { c.NumPartitions, c.LogDirs = 7, []string{"/a"} }},
		{name: "overrides beat the sample file", path: "testdata/server.properties", overrides: []string{"log.retention.ms=-1", "node.id=3", "log.dirs=/x"},
			edit: func(c *broker.Config) {
				sample, _, err := loadServeConfig("testdata/server.properties", nil)
				if err != nil {
					t.Fatal(err)
				}
				*c = sample
				c.Log.RetentionMs, c.LogDirs, c.StateDir = -1, []string{"/x"}, "/var/lib/kmirror/meta"
			}},
		{name: "later override wins", overrides: []string{"num.partitions=2", "num.partitions = 5"},
			edit: func(c *broker.Config) { c.NumPartitions = 5 }},
		{name: "later line wins", contents: "num.partitions=2\nnum.partitions=4\n",
			edit: func(c *broker.Config) { c.NumPartitions = 4 }},
		{name: "values are trimmed", contents: "num.partitions =  4  \t\nauto.create.topics.enable: FALSE \n",
			edit: func(c *broker.Config) { c.NumPartitions, c.AutoCreateTopics = 4, false }},
		{name: "boolean any case", overrides: []string{"auto.create.topics.enable=True"}},

		{name: "retention hours", overrides: []string{"log.retention.hours=2"},
			edit: func(c *broker.Config) { c.Log.RetentionMs = 2 * msPerHour }},
		{name: "retention minutes beat hours", contents: "log.retention.minutes=30\nlog.retention.hours=2\n",
			edit: func(c *broker.Config) { c.Log.RetentionMs = 30 * msPerMinute }},
		{name: "retention ms beats minutes and hours", contents: "log.retention.ms=1234\nlog.retention.hours=2\nlog.retention.minutes=30\n",
			edit: func(c *broker.Config) { c.Log.RetentionMs = 1234 }},
		{name: "retention negative is unlimited", overrides: []string{"log.retention.minutes=-5"},
			edit: func(c *broker.Config) { c.Log.RetentionMs = -1 }},
		{name: "retention ms negative is unlimited", overrides: []string{"log.retention.ms=-1", "log.retention.hours=3"},
			edit: func(c *broker.Config) { c.Log.RetentionMs = -1 }},
		{name: "retention zero is one ms", overrides: []string{"log.retention.hours=0"},
			edit: func(c *broker.Config) { c.Log.RetentionMs = 1 }},
		{name: "retention bytes", overrides: []string{"log.retention.bytes=-7"}},
		{name: "retention bytes zero is one byte", overrides: []string{"log.retention.bytes=0"},
			edit: func(c *broker.Config) { c.Log.RetentionBytes = 1 }},
		{name: "roll hours", overrides: []string{"log.roll.hours=1"},
			edit: func(c *broker.Config) { c.Log.SegmentMs = msPerHour }},
		{name: "roll ms beats hours", contents: "log.roll.ms=5000\nlog.roll.hours=1\n",
			edit: func(c *broker.Config) { c.Log.SegmentMs = 5000 }},
		{name: "log.dirs beats log.dir", contents: "log.dirs=/b, /c\nlog.dir=/a\n",
			edit: func(c *broker.Config) { c.LogDirs = []string{"/b", "/c"} }},
		{name: "log.dir alone, empty items dropped", overrides: []string{"log.dir=/a,,/b , "},
			edit: func(c *broker.Config) { c.LogDirs = []string{"/a", "/b"} }},
		{name: "empty metadata.log.dir is the default", overrides: []string{"metadata.log.dir="}},
		{name: "index interval zero is every batch", overrides: []string{"log.index.interval.bytes=0"},
			edit: func(c *broker.Config) { c.Log.IndexIntervalBytes = 1 }},
		{name: "flush ms zero", overrides: []string{"log.flush.interval.ms=0", "log.flush.interval.messages=1"},
			edit: func(c *broker.Config) { c.Log.FlushMs, c.Log.FlushMessages = 1, 1 }},
		{name: "compaction settings", overrides: []string{"log.cleaner.delete.retention.ms=0", "log.cleaner.min.compaction.lag.ms=0", "producer.id.expiration.ms=1"},
			edit: func(c *broker.Config) { c.Log.DeleteRetentionMs, c.Log.ProducerIDExpirationMs = 1, 1 }},
		{name: "cleanup compact", overrides: []string{"log.cleanup.policy=compact"},
			edit: func(c *broker.Config) { c.LogCleanupPolicy, c.Log.Compact = "compact", true }},
		{name: "cleanup both, any order", overrides: []string{"log.cleanup.policy=delete , compact"},
			edit: func(c *broker.Config) { c.LogCleanupPolicy, c.Log.Compact = "compact,delete", true }},
		{name: "cleanup delete", overrides: []string{"log.cleanup.policy=delete,delete"}},
		{name: "segment bytes minimum", overrides: []string{"log.segment.bytes=244"},
			edit: func(c *broker.Config) { c.Log.SegmentBytes = 244 }},

		{name: "broker.id alone", overrides: []string{"broker.id=9"},
			edit: func(c *broker.Config) { c.NodeID = 9 }},
		{name: "broker.id agrees with node.id", contents: "node.id=7\nbroker.id=07\n",
			edit: func(c *broker.Config) { c.NodeID = 7 }},

		{name: "listener empty host", overrides: []string{"listeners=PLAINTEXT://:0"},
			edit: func(c *broker.Config) { c.Listeners = plain("0.0.0.0", 0) }},
		{name: "listener IPv6 and lower-case name", overrides: []string{"listeners=plaintext://[::1]:9093", "advertised.listeners=PLAINTEXT://[2001:db8::1]:9093"},
			edit: func(c *broker.Config) {
				c.Listeners = plain("::1", 9093)
				c.AdvertisedListeners = plain("2001:db8::1", 9093)
			}},
		{name: "controller listener dropped", contents: "listeners=PLAINTEXT://h:1,CONTROLLER://h:2\ncontroller.listener.names=controller\n",
			edit: func(c *broker.Config) {
				c.Listeners = plain("h", 1)
				c.Cluster.ControllerListener = &broker.Listener{Name: "CONTROLLER", Host: "h", Port: 2}
			}},
		{name: "empty advertised listeners", overrides: []string{"advertised.listeners="}},
		{name: "protocol map of PLAINTEXT", overrides: []string{"listener.security.protocol.map=CONTROLLER:PLAINTEXT, PLAINTEXT : plaintext"}},
		{name: "metrics disabled", overrides: []string{"metrics.listener="},
			edit: func(c *broker.Config) { c.MetricsListener = "" }},
		{name: "metrics all interfaces", overrides: []string{"metrics.listener=:9999"},
			edit: func(c *broker.Config) { c.MetricsListener = ":9999" }},
		{name: "metrics partition labels", overrides: []string{"metrics.mirror.partition.labels=TRUE"},
			edit: func(c *broker.Config) { c.MetricsMirrorPartitionLabels = true }},
		{name: "ignored keys", contents: "process.roles=broker,controller\ncontroller.quorum.voters=1@localhost:9093\n" +
			"num.network.threads=abc\n", edit: func(c *broker.Config) {
			c.Cluster.Voters = []meta.Voter{{ID: 1, Addr: "localhost:9093"}}
		}},
		{name: "replication settings", contents: "default.replication.factor=3\nmin.insync.replicas=2\nunclean.leader.election.enable=TRUE\n" +
			"replica.lag.time.max.ms=10000\nnum.replica.fetchers=4\nreplica.fetch.max.bytes=2048\nreplica.fetch.response.max.bytes=4096\n" +
			"replica.fetch.min.bytes=16\nreplica.fetch.wait.max.ms=100\n", edit: func(c *broker.Config) {
			c.DefaultReplicationFactor, c.MinInsyncReplicas, c.UncleanLeaderElection = 3, 2, true
			c.Replication = broker.ReplicationConfig{LagTimeMax: 10 * time.Second, NumFetchers: 4, FetchMaxBytes: 2048,
				FetchResponseMaxBytes: 4096, FetchMinBytes: 16, FetchWaitMax: 100 * time.Millisecond}
		}},
		{name: "mirror settings", overrides: []string{"mirror.metadata.refresh.interval.ms=0", "mirror.failed.retry.initial.backoff.ms=100",
			"mirror.failed.retry.max.backoff.ms=300000", "mirror.failed.retry.max.attempts=0"},
			edit: func(c *broker.Config) {
				c.Mirror = broker.MirrorSettings{RetryInitialBackoff: 100 * time.Millisecond, RetryMaxBackoff: 5 * time.Minute}
			}},
		{name: "SASL listener with PLAIN users and ACLs", contents: "listeners=SASL_PLAINTEXT://:9092,PLAINTEXT://:9093\n" +
			`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" user_admin="a" user_alice="b";` + "\n" +
			"sasl.enabled.mechanisms=PLAIN,scram-sha-512\nauthorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n" +
			"super.users=User:admin; User:ops\nallow.everyone.if.no.acl.found=true\n",
			edit: func(c *broker.Config) {
				c.Listeners = []broker.Listener{{Name: "SASL_PLAINTEXT", Host: "0.0.0.0", Port: 9092, Protocol: "SASL_PLAINTEXT"},
					{Name: "PLAINTEXT", Host: "0.0.0.0", Port: 9093, Protocol: "PLAINTEXT"}}
				c.Security = broker.Security{PlainUsers: map[string]string{"admin": "a", "alice": "b"},
					SASLMechanisms: []string{"PLAIN", "SCRAM-SHA-512"}, Authorizer: true,
					SuperUsers: []string{"User:admin", "User:ops"}, AllowEveryoneIfNoACL: true}
			}},
		{name: "protocol map names a listener", contents: "listeners=INTERNAL://:9092\nlistener.security.protocol.map=INTERNAL:PLAINTEXT\n",
			edit: func(c *broker.Config) {
				c.Listeners = []broker.Listener{{Name: "INTERNAL", Host: "0.0.0.0", Port: 9092, Protocol: "PLAINTEXT"}}
			}},
		{name: "transaction settings", overrides: []string{"transaction.max.timeout.ms=60000", "transactional.id.expiration.ms=3600000",
			"transaction.abort.timed.out.transaction.cleanup.interval.ms=500"},
			edit: func(c *broker.Config) {
				c.Transactions = broker.TxnSettings{MaxTimeout: time.Minute, IDExpiration: time.Hour, AbortCheckInterval: 500 * time.Millisecond}
			}},
		{name: "quota windows", overrides: []string{"quota.window.num=5", "quota.window.size.seconds=2"},
			edit: func(c *broker.Config) { c.QuotaWindowNum, c.QuotaWindowSize = 5, 2*time.Second }},
		{name: "password encoder secret", overrides: []string{"password.encoder.secret=s3cret"},
			edit: func(c *broker.Config) { c.PasswordEncoderSecret = "s3cret" }},
		{name: "comments and escapes", contents: "# c\n! c\nlog.dirs = /data/a\\,b,\\\n   /data/c\n",
			edit: func(c *broker.Config) { c.LogDirs = []string{"/data/a", "b", "/data/c"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := tt.path
			if path == "" {
				path = writeConfig(t, tt.contents)
			}
			got, _, err := loadServeConfig(path, tt.overrides)
			if err != nil {
				t.Fatal(err)
			}
			want := wantConfig(t, tt.edit)
			got.Logger, want.Logger = nil, nil               // Validate makes a fresh one each time
			got.KafkaSettings, want.KafkaSettings = nil, nil // TestLoadServeConfigIgnoresKafkaSettings checks them
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("config\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestLoadServeConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		contents  string
		overrides []string
		want      string // "{file}" stands for the file's path
	}{
		{"unknown key", "node.id=1\n\n# c\nfoo.bar=1\n", nil, `unknown setting "foo.bar" (line 4 of {file})`},
		{"unknown override", "", []string{"foo.bar=1"}, `unknown setting "foo.bar" (from --override)`},
		{"unknown key escaped", "log\\ dirs=1\n", nil, `unknown setting "log dirs" (line 1 of {file})`},
		{"override without =", "", []string{"num.partitions"}, `--override "num.partitions": want key=value`},
		{"override empty key", "", []string{" =1"}, `--override " =1": want key=value`},
		{"malformed escape", "a=b\nlog.dirs=\\u12x4\n", nil, `config file {file}: props: line 2: malformed \uXXXX escape`},

		{"segment bytes not a number", "\nlog.segment.bytes=abc\n", nil, `log.segment.bytes: want an integer >= 244 (got "abc") (line 2 of {file})`},
		{"segment bytes too small", "log.segment.bytes=243", nil, `log.segment.bytes: want an integer >= 244 (got "243") (line 1 of {file})`},
		{"segment bytes too big", "", []string{"log.segment.bytes=2147483648"}, `log.segment.bytes: want an integer <= 2147483647 (got "2147483648") (from --override)`},
		{"num.partitions zero", "num.partitions=0", nil, `num.partitions: want an integer >= 1 (got "0") (line 1 of {file})`},
		{"num.partitions huge", "", []string{"num.partitions=99999999999999999999"}, `num.partitions: want an integer <= 2147483647`},
		{"message.max.bytes negative", "message.max.bytes=-1", nil, `message.max.bytes: want an integer >= 0 (got "-1") (line 1 of {file})`},
		{"socket.request.max.bytes zero", "socket.request.max.bytes=0", nil, `socket.request.max.bytes: want an integer >= 1 (got "0")`},
		{"node.id negative", "node.id=-1", nil, `node.id: want an integer >= 0 (got "-1") (line 1 of {file})`},
		{"node.id float", "", []string{"node.id=1.5"}, `node.id: want an integer >= 0 (got "1.5") (from --override)`},
		{"broker.id invalid", "broker.id=x", nil, `broker.id: want an integer >= 0 (got "x") (line 1 of {file})`},
		{"broker.id conflicts", "node.id=1\nbroker.id=2\n", nil, `broker.id: "2" (line 2 of {file}) conflicts with node.id "1" (line 1 of {file})`},
		{"override makes a conflict", "node.id=1\nbroker.id=1\n", []string{"node.id=2"}, `broker.id: "1" (line 2 of {file}) conflicts with node.id "2" (from --override)`},
		{"boolean", "auto.create.topics.enable=yes", nil, `auto.create.topics.enable: want true or false (got "yes") (line 1 of {file})`},
		{"retention hours", "log.retention.hours=abc", nil, `log.retention.hours: want an integer, negative for unlimited (got "abc") (line 1 of {file})`},
		{"retention minutes too big", "log.retention.minutes=2147483648", nil, `log.retention.minutes: want an integer, negative for unlimited`},
		{"retention ms", "log.retention.ms=1.5", nil, `log.retention.ms: want an integer, negative for unlimited (got "1.5")`},
		{"retention bytes", "log.retention.bytes=1G", nil, `log.retention.bytes: want an integer, negative for unlimited (got "1G")`},
		{"roll hours zero", "log.roll.hours=0", nil, `log.roll.hours: want an integer >= 1 (got "0") (line 1 of {file})`},
		{"roll ms zero", "log.roll.ms=0", nil, `log.roll.ms: want an integer >= 1 (got "0")`},
		{"index interval negative", "log.index.interval.bytes=-1", nil, `log.index.interval.bytes: want an integer >= 0`},
		{"flush messages zero", "log.flush.interval.messages=0", nil, `log.flush.interval.messages: want an integer >= 1`},
		{"flush ms negative", "log.flush.interval.ms=-1", nil, `log.flush.interval.ms: want an integer >= 0`},
		{"delete retention negative", "log.cleaner.delete.retention.ms=-1", nil, `log.cleaner.delete.retention.ms: want an integer >= 0`},
		{"compaction lag negative", "log.cleaner.min.compaction.lag.ms=-1", nil, `log.cleaner.min.compaction.lag.ms: want an integer >= 0`},
		{"producer expiration zero", "producer.id.expiration.ms=0", nil, `producer.id.expiration.ms: want an integer >= 1`},
		{"cleanup policy", "log.cleanup.policy=compress", nil, `log.cleanup.policy: want delete, compact or compact,delete (got "compress") (line 1 of {file})`},
		{"cleanup policy empty", "log.cleanup.policy=", nil, `log.cleanup.policy: want delete, compact or compact,delete (got "")`},
		{"replication factor zero", "default.replication.factor=0", nil, `default.replication.factor: want an integer >= 1 (got "0") (line 1 of {file})`},
		{"min.insync.replicas zero", "min.insync.replicas=0", nil, `min.insync.replicas: want an integer >= 1 (got "0")`},
		{"unclean election not a boolean", "unclean.leader.election.enable=yes", nil, `unclean.leader.election.enable: want true or false (got "yes")`},
		{"replica lag zero", "replica.lag.time.max.ms=0", nil, `replica.lag.time.max.ms: want an integer >= 1 (got "0")`},
		{"replica fetchers zero", "num.replica.fetchers=0", nil, `num.replica.fetchers: want an integer >= 1 (got "0")`},
		{"replica fetch max bytes negative", "replica.fetch.max.bytes=-1", nil, `replica.fetch.max.bytes: want an integer >= 1 (got "-1")`},
		{"replica fetch response max bytes text", "replica.fetch.response.max.bytes=10M", nil, `replica.fetch.response.max.bytes: want an integer >= 1 (got "10M")`},
		{"replica fetch min bytes zero", "replica.fetch.min.bytes=0", nil, `replica.fetch.min.bytes: want an integer >= 1 (got "0")`},
		{"replica fetch wait too big", "replica.fetch.wait.max.ms=2147483648", nil, `replica.fetch.wait.max.ms: want an integer <= 2147483647`},
		{"log.dirs empty", "log.dirs= , ", nil, `log.dirs: want a comma-separated list of directories (got ",")`},
		{"log.dir empty", "log.dir=", nil, `log.dir: want a comma-separated list of directories (got "") (line 1 of {file})`},

		{"listeners empty", "listeners=", nil, `listeners: want a comma-separated list of NAME://host:port (got "") (line 1 of {file})`},
		{"listener without name", "listeners=localhost:9092", nil, `listeners: want NAME://host:port (got "localhost:9092") (line 1 of {file})`},
		{"listener empty item", "listeners=PLAINTEXT://:1,", nil, `listeners: want NAME://host:port (got "")`},
		{"listener IPv6 unbracketed", "listeners=PLAINTEXT://::1:9092", nil, `listeners: want NAME://host:port, IPv6 hosts in brackets (got "PLAINTEXT://::1:9092")`},
		{"listener no port", "listeners=PLAINTEXT://host", nil, `listeners: want NAME://host:port, IPv6 hosts in brackets (got "PLAINTEXT://host")`},
		{"listener port range", "listeners=PLAINTEXT://h:65536", nil, `listeners: want NAME://host:port, a port in 0-65535 (got "PLAINTEXT://h:65536")`},
		{"listener port text", "listeners=PLAINTEXT://h:http", nil, `listeners: want NAME://host:port, a port in 0-65535`},
		{"listener host", "listeners=PLAINTEXT://a/b:1", nil, `listeners: want NAME://host:port, a host of letters, digits and -%._: (got "PLAINTEXT://a/b:1")`},
		{"listener SSL without a keystore", "listeners=SSL://:9093", nil, `ssl.keystore.location: listener SSL is SSL: it needs this node's certificate`},
		{"advertised meta-address", "advertised.listeners=PLAINTEXT://0.0.0.0:9092", nil, `advertised.listeners: want a host clients can reach, not "0.0.0.0" (got "PLAINTEXT://0.0.0.0:9092") (line 1 of {file})`},
		{"advertised empty host", "advertised.listeners=PLAINTEXT://:9092", nil, `advertised.listeners: want a host clients can reach, not ""`},
		{"advertised IPv6 meta-address", "", []string{"advertised.listeners=PLAINTEXT://[::]:9092"}, `advertised.listeners: want a host clients can reach, not "::"`},
		{"advertised port zero", "advertised.listeners=PLAINTEXT://h:0", nil, `advertised.listeners: want a port in 1-65535 (got "PLAINTEXT://h:0")`},
		{"advertised unknown listener", "advertised.listeners=EXTERNAL://h:1", nil, `advertised.listeners: listener EXTERNAL is not in listeners`},
		{"protocol map unknown protocol", "\nlistener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:KERBEROS\n", nil,
			`listener.security.protocol.map: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL as protocol (got "PLAINTEXT:KERBEROS") (line 2 of {file})`},
		{"protocol map malformed", "listener.security.protocol.map=PLAINTEXT", nil, `listener.security.protocol.map: want a comma-separated list of NAME:PROTOCOL (got "PLAINTEXT")`},
		{"listener without protocol", "listeners=EXTERNAL://:9092", nil, `listener EXTERNAL has no security protocol: map it`},
		{"SASL listener without users", "listeners=SASL_PLAINTEXT://:9092\nsasl.enabled.mechanisms=PLAIN\n", nil,
			`listener SASL_PLAINTEXT is SASL_PLAINTEXT but no mechanism can authenticate anyone`},
		{"GSSAPI", "sasl.enabled.mechanisms=GSSAPI", nil, `sasl.enabled.mechanisms: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got "GSSAPI"`},
		{"authorizer class", "authorizer.class.name=com.example.Custom", nil, `authorizer.class.name: want org.apache.kafka.metadata.authorizer.StandardAuthorizer`},
		{"super user without type", "super.users=admin", nil, `super.users: want principals of the form Type:name, got "admin"`},
		{"PLAIN JAAS without users", `listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";`, nil,
			`listener.name.sasl_plaintext.plain.sasl.jaas.config: no user_<name>="<password>" option`},
		{"ssl client auth", "ssl.client.auth=maybe", nil, `ssl.client.auth: want none, requested or required (got "maybe")`},
		{"TLS without a keystore", "ssl.truststore.certificates=x", nil, `ssl.truststore`},
		{"metrics listener", "metrics.listener=localhost", nil, `metrics.listener: want host:port or nothing, IPv6 hosts in brackets (got "localhost") (line 1 of {file})`},
		{"mirror refresh negative", "mirror.metadata.refresh.interval.ms=-1", nil, `mirror.metadata.refresh.interval.ms: want an integer >= 0 (got "-1")`},
		{"mirror attempts too many", "", []string{"mirror.failed.retry.max.attempts=32768"}, `mirror.failed.retry.max.attempts: want an integer <= 32767`},
		{"mirror backoff max below initial", "mirror.failed.retry.initial.backoff.ms=5000\nmirror.failed.retry.max.backoff.ms=1000\n", nil,
			`mirror.failed.retry.max.backoff.ms: must be >= mirror.failed.retry.initial.backoff.ms`},
		{"controller drops every listener", "listeners=CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\n", nil, `listeners: at least one listener is required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, tt.contents)
			_, _, err := loadServeConfig(path, tt.overrides)
			want := strings.ReplaceAll(tt.want, "{file}", path)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v\nwant it to contain %s", err, want)
			}
		})
	}
}

func TestLoadServeConfigUnreadable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.properties")
	_, _, err := loadServeConfig(missing, nil)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v; want ErrNotExist naming %s", err, missing)
	}
	// A directory opens but does not read.
	if _, _, err := loadServeConfig(dir, nil); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("directory: %v; want an error naming %s", err, dir)
	}
}

// TestSettingsTable checks the table itself: names unique, aliases resolve
// to real settings, and every key has one line of ASCII help that
// serveConfigHelp prints.
func TestSettingsTable(t *testing.T) {
	t.Parallel()
	help := serveConfigHelp()
	seen := map[string]bool{}
	for _, s := range serverSettings {
		if seen[s.Name] {
			t.Errorf("%s: listed twice", s.Name)
		}
		seen[s.Name] = true
		if s.aliasOf != "" && (s.apply != nil || lookupSetting(s.aliasOf) == nil || lookupSetting(s.aliasOf).apply == nil) {
			t.Errorf("%s: alias of %q must have no apply of its own and name a setting that has one", s.Name, s.aliasOf)
		}
		if s.Doc == "" || strings.Contains(s.Doc, "\n") {
			t.Errorf("%s: help must be one non-empty line, got %q", s.Name, s.Doc)
		}
		if !strings.Contains("\n"+help, "\n  "+s.Name+" ") {
			t.Errorf("%s: missing from serveConfigHelp", s.Name)
		}
	}
	for i, r := range help {
		if r > 0x7e || r < 0x20 && r != '\n' {
			t.Fatalf("help has a non-ASCII or control character at %d: %q", i, r)
		}
	}
	// The keys of Kafka's sample KRaft file are accepted and ignored.
	for _, name := range []string{"num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
		"socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir",
		"share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr"} {
		if lookupSetting(name) != nil || !kafkaconfigs.Known(name) {
			t.Errorf("%s: want an accepted, ignored key", name)
		}
	}
	// Every applied setting that is not kmirror's own is a Kafka name: a
	// typo in the table would otherwise pass as a kmirror extension.
	own := map[string]bool{"metrics.listener": true, "metrics.mirror.partition.labels": true, "password.encoder.secret": true, plainJAASPattern: true,
		"mirror.metadata.refresh.interval.ms": true, "mirror.failed.retry.initial.backoff.ms": true,
		"mirror.failed.retry.max.backoff.ms": true, "mirror.failed.retry.max.attempts": true,
		"ssl.keystore.certificate.chain": true, "ssl.keystore.key": true, "ssl.truststore.certificates": true}
	for _, s := range serverSettings {
		if !own[s.Name] && !kafkaconfigs.Known(s.Name) {
			t.Errorf("%s: no Kafka release knows this name", s.Name)
		}
	}
}

// What a definition says 0 means agrees with what the setting does with
// it: a setting that gives 0 a meaning accepts it, and an integer setting
// whose definition refuses 0 refuses it.
func TestSettingsZero(t *testing.T) {
	t.Parallel()
	for _, s := range serverSettings {
		if s.apply == nil {
			continue
		}
		cfg := broker.DefaultConfig()
		err := s.apply(&cfg, "0")
		integer := s.Type == settings.Int || s.Type == settings.Long || s.Type == settings.Short
		switch {
		case s.Zero != settings.ZeroRefused && err != nil:
			t.Errorf("%s: 0 is %v in its definition, yet refused: %v", s.Name, s.Zero, err)
		case s.Zero == settings.ZeroRefused && integer && err == nil:
			t.Errorf("%s: an integer whose definition refuses 0, yet 0 is accepted", s.Name)
		}
	}
}

// The defaults in the help text come from the same constants DefaultConfig
// uses; this catches a constant that DefaultConfig stops using.
func TestServeConfigHelpDefaults(t *testing.T) {
	t.Parallel()
	d := broker.DefaultConfig()
	if d.Log.SegmentBytes != storage.DefaultSegmentBytes || d.Log.RetentionMs != storage.DefaultRetentionMs ||
		d.NumPartitions != broker.DefaultNumPartitions || d.MetricsListener != broker.DefaultMetricsListener {
		t.Fatalf("DefaultConfig no longer uses the constants the help quotes: %+v", d)
	}
}

// A server.properties written for Kafka loads: the settings kmirror does
// not apply (ZooKeeper, thread pools, old templates' names, per-listener
// overrides) are accepted and reported in one start-up line, while a name
// no Kafka release knows still fails.
func TestLoadServeConfigIgnoresKafkaSettings(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "delete.topic.enable=true\nzookeeper.connect=zk1:2181,zk2:2181/kafka\n"+
		"num.network.threads=3\nnum.io.threads=8\nlog.message.format.version=2.8\n"+
		"inter.broker.protocol.version=3.9\nport=9092\nprocess.roles=broker,controller\n"+
		"listener.name.internal.ssl.keystore.location=/k.jks\nlistener.name.sasl.scram-sha-256.sasl.jaas.config=x\n"+
		"num.partitions=4\n")
	cfg, ignored, err := loadServeConfig(path, []string{"delete.topic.enable=false", "log.flush.scheduler.interval.ms=1000"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NumPartitions != 4 {
		t.Errorf("num.partitions not applied: %d", cfg.NumPartitions)
	}
	if len(cfg.KafkaSettings) != 10 || cfg.KafkaSettings["delete.topic.enable"] != "false" || cfg.KafkaSettings["num.io.threads"] != "8" {
		t.Errorf("KafkaSettings (described as static) = %v", cfg.KafkaSettings)
	}
	want := []string{"delete.topic.enable", "inter.broker.protocol.version", "listener.name.internal.ssl.keystore.location",
		"listener.name.sasl.scram-sha-256.sasl.jaas.config", "log.flush.scheduler.interval.ms", "log.message.format.version",
		"num.io.threads", "num.network.threads", "port", "zookeeper.connect"}
	if !reflect.DeepEqual(ignored, want) {
		t.Fatalf("ignored\n got %q\nwant %q", ignored, want)
	}
	var buf strings.Builder
	logIgnored(slog.New(slog.NewTextHandler(&buf, nil)), ignored)
	if line := buf.String(); strings.Count(line, "\n") != 1 || !strings.Contains(line, "level=INFO") ||
		!strings.Contains(line, `msg="ignored Kafka settings: delete.topic.enable, inter.broker.protocol.version,`) ||
		!strings.Contains(line, "zookeeper.connect\" count=10") {
		t.Fatalf("log line %q", line)
	}
	buf.Reset()
	logIgnored(slog.New(slog.NewTextHandler(&buf, nil)), nil)
	if buf.Len() != 0 {
		t.Fatalf("nothing ignored, yet logged %q", buf.String())
	}

	for _, bad := range []string{"delete.topics.enable", "listener.name.internal.no.such.config", "listener.name.ssl.keystore.location"} {
		if _, _, err := loadServeConfig(writeConfig(t, "delete.topic.enable=true\n"+bad+"=1\n"), nil); err == nil ||
			!strings.Contains(err.Error(), `unknown setting "`+bad+`" (line 2 of`) {
			t.Errorf("%s: error %v, want unknown setting", bad, err)
		}
	}
}

// The help lists the applied settings and says what happens to the rest.
func TestServeHelpNamesIgnoredSettings(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	if code := run([]string{"serve", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	help := errOut.String()
	for _, want := range []string{"\n  num.partitions ", "\n  log.retention.ms ", "is accepted and\nignored",
		"num.network.threads or zookeeper.connect"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "\n  num.network.threads ") {
		t.Errorf("help lists an ignored setting as applied")
	}
}

// KRaft settings: Kafka's single-node file is a node alone; three voters
// with a CONTROLLER listener are a cluster, and a broker-only node joins
// them without one; what kmirror cannot be yet (controller-only nodes, a
// dynamic quorum) is refused, naming the setting.
func TestLoadServeConfigQuorum(t *testing.T) {
	t.Parallel()
	const three = "process.roles=broker,controller\nnode.id=2\n" +
		"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\ncontroller.listener.names=CONTROLLER\n" +
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n" +
		"controller.quorum.voters=1@a:9093,2@127.0.0.1:9093,3@c:9093\n"
	const brokerOnly = "process.roles=broker\nnode.id=4\nlisteners=PLAINTEXT://127.0.0.1:9092\ncontroller.listener.names=CONTROLLER\n" +
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n" +
		"controller.quorum.voters=1@a:9093,2@b:9093,3@c:9093\n"
	for _, c := range []struct {
		name, contents, err string
		voters              int
	}{
		{"Kafka's single-node file", "node.id=2\nprocess.roles=broker,controller\ncontroller.quorum.voters=2@localhost:9093\n" +
			"controller.quorum.bootstrap.servers=localhost:9093\n", "", 1},
		{"roles in another order", "process.roles=controller, broker\n", "", 0},
		{"three voters", three, "", 3},
		{"three voters, timeouts", three + "broker.session.timeout.ms=3000\nbroker.heartbeat.interval.ms=500\n", "", 3},
		{"a heartbeat slower than the session", three + "broker.session.timeout.ms=3000\nbroker.heartbeat.interval.ms=3000\n", "broker.heartbeat.interval.ms: must be below", 0},
		{"an SSL controller listener", strings.Replace(three, "CONTROLLER:PLAINTEXT", "CONTROLLER:SSL", 1), "the controller listener CONTROLLER is SSL: only PLAINTEXT", 0},
		{"an unmapped controller listener", strings.Replace(three, "CONTROLLER:PLAINTEXT,", "", 1), "listener.security.protocol.map: the controller listener CONTROLLER has no security protocol", 0},
		{"a voter address off the controller listener", strings.Replace(three, "2@127.0.0.1:9093", "2@127.0.0.1:9094", 1), "node 2's voter address 127.0.0.1:9094 is not on the port", 0},
		{"three voters without a controller listener", "node.id=1\ncontroller.quorum.voters=1@a:9093,2@b:9093,3@c:9093\n", "controller.listener.names: a voter of a quorum of several needs", 0},
		{"not a voter", "node.id=4\ncontroller.quorum.voters=1@a:9093,2@b:9093,3@c:9093\n", "node 4 is not a voter", 0},
		{"another node as the only voter", "node.id=1\ncontroller.quorum.voters=2@b:9093\n", "node 1 is not a voter", 0},
		{"a bad voter list", "controller.quorum.voters=x\n", "controller.quorum.voters: want id@host:port", 0},
		{"a broker-only node", brokerOnly, "", 3},
		{"a broker-only node among the voters", strings.Replace(brokerOnly, "node.id=4", "node.id=2", 1), "node 2 is a voter, and process.roles=broker", 0},
		{"a broker-only node with a controller listener", strings.Replace(brokerOnly, "listeners=PLAINTEXT://127.0.0.1:9092",
			"listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", 1), "CONTROLLER must not be in listeners", 0},
		{"a broker-only node of one voter", strings.Replace(brokerOnly, "1@a:9093,2@b:9093,3@c:9093", "1@a:9093", 1), "a broker-only node joins a quorum of several voters, got 1", 0},
		{"a broker-only node without voters", "process.roles=broker\n", "a broker-only node joins a quorum of several voters, got 0", 0},
		{"controller only", "process.roles=controller\n", "controller-only nodes are not supported yet", 0},
		{"several bootstrap controllers", "controller.quorum.bootstrap.servers=a:9093,b:9093\n", "controller.quorum.bootstrap.servers", 0},
		{"replication factor 3", "default.replication.factor=3\n", "", 0},
		{"replication factor 0", "default.replication.factor=0\n", "default.replication.factor", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, _, err := loadServeConfig(writeConfig(t, c.contents), nil)
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("want an error with %q, got %v", c.err, err)
			case c.err == "" && len(cfg.Cluster.Voters) != c.voters:
				t.Fatalf("voters %v, want %d", cfg.Cluster.Voters, c.voters)
			}
			if c.contents == brokerOnly {
				if !cfg.Cluster.BrokerOnly || cfg.Cluster.ControllerListener != nil || len(cfg.Listeners) != 1 {
					t.Fatalf("broker only %v, controller listener %+v, listeners %+v", cfg.Cluster.BrokerOnly, cfg.Cluster.ControllerListener, cfg.Listeners)
				}
			} else if c.voters == 3 {
				cl := cfg.Cluster.ControllerListener
				if cl == nil || cl.Addr() != "127.0.0.1:9093" || len(cfg.Listeners) != 1 || cfg.Listeners[0].Name != "PLAINTEXT" {
					t.Fatalf("controller listener %+v, listeners %+v", cl, cfg.Listeners)
				}
			}
		})
	}
}
