package broker

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/internal/settings"
	"github.com/kmirror/kmirror/storage"
)

// effectiveTopicConfig holds the topic configs the broker (not storage)
// enforces.
type effectiveTopicConfig struct {
	maxMessageBytes int32
	compact         bool
	logAppendTime   bool
}

// topicConfig is one topic config Kafka defines. Those with apply change
// how kmirror stores or accepts data; the others are accepted, stored and
// described so tools and mirrored configs round-trip, but have no effect on
// a single node (replication, remote storage, down-conversion...). The
// Def's synonym is the broker config that sets the default ("" if none).
type topicConfig struct {
	settings.Def
	// apply sets the value on the storage config and the broker-enforced
	// part; nil for configs without effect. n is the value of an integer
	// config as storage must be given it (Def.Zero applied).
	apply func(c *storage.Config, e *effectiveTopicConfig, v string, n int64)
	// def returns the static default from the broker config.
	def func(b *Config) string
}

func itoa64(v int64) string { return strconv.FormatInt(v, 10) }

func checkCleanupPolicy(s string) error {
	items := settings.SplitList(s)
	for _, p := range items {
		if p != "delete" && p != "compact" {
			items = nil
			break
		}
	}
	if len(items) == 0 {
		return fmt.Errorf("want a list of delete and compact (got %q)", s)
	}
	return nil
}

func cleanupCompacts(s string) bool { return strings.Contains(s, "compact") }

func cleanupDeletes(s string) bool { return strings.Contains(s, "delete") }

// topicDef builds a topic config's Def: dynamic, as every topic config is,
// with the broker config that sets its default as synonym.
func topicDef(name, broker string, typ settings.Type, zero settings.Zero, check func(string) error, doc string) settings.Def {
	d := settings.Def{Name: name, Type: typ, Doc: doc, Check: check, Dynamic: true, Zero: zero}
	if broker != "" {
		d.Synonyms = []string{broker}
	}
	return d
}

// topicConfigs is every topic config, sorted by name (DescribeConfigs lists
// them in this order).
var topicConfigs = []topicConfig{
	{Def: topicDef("cleanup.policy", "log.cleanup.policy", settings.List, settings.ZeroRefused, checkCleanupPolicy,
		"How old segments are cleaned: delete (by retention.ms and retention.bytes), compact (keep the newest record per key) or both."),
		// Retention is switched off after the loop in logConfig, so that
		// an explicit retention.ms never turns deletion back on for a
		// compact-only topic (Kafka ignores retention without delete).
		apply: func(c *storage.Config, e *effectiveTopicConfig, v string, _ int64) {
			c.Compact, e.compact = cleanupCompacts(v), cleanupCompacts(v)
		},
		def: func(b *Config) string { return b.LogCleanupPolicy }},
	{Def: topicDef("compression.type", "compression.type", settings.String, settings.ZeroRefused,
		settings.OneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
		"Codec of stored batches (stored, no effect: kmirror keeps each batch as the producer compressed it)."),
		def: func(*Config) string { return "producer" }},
	{Def: topicDef("delete.retention.ms", "log.cleaner.delete.retention.ms", settings.Long, settings.ZeroAtOnce, settings.AtLeast(settings.Long, 0),
		"How long tombstones survive in a compacted topic, so consumers reading from the start see deletions."),
		apply: func(c *storage.Config, _ *effectiveTopicConfig, _ string, n int64) { c.DeleteRetentionMs = n },
		def:   func(b *Config) string { return itoa64(b.Log.DeleteRetentionMs) }},
	{Def: topicDef("file.delete.delay.ms", "log.segment.delete.delay.ms", settings.Long, settings.ZeroLiteral, settings.AtLeast(settings.Long, 0),
		"Delay before a deleted segment's files are removed (stored, no effect on kmirror)."),
		def: func(*Config) string { return "60000" }},
	{Def: topicDef("flush.messages", "log.flush.interval.messages", settings.Long, settings.ZeroRefused, settings.AtLeast(settings.Long, 1),
		"Fsync the log after this many appended records; the default relies on the page cache."),
		apply: func(c *storage.Config, _ *effectiveTopicConfig, _ string, n int64) { c.FlushMessages = n },
		def:   func(b *Config) string { return itoa64(unlimitedAsMax(b.Log.FlushMessages)) }},
	{Def: topicDef("flush.ms", "log.flush.interval.ms", settings.Long, settings.ZeroAtOnce, settings.AtLeast(settings.Long, 0),
		"Fsync the log when the oldest unflushed append is older than this; the default relies on the page cache."),
		apply: func(c *storage.Config, _ *effectiveTopicConfig, _ string, n int64) { c.FlushMs = n },
		def:   func(b *Config) string { return itoa64(unlimitedAsMax(b.Log.FlushMs)) }},
	{Def: topicDef("follower.replication.throttled.replicas", "", settings.List, settings.ZeroRefused, nil,
		"Replicas throttled on the follower side (stored, no effect on a single node)."),
		def: func(*Config) string { return "" }},
	{Def: topicDef("index.interval.bytes", "log.index.interval.bytes", settings.Int, settings.ZeroAtOnce, settings.AtLeast(settings.Int, 0),
		"Bytes of batches between two offset index entries."),
		apply: func(c *storage.Config, _ *effectiveTopicConfig, _ string, n int64) { c.IndexIntervalBytes = n },
		def:   func(b *Config) string { return itoa64(b.Log.IndexIntervalBytes) }},
	{Def: topicDef("leader.replication.throttled.replicas", "", settings.List, settings.ZeroRefused, nil,
		"Replicas throttled on the leader side (stored, no effect on a single node)."),
		def: func(*Config) string { return "" }},
	{Def: topicDef("local.retention.bytes", "log.local.retention.bytes", settings.Long, settings.ZeroLiteral, settings.AtLeast(settings.Long, -2),
		"Local retention size with tiered storage (stored, no effect: kmirror has no tiered storage)."),
		def: func(*Config) string { return "-2" }},
	{Def: topicDef("local.retention.ms", "log.local.retention.ms", settings.Long, settings.ZeroLiteral, settings.AtLeast(settings.Long, -2),
		"Local retention time with tiered storage (stored, no effect: kmirror has no tiered storage)."),
		def: func(*Config) string { return "-2" }},
	{Def: topicDef("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", settings.Long, settings.ZeroRefused, settings.AtLeast(settings.Long, 1),
		"Longest time a record may stay uncompacted (stored, no effect yet)."),
		def: func(*Config) string { return "9223372036854775807" }},
	{Def: topicDef("max.message.bytes", "message.max.bytes", settings.Int, settings.ZeroLiteral, settings.AtLeast(settings.Int, 0),
		"Largest record batch a producer may append; larger ones get MESSAGE_TOO_LARGE."),
		apply: func(_ *storage.Config, e *effectiveTopicConfig, _ string, n int64) { e.maxMessageBytes = int32(n) },
		def:   func(b *Config) string { return itoa64(int64(b.MessageMaxBytes)) }},
	{Def: topicDef("message.downconversion.enable", "", settings.Boolean, settings.ZeroRefused, settings.CheckBool,
		"Down-conversion for old fetch versions (stored, no effect: kmirror serves record batch v2 only)."),
		def: func(*Config) string { return "true" }},
	{Def: topicDef("message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms", settings.Long, settings.ZeroLiteral, settings.AtLeast(settings.Long, 0),
		"How far in the future a CreateTime timestamp may be (stored, not enforced yet)."),
		def: func(*Config) string { return "3600000" }},
	{Def: topicDef("message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms", settings.Long, settings.ZeroLiteral, settings.AtLeast(settings.Long, 0),
		"How far in the past a CreateTime timestamp may be (stored, not enforced yet)."),
		def: func(*Config) string { return "9223372036854775807" }},
	{Def: topicDef("message.timestamp.type", "log.message.timestamp.type", settings.String, settings.ZeroRefused,
		settings.OneOf("CreateTime", "LogAppendTime"),
		"CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the broker's clock."),
		apply: func(_ *storage.Config, e *effectiveTopicConfig, v string, _ int64) {
			e.logAppendTime = v == "LogAppendTime"
		},
		def: func(*Config) string { return "CreateTime" }},
	{Def: topicDef("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", settings.Double, settings.ZeroRefused, settings.Ratio,
		"Share of uncompacted log that triggers compaction (stored, no effect yet)."),
		def: func(*Config) string { return "0.5" }},
	{Def: topicDef("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", settings.Long, settings.ZeroLiteral, settings.AtLeast(settings.Long, 0),
		"Shortest time a record stays uncompacted."),
		apply: func(c *storage.Config, _ *effectiveTopicConfig, _ string, n int64) { c.MinCompactionLagMs = n },
		def:   func(b *Config) string { return itoa64(b.Log.MinCompactionLagMs) }},
	{Def: topicDef("min.insync.replicas", "min.insync.replicas", settings.Int, settings.ZeroRefused, settings.AtLeast(settings.Int, 1),
		"In-sync replicas an acks=all write needs; with fewer, the leader answers NOT_ENOUGH_REPLICAS."),
		def: func(b *Config) string { return strconv.Itoa(b.MinInsyncReplicas) }},
	{Def: topicDef("preallocate", "log.preallocate", settings.Boolean, settings.ZeroRefused, settings.CheckBool,
		"Preallocate segment files (stored, no effect)."),
		def: func(*Config) string { return "false" }},
	{Def: topicDef("remote.storage.enable", "", settings.Boolean, settings.ZeroRefused, settings.OneOf("false"),
		"Tiered storage; kmirror has none, so only false is accepted."),
		def: func(*Config) string { return "false" }},
	{Def: topicDef("retention.bytes", "log.retention.bytes", settings.Long, settings.ZeroAtOnce, settings.AtLeast(settings.Long, -1),
		"Delete the oldest segments while the partition is larger than this (-1: no size limit)."),
		apply: func(c *storage.Config, _ *effectiveTopicConfig, _ string, n int64) { c.RetentionBytes = n },
		def:   func(b *Config) string { return itoa64(b.Log.RetentionBytes) }},
	{Def: topicDef("retention.ms", "log.retention.ms", settings.Long, settings.ZeroAtOnce, settings.AtLeast(settings.Long, -1),
		"Delete segments whose newest record is older than this (-1: no time limit)."),
		apply: func(c *storage.Config, _ *effectiveTopicConfig, _ string, n int64) { c.RetentionMs = n },
		def:   func(b *Config) string { return itoa64(b.Log.RetentionMs) }},
	{Def: topicDef("segment.bytes", "log.segment.bytes", settings.Int, settings.ZeroRefused, settings.AtLeast(settings.Int, minTopicSegmentBytes),
		"Roll to a new segment file past this size."),
		apply: func(c *storage.Config, _ *effectiveTopicConfig, _ string, n int64) { c.SegmentBytes = n },
		def:   func(b *Config) string { return itoa64(b.Log.SegmentBytes) }},
	{Def: topicDef("segment.index.bytes", "log.index.size.max.bytes", settings.Int, settings.ZeroRefused, settings.AtLeast(settings.Int, 4),
		"Size of a segment's offset index (stored, no effect: kmirror's index grows as needed)."),
		def: func(*Config) string { return "10485760" }},
	{Def: topicDef("segment.jitter.ms", "log.roll.jitter.ms", settings.Long, settings.ZeroLiteral, settings.AtLeast(settings.Long, 0),
		"Random jitter subtracted from segment.ms (stored, no effect)."),
		def: func(*Config) string { return "0" }},
	{Def: topicDef("segment.ms", "log.roll.ms", settings.Long, settings.ZeroRefused, settings.AtLeast(settings.Long, 1),
		"Roll to a new segment when the active one's first batch is older than this."),
		apply: func(c *storage.Config, _ *effectiveTopicConfig, _ string, n int64) { c.SegmentMs = n },
		def:   func(b *Config) string { return itoa64(b.Log.SegmentMs) }},
	{Def: topicDef("unclean.leader.election.enable", "unclean.leader.election.enable", settings.Boolean, settings.ZeroRefused, settings.CheckBool,
		"Let an out-of-sync replica lead when no in-sync one is left, at the cost of the records it lacks."),
		def: func(b *Config) string { return strconv.FormatBool(b.UncleanLeaderElection) }},
}

// minTopicSegmentBytes is the smallest segment.bytes storage accepts (four
// batch headers); Kafka's own floor is 14 bytes but no batch fits in that.
const minTopicSegmentBytes = storage.MinSegmentBytes

// unlimitedAsMax reports storage's -1 (unlimited) as Kafka does, Long.MAX.
func unlimitedAsMax(v int64) int64 {
	if v < 0 {
		return 1<<63 - 1
	}
	return v
}

func lookupTopicConfig(name string) (*topicConfig, bool) {
	i, ok := slices.BinarySearchFunc(topicConfigs, name, func(c topicConfig, n string) int {
		return strings.Compare(c.Name, n)
	})
	if !ok {
		return nil, false
	}
	return &topicConfigs[i], true
}

// validateTopicConfig checks one topic config; the error is the message
// for INVALID_CONFIG.
func validateTopicConfig(name, value string) error {
	tc, ok := lookupTopicConfig(name)
	if !ok {
		return fmt.Errorf("unknown topic config %q", name)
	}
	return tc.Validate(value)
}

// topicConfigDefault is the value a topic gets when it does not set name:
// the dynamic broker config, else the static one. The bool reports
// whether the default came from a dynamic broker config.
func (b *Broker) topicConfigDefault(tc *topicConfig) (string, bool) {
	if v, ok := b.dynamicDefault(tc); ok {
		return v, true
	}
	return tc.def(&b.cfg), false
}

// minInsyncReplicasConfig is looked up once: MinInsyncReplicas runs for
// every acks=all produce.
var minInsyncReplicasConfig = func() *topicConfig {
	tc, ok := lookupTopicConfig("min.insync.replicas")
	if !ok {
		panic("BUG: no topic config min.insync.replicas")
	}
	return tc
}()

// MinInsyncReplicas is topic's min.insync.replicas, which an acks=all
// write needs in the ISR: the topic's config, else the dynamic broker
// default, else min.insync.replicas of the node's configuration (an
// unknown topic gets the broker's). Topic configs are validated when set,
// so the value is an int >= 1.
func (b *Broker) MinInsyncReplicas(topic string) int {
	tc := minInsyncReplicasConfig
	if t := b.partitions.Topic(topic); t != nil {
		if v, ok := t.Config(tc.Name); ok {
			return int(settings.MustInt(v))
		}
	}
	v, _ := b.topicConfigDefault(tc)
	return int(settings.MustInt(v))
}

// logConfig resolves a topic's storage configuration and broker-enforced
// settings: each config from the topic's dynamic configs, else the dynamic
// broker default, else the static broker config (already in b.cfg.Log).
func (b *Broker) logConfig(configs map[string]string) (storage.Config, effectiveTopicConfig, error) {
	cfg := b.cfg.Log
	cfg.Logger = b.log
	// The node moves its partitions' high watermarks (partition.Appended,
	// partition/hw_checkpoint.go), as a Kafka leader does: replication
	// plugs in there.
	cfg.ExternalHighWatermark = true
	eff := effectiveTopicConfig{maxMessageBytes: b.cfg.MessageMaxBytes}
	policy := b.cfg.LogCleanupPolicy
	for i := range topicConfigs {
		tc := &topicConfigs[i]
		if tc.apply == nil {
			continue
		}
		v, ok := configs[tc.Name]
		if !ok {
			v, ok = b.dynamicDefault(tc)
		}
		if !ok {
			continue
		}
		if err := tc.Validate(v); err != nil {
			return cfg, eff, err
		}
		tc.apply(&cfg, &eff, v, tc.Zero.Of(settings.MustInt(v)))
		if tc.Name == "cleanup.policy" {
			policy = v
		}
	}
	cfg.Compact, eff.compact = cleanupCompacts(policy), cleanupCompacts(policy)
	if !cleanupDeletes(policy) {
		cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	}
	return cfg, eff, nil
}

// dynamicDefault returns the dynamic broker config that sets tc's
// default: this node's, else the cluster default, as in Kafka.
func (b *Broker) dynamicDefault(tc *topicConfig) (string, bool) {
	name := tc.Synonym()
	if name == "" {
		return "", false
	}
	b.dynMu.RLock()
	defer b.dynMu.RUnlock()
	if v, ok := b.nodeConfigs[name]; ok {
		return v, true
	}
	v, ok := b.dynamicConfigs[name]
	return v, ok
}
