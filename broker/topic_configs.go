package broker

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/storage"
)

// Config types as DescribeConfigs reports them (Kafka's ConfigType).
const (
	configTypeBoolean int8 = 1
	configTypeString  int8 = 2
	configTypeInt     int8 = 3
	configTypeLong    int8 = 5
	configTypeDouble  int8 = 6
	configTypeList    int8 = 7
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
// a single node (replication, remote storage, down-conversion...).
type topicConfig struct {
	name string
	// broker is the broker config that sets the default ("" if none).
	broker string
	typ    int8
	// doc is the one-line documentation DescribeConfigs v3+ returns.
	doc string
	// check validates a value; nil accepts any string.
	check func(string) error
	// apply sets the value on the storage config and the broker-enforced
	// part; nil for configs without effect.
	apply func(c *storage.Config, e *effectiveTopicConfig, v string)
	// def returns the static default from the broker config.
	def func(b *Config) string
}

func itoa64(v int64) string { return strconv.FormatInt(v, 10) }

func longAtLeast(min int64) func(string) error {
	return func(s string) error {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < min {
			return fmt.Errorf("want an integer >= %d, got %q", min, s)
		}
		return nil
	}
}

func intAtLeast(min int64) func(string) error {
	return func(s string) error {
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil || v < min {
			return fmt.Errorf("want a 32-bit integer >= %d, got %q", min, s)
		}
		return nil
	}
}

func checkBool(s string) error {
	if !strings.EqualFold(s, "true") && !strings.EqualFold(s, "false") {
		return fmt.Errorf("want true or false, got %q", s)
	}
	return nil
}

func oneOf(values ...string) func(string) error {
	return func(s string) error {
		if !slices.Contains(values, s) {
			return fmt.Errorf("want one of %s, got %q", strings.Join(values, ", "), s)
		}
		return nil
	}
}

func checkCleanupPolicy(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "delete" && p != "compact" {
			return fmt.Errorf("want a list of delete and compact, got %q", s)
		}
	}
	return nil
}

func checkRatio(s string) error {
	if v, err := strconv.ParseFloat(s, 64); err != nil || v < 0 || v > 1 {
		return fmt.Errorf("want a number in [0, 1], got %q", s)
	}
	return nil
}

func parseLong(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }

// storageLong parses a value for a storage.Config field where Kafka gives 0
// a meaning of its own (retention.ms=0 deletes closed segments at once,
// flush.ms=0 flushes at every check...) but storage reads 0 as "unset, use
// the default". 1 is the nearest value storage takes literally.
func storageLong(s string) int64 {
	if v := parseLong(s); v != 0 {
		return v
	}
	return 1
}

func cleanupCompacts(s string) bool { return strings.Contains(s, "compact") }

func cleanupDeletes(s string) bool { return strings.Contains(s, "delete") }

// topicConfigs is every topic config, sorted by name (DescribeConfigs lists
// them in this order).
var topicConfigs = []topicConfig{
	{name: "cleanup.policy", broker: "log.cleanup.policy", typ: configTypeList, check: checkCleanupPolicy,
		doc: "How old segments are cleaned: delete (by retention.ms and retention.bytes), compact (keep the newest record per key) or both.",
		// Retention is switched off after the loop in logConfig, so that
		// an explicit retention.ms never turns deletion back on for a
		// compact-only topic (Kafka ignores retention without delete).
		apply: func(c *storage.Config, e *effectiveTopicConfig, v string) {
			c.Compact, e.compact = cleanupCompacts(v), cleanupCompacts(v)
		},
		def: func(b *Config) string { return b.LogCleanupPolicy }},
	{name: "compression.type", broker: "compression.type", typ: configTypeString,
		check: oneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
		doc:   "Codec of stored batches (stored, no effect: kmirror keeps each batch as the producer compressed it).",
		def:   func(*Config) string { return "producer" }},
	{name: "delete.retention.ms", broker: "log.cleaner.delete.retention.ms", typ: configTypeLong, check: longAtLeast(0),
		doc:   "How long tombstones survive in a compacted topic, so consumers reading from the start see deletions.",
		apply: func(c *storage.Config, _ *effectiveTopicConfig, v string) { c.DeleteRetentionMs = storageLong(v) },
		def:   func(b *Config) string { return itoa64(b.Log.DeleteRetentionMs) }},
	{name: "file.delete.delay.ms", broker: "log.segment.delete.delay.ms", typ: configTypeLong, check: longAtLeast(0),
		doc: "Delay before a deleted segment's files are removed (stored, no effect on kmirror).",
		def: func(*Config) string { return "60000" }},
	{name: "flush.messages", broker: "log.flush.interval.messages", typ: configTypeLong, check: longAtLeast(1),
		doc:   "Fsync the log after this many appended records; the default relies on the page cache.",
		apply: func(c *storage.Config, _ *effectiveTopicConfig, v string) { c.FlushMessages = parseLong(v) },
		def:   func(b *Config) string { return itoa64(unlimitedAsMax(b.Log.FlushMessages)) }},
	{name: "flush.ms", broker: "log.flush.interval.ms", typ: configTypeLong, check: longAtLeast(0),
		doc:   "Fsync the log when the oldest unflushed append is older than this; the default relies on the page cache.",
		apply: func(c *storage.Config, _ *effectiveTopicConfig, v string) { c.FlushMs = storageLong(v) },
		def:   func(b *Config) string { return itoa64(unlimitedAsMax(b.Log.FlushMs)) }},
	{name: "follower.replication.throttled.replicas", typ: configTypeList,
		doc: "Replicas throttled on the follower side (stored, no effect on a single node).",
		def: func(*Config) string { return "" }},
	{name: "index.interval.bytes", broker: "log.index.interval.bytes", typ: configTypeInt, check: intAtLeast(0),
		doc:   "Bytes of batches between two offset index entries.",
		apply: func(c *storage.Config, _ *effectiveTopicConfig, v string) { c.IndexIntervalBytes = storageLong(v) },
		def:   func(b *Config) string { return itoa64(b.Log.IndexIntervalBytes) }},
	{name: "leader.replication.throttled.replicas", typ: configTypeList,
		doc: "Replicas throttled on the leader side (stored, no effect on a single node).",
		def: func(*Config) string { return "" }},
	{name: "local.retention.bytes", broker: "log.local.retention.bytes", typ: configTypeLong, check: longAtLeast(-2),
		doc: "Local retention size with tiered storage (stored, no effect: kmirror has no tiered storage).",
		def: func(*Config) string { return "-2" }},
	{name: "local.retention.ms", broker: "log.local.retention.ms", typ: configTypeLong, check: longAtLeast(-2),
		doc: "Local retention time with tiered storage (stored, no effect: kmirror has no tiered storage).",
		def: func(*Config) string { return "-2" }},
	{name: "max.compaction.lag.ms", broker: "log.cleaner.max.compaction.lag.ms", typ: configTypeLong, check: longAtLeast(1),
		doc: "Longest time a record may stay uncompacted (stored, no effect yet).",
		def: func(*Config) string { return "9223372036854775807" }},
	{name: "max.message.bytes", broker: "message.max.bytes", typ: configTypeInt, check: intAtLeast(0),
		doc:   "Largest record batch a producer may append; larger ones get MESSAGE_TOO_LARGE.",
		apply: func(_ *storage.Config, e *effectiveTopicConfig, v string) { e.maxMessageBytes = int32(parseLong(v)) },
		def:   func(b *Config) string { return itoa64(int64(b.MessageMaxBytes)) }},
	{name: "message.downconversion.enable", typ: configTypeBoolean, check: checkBool,
		doc: "Down-conversion for old fetch versions (stored, no effect: kmirror serves record batch v2 only).",
		def: func(*Config) string { return "true" }},
	{name: "message.timestamp.after.max.ms", broker: "log.message.timestamp.after.max.ms", typ: configTypeLong, check: longAtLeast(0),
		doc: "How far in the future a CreateTime timestamp may be (stored, not enforced yet).",
		def: func(*Config) string { return "3600000" }},
	{name: "message.timestamp.before.max.ms", broker: "log.message.timestamp.before.max.ms", typ: configTypeLong, check: longAtLeast(0),
		doc: "How far in the past a CreateTime timestamp may be (stored, not enforced yet).",
		def: func(*Config) string { return "9223372036854775807" }},
	{name: "message.timestamp.type", broker: "log.message.timestamp.type", typ: configTypeString,
		check: oneOf("CreateTime", "LogAppendTime"),
		doc:   "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the broker's clock.",
		apply: func(_ *storage.Config, e *effectiveTopicConfig, v string) { e.logAppendTime = v == "LogAppendTime" },
		def:   func(*Config) string { return "CreateTime" }},
	{name: "min.cleanable.dirty.ratio", broker: "log.cleaner.min.cleanable.ratio", typ: configTypeDouble, check: checkRatio,
		doc: "Share of uncompacted log that triggers compaction (stored, no effect yet).",
		def: func(*Config) string { return "0.5" }},
	{name: "min.compaction.lag.ms", broker: "log.cleaner.min.compaction.lag.ms", typ: configTypeLong, check: longAtLeast(0),
		doc:   "Shortest time a record stays uncompacted.",
		apply: func(c *storage.Config, _ *effectiveTopicConfig, v string) { c.MinCompactionLagMs = parseLong(v) },
		def:   func(b *Config) string { return itoa64(b.Log.MinCompactionLagMs) }},
	{name: "min.insync.replicas", broker: "min.insync.replicas", typ: configTypeInt, check: intAtLeast(1),
		doc: "Replicas that must acknowledge an acks=all write (stored, always met on a single node).",
		def: func(*Config) string { return "1" }},
	{name: "preallocate", broker: "log.preallocate", typ: configTypeBoolean, check: checkBool,
		doc: "Preallocate segment files (stored, no effect).",
		def: func(*Config) string { return "false" }},
	{name: "remote.storage.enable", typ: configTypeBoolean, check: oneOf("false"),
		doc: "Tiered storage; kmirror has none, so only false is accepted.",
		def: func(*Config) string { return "false" }},
	{name: "retention.bytes", broker: "log.retention.bytes", typ: configTypeLong, check: longAtLeast(-1),
		doc:   "Delete the oldest segments while the partition is larger than this (-1: no size limit).",
		apply: func(c *storage.Config, _ *effectiveTopicConfig, v string) { c.RetentionBytes = storageLong(v) },
		def:   func(b *Config) string { return itoa64(b.Log.RetentionBytes) }},
	{name: "retention.ms", broker: "log.retention.ms", typ: configTypeLong, check: longAtLeast(-1),
		doc:   "Delete segments whose newest record is older than this (-1: no time limit).",
		apply: func(c *storage.Config, _ *effectiveTopicConfig, v string) { c.RetentionMs = storageLong(v) },
		def:   func(b *Config) string { return itoa64(b.Log.RetentionMs) }},
	{name: "segment.bytes", broker: "log.segment.bytes", typ: configTypeInt, check: intAtLeast(minTopicSegmentBytes),
		doc:   "Roll to a new segment file past this size.",
		apply: func(c *storage.Config, _ *effectiveTopicConfig, v string) { c.SegmentBytes = parseLong(v) },
		def:   func(b *Config) string { return itoa64(b.Log.SegmentBytes) }},
	{name: "segment.index.bytes", broker: "log.index.size.max.bytes", typ: configTypeInt, check: intAtLeast(4),
		doc: "Size of a segment's offset index (stored, no effect: kmirror's index grows as needed).",
		def: func(*Config) string { return "10485760" }},
	{name: "segment.jitter.ms", broker: "log.roll.jitter.ms", typ: configTypeLong, check: longAtLeast(0),
		doc: "Random jitter subtracted from segment.ms (stored, no effect).",
		def: func(*Config) string { return "0" }},
	{name: "segment.ms", broker: "log.roll.ms", typ: configTypeLong, check: longAtLeast(1),
		doc:   "Roll to a new segment when the active one's first batch is older than this.",
		apply: func(c *storage.Config, _ *effectiveTopicConfig, v string) { c.SegmentMs = parseLong(v) },
		def:   func(b *Config) string { return itoa64(b.Log.SegmentMs) }},
	{name: "unclean.leader.election.enable", broker: "unclean.leader.election.enable", typ: configTypeBoolean, check: checkBool,
		doc: "Allow out-of-sync replicas to lead (stored, no effect on a single node).",
		def: func(*Config) string { return "false" }},
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
		return strings.Compare(c.name, n)
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
	return tc.validate(value)
}

// validate checks a value of the config, for the topic config itself or
// for its broker synonym (both take the same values).
func (tc *topicConfig) validate(value string) error {
	if tc.check != nil {
		if err := tc.check(value); err != nil {
			return fmt.Errorf("invalid value for %s: %w", tc.name, err)
		}
	}
	return nil
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
		v, ok := configs[tc.name]
		if !ok {
			v, ok = b.dynamicDefault(tc)
		}
		if !ok {
			continue
		}
		if err := tc.validate(v); err != nil {
			return cfg, eff, err
		}
		tc.apply(&cfg, &eff, v)
		if tc.name == "cleanup.policy" {
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
	if tc.broker == "" {
		return "", false
	}
	b.dynMu.RLock()
	defer b.dynMu.RUnlock()
	if v, ok := b.nodeConfigs[tc.broker]; ok {
		return v, true
	}
	v, ok := b.dynamicConfigs[tc.broker]
	return v, ok
}
