package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/group"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/state"
	"github.com/kmirror/kmirror/storage"
)

// Config is the node's configuration: plain data, filled by cmd/kmirror from
// a Kafka-style properties file and flags (STYLE.md item 34). Field comments
// name the Kafka property each field comes from.
type Config struct {
	// NodeID is node.id (default 1).
	NodeID int32
	// Listeners are the addresses to bind (listeners, default
	// PLAINTEXT://127.0.0.1:9092); the security protocol of each comes
	// from listener.security.protocol.map (Security below).
	Listeners []Listener
	// AdvertisedListeners are what Metadata tells clients
	// (advertised.listeners); empty means Listeners, with the bound port
	// when a listener asked for port 0.
	AdvertisedListeners []Listener
	// InterBrokerListenerName is inter.broker.listener.name: the listener
	// this node's followers fetch from the leaders on (every node of a
	// cluster has the same listener names). Empty means the first of
	// Listeners. It is PLAINTEXT or SSL: the replica fetchers do not
	// authenticate with SASL yet.
	InterBrokerListenerName string
	// LogDirs hold partition logs (log.dirs, default /tmp/kmirror-logs).
	// New partitions go to the directory holding the fewest partitions.
	LogDirs []string
	// StateDir holds the Badger store (metadata.log.dir; default
	// <first log dir>/__kmirror_state).
	StateDir string
	// NumPartitions is num.partitions (default 1) for auto-created topics
	// and CreateTopics without a partition count.
	NumPartitions int32
	// DefaultReplicationFactor is default.replication.factor (default 1):
	// the replica count of auto-created topics and of CreateTopics with
	// replication factor -1.
	DefaultReplicationFactor int32
	// OffsetsTopicPartitions is offsets.topic.num.partitions (50) and
	// OffsetsTopicReplicationFactor offsets.topic.replication.factor (3,
	// capped by the usable brokers when the topic is created): the shape
	// of __consumer_offsets, which holds the groups' state.
	OffsetsTopicPartitions        int32
	OffsetsTopicReplicationFactor int16
	// TransactionTopicPartitions is transaction.state.log.num.partitions
	// (50), TransactionTopicReplicationFactor
	// transaction.state.log.replication.factor (3, capped by the usable
	// brokers when the topic is created) and TransactionTopicMinISR
	// transaction.state.log.min.isr (2, capped by the replication
	// factor): the shape of __transaction_state, which holds the
	// transaction coordinator's state.
	TransactionTopicPartitions        int32
	TransactionTopicReplicationFactor int16
	TransactionTopicMinISR            int16
	// MinInsyncReplicas is min.insync.replicas (default 1): the broker
	// default of the topic config of that name, the ISR size below which
	// a leader refuses acks=all writes (Broker.MinInsyncReplicas).
	MinInsyncReplicas int
	// UncleanLeaderElection is unclean.leader.election.enable (default
	// false): the broker default of the topic config of that name, which
	// lets an out-of-sync replica lead when no ISR member is left.
	UncleanLeaderElection bool
	// Replication is how followers copy their leaders' logs.
	Replication ReplicationConfig
	// LeaderRebalance is the controller's balancing of leaderships back to
	// the preferred replicas (auto.leader.rebalance.enable).
	LeaderRebalance LeaderRebalanceConfig
	// AutoCreateTopics is auto.create.topics.enable (default true).
	AutoCreateTopics bool
	// MessageMaxBytes is message.max.bytes (default 1048588): the largest
	// record batch a producer may send, and the topic default of
	// max.message.bytes.
	MessageMaxBytes int32
	// SocketRequestMaxBytes is socket.request.max.bytes (default 104857600):
	// a larger frame closes the connection.
	SocketRequestMaxBytes int32
	// Log is the default partition log configuration (log.segment.bytes,
	// log.retention.ms/minutes/hours, log.retention.bytes, log.roll.ms,
	// log.flush.*, log.cleanup.policy...). Topic configs override it.
	Log storage.Config
	// LogCleanupPolicy is log.cleanup.policy (default "delete").
	LogCleanupPolicy string
	// LogRetentionCheckInterval is log.retention.check.interval.ms: how
	// often retention, compaction, flush.ms and producer expiry run.
	// Kafka's default is 5 minutes; ours is 10 s (DefaultMaintainInterval,
	// also used when 0), as a pass costs little on one node.
	LogRetentionCheckInterval time.Duration
	// HighWatermarkCheckpointInterval is
	// replica.high.watermark.checkpoint.interval.ms (Kafka's default,
	// 5 s, also used when 0): how often each log directory's
	// replication-offset-checkpoint is written (see partition/hw_checkpoint.go).
	HighWatermarkCheckpointInterval time.Duration
	// KafkaSettings are the Kafka broker settings of server.properties
	// that kmirror accepts without applying them (num.io.threads,
	// zookeeper.connect...), by name. DescribeConfigs shows them as
	// STATIC_BROKER_CONFIG, as Kafka would.
	KafkaSettings map[string]string
	// GroupInitialRebalanceDelay is group.initial.rebalance.delay.ms
	// (default 3 s; 0 none): the first rebalance of an empty group waits
	// this long for more members.
	GroupInitialRebalanceDelay time.Duration
	// GroupMinSessionTimeout and GroupMaxSessionTimeout bound the session
	// timeouts members may ask for (group.min.session.timeout.ms 6 s,
	// group.max.session.timeout.ms 30 min).
	GroupMinSessionTimeout, GroupMaxSessionTimeout time.Duration
	// GroupRebalanceProtocols is group.coordinator.rebalance.protocols:
	// "classic" always, "consumer" for the consumer group protocol
	// (KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe), "share"
	// for share groups (KIP-932: share group membership, ShareFetch and
	// ShareAcknowledge, share offsets; not in the default while they are
	// new).
	GroupRebalanceProtocols []string
	// GroupConsumerSessionTimeout and GroupConsumerHeartbeatInterval are
	// the consumer protocol's group.consumer.session.timeout.ms (45 s)
	// and group.consumer.heartbeat.interval.ms (5 s); the coordinator,
	// not the member, sets them.
	GroupConsumerSessionTimeout, GroupConsumerHeartbeatInterval time.Duration
	// GroupConsumerAssignors is group.consumer.assignors (uniform,range):
	// the server-side assignors, the first the default.
	GroupConsumerAssignors []string
	// GroupShareSessionTimeout, GroupShareHeartbeatInterval and
	// GroupShareMaxSize are group.share.session.timeout.ms (45 s),
	// group.share.heartbeat.interval.ms (5 s) and group.share.max.size
	// (200 members).
	GroupShareSessionTimeout, GroupShareHeartbeatInterval time.Duration
	GroupShareMaxSize                                     int
	// GroupShareRecordLockDuration, GroupShareDeliveryCountLimit and
	// GroupSharePartitionMaxRecordLocks are
	// group.share.record.lock.duration.ms (30 s),
	// group.share.delivery.count.limit (5) and
	// group.share.partition.max.record.locks (2000): how long a member
	// holds a record it acquired, how often a record is delivered before
	// it is archived, and the in-flight records of a share partition.
	GroupShareRecordLockDuration      time.Duration
	GroupShareDeliveryCountLimit      int
	GroupSharePartitionMaxRecordLocks int
	// Cluster is the node's KRaft settings; the zero value is a node
	// alone, a one-voter quorum that needs no network.
	Cluster ClusterConfig
	// MetadataQuorum is the node's metadata log, which DescribeQuorum
	// describes; nil for a bare broker.
	MetadataQuorum QuorumDescriber
	// Controller is the controller role of the node's metadata log, which
	// the controller RPCs (BrokerRegistration, BrokerHeartbeat,
	// AllocateProducerIds, AlterPartition) call; nil on a node that is
	// not a controller (they answer NOT_CONTROLLER).
	Controller *meta.Controller
	// ProducerIDs is where the broker gets its blocks of producer ids
	// (the controller, directly or over AllocateProducerIds); nil: the
	// state store, for a bare broker without a metadata log.
	ProducerIDs ProducerIDBlocks
	// ISR changes a partition's in-sync replicas through the controller
	// (AlterPartition); nil on a node without a metadata log.
	ISR ISRChanger
	// Epochs raises partitions' leader epochs through the controller
	// (BumpLeaderEpochs) in a cluster of several nodes; nil on a node
	// alone, which keeps a mirrored partition's epoch locally.
	Epochs EpochBumper
	// ControllerConns is the Kafka side of the node's CONTROLLER
	// listener (meta.ControllerListener.KafkaListener), bound by the
	// composition root (node/), which also owns the port; nil: none. The
	// broker serves it (netio's Listener.Conns) with the controller's APIs
	// only (controllerListenerAPIs, controller_listener.go), and Close
	// closes it (when New fails, the caller does; closing it twice is
	// harmless for a KafkaListener). It is PLAINTEXT only for now: an SSL or SASL controller
	// listener (listener.security.protocol.map) is not served yet. It is
	// not advertised to clients.
	ControllerConns net.Listener
	// ControllerListenerName is the first name of controller.listener.names
	// (default "CONTROLLER"): the listener name Conn.Listener reports for
	// ControllerConns's connections. It must not name one of Listeners.
	ControllerListenerName string
	// ControllerChannel sends requests to the current controller (KIP-590's
	// forwarding): on a node that is not the controller the admin requests
	// go there in an Envelope (forward.go). Nil: this node never forwards
	// (a node alone, which is its own controller).
	ControllerChannel ControllerChannel
	// MirrorControllerChannel, when set, carries the forwarded mirror RPCs
	// instead: they read the source, and a stop may take 25 s, while the
	// controller serves a channel's requests in order (nil: they share
	// ControllerChannel).
	MirrorControllerChannel ControllerChannel
	// MetadataLog is the node's metadata log as its CONTROLLER listener
	// serves it to observers (broker-only nodes); nil without that
	// listener.
	MetadataLog MetadataLogServer

	// Store is the node's state store when the composition root (node/)
	// opened it (OpenStore) to put the metadata log under it; it stays
	// open after Close. Nil: New opens it, Close closes it.
	Store *state.Store

	// DeferServing makes New bind the listeners but serve no request until
	// StartServing: a node's composition (kmirror serve, demo) wires the
	// control plane (SetMirrorAdmin) first, so that no client meets a
	// node whose mirror RPCs are not served yet. Requests that arrive
	// meanwhile wait; they are not refused.
	DeferServing bool
	// MetricsListener is the host:port of the Prometheus /metrics HTTP
	// listener (metrics.listener, kmirror's own; default 127.0.0.1:9308,
	// empty disables it).
	MetricsListener string
	// MetricsMirrorPartitionLabels adds a partition label to the mirror
	// lag series (metrics.mirror.partition.labels, kmirror's own; default
	// false: per-topic series, as STYLE.md item 36 keeps labels bounded).
	MetricsMirrorPartitionLabels bool
	// PasswordEncoderSecret is password.encoder.secret (Kafka's name): the
	// secret that seals source credentials (mirror SASL and TLS secrets)
	// in the state store. Empty: mirrors with credentials are refused.
	PasswordEncoderSecret string
	// QuotaWindowNum and QuotaWindowSize are quota.window.num (11) and
	// quota.window.size.seconds (1 s): client quota rates are measured over
	// that many samples of that length (quotas.go). Zero means the default.
	QuotaWindowNum  int
	QuotaWindowSize time.Duration
	// Security is listener security and authorization.
	Security Security
	// Transactions configures the transaction coordinator.
	Transactions TxnSettings
	// Mirror holds the broker-level mirror settings (SPEC.md section 3).
	// The broker does not use them; the control plane does (control.Config).
	Mirror MirrorSettings

	// Logger receives the broker's logs; nil discards them.
	Logger *slog.Logger
}

// MirrorSettings are the node-wide mirror settings of server.properties.
type MirrorSettings struct {
	// MetadataRefresh is mirror.metadata.refresh.interval.ms (60 s): how
	// often each mirror's metadata sync runs; 0 turns the periodic sync off.
	MetadataRefresh time.Duration
	// RetryInitialBackoff and RetryMaxBackoff are
	// mirror.failed.retry.initial.backoff.ms (1 s) and
	// mirror.failed.retry.max.backoff.ms (60 s): a FAILED partition is
	// retried after initial x 2^(attempt-1), capped, with 20% jitter.
	RetryInitialBackoff, RetryMaxBackoff time.Duration
	// RetryMaxAttempts is mirror.failed.retry.max.attempts (20; 0 never
	// retries; at most 32767, the width of the persisted attempt count).
	RetryMaxAttempts int32
}

// TxnSettings are the transaction coordinator's settings (Kafka's names).
type TxnSettings struct {
	// MaxTimeout is transaction.max.timeout.ms (15 min): the longest
	// transaction.timeout.ms a producer may ask for, and how long an
	// orphaned open transaction is kept before it is aborted.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms (7 days).
	IDExpiration time.Duration
	// AbortCheckInterval is transaction.abort.timed.out.transaction.
	// cleanup.interval.ms (10 s): how often timed-out transactions are
	// aborted.
	AbortCheckInterval time.Duration
}

// ReplicationConfig are the follower side's settings (Kafka's names): how
// a node fetches the partitions it follows from their leaders, and when a
// leader drops a follower from the ISR. Zero values get Kafka's defaults
// in Validate.
type ReplicationConfig struct {
	// LagTimeMax is replica.lag.time.max.ms (30 s): a follower that has
	// not caught up with the leader's log end for this long leaves the
	// ISR.
	LagTimeMax time.Duration
	// NumFetchers is num.replica.fetchers (1): fetcher connections per
	// source broker.
	NumFetchers int
	// FetchMaxBytes is replica.fetch.max.bytes (1048576): the bytes a
	// follower's fetch asks for per partition (a larger first batch still
	// comes whole, as in Kafka).
	FetchMaxBytes int32
	// FetchWaitMax is replica.fetch.wait.max.ms (500 ms): how long the
	// leader holds a follower's fetch waiting for FetchMinBytes.
	FetchWaitMax time.Duration
	// FetchMinBytes is replica.fetch.min.bytes (1): what a follower's
	// fetch waits for.
	FetchMinBytes int32
	// FetchResponseMaxBytes is replica.fetch.response.max.bytes
	// (10485760): the bytes a follower's whole fetch asks for.
	FetchResponseMaxBytes int32
}

// LeaderRebalanceConfig is the controller's preferred-leader balancing,
// with Kafka's settings: Enable is auto.leader.rebalance.enable (true),
// CheckInterval leader.imbalance.check.interval.seconds (300 s), Percent
// leader.imbalance.per.broker.percentage (10): every CheckInterval, the
// partitions of a broker that leads fewer than it is preferred for by
// more than Percent go back to it.
type LeaderRebalanceConfig struct {
	Enable        bool
	CheckInterval time.Duration
	Percent       int
}

// Kafka's defaults of LeaderRebalanceConfig.
const (
	DefaultLeaderImbalanceCheckInterval = 300 * time.Second
	DefaultLeaderImbalancePercent       = 10
)

// Kafka's defaults of ReplicationConfig.
const (
	DefaultReplicaLagTimeMax            = 30 * time.Second
	DefaultNumReplicaFetchers           = 1
	DefaultReplicaFetchMaxBytes         = 1048576
	DefaultReplicaFetchWaitMax          = 500 * time.Millisecond
	DefaultReplicaFetchMinBytes         = 1
	DefaultReplicaFetchResponseMaxBytes = 10485760
)

// Listener is one listener: a name, a host:port and its security protocol
// (listener.security.protocol.map; by default the name when it is one of
// the four protocols).
type Listener struct {
	Name string
	Host string
	Port int
	// Protocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL ("" means
	// PLAINTEXT).
	Protocol string
}

// Security is the node's listener security and authorization (SPEC.md
// section 7, Kafka's names).
type Security struct {
	// TLS serves the SSL and SASL_SSL listeners (ssl.keystore.* for the
	// certificate, ssl.truststore.* and ssl.client.auth for client
	// certificates). Nil when no listener needs it.
	TLS *tls.Config
	// PlainUsers are the PLAIN mechanism's users and passwords (the
	// user_<name>="<password>" options of the PlainLoginModule JAAS
	// config); empty: PLAIN is not offered.
	PlainUsers map[string]string
	// SASLMechanisms are sasl.enabled.mechanisms (PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512); SCRAM users live in the state store
	// (AlterUserScramCredentials).
	SASLMechanisms []string
	// Authorizer turns ACL checks on (authorizer.class.name set): every
	// request is checked against the stored ACLs, deny by default.
	Authorizer bool
	// SuperUsers bypass ACLs (super.users: "User:admin;User:ops").
	SuperUsers []string
	// AllowEveryoneIfNoACL is allow.everyone.if.no.acl.found: a resource
	// with no matching ACL is open instead of closed.
	AllowEveryoneIfNoACL bool
}

// Addr is host:port.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// String is the listeners-property form, NAME://host:port.
func (l Listener) String() string { return l.Name + "://" + l.Addr() }

// Defaults, Kafka's where Kafka has one.
const (
	DefaultNodeID                = 1
	DefaultNumPartitions         = 1
	DefaultReplicationFactor     = 1
	DefaultMinInsyncReplicas     = 1
	DefaultMessageMaxBytes       = 1048588
	DefaultSocketRequestMaxBytes = 104857600
	DefaultLogDir                = "/tmp/kmirror-logs"
	DefaultMetricsListener       = "127.0.0.1:9308"
	// DefaultControllerListenerName is Kafka's usual
	// controller.listener.names.
	DefaultControllerListenerName = "CONTROLLER"
	stateDirName                  = "__kmirror_state"
)

// DefaultConfig is what `kmirror serve` runs with no file and no flags.
func DefaultConfig() Config {
	return Config{
		NodeID:                            DefaultNodeID,
		Listeners:                         []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}},
		LogDirs:                           []string{DefaultLogDir},
		NumPartitions:                     DefaultNumPartitions,
		DefaultReplicationFactor:          DefaultReplicationFactor,
		MinInsyncReplicas:                 DefaultMinInsyncReplicas,
		OffsetsTopicPartitions:            DefaultOffsetsTopicPartitions,
		OffsetsTopicReplicationFactor:     DefaultOffsetsTopicReplicationFactor,
		TransactionTopicPartitions:        DefaultTransactionTopicPartitions,
		TransactionTopicReplicationFactor: DefaultTransactionTopicReplicationFactor,
		TransactionTopicMinISR:            DefaultTransactionTopicMinISR,
		Replication: ReplicationConfig{LagTimeMax: DefaultReplicaLagTimeMax, NumFetchers: DefaultNumReplicaFetchers,
			FetchMaxBytes: DefaultReplicaFetchMaxBytes, FetchWaitMax: DefaultReplicaFetchWaitMax,
			FetchMinBytes: DefaultReplicaFetchMinBytes, FetchResponseMaxBytes: DefaultReplicaFetchResponseMaxBytes},
		LeaderRebalance: LeaderRebalanceConfig{Enable: true, CheckInterval: DefaultLeaderImbalanceCheckInterval,
			Percent: DefaultLeaderImbalancePercent},
		AutoCreateTopics:      true,
		MessageMaxBytes:       DefaultMessageMaxBytes,
		SocketRequestMaxBytes: DefaultSocketRequestMaxBytes,
		Log:                   storage.DefaultConfig(),
		LogCleanupPolicy:      "delete",
		MetricsListener:       DefaultMetricsListener,

		LogRetentionCheckInterval:       DefaultMaintainInterval,
		HighWatermarkCheckpointInterval: DefaultHighWatermarkCheckpointInterval,
		QuotaWindowNum:                  DefaultQuotaWindowNum,
		QuotaWindowSize:                 DefaultQuotaWindowSize,

		GroupInitialRebalanceDelay: group.DefaultInitialRebalanceDelay,
		GroupMinSessionTimeout:     group.DefaultMinSessionTimeout,
		GroupMaxSessionTimeout:     group.DefaultMaxSessionTimeout,
		GroupRebalanceProtocols:    []string{"classic", "consumer"},

		GroupConsumerSessionTimeout:       group.DefaultConsumerSessionTimeout,
		GroupConsumerHeartbeatInterval:    group.DefaultConsumerHeartbeatInterval,
		GroupConsumerAssignors:            group.DefaultAssignors,
		GroupShareSessionTimeout:          group.DefaultShareSessionTimeout,
		GroupShareHeartbeatInterval:       group.DefaultShareHeartbeatInterval,
		GroupShareMaxSize:                 group.DefaultShareMaxSize,
		GroupShareRecordLockDuration:      30 * time.Second,
		GroupShareDeliveryCountLimit:      5,
		GroupSharePartitionMaxRecordLocks: 2000,

		Security: Security{SASLMechanisms: []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}},
		Transactions: TxnSettings{MaxTimeout: 15 * time.Minute, IDExpiration: 7 * 24 * time.Hour,
			AbortCheckInterval: 10 * time.Second},
		Mirror: MirrorSettings{MetadataRefresh: time.Minute, RetryInitialBackoff: time.Second,
			RetryMaxBackoff: time.Minute, RetryMaxAttempts: 20},
	}
}

// saslUsable reports whether some enabled mechanism can authenticate.
func (s Security) saslUsable() bool {
	for _, m := range s.SASLMechanisms {
		if m != "PLAIN" || len(s.PlainUsers) > 0 {
			return true
		}
	}
	return false
}

// ClusterConfig is a node's KRaft settings, with Kafka's names.
type ClusterConfig struct {
	// Voters is controller.quorum.voters; empty, or this node alone, is a
	// single node.
	Voters []meta.Voter
	// BrokerOnly is process.roles=broker: the node is not a voter but an
	// observer of the metadata log, which it fetches from the controller
	// (it binds no CONTROLLER listener). False is broker,controller.
	BrokerOnly bool
	// ControllerListener is the listener controller.listener.names
	// names, which this node binds for the quorum's traffic and the
	// other nodes' requests to the controller; PLAINTEXT only. Unused
	// (and dropped) on a single node.
	ControllerListener *Listener
	// SessionTimeout is broker.session.timeout.ms (9 s): a broker whose
	// heartbeats stop this long is fenced. HeartbeatInterval is
	// broker.heartbeat.interval.ms (2 s).
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	// SnapshotEntries, SnapshotInterval and TrailingEntries tune the
	// metadata log's snapshots (meta.LogConfig's SnapshotThreshold,
	// SnapshotInterval and TrailingLogs; zero: raft's defaults). Not
	// settings: tests shorten them so that a restarted node must catch up
	// from a snapshot.
	SnapshotEntries, TrailingEntries uint64
	SnapshotInterval                 time.Duration
}

// Default session and heartbeat, Kafka's.
const (
	DefaultBrokerSessionTimeout    = 9 * time.Second
	DefaultBrokerHeartbeatInterval = 2 * time.Second
)

// Several reports whether the settings name a quorum of several voters:
// a cluster, not a node alone.
func (c ClusterConfig) Several() bool { return len(c.Voters) > 1 || c.BrokerOnly }

// validate checks the KRaft settings of node id.
func (c *ClusterConfig) validate(id int32, bad func(prop, format string, args ...any) error) error {
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultBrokerSessionTimeout
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultBrokerHeartbeatInterval
	}
	if c.HeartbeatInterval >= c.SessionTimeout {
		return bad("broker.heartbeat.interval.ms", "must be below broker.session.timeout.ms (%v), got %v", c.SessionTimeout, c.HeartbeatInterval)
	}
	voter := slices.ContainsFunc(c.Voters, func(v meta.Voter) bool { return v.ID == id })
	if c.BrokerOnly {
		switch {
		case voter:
			return bad("controller.quorum.voters", "node %d is a voter, and process.roles=broker: a broker-only node is not "+
				"in controller.quorum.voters (a voter is broker,controller)", id)
		case len(c.Voters) < 2:
			return bad("controller.quorum.voters", "a broker-only node joins a quorum of several voters, got %d "+
				"(a single voter runs as a node alone)", len(c.Voters))
		case c.ControllerListener != nil:
			return bad("controller.listener.names", "a broker-only node binds no controller listener: %s must not be in listeners",
				c.ControllerListener.Name)
		}
		return nil
	}
	if len(c.Voters) == 0 {
		return nil
	}
	if !voter {
		return bad("controller.quorum.voters", "node %d is not a voter: a node of a cluster is a voter "+
			"(process.roles=broker,controller) or a broker-only node (process.roles=broker)", id)
	}
	if !c.Several() {
		return nil
	}
	cl := c.ControllerListener
	if cl == nil {
		return bad("controller.listener.names", "a voter of a quorum of several needs its CONTROLLER listener in listeners")
	}
	proto := cl.Protocol
	if proto == "" && slices.Contains([]string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}, cl.Name) {
		proto = cl.Name
	}
	switch proto {
	case "PLAINTEXT":
	case "":
		return bad("listener.security.protocol.map", "the controller listener %s has no security protocol: map it (%s:PLAINTEXT)", cl.Name, cl.Name)
	default:
		return bad("listener.security.protocol.map", "the controller listener %s is %s: only PLAINTEXT is supported", cl.Name, proto)
	}
	self := c.Voters[slices.IndexFunc(c.Voters, func(v meta.Voter) bool { return v.ID == id })]
	if _, port, err := net.SplitHostPort(self.Addr); err == nil && cl.Port != 0 && port != strconv.Itoa(cl.Port) {
		return bad("controller.quorum.voters", "node %d's voter address %s is not on the port of its controller listener %s: "+
			"the other voters could not reach it", id, self.Addr, cl)
	}
	return nil
}

// InterBrokerListener is the listener followers fetch from leaders on:
// the one named by InterBrokerListenerName, else the first.
// REQUIRES: Validate passed.
func (c *Config) InterBrokerListener() Listener {
	for _, l := range c.Listeners {
		if l.Name == c.InterBrokerListenerName {
			return l
		}
	}
	return c.Listeners[0]
}

// validateInterBrokerListener checks inter.broker.listener.name: one of
// listeners, and in a cluster one the replica fetchers can speak.
// REQUIRES: the listeners' protocols resolved.
func (c *Config) validateInterBrokerListener(bad func(prop, format string, args ...any) error) error {
	if n := c.InterBrokerListenerName; n != "" && !slices.ContainsFunc(c.Listeners, func(l Listener) bool { return l.Name == n }) {
		return bad("inter.broker.listener.name", "%s is not one of listeners", n)
	}
	if l := c.InterBrokerListener(); c.Cluster.Several() && strings.HasPrefix(l.Protocol, "SASL_") {
		return bad("inter.broker.listener.name", "the inter-broker listener %s is %s: replica fetchers connect with "+
			"PLAINTEXT or SSL only today; name (or list first) a PLAINTEXT or SSL listener", l.Name, l.Protocol)
	}
	return nil
}

// ErrInvalidConfig marks a configuration the broker refuses to start with.
var ErrInvalidConfig = errors.New("broker: invalid config")

// Validate checks the configuration and fills derived defaults (StateDir,
// Logger). Errors name the Kafka property at fault.
func (c *Config) Validate() error {
	bad := func(prop, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, prop, fmt.Sprintf(format, args...))
	}
	if c.NodeID < 0 {
		return bad("node.id", "must be >= 0, got %d", c.NodeID)
	}
	if err := c.Cluster.validate(c.NodeID, bad); err != nil {
		return err
	}
	if len(c.Listeners) == 0 {
		return bad("listeners", "at least one listener is required")
	}
	seen := map[string]bool{}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.Protocol == "" {
			switch l.Name {
			case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
				l.Protocol = l.Name
			default:
				return bad("listener.security.protocol.map", "listener %s has no security protocol: map it (%s:PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", l.Name, l.Name)
			}
		}
		switch l.Protocol {
		case "PLAINTEXT":
		case "SASL_PLAINTEXT":
			if !c.Security.saslUsable() {
				return bad("sasl.enabled.mechanisms", "listener %s is SASL_PLAINTEXT but no mechanism can authenticate anyone: enable SCRAM-SHA-256/512 or give PLAIN users", l.Name)
			}
		case "SSL", "SASL_SSL":
			if c.Security.TLS == nil || len(c.Security.TLS.Certificates) == 0 {
				return bad("ssl.keystore.location", "listener %s is %s: it needs this node's certificate (ssl.keystore.location, PEM)", l.Name, l.Protocol)
			}
			if l.Protocol == "SASL_SSL" && !c.Security.saslUsable() {
				return bad("sasl.enabled.mechanisms", "listener %s is SASL_SSL but no mechanism can authenticate anyone: enable SCRAM-SHA-256/512 or give PLAIN users", l.Name)
			}
		default:
			return bad("listener.security.protocol.map", "listener %s: unknown protocol %s", l.Name, l.Protocol)
		}
		if seen[l.Name] {
			return bad("listeners", "listener name %s appears twice", l.Name)
		}
		seen[l.Name] = true
		if l.Port < 0 || l.Port > 65535 {
			return bad("listeners", "port %d out of range", l.Port)
		}
	}
	if err := c.validateInterBrokerListener(bad); err != nil {
		return err
	}
	if c.ControllerConns != nil {
		if c.ControllerListenerName == "" {
			c.ControllerListenerName = DefaultControllerListenerName
		}
		if seen[c.ControllerListenerName] {
			return bad("controller.listener.names", "listener %s is the controller listener and also in listeners", c.ControllerListenerName)
		}
	}
	for _, l := range c.AdvertisedListeners {
		if !seen[l.Name] {
			return bad("advertised.listeners", "listener %s is not in listeners", l.Name)
		}
		if l.Host == "" || l.Port <= 0 || l.Port > 65535 {
			return bad("advertised.listeners", "%s needs a host and a port in 1-65535", l)
		}
	}
	if len(c.LogDirs) == 0 {
		return bad("log.dirs", "at least one directory is required")
	}
	if c.StateDir == "" {
		c.StateDir = c.LogDirs[0] + "/" + stateDirName
	}
	if c.NumPartitions < 1 {
		return bad("num.partitions", "must be >= 1, got %d", c.NumPartitions)
	}
	switch {
	case c.DefaultReplicationFactor < 0:
		return bad("default.replication.factor", "must be >= 1, got %d", c.DefaultReplicationFactor)
	case c.DefaultReplicationFactor == 0:
		c.DefaultReplicationFactor = DefaultReplicationFactor
	}
	switch {
	case c.OffsetsTopicPartitions < 0:
		return bad("offsets.topic.num.partitions", "must be >= 1, got %d", c.OffsetsTopicPartitions)
	case c.OffsetsTopicPartitions == 0:
		c.OffsetsTopicPartitions = DefaultOffsetsTopicPartitions
	}
	switch {
	case c.OffsetsTopicReplicationFactor < 0:
		return bad("offsets.topic.replication.factor", "must be >= 1, got %d", c.OffsetsTopicReplicationFactor)
	case c.OffsetsTopicReplicationFactor == 0:
		c.OffsetsTopicReplicationFactor = DefaultOffsetsTopicReplicationFactor
	}
	switch {
	case c.TransactionTopicPartitions < 0:
		return bad("transaction.state.log.num.partitions", "must be >= 1, got %d", c.TransactionTopicPartitions)
	case c.TransactionTopicPartitions == 0:
		c.TransactionTopicPartitions = DefaultTransactionTopicPartitions
	}
	switch {
	case c.TransactionTopicReplicationFactor < 0:
		return bad("transaction.state.log.replication.factor", "must be >= 1, got %d", c.TransactionTopicReplicationFactor)
	case c.TransactionTopicReplicationFactor == 0:
		c.TransactionTopicReplicationFactor = DefaultTransactionTopicReplicationFactor
	}
	switch {
	case c.TransactionTopicMinISR < 0:
		return bad("transaction.state.log.min.isr", "must be >= 1, got %d", c.TransactionTopicMinISR)
	case c.TransactionTopicMinISR == 0:
		c.TransactionTopicMinISR = DefaultTransactionTopicMinISR
	}
	switch {
	case c.MinInsyncReplicas < 0:
		return bad("min.insync.replicas", "must be >= 1, got %d", c.MinInsyncReplicas)
	case c.MinInsyncReplicas == 0:
		c.MinInsyncReplicas = DefaultMinInsyncReplicas
	}
	if err := c.Replication.validate(bad); err != nil {
		return err
	}
	if err := c.LeaderRebalance.validate(bad); err != nil {
		return err
	}
	if c.MessageMaxBytes < 0 {
		return bad("message.max.bytes", "must be >= 0, got %d", c.MessageMaxBytes)
	}
	if c.SocketRequestMaxBytes < 1 {
		return bad("socket.request.max.bytes", "must be >= 1, got %d", c.SocketRequestMaxBytes)
	}
	switch {
	case c.LogRetentionCheckInterval < 0:
		return bad("log.retention.check.interval.ms", "must be >= 0, got %v", c.LogRetentionCheckInterval)
	case c.LogRetentionCheckInterval == 0:
		c.LogRetentionCheckInterval = DefaultMaintainInterval
	}
	switch {
	case c.HighWatermarkCheckpointInterval < 0:
		return bad("replica.high.watermark.checkpoint.interval.ms", "must be >= 0, got %v", c.HighWatermarkCheckpointInterval)
	case c.HighWatermarkCheckpointInterval == 0:
		c.HighWatermarkCheckpointInterval = DefaultHighWatermarkCheckpointInterval
	}
	switch {
	case c.QuotaWindowNum < 0:
		return bad("quota.window.num", "must be >= 1, got %d", c.QuotaWindowNum)
	case c.QuotaWindowNum == 0:
		c.QuotaWindowNum = DefaultQuotaWindowNum
	}
	switch {
	case c.QuotaWindowSize < 0 || c.QuotaWindowSize%time.Second != 0:
		return bad("quota.window.size.seconds", "must be a whole number of seconds >= 1, got %v", c.QuotaWindowSize)
	case c.QuotaWindowSize == 0:
		c.QuotaWindowSize = DefaultQuotaWindowSize
	}
	switch c.LogCleanupPolicy {
	case "delete", "compact", "compact,delete", "delete,compact":
	default:
		return bad("log.cleanup.policy", "must be delete, compact or both, got %q", c.LogCleanupPolicy)
	}
	switch {
	case c.GroupInitialRebalanceDelay < 0:
		return bad("group.initial.rebalance.delay.ms", "must be >= 0, got %v", c.GroupInitialRebalanceDelay)
	case c.GroupMinSessionTimeout <= 0:
		return bad("group.min.session.timeout.ms", "must be > 0, got %v", c.GroupMinSessionTimeout)
	case c.GroupMaxSessionTimeout < c.GroupMinSessionTimeout:
		return bad("group.max.session.timeout.ms", "must be >= group.min.session.timeout.ms (%v), got %v",
			c.GroupMinSessionTimeout, c.GroupMaxSessionTimeout)
	case c.GroupConsumerSessionTimeout <= 0:
		return bad("group.consumer.session.timeout.ms", "must be > 0, got %v", c.GroupConsumerSessionTimeout)
	case c.GroupConsumerHeartbeatInterval <= 0 || c.GroupConsumerHeartbeatInterval >= c.GroupConsumerSessionTimeout:
		return bad("group.consumer.heartbeat.interval.ms", "must be > 0 and < group.consumer.session.timeout.ms (%v), got %v",
			c.GroupConsumerSessionTimeout, c.GroupConsumerHeartbeatInterval)
	case c.GroupShareSessionTimeout <= 0:
		return bad("group.share.session.timeout.ms", "must be > 0, got %v", c.GroupShareSessionTimeout)
	case c.GroupShareHeartbeatInterval <= 0 || c.GroupShareHeartbeatInterval >= c.GroupShareSessionTimeout:
		return bad("group.share.heartbeat.interval.ms", "must be > 0 and < group.share.session.timeout.ms (%v), got %v",
			c.GroupShareSessionTimeout, c.GroupShareHeartbeatInterval)
	case c.GroupShareMaxSize < 1 || c.GroupShareMaxSize > 1000:
		return bad("group.share.max.size", "must be between 1 and 1000, got %d", c.GroupShareMaxSize)
	case c.GroupShareRecordLockDuration < time.Second || c.GroupShareRecordLockDuration > time.Hour:
		return bad("group.share.record.lock.duration.ms", "must be between 1000 and 3600000, got %v", c.GroupShareRecordLockDuration)
	case c.GroupShareDeliveryCountLimit < 2 || c.GroupShareDeliveryCountLimit > 10:
		return bad("group.share.delivery.count.limit", "must be between 2 and 10, got %d", c.GroupShareDeliveryCountLimit)
	case c.GroupSharePartitionMaxRecordLocks < 100 || c.GroupSharePartitionMaxRecordLocks > 10000:
		return bad("group.share.partition.max.record.locks", "must be between 100 and 10000, got %d",
			c.GroupSharePartitionMaxRecordLocks)
	}
	if err := checkRebalanceProtocols(c.GroupRebalanceProtocols); err != nil {
		return err
	}
	if len(c.GroupConsumerAssignors) == 0 {
		return bad("group.consumer.assignors", "must name at least one assignor (uniform, range)")
	}
	for _, a := range c.GroupConsumerAssignors {
		if group.Assignors[a] == nil {
			return bad("group.consumer.assignors", "%q is not an assignor kmirror has (uniform, range)", a)
		}
	}
	switch m := c.Mirror; {
	case m.MetadataRefresh < 0:
		return bad("mirror.metadata.refresh.interval.ms", "must be >= 0, got %v", m.MetadataRefresh)
	case m.RetryInitialBackoff <= 0:
		return bad("mirror.failed.retry.initial.backoff.ms", "must be > 0, got %v", m.RetryInitialBackoff)
	case m.RetryMaxBackoff < m.RetryInitialBackoff:
		return bad("mirror.failed.retry.max.backoff.ms", "must be >= mirror.failed.retry.initial.backoff.ms (%v), got %v",
			m.RetryInitialBackoff, m.RetryMaxBackoff)
	case m.RetryMaxAttempts < 0 || m.RetryMaxAttempts > 32767:
		return bad("mirror.failed.retry.max.attempts", "must be in [0, 32767], got %d", m.RetryMaxAttempts)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// validate refuses negative replication settings and gives the zero ones
// Kafka's defaults.
func (r *ReplicationConfig) validate(bad func(prop, format string, args ...any) error) error {
	for _, f := range []struct {
		prop       string
		neg, zero  bool
		setDefault func()
	}{
		{"replica.lag.time.max.ms", r.LagTimeMax < 0, r.LagTimeMax == 0, func() { r.LagTimeMax = DefaultReplicaLagTimeMax }},
		{"num.replica.fetchers", r.NumFetchers < 0, r.NumFetchers == 0, func() { r.NumFetchers = DefaultNumReplicaFetchers }},
		{"replica.fetch.max.bytes", r.FetchMaxBytes < 0, r.FetchMaxBytes == 0, func() { r.FetchMaxBytes = DefaultReplicaFetchMaxBytes }},
		{"replica.fetch.wait.max.ms", r.FetchWaitMax < 0, r.FetchWaitMax == 0, func() { r.FetchWaitMax = DefaultReplicaFetchWaitMax }},
		{"replica.fetch.min.bytes", r.FetchMinBytes < 0, r.FetchMinBytes == 0, func() { r.FetchMinBytes = DefaultReplicaFetchMinBytes }},
		{"replica.fetch.response.max.bytes", r.FetchResponseMaxBytes < 0, r.FetchResponseMaxBytes == 0,
			func() { r.FetchResponseMaxBytes = DefaultReplicaFetchResponseMaxBytes }},
	} {
		switch {
		case f.neg:
			return bad(f.prop, "must be >= 1")
		case f.zero:
			f.setDefault()
		}
	}
	return nil
}

// validate refuses negative or out-of-range rebalance settings and gives
// the zero interval and percentage Kafka's defaults.
func (r *LeaderRebalanceConfig) validate(bad func(prop, format string, args ...any) error) error {
	switch {
	case r.CheckInterval < 0:
		return bad("leader.imbalance.check.interval.seconds", "must be >= 1, got %v", r.CheckInterval)
	case r.Percent < 0 || r.Percent > 100:
		return bad("leader.imbalance.per.broker.percentage", "must be in [0, 100], got %d", r.Percent)
	}
	if r.CheckInterval == 0 {
		r.CheckInterval = DefaultLeaderImbalanceCheckInterval
	}
	if r.Percent == 0 {
		r.Percent = DefaultLeaderImbalancePercent
	}
	return nil
}

// ControllerChannel sends a request to the current controller and returns
// its answer (meta.ControllerChannel). An error means no answer came: the
// controller is unknown or unreachable, or ctx ended.
type ControllerChannel interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// checkRebalanceProtocols validates group.coordinator.rebalance.protocols.
func checkRebalanceProtocols(protocols []string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: group.coordinator.rebalance.protocols: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if !slices.Contains(protocols, "classic") {
		return bad("must contain classic, got %q", protocols)
	}
	for _, p := range protocols {
		switch p {
		case "classic", "consumer", "share":
		case "streams":
			return bad("streams groups are not served by kmirror yet: leave streams out")
		default:
			return bad("%q is not a rebalance protocol (classic, consumer, share)", p)
		}
	}
	return nil
}

// ShareProtocol reports whether share groups are on.
func (c Config) ShareProtocol() bool { return slices.Contains(c.GroupRebalanceProtocols, "share") }

// ConsumerProtocol reports whether the consumer group protocol is on.
func (c Config) ConsumerProtocol() bool {
	return slices.Contains(c.GroupRebalanceProtocols, "consumer")
}
