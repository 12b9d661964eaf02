package main

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/kafkaconfigs"
	"github.com/kmirror/kmirror/internal/props"
	"github.com/kmirror/kmirror/internal/settings"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/storage"
)

// This file is the configuration front end of `kmirror serve`: Kafka's
// server.properties keys, with Kafka's meanings, mapped onto broker.Config.
// An operator's existing file should load unchanged or be refused with an
// error naming the key and line, never half-understood.

// setting is one key kmirror reads from a properties file or --override:
// its definition (Doc is its line in `kmirror serve --help`) and how it
// is applied.
type setting struct {
	settings.Def
	// apply parses v onto c. v is already trimmed, as Kafka trims every
	// value before parsing it. On error c may be half-written; the caller
	// then discards it. nil: the key is read with others after the table
	// (applyServerSecurity reads the ssl.* keys together).
	apply func(c *broker.Config, v string) error
	// aliasOf names the setting this key is another name for: the value
	// goes through that setting's apply, and when both keys are set they
	// must agree (Kafka refuses a broker.id that differs from node.id).
	aliasOf string
}

// serverSettings is every key kmirror applies, in application order. Every other
// name some Kafka release knows (internal/kafkaconfigs) is accepted and
// ignored: operators keep one server.properties for Kafka and kmirror, and
// most of Kafka's settings (thread pools, ZooKeeper, KRaft quorum
// internals) have nothing to act on in kmirror. Where Kafka
// lets one key take precedence over another, the winner comes later and so
// overwrites: log.dirs after log.dir, log.roll.ms after log.roll.hours,
// log.retention.ms after .minutes after .hours, and controller.listener.names
// after the listener lists it prunes and the protocol map that names the
// controller listener's protocol. A key's position in a file does not
// matter, as in Kafka.
var serverSettings = []setting{
	// Server basics, and the KRaft settings that make nodes one cluster
	// (README "Running a cluster"); without them a node is a cluster of
	// one.
	{Def: brokerDef("node.id", "this node's id, an integer >= 0 (default "+strconv.Itoa(broker.DefaultNodeID)+")"),
		apply: func(c *broker.Config, v string) (err error) { c.NodeID, err = settings.Int32(v, 0); return err }},
	{Def: settings.Def{Name: "broker.id", Doc: "older name of node.id; if both are set they must agree"}, aliasOf: "node.id"},
	{Def: settings.Def{Name: "process.roles", Doc: "broker,controller (a voter of controller.quorum.voters) or broker (a broker-only node, which fetches the metadata log from the controller); controller-only nodes are not supported yet"},
		apply: applyProcessRoles},
	{Def: settings.Def{Name: "controller.quorum.voters", Doc: "comma list of id@host:port, the CONTROLLER listener of every node of the cluster; empty or this node alone: a single node"},
		apply: func(c *broker.Config, v string) (err error) {
			if strings.TrimSpace(v) == "" {
				c.Cluster.Voters = nil
				return nil
			}
			c.Cluster.Voters, err = meta.ParseVoters(v)
			return err
		}},
	{Def: settings.Def{Name: "controller.quorum.bootstrap.servers", Doc: "accepted when it names at most one address: kmirror's quorum is static (controller.quorum.voters)"},
		apply: func(c *broker.Config, v string) error {
			if len(settings.Items(v)) > 1 {
				return errors.New("a dynamic quorum (KIP-853) is not supported: list the voters in controller.quorum.voters")
			}
			return nil
		}},
	{Def: settings.Def{Name: "broker.session.timeout.ms", Doc: "a broker whose heartbeats stop this long is fenced, an integer >= 1 (default 9000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int64(v, 1)
			c.Cluster.SessionTimeout = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "broker.heartbeat.interval.ms", Doc: "how often a node heartbeats to the controller, an integer >= 1 below broker.session.timeout.ms (default 2000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int64(v, 1)
			c.Cluster.HeartbeatInterval = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: brokerDef("offsets.topic.num.partitions", "partitions of __consumer_offsets, which holds the groups' state, when it is created, an integer >= 1 (default "+strconv.Itoa(broker.DefaultOffsetsTopicPartitions)+")"),
		apply: func(c *broker.Config, v string) (err error) {
			c.OffsetsTopicPartitions, err = settings.Int32(v, 1)
			return err
		}},
	{Def: brokerDef("offsets.topic.replication.factor", "replicas of __consumer_offsets when it is created, fewer while fewer brokers are usable, an integer >= 1 (default "+strconv.Itoa(broker.DefaultOffsetsTopicReplicationFactor)+")"),
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			if err == nil && n > 32767 {
				err = fmt.Errorf("must be at most 32767, got %d", n)
			}
			c.OffsetsTopicReplicationFactor = int16(n)
			return err
		}},
	{Def: brokerDef("transaction.state.log.num.partitions", "partitions of __transaction_state, which holds the transaction coordinator's state, when it is created, an integer >= 1 (default "+strconv.Itoa(broker.DefaultTransactionTopicPartitions)+")"),
		apply: func(c *broker.Config, v string) (err error) {
			c.TransactionTopicPartitions, err = settings.Int32(v, 1)
			return err
		}},
	{Def: brokerDef("transaction.state.log.replication.factor", "replicas of __transaction_state when it is created, fewer while fewer brokers are usable, an integer >= 1 (default "+strconv.Itoa(broker.DefaultTransactionTopicReplicationFactor)+")"),
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			if err == nil && n > 32767 {
				err = fmt.Errorf("must be at most 32767, got %d", n)
			}
			c.TransactionTopicReplicationFactor = int16(n)
			return err
		}},
	{Def: brokerDef("transaction.state.log.min.isr", "min.insync.replicas of __transaction_state when it is created, at most its replication factor, an integer >= 1 (default "+strconv.Itoa(broker.DefaultTransactionTopicMinISR)+")"),
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			if err == nil && n > 32767 {
				err = fmt.Errorf("must be at most 32767, got %d", n)
			}
			c.TransactionTopicMinISR = int16(n)
			return err
		}},
	{Def: brokerDef("default.replication.factor", "replicas of auto-created topics and of CreateTopics with replication factor -1, an integer >= 1 (default "+strconv.Itoa(broker.DefaultReplicationFactor)+")"),
		apply: func(c *broker.Config, v string) (err error) {
			c.DefaultReplicationFactor, err = settings.Int32(v, 1)
			return err
		}},

	// Replication: the ISR and the followers' fetchers.
	{Def: brokerDef("min.insync.replicas", "in-sync replicas an acks=all write needs, the default of the topic config, an integer >= 1 (default "+strconv.Itoa(broker.DefaultMinInsyncReplicas)+")"),
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.MinInsyncReplicas = int(n)
			return err
		}},
	{Def: brokerDef("unclean.leader.election.enable", "let an out-of-sync replica lead when no in-sync one is left, the default of the topic config, true or false (default false)"),
		apply: func(c *broker.Config, v string) (err error) {
			c.UncleanLeaderElection, err = settings.ParseBool(v)
			return err
		}},
	{Def: settings.Def{Name: "replica.lag.time.max.ms", Doc: "a follower not caught up with its leader for this long leaves the ISR, an integer >= 1 (default 30000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int64(v, 1)
			c.Replication.LagTimeMax = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "auto.leader.rebalance.enable", Doc: "the controller moves leaderships back to their preferred replicas, true or false (default true)"},
		apply: func(c *broker.Config, v string) (err error) {
			c.LeaderRebalance.Enable, err = settings.ParseBool(v)
			return err
		}},
	{Def: settings.Def{Name: "leader.imbalance.check.interval.seconds", Doc: "how often the controller checks the leaderships' balance, an integer >= 1 (default 300)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int64(v, 1)
			c.LeaderRebalance.CheckInterval = time.Duration(n) * time.Second
			return err
		}},
	{Def: settings.Def{Name: "leader.imbalance.per.broker.percentage", Doc: "a broker leading fewer of the partitions it is preferred for by more than this percentage gets them back, 1 to 100 (default 10)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			if err == nil && n > 100 {
				err = fmt.Errorf("want at most 100, got %d", n)
			}
			c.LeaderRebalance.Percent = int(n)
			return err
		}},
	{Def: settings.Def{Name: "num.replica.fetchers", Doc: "fetcher connections a follower opens per leader broker, an integer >= 1 (default 1)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.Replication.NumFetchers = int(n)
			return err
		}},
	{Def: settings.Def{Name: "replica.fetch.max.bytes", Doc: "bytes a follower fetches per partition and request, an integer >= 1 (default 1048576)"},
		apply: func(c *broker.Config, v string) (err error) {
			c.Replication.FetchMaxBytes, err = settings.Int32(v, 1)
			return err
		}},
	{Def: settings.Def{Name: "replica.fetch.response.max.bytes", Doc: "bytes a follower fetches per request, an integer >= 1 (default 10485760)"},
		apply: func(c *broker.Config, v string) (err error) {
			c.Replication.FetchResponseMaxBytes, err = settings.Int32(v, 1)
			return err
		}},
	{Def: settings.Def{Name: "replica.fetch.min.bytes", Doc: "bytes a follower's fetch waits for, an integer >= 1 (default 1)"},
		apply: func(c *broker.Config, v string) (err error) {
			c.Replication.FetchMinBytes, err = settings.Int32(v, 1)
			return err
		}},
	{Def: settings.Def{Name: "replica.fetch.wait.max.ms", Doc: "longest a leader holds a follower's fetch for replica.fetch.min.bytes, an integer >= 1 (default 500)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.Replication.FetchWaitMax = time.Duration(n) * time.Millisecond
			return err
		}},

	// Sockets.
	{Def: brokerDef("listeners", "comma list of NAME://host:port to bind; empty host means 0.0.0.0, IPv6 in brackets (default "+broker.DefaultConfig().Listeners[0].String()+")"),
		apply: func(c *broker.Config, v string) (err error) { c.Listeners, err = parseListeners(v, false); return err }},
	{Def: brokerDef("advertised.listeners", "comma list of NAME://host:port that clients are told to use; empty means listeners"),
		apply: func(c *broker.Config, v string) (err error) {
			c.AdvertisedListeners, err = parseListeners(v, true)
			return err
		}},
	{Def: settings.Def{Name: "listener.security.protocol.map", Doc: "NAME:PROTOCOL list; PROTOCOL is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (a listener named as a protocol needs no entry)"},
		apply: applyProtocolMap},
	{Def: settings.Def{Name: "inter.broker.listener.name", Doc: "the listener (of listeners) followers fetch from their leaders on, PLAINTEXT or SSL (default: the first of listeners)"},
		apply: func(c *broker.Config, v string) error {
			c.InterBrokerListenerName = strings.TrimSpace(v)
			return nil
		}},
	{Def: settings.Def{Name: "controller.listener.names", Doc: "the listener (of listeners) that a voter of a cluster binds for the quorum and for the other nodes' requests to the controller, PLAINTEXT; a single node and a broker-only node bind none"},
		apply: takeControllerListener},
	{Def: brokerDef("socket.request.max.bytes", "largest request frame, an integer >= 1 (default "+strconv.Itoa(broker.DefaultSocketRequestMaxBytes)+")"),
		apply: func(c *broker.Config, v string) (err error) {
			c.SocketRequestMaxBytes, err = settings.Int32(v, 1)
			return err
		}},
	{Def: brokerDef("message.max.bytes", "largest record batch, an integer >= 0 (default "+strconv.Itoa(broker.DefaultMessageMaxBytes)+")"),
		apply: func(c *broker.Config, v string) (err error) {
			c.MessageMaxBytes, err = settings.Int32(v, 0)
			return err
		}},
	{Def: settings.Def{Name: "metrics.listener", Doc: "host:port of the Prometheus /metrics listener, empty to disable (default " + broker.DefaultMetricsListener + ")"},
		apply: func(c *broker.Config, v string) (err error) {
			c.MetricsListener, err = parseMetricsListener(v)
			return err
		}},
	{Def: settings.Def{Name: "metrics.mirror.partition.labels", Doc: "label the mirror lag metrics by partition too, true or false (default false: per topic)"},
		apply: func(c *broker.Config, v string) (err error) {
			c.MetricsMirrorPartitionLabels, err = settings.ParseBool(v)
			return err
		}},

	// Log basics.
	{Def: settings.Def{Name: "log.dir", Doc: "comma list of log directories, used when log.dirs is not set (default " + broker.DefaultLogDir + ")"},
		apply: func(c *broker.Config, v string) (err error) { c.LogDirs, err = parseDirs(v); return err }},
	{Def: brokerDef("log.dirs", "comma list of log directories; wins over log.dir"),
		apply: func(c *broker.Config, v string) (err error) { c.LogDirs, err = parseDirs(v); return err }},
	{Def: settings.Def{Name: "metadata.log.dir", Doc: "directory of kmirror's state store (default <first log dir>/__kmirror_state)"},
		apply: func(c *broker.Config, v string) error { c.StateDir = v; return nil }},
	{Def: brokerDef("num.partitions", "partitions of auto-created topics, an integer >= 1 (default "+strconv.Itoa(broker.DefaultNumPartitions)+")"),
		apply: func(c *broker.Config, v string) (err error) { c.NumPartitions, err = settings.Int32(v, 1); return err }},
	{Def: brokerDef("auto.create.topics.enable", "create unknown topics on first use, true or false (default true)"),
		apply: func(c *broker.Config, v string) (err error) {
			c.AutoCreateTopics, err = settings.ParseBool(v)
			return err
		}},

	// Flush policy. Kafka's defaults leave flushing to the OS, as ours do.
	{Def: brokerDef("log.flush.interval.messages", "fsync after this many records, an integer >= 1 (default: never, the OS decides)"),
		apply: func(c *broker.Config, v string) (err error) {
			c.Log.FlushMessages, err = settings.Int64(v, 1)
			return err
		}},
	{Def: settings.Def{Name: "log.retention.check.interval.ms", Doc: "how often retention, compaction and time-based flushes run, an integer >= 1 (default 10000; Kafka's is 300000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int64(v, 1)
			c.LogRetentionCheckInterval = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "replica.high.watermark.checkpoint.interval.ms", Doc: "how often each log directory's replication-offset-checkpoint (the partitions' high watermarks) is written, an integer >= 1 (default 5000, Kafka's)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int64(v, 1)
			c.HighWatermarkCheckpointInterval = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: brokerDef("log.flush.interval.ms", "fsync when the oldest unflushed record is this old, an integer >= 0 (default: never)"),
		apply: func(c *broker.Config, v string) (err error) {
			c.Log.FlushMs, err = settings.Int64(v, 0)
			c.Log.FlushMs = settings.ZeroAtOnce.Of(c.Log.FlushMs)
			return err
		}},

	// Retention, segments and cleanup.
	{Def: settings.Def{Name: "log.retention.hours", Doc: "delete segments older than this, negative for unlimited (default " + strconv.Itoa(storage.DefaultRetentionMs/msPerHour) + ")", Zero: settings.ZeroAtOnce},
		apply: func(c *broker.Config, v string) (err error) {
			c.Log.RetentionMs, err = retentionMs(v, msPerHour)
			return err
		}},
	{Def: settings.Def{Name: "log.retention.minutes", Doc: "as log.retention.hours, in minutes; wins over it", Zero: settings.ZeroAtOnce},
		apply: func(c *broker.Config, v string) (err error) {
			c.Log.RetentionMs, err = retentionMs(v, msPerMinute)
			return err
		}},
	{Def: brokerDef("log.retention.ms", "as log.retention.hours, in milliseconds; wins over minutes and hours"),
		apply: func(c *broker.Config, v string) (err error) { c.Log.RetentionMs, err = retentionMs(v, 1); return err }},
	{Def: brokerDef("log.retention.bytes", "delete the oldest segments while a partition is larger, negative for unlimited (default -1)"),
		apply: func(c *broker.Config, v string) (err error) {
			c.Log.RetentionBytes, err = retentionBytes(v)
			return err
		}},
	{Def: brokerDef("log.segment.bytes", "roll to a new segment past this size, an integer >= 244 (default "+strconv.Itoa(storage.DefaultSegmentBytes)+")"),
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, storage.MinSegmentBytes) // four batch headers: Kafka's floor of 14 bytes holds no v2 batch
			c.Log.SegmentBytes = int64(n)
			return err
		}},
	{Def: settings.Def{Name: "log.roll.hours", Doc: "roll a segment whose first batch is this old, an integer >= 1 (default " + strconv.Itoa(storage.DefaultSegmentMs/msPerHour) + ")"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.Log.SegmentMs = int64(n) * msPerHour
			return err
		}},
	{Def: brokerDef("log.roll.ms", "as log.roll.hours, in milliseconds; wins over it"),
		apply: func(c *broker.Config, v string) (err error) { c.Log.SegmentMs, err = settings.Int64(v, 1); return err }},
	{Def: brokerDef("log.index.interval.bytes", "bytes between offset index entries, an integer >= 0 (default "+strconv.Itoa(storage.DefaultIndexIntervalBytes)+")"),
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 0)
			c.Log.IndexIntervalBytes = settings.ZeroAtOnce.Of(int64(n))
			return err
		}},
	{Def: brokerDef("log.cleanup.policy", "delete, compact or compact,delete (default delete)"),
		apply: setCleanupPolicy},
	{Def: brokerDef("log.cleaner.delete.retention.ms", "keep a compacted log's tombstones this long, an integer >= 0 (default "+strconv.Itoa(storage.DefaultDeleteRetentionMs)+")"),
		apply: func(c *broker.Config, v string) (err error) {
			c.Log.DeleteRetentionMs, err = settings.Int64(v, 0)
			c.Log.DeleteRetentionMs = settings.ZeroAtOnce.Of(c.Log.DeleteRetentionMs)
			return err
		}},
	{Def: brokerDef("log.cleaner.min.compaction.lag.ms", "leave segments younger than this out of compaction, an integer >= 0 (default 0)"),
		apply: func(c *broker.Config, v string) (err error) {
			c.Log.MinCompactionLagMs, err = settings.Int64(v, 0)
			return err
		}},
	{Def: settings.Def{Name: "producer.id.expiration.ms", Doc: "forget producers idle this long, an integer >= 1 (default " + strconv.Itoa(storage.DefaultProducerIDExpirationMs) + ")"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.Log.ProducerIDExpirationMs = int64(n)
			return err
		}},

	// Group coordinator.
	{Def: settings.Def{Name: "group.initial.rebalance.delay.ms", Doc: "the first rebalance of an empty group waits this long for members, an integer >= 0 (default 3000)", Zero: settings.ZeroLiteral},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 0)
			c.GroupInitialRebalanceDelay = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "group.min.session.timeout.ms", Doc: "the smallest session timeout a member may ask for, an integer >= 1 (default 6000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.GroupMinSessionTimeout = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "group.max.session.timeout.ms", Doc: "the largest session timeout a member may ask for, an integer >= 1 (default 1800000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.GroupMaxSessionTimeout = time.Duration(n) * time.Millisecond
			return err
		}},

	{Def: settings.Def{Name: "group.coordinator.rebalance.protocols", Doc: "the group protocols served: classic, consumer for the consumer group protocol of Kafka 4 clients (KIP-848), and share for share groups and share consumers (KIP-932) (default classic,consumer)"},
		apply: func(c *broker.Config, v string) error {
			c.GroupRebalanceProtocols = settings.Items(v)
			return nil
		}},
	{Def: settings.Def{Name: "group.consumer.session.timeout.ms", Doc: "a consumer-protocol member that does not heartbeat this long is removed, an integer >= 1 (default 45000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.GroupConsumerSessionTimeout = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "group.consumer.heartbeat.interval.ms", Doc: "how often consumer-protocol members heartbeat, an integer >= 1 below the session timeout (default 5000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.GroupConsumerHeartbeatInterval = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "group.share.session.timeout.ms", Doc: "a share group member that does not heartbeat this long is removed, an integer >= 1 (default 45000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.GroupShareSessionTimeout = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "group.share.heartbeat.interval.ms", Doc: "how often share group members heartbeat, an integer >= 1 below the session timeout (default 5000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.GroupShareHeartbeatInterval = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "group.share.max.size", Doc: "the most members a share group may have, 1 to 1000 (default 200)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.GroupShareMaxSize = int(n)
			return err
		}},
	{Def: settings.Def{Name: "group.share.record.lock.duration.ms", Doc: "how long a share consumer holds a record it acquired, 1000 to 3600000 (default 30000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.GroupShareRecordLockDuration = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "group.share.delivery.count.limit", Doc: "how often a record is delivered to share consumers before it is archived, 2 to 10 (default 5)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.GroupShareDeliveryCountLimit = int(n)
			return err
		}},
	{Def: settings.Def{Name: "group.share.partition.max.record.locks", Doc: "the most in-flight records of a share partition, 100 to 10000 (default 2000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.GroupSharePartitionMaxRecordLocks = int(n)
			return err
		}},
	{Def: settings.Def{Name: "group.consumer.assignors", Doc: "the server-side assignors of consumer-protocol groups, the first the default: uniform, range (default uniform,range)"},
		apply: func(c *broker.Config, v string) error {
			c.GroupConsumerAssignors = settings.Items(v)
			return nil
		}},

	// Client quotas.
	{Def: settings.Def{Name: "quota.window.num", Doc: "client quota rates are measured over this many samples, an integer >= 1 (default 11)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.QuotaWindowNum = int(n)
			return err
		}},
	{Def: settings.Def{Name: "quota.window.size.seconds", Doc: "the length of one client quota sample in seconds, an integer >= 1 (default 1)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.QuotaWindowSize = time.Duration(n) * time.Second
			return err
		}},

	// Transaction coordinator.
	{Def: settings.Def{Name: "transaction.max.timeout.ms", Doc: "the longest transaction.timeout.ms producers may use; also how long an orphaned open transaction is kept, an integer >= 1 (default 900000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.Transactions.MaxTimeout = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "transactional.id.expiration.ms", Doc: "forget a transactional id idle this long, an integer >= 1 (default 604800000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.Transactions.IDExpiration = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", Doc: "how often timed-out transactions are aborted, an integer >= 1 (default 10000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int32(v, 1)
			c.Transactions.AbortCheckInterval = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "password.encoder.secret", Doc: "seals source credentials (mirror SASL and TLS secrets) in the state store; required to create mirrors that hold any"},
		apply: func(c *broker.Config, v string) error { c.PasswordEncoderSecret = v; return nil }},

	// Cluster mirroring (SPEC.md section 3, broker level).
	{Def: settings.Def{Name: "mirror.metadata.refresh.interval.ms", Doc: "each mirror's metadata sync (topics, configs, group offsets, ACLs) runs this often, an integer >= 0 (default 60000)", Zero: settings.ZeroOff},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int64(v, 0)
			c.Mirror.MetadataRefresh = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "mirror.failed.retry.initial.backoff.ms", Doc: "first wait before a FAILED mirror partition is retried, an integer >= 1 (default 1000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int64(v, 1)
			c.Mirror.RetryInitialBackoff = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "mirror.failed.retry.max.backoff.ms", Doc: "longest wait between retries of a FAILED mirror partition, an integer >= 1 (default 60000)"},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.Int64(v, 1)
			c.Mirror.RetryMaxBackoff = time.Duration(n) * time.Millisecond
			return err
		}},
	{Def: settings.Def{Name: "mirror.failed.retry.max.attempts", Doc: "retries of a FAILED mirror partition before it waits for --recover, an integer in [0, 32767] (default 20)", Zero: settings.ZeroOff},
		apply: func(c *broker.Config, v string) error {
			n, err := settings.ParseInt(v, 0, 32767)
			c.Mirror.RetryMaxAttempts = int32(n)
			return err
		}},
}

// brokerDef is the definition broker gives a setting it also describes
// (broker.ConfigDef), with doc as its line in --help: the help says what a
// server.properties reader needs (bounds, default, precedence).
func brokerDef(name, doc string) settings.Def {
	d, ok := broker.ConfigDef(name)
	if !ok {
		panic("BUG: broker describes no config " + name)
	}
	d.Doc = doc
	return d
}

const (
	msPerMinute = 60 * 1000
	msPerHour   = 60 * msPerMinute
)

// loadServeConfig builds the node's configuration as kafka-server-start.sh
// does: defaults, then the properties file (if file is not empty), then each
// override ("key=value", Kafka's --override), the last value of a key
// winning; then Validate. Errors name the setting and where its value came
// from. ignored lists, sorted, the Kafka settings given that kmirror does
// not apply, for the start-up log.
func loadServeConfig(file string, overrides []string) (cfg broker.Config, ignored []string, err error) {
	vals := map[string]settingValue{}
	skipped := map[string]string{}
	if file != "" {
		ps, err := readPropsFile(file)
		if err != nil {
			return broker.Config{}, nil, err
		}
		for _, p := range ps {
			if err := collectSetting(vals, skipped, p.Key, p.Value, fmt.Sprintf("line %d of %s", p.Line, file)); err != nil {
				return broker.Config{}, nil, err
			}
		}
	}
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return broker.Config{}, nil, fmt.Errorf("--override %q: want key=value", o)
		}
		if err := collectSetting(vals, skipped, k, v, "from --override"); err != nil {
			return broker.Config{}, nil, err
		}
	}

	cfg = broker.DefaultConfig()
	for i := range serverSettings {
		s := &serverSettings[i]
		if v, ok := vals[s.Name]; ok {
			if err := s.set(&cfg, v, vals); err != nil {
				return broker.Config{}, nil, err
			}
		}
	}
	if err := applyServerSecurity(&cfg, vals); err != nil {
		return broker.Config{}, nil, err
	}
	if err := cfg.Validate(); err != nil {
		return broker.Config{}, nil, err
	}
	if len(skipped) > 0 {
		cfg.KafkaSettings = skipped // described as STATIC_BROKER_CONFIG
	}
	return cfg, slices.Sorted(maps.Keys(skipped)), nil
}

// applyProcessRoles applies process.roles: a kmirror node is a broker
// and a controller (a voter), or a broker only (an observer of the
// metadata log); controller-only nodes are not supported yet.
func applyProcessRoles(c *broker.Config, v string) error {
	roles := settings.Items(v)
	slices.Sort(roles)
	switch {
	case slices.Equal(roles, []string{"broker", "controller"}):
		c.Cluster.BrokerOnly = false
	case slices.Equal(roles, []string{"broker"}):
		c.Cluster.BrokerOnly = true
	default:
		return errors.New("a kmirror node is broker,controller or broker; controller-only nodes are not supported yet")
	}
	return nil
}

// settingValue is the winning value of one key and where it came from, for errors.
type settingValue struct {
	text   string
	origin string // "line 12 of server.properties" or "from --override"
}

// collectSetting records key=text, or in skipped a Kafka setting kmirror
// does not apply. It refuses the names no Kafka release knows: a
// misspelt key silently ignored is a setting the operator believes is in
// force.
func collectSetting(vals map[string]settingValue, skipped map[string]string, key, text, origin string) error {
	switch {
	case lookupSetting(key) != nil:
		vals[key] = settingValue{text: text, origin: origin}
	case kafkaconfigs.Known(key):
		skipped[key] = strings.TrimSpace(text)
	default:
		return fmt.Errorf("unknown setting %q (%s)", key, origin)
	}
	return nil
}

// logIgnored writes the one start-up line naming the Kafka settings the
// file or overrides set and kmirror does not apply, so that an operator
// sees which of them have no effect here.
func logIgnored(log *slog.Logger, ignored []string) {
	if len(ignored) > 0 {
		log.Info("ignored Kafka settings: "+strings.Join(ignored, ", "), "count", len(ignored))
	}
}

func lookupSetting(name string) *setting {
	for i := range serverSettings {
		if serverSettings[i].Name == name {
			return &serverSettings[i]
		}
	}
	if isPlainJAASKey(name) {
		return &plainJAASSetting
	}
	return nil
}

// plainJAASSetting stands for every listener.name.<l>.plain.sasl.jaas.config
// key; applyServerSecurity reads them after the table.
var plainJAASSetting = setting{Def: settings.Def{Name: plainJAASPattern,
	Doc: "PLAIN users of SASL listeners: a PlainLoginModule config with user_<name>=\"<password>\" options"}}

func init() { serverSettings = append(serverSettings, securitySettings...) }

// set applies v, following an alias to the setting it names.
func (s *setting) set(c *broker.Config, v settingValue, vals map[string]settingValue) error {
	apply := s.apply
	if s.aliasOf != "" {
		apply = lookupSetting(s.aliasOf).apply
	}
	if apply == nil {
		return nil
	}
	if err := apply(c, strings.TrimSpace(v.text)); err != nil {
		return fmt.Errorf("%s: %w (%s)", s.Name, err, v.origin)
	}
	if s.aliasOf == "" {
		return nil
	}
	if other, ok := vals[s.aliasOf]; ok && !sameEffect(apply, v.text, other.text) {
		return fmt.Errorf("%s: %q (%s) conflicts with %s %q (%s); set one of them",
			s.Name, v.text, v.origin, s.aliasOf, other.text, other.origin)
	}
	return nil
}

// sameEffect reports whether two values configure the same thing, so that
// node.id=7 and broker.id=07 agree as they do in Kafka. Each is applied to
// an empty Config, so only the fields apply sets can differ.
func sameEffect(apply func(*broker.Config, string) error, a, b string) bool {
	var ca, cb broker.Config
	errA, errB := apply(&ca, strings.TrimSpace(a)), apply(&cb, strings.TrimSpace(b))
	return errA == nil && errB == nil && reflect.DeepEqual(ca, cb)
}

// readPropsFile parses file. The *PathError from Open names the path; a
// syntax error is prefixed with it.
func readPropsFile(file string) ([]props.Property, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	ps, err := props.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", file, err)
	}
	return ps, nil
}

// serveConfigHelp is the body of the settings section of `kmirror serve
// --help` (the caller writes the heading): one indented line per key, in
// table order, written from the settings table so the two cannot drift.
func serveConfigHelp() string {
	width := 0
	for _, s := range serverSettings {
		width = max(width, len(s.Name))
	}
	var b strings.Builder
	for _, s := range serverSettings {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, s.Name, s.FullDoc())
	}
	// The ignored names are too many (hundreds) to list usefully; the
	// start-up log names those a file actually sets.
	fmt.Fprintf(&b, "\nEvery other Kafka broker setting (the %d names of Kafka 4.4, 3.9 and older releases,\n"+
		"such as process.roles, num.network.threads or zookeeper.connect) is accepted and\n"+
		"ignored; serve logs the ones it ignores at start. Any other name is an error.\n", len(kafkaconfigs.All()))
	return b.String()
}

// retentionMs reads log.retention.hours (unit msPerHour), .minutes or .ms.
// Kafka's rule: any negative result is -1, unlimited. Hours and minutes are
// Kafka INTs, so the product cannot overflow.
func retentionMs(v string, unit int64) (int64, error) {
	lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
	if unit == 1 {
		lo, hi = math.MinInt64, math.MaxInt64
	}
	n, err := settings.ParseInt(v, lo, hi)
	if err != nil {
		return 0, fmt.Errorf("want an integer, negative for unlimited (got %q)", v)
	}
	if n < 0 {
		return -1, nil
	}
	return settings.ZeroAtOnce.Of(n * unit), nil
}

// retentionBytes reads log.retention.bytes: negative is unlimited, as in
// Kafka, and 0 (delete all but the active segment) becomes 1 byte.
func retentionBytes(v string) (int64, error) {
	n, err := settings.ParseInt(v, math.MinInt64, math.MaxInt64)
	if err != nil {
		return 0, fmt.Errorf("want an integer, negative for unlimited (got %q)", v)
	}
	if n < 0 {
		return -1, nil
	}
	return settings.ZeroAtOnce.Of(n), nil
}

// parseDirs reads log.dirs or log.dir. Kafka parses both as comma lists and
// drops empty items (CoreUtils.parseCsvList).
func parseDirs(v string) ([]string, error) {
	var dirs []string
	for _, d := range settings.SplitList(v) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("want a comma-separated list of directories (got %q)", v)
	}
	return dirs, nil
}

// parseListeners reads listeners or advertised.listeners. An empty
// advertised.listeners means "the same as listeners" (nil).
func parseListeners(v string, advertised bool) ([]broker.Listener, error) {
	items := settings.SplitList(v)
	if len(items) == 0 && !advertised {
		return nil, fmt.Errorf("want a comma-separated list of NAME://host:port (got %q)", v)
	}
	var ls []broker.Listener
	for _, item := range items {
		l, err := parseListener(item)
		if err != nil {
			return nil, err
		}
		if advertised {
			// Kafka refuses to advertise the meta-addresses: a client
			// cannot connect to them.
			if ip := net.ParseIP(l.Host); l.Host == "" || ip != nil && ip.IsUnspecified() {
				return nil, fmt.Errorf("want a host clients can reach, not %q (got %q)", l.Host, item)
			}
			if l.Port == 0 {
				return nil, fmt.Errorf("want a port in 1-65535 (got %q)", item)
			}
		} else if l.Host == "" {
			l.Host = "0.0.0.0" // Kafka binds every interface for an empty host
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// parseListener reads NAME://host:port. Kafka upper-cases the name
// (ListenerName.normalised) and takes the host characters of its listener
// regex; an IPv6 host goes in brackets.
func parseListener(s string) (broker.Listener, error) {
	name, addr, ok := strings.Cut(s, "://")
	if !ok || name == "" {
		return broker.Listener{}, fmt.Errorf("want NAME://host:port (got %q)", s)
	}
	host, port, err := hostPort(addr)
	if err != nil {
		return broker.Listener{}, fmt.Errorf("want NAME://host:port, %w (got %q)", err, s)
	}
	return broker.Listener{Name: strings.ToUpper(name), Host: host, Port: port}, nil
}

// hostPort splits host:port with a port in 0-65535 (0 picks a free port).
func hostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, errors.New("IPv6 hosts in brackets")
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, errors.New("a port in 0-65535")
	}
	for _, c := range host {
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("-%._:", c)
		if !ok {
			return "", 0, errors.New("a host of letters, digits and -%._:")
		}
	}
	return host, port, nil
}

// parseMetricsListener reads metrics.listener: host:port, or empty to
// serve no metrics.
func parseMetricsListener(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if _, _, err := hostPort(v); err != nil {
		return "", fmt.Errorf("want host:port or nothing, %w (got %q)", err, v)
	}
	return v, nil
}

// takeControllerListener applies controller.listener.names: the
// listeners it names leave listeners and advertised.listeners (clients
// are never told of them), and the first becomes the node's controller
// listener, which a node of a cluster binds (a single node binds none).
// It runs after listeners, advertised.listeners and
// listener.security.protocol.map (table order), so the controller
// listener has its protocol.
func takeControllerListener(c *broker.Config, v string) error {
	names := map[string]bool{}
	for _, name := range settings.SplitList(v) {
		names[strings.ToUpper(name)] = true
	}
	c.Cluster.ControllerListener = nil
	keep := func(ls []broker.Listener) []broker.Listener {
		var out []broker.Listener
		for _, l := range ls {
			if !names[l.Name] {
				out = append(out, l)
			}
		}
		return out
	}
	for _, l := range c.Listeners {
		if names[l.Name] && c.Cluster.ControllerListener == nil {
			cl := l
			c.Cluster.ControllerListener = &cl
		}
	}
	c.Listeners, c.AdvertisedListeners = keep(c.Listeners), keep(c.AdvertisedListeners)
	return nil
}

// setCleanupPolicy applies log.cleanup.policy: compact, delete or both, in
// any order. Retention stays as configured: a compact-only policy switches
// off time and size deletion per log, where the effective policy of each
// topic is known (storage.Config.Compact).
func setCleanupPolicy(c *broker.Config, v string) error {
	var compact, del bool
	for _, p := range settings.SplitList(v) {
		switch p {
		case "compact":
			compact = true
		case "delete":
			del = true
		default:
			return fmt.Errorf("want delete, compact or compact,delete (got %q)", v)
		}
	}
	switch {
	case compact && del:
		c.LogCleanupPolicy = "compact,delete"
	case compact:
		c.LogCleanupPolicy = "compact"
	case del:
		c.LogCleanupPolicy = "delete"
	default:
		return fmt.Errorf("want delete, compact or compact,delete (got %q)", v)
	}
	c.Log.Compact = compact
	return nil
}
