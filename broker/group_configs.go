package broker

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/settings"
)

// The GROUP config resource (kafka-configs --entity-type groups, KIP-848):
// a group's own session timeout and heartbeat interval on the consumer
// protocol and as a share group, over the broker's group.consumer.* and
// group.share.* defaults. They live in the
// metadata log (state's group configs), so that whichever node coordinates
// the group applies them, and may be set before the group exists, as in
// Kafka. A change reaches a member at its next heartbeat.

// groupConfig is one config of the GROUP resource.
type groupConfig struct {
	name, brokerName, doc string
	// min and max are Kafka's bounds for the group's value: the defaults
	// of group.<kind>.min/max.session.timeout.ms and
	// group.<kind>.min/max.heartbeat.interval.ms.
	min, max int32
	// broker is the broker's value, which an unset group config takes.
	broker func(*Config) time.Duration
	// values are the values of a string config (no broker config: an
	// unset one is values[0], Kafka's default); nil for the others.
	values []string
}

var groupConfigs = []groupConfig{
	{name: "consumer.heartbeat.interval.ms", brokerName: "group.consumer.heartbeat.interval.ms", min: 5000, max: 15000,
		doc:    "The heartbeat interval given to the members of the consumer group.",
		broker: func(c *Config) time.Duration { return c.GroupConsumerHeartbeatInterval }},
	{name: "consumer.session.timeout.ms", brokerName: "group.consumer.session.timeout.ms", min: 45000, max: 60000,
		doc:    "The timeout to detect client failures when using the consumer group protocol.",
		broker: func(c *Config) time.Duration { return c.GroupConsumerSessionTimeout }},
	{name: "share.heartbeat.interval.ms", brokerName: "group.share.heartbeat.interval.ms", min: 5000, max: 15000,
		doc:    "The heartbeat interval given to the members of the share group.",
		broker: func(c *Config) time.Duration { return c.GroupShareHeartbeatInterval }},
	{name: "share.session.timeout.ms", brokerName: "group.share.session.timeout.ms", min: 45000, max: 60000,
		doc:    "The timeout to detect client failures when using the share group protocol.",
		broker: func(c *Config) time.Duration { return c.GroupShareSessionTimeout }},
	{name: "share.record.lock.duration.ms", brokerName: "group.share.record.lock.duration.ms", min: 15000, max: 60000,
		doc:    "The record acquisition lock duration in milliseconds for share groups.",
		broker: func(c *Config) time.Duration { return c.GroupShareRecordLockDuration }},
	{name: "share.auto.offset.reset", values: []string{"latest", "earliest"},
		doc: "The strategy to initialize the share-partition start offset: latest or earliest."},
}

func lookupGroupConfig(name string) (*groupConfig, bool) {
	i := slices.IndexFunc(groupConfigs, func(gc groupConfig) bool { return gc.name == name })
	if i < 0 {
		return nil, false
	}
	return &groupConfigs[i], true
}

// validateGroupConfig checks a value to set on a GROUP resource.
func validateGroupConfig(name, value string) *configError {
	gc, ok := lookupGroupConfig(name)
	if !ok {
		return newConfigError(kerr.InvalidConfig, "Unknown group config name: %s", name)
	}
	if gc.values != nil {
		if !slices.Contains(gc.values, value) {
			return newConfigError(kerr.InvalidConfig, "Invalid value %s for configuration %s: must be one of %s", value, name,
				strings.Join(gc.values, ", "))
		}
		return nil
	}
	n, err := strconv.ParseInt(value, 10, 32)
	switch {
	case err != nil:
		return newConfigError(kerr.InvalidConfig, "Invalid value %s for configuration %s: Not a number of type INT", value, name)
	case int32(n) < gc.min || int32(n) > gc.max:
		return newConfigError(kerr.InvalidConfig, "%s must be greater than or equal to %s (%d) and less than or equal to %s (%d)",
			name, minName(gc), gc.min, maxName(gc), gc.max)
	}
	return nil
}

// minName and maxName are the broker configs of gc's bounds:
// group.consumer.session.timeout.ms's are group.consumer.min.session.timeout.ms
// and group.consumer.max.session.timeout.ms.
func minName(gc *groupConfig) string { return boundName(gc, "min") }
func maxName(gc *groupConfig) string { return boundName(gc, "max") }

func boundName(gc *groupConfig, bound string) string {
	kind, rest, _ := strings.Cut(strings.TrimPrefix(gc.brokerName, "group."), ".")
	return "group." + kind + "." + bound + "." + rest
}

// checkGroupName refuses the GROUP resource "".
func checkGroupName(name string) *configError {
	if name == "" {
		return newConfigError(kerr.InvalidRequest, "Group name must not be empty.")
	}
	return nil
}

// describeGroupConfigs lists a group's configs: its own (GROUP_CONFIG),
// else the broker's.
func (b *Broker) describeGroupConfigs(name string, opts *describeOpts) ([]kmsg.DescribeConfigsResponseResourceConfig, *configError) {
	if cerr := checkGroupName(name); cerr != nil {
		return nil, cerr
	}
	set, err := b.store.GroupConfigs(name)
	if err != nil {
		return nil, newConfigError(kerr.UnknownServerError, "reading the configs of group %s: %v", name, err)
	}
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for i := range groupConfigs {
		gc := &groupConfigs[i]
		if !opts.wants(gc.name) {
			continue
		}
		var chain []configSynonym
		if v, ok := set[gc.name]; ok {
			chain = append(chain, synonym(gc.name, v, kmsg.ConfigSourceGroupConfig))
		}
		if gc.values != nil {
			chain = append(chain, synonym(gc.name, gc.values[0], kmsg.ConfigSourceDefaultConfig))
			out = append(out, configEntry(gc.name, settings.String, gc.doc, false, chain, opts))
			continue
		}
		def := DefaultConfig()
		v, builtin := strconv.FormatInt(gc.broker(&b.cfg).Milliseconds(), 10), strconv.FormatInt(gc.broker(&def).Milliseconds(), 10)
		chain = append(chain, synonym(gc.brokerName, v, staticSource(v, builtin)))
		out = append(out, configEntry(gc.name, settings.Int, gc.doc, false, chain, opts))
	}
	return out, nil
}

// groupConsumerConfig is the session timeout and heartbeat interval of
// group on the consumer protocol: its own, else the broker's.
func (b *Broker) groupConsumerConfig(group string) (session, heartbeat time.Duration) {
	return b.groupTimeouts(group, "consumer.", b.cfg.GroupConsumerSessionTimeout, b.cfg.GroupConsumerHeartbeatInterval)
}

// groupShareConfig is groupConsumerConfig for a share group.
func (b *Broker) groupShareConfig(group string) (session, heartbeat time.Duration) {
	return b.groupTimeouts(group, "share.", b.cfg.GroupShareSessionTimeout, b.cfg.GroupShareHeartbeatInterval)
}

// shareLockDuration is group's share.record.lock.duration.ms, else the
// broker's.
func (b *Broker) shareLockDuration(group string) time.Duration {
	return b.groupMillis(group, "share.record.lock.duration.ms", b.cfg.GroupShareRecordLockDuration)
}

// shareAutoOffsetReset is group's share.auto.offset.reset: where a share
// partition without a start offset starts.
func (b *Broker) shareAutoOffsetReset(group string) string {
	set, err := b.store.GroupConfigs(group)
	if err != nil {
		b.log.Warn("reading a group's configs; share.auto.offset.reset=latest applies", "group", group, "err", err)
		return "latest"
	}
	if v := set["share.auto.offset.reset"]; v != "" {
		return v
	}
	return "latest"
}

// groupTimeouts reads group's <prefix>session.timeout.ms and
// <prefix>heartbeat.interval.ms, else the broker's session and
// heartbeat. A store that cannot be read gives the broker's (logged).
func (b *Broker) groupTimeouts(group, prefix string, session, heartbeat time.Duration) (time.Duration, time.Duration) {
	return b.groupMillis(group, prefix+"session.timeout.ms", session), b.groupMillis(group, prefix+"heartbeat.interval.ms", heartbeat)
}

// groupMillis reads group's config name, a duration in milliseconds, else
// dflt (the broker's). A store that cannot be read gives dflt (logged).
func (b *Broker) groupMillis(group, name string, dflt time.Duration) time.Duration {
	set, err := b.store.GroupConfigs(group)
	if err != nil {
		b.log.Warn("reading a group's configs; the broker's apply", "group", group, "err", err)
		return dflt
	}
	if n, err := strconv.ParseInt(set[name], 10, 32); err == nil && n > 0 {
		return time.Duration(n) * time.Millisecond
	}
	return dflt
}
