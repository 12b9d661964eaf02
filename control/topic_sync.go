package control

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/pattern"
	"github.com/kmirror/kmirror/internal/settings"
	"github.com/kmirror/kmirror/internal/topicid"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// The topic part of a mirror's metadata sync (SPEC.md section 6): each
// cycle compares the source's topics with the mirror's and
//   - fails, non-retryable, a mirrored topic deleted at the source (the
//     local copy is kept: deletes are never propagated) or deleted and
//     recreated there (another topic id: other data at the same offsets);
//   - grows a mirrored topic whose source gained partitions;
//   - copies the source's dynamic topic configs, except the excluded ones
//     and those Apache Kafka removed (removed_configs.go), over local edits;
//   - starts the source topics the mirror's rules match (discovery) and
//     stops the active ones its rules now exclude.

// defaultTopicExclude is topics.exclude when unset: internal topics
// (__consumer_offsets, __transaction_state, __mirror_state...) belong to
// each cluster and are never discovered.
const defaultTopicExclude = "__.*"

// defaultTopicPropertiesExclude is topic.properties.exclude when unset
// (SPEC.md section 3, the prototype's list and the later additions):
// configs that describe the source cluster's replication or clocks, not
// the data, and would be wrong here.
var defaultTopicPropertiesExclude = []string{
	"follower.replication.throttled.replicas",
	"leader.replication.throttled.replicas",
	"message.timestamp.difference.max.ms",
	"log.message.timestamp.before.max.ms",
	"log.message.timestamp.after.max.ms",
	"message.timestamp.type",
	"unclean.leader.election.enable",
	"min.insync.replicas",
	"mirror.name",
	"mirror.replication.throttled.replicas",
	"mirror.support.unclean.leader.election",
}

// listConfig reads a comma-list mirror config under its prototype name
// (mirror.<name>) or its later one (<name>); ok is false when neither is
// set, so the caller applies the default.
func listConfig(m state.Mirror, name string) (values []string, ok bool) {
	if v, set := m.Configs["mirror."+name]; set {
		return settings.Items(v), true
	}
	if v, set := m.Configs[name]; set {
		return settings.Items(v), true
	}
	return nil, false
}

// topicRules is a mirror's effective topic filter. The include set is
// Start's names and patterns plus topics.include; the exclude set is
// Start's exclusions plus topics.exclude (default __.*). Exclude wins.
type topicRules struct {
	include, exclude []*regexp.Regexp
}

func mirrorTopicRules(m state.Mirror) (topicRules, error) {
	inc, _ := listConfig(m, "topics.include")
	exc, set := listConfig(m, "topics.exclude")
	if !set {
		exc = []string{defaultTopicExclude}
	}
	var r topicRules
	var err error
	if r.include, err = pattern.CompileAll(append(append([]string{}, m.Include...), inc...)); err != nil {
		return r, fmt.Errorf("topics.include: %w", err)
	}
	if r.exclude, err = pattern.CompileAll(append(append([]string{}, m.Exclude...), exc...)); err != nil {
		return r, fmt.Errorf("topics.exclude: %w", err)
	}
	return r, nil
}

func (r topicRules) excluded(topic string) bool { return pattern.MatchAny(r.exclude, topic) }

func (r topicRules) match(topic string) bool {
	return !r.excluded(topic) && pattern.MatchAny(r.include, topic)
}

// configFilter compiles topic.properties.exclude (full-match regexes).
func configFilter(m state.Mirror) ([]*regexp.Regexp, error) {
	exc, set := listConfig(m, "topic.properties.exclude")
	if !set {
		exc = defaultTopicPropertiesExclude
	}
	res, err := pattern.CompileAll(exc)
	if err != nil {
		return nil, fmt.Errorf("topic.properties.exclude: %w", err)
	}
	return res, nil
}

// sourceTopicConfigs reads the dynamic configs (those set on the topic at
// the source, not defaults or broker settings) of topics, minus the
// excluded ones. A topic the source could not describe is left out and
// its error returned.
func sourceTopicConfigs(ctx context.Context, adm *kadm.Client, m state.Mirror, topics []string) (map[string]map[string]string, error) {
	if len(topics) == 0 {
		return nil, nil
	}
	exclude, err := configFilter(m)
	if err != nil {
		return nil, err
	}
	described, err := adm.DescribeTopicConfigs(ctx, topics...)
	out := make(map[string]map[string]string, len(described))
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("describing source topic configs: %w", err))
	}
	for _, rc := range described {
		if rc.Err != nil {
			errs = append(errs, fmt.Errorf("describing source topic %s configs: %w", rc.Name, rc.Err))
			continue
		}
		set := map[string]string{}
		for _, cfg := range rc.Configs {
			if cfg.Source != kmsg.ConfigSourceDynamicTopicConfig || cfg.Value == nil || pattern.MatchAny(exclude, cfg.Key) {
				continue
			}
			set[cfg.Key] = *cfg.Value
		}
		out[rc.Name] = set
	}
	return out, errors.Join(errs...)
}

// applyTopicConfigs sets a mirrored topic's source configs here. Configs
// Apache Kafka removed are skipped (removed_configs.go); configs this node
// does not know or refuses are reported, the others applied.
func (c *Plane) applyTopicConfigs(topic string, set map[string]string) error {
	if info, ok := c.parts.Info(topic); ok {
		set = withoutRemovedConfigs(set, c.log, &c.removedConfigs, info.Mirror, topic)
	}
	if len(set) == 0 {
		return nil
	}
	rejected, err := c.b.MergeTopicConfigs(topic, set)
	errs := []error{err}
	keys := make([]string, 0, len(rejected))
	for k := range rejected {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		errs = append(errs, fmt.Errorf("topic %s: source config not copied: %w", topic, rejected[k]))
	}
	return errors.Join(errs...)
}

// sourceView is what one sync cycle learned of the source's topics,
// gathered before the mirror's lock is taken so no source round trip runs
// under it.
type sourceView struct {
	topics  map[string]sourceTopic
	deleted map[string]bool              // mirrored topics the source no longer has
	configs map[string]map[string]string // the mirrored topics' source configs
}

// readSourceTopics lists the source's topics, re-checks the mirrored ones
// missing from the list by name (a listing can race a creation), and reads
// the mirrored topics' configs. metaErr is the listing's failure (nothing
// can be decided without it); cfgErr the configs'.
func (c *Plane) readSourceTopics(m state.Mirror, cl *kgo.Client) (v sourceView, metaErr, cfgErr error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	v.topics, metaErr = listSourceTopics(ctx, cl, nil)
	if metaErr != nil {
		return v, fmt.Errorf("listing source topics: %w", metaErr), nil
	}
	var mirrored, missing []string
	for t, desired := range m.Topics {
		if desired != state.StateMirroring {
			continue // paused and stopped topics are not synced
		}
		if d, ok := v.topics[t]; ok && d.Err == nil {
			mirrored = append(mirrored, t)
		} else {
			missing = append(missing, t)
		}
	}
	v.deleted = map[string]bool{}
	if len(missing) > 0 {
		again, err := listSourceTopics(ctx, cl, missing)
		if err != nil {
			return v, fmt.Errorf("re-checking source topics %v: %w", missing, err), nil
		}
		for _, t := range missing {
			d, ok := again[t]
			switch {
			case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
				v.deleted[t] = true
			case d.Err == nil:
				v.topics[t] = d
				mirrored = append(mirrored, t)
			default:
				metaErr = errors.Join(metaErr, fmt.Errorf("source topic %s: %w", t, d.Err))
			}
		}
	}
	sort.Strings(mirrored)
	v.configs, cfgErr = sourceTopicConfigs(ctx, adm, m, mirrored)
	return v, metaErr, cfgErr
}

// syncTopics runs the topic part of one cycle for mirror m; it returns
// the metadata errors and the config errors apart (they are counted under
// different kinds).
func (c *Plane) syncTopics(m state.Mirror, cl *kgo.Client) (metaErr, cfgErr error) {
	v, metaErr, cfgErr := c.readSourceTopics(m, cl)
	if v.topics == nil {
		return metaErr, nil
	}
	// Configs of newly discovered topics, and what the source mirrors (the
	// loop check of their start), are read before the lock too.
	rules, err := mirrorTopicRules(m)
	if err != nil {
		return errors.Join(metaErr, err), cfgErr
	}
	var discovered []string
	for name, d := range v.topics {
		if _, in := m.Topics[name]; !in && d.Err == nil && rules.match(name) {
			discovered = append(discovered, name)
		}
	}
	sort.Strings(discovered)
	if v.configs == nil {
		v.configs = map[string]map[string]string{}
	}
	var loops sourceMirrors
	if len(discovered) > 0 {
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
		newConfigs, err := sourceTopicConfigs(ctx, kadm.NewClient(cl), m, discovered)
		cancel()
		cfgErr = errors.Join(cfgErr, err)
		for t, set := range newConfigs {
			v.configs[t] = set
		}
		loops = c.readSourceMirrors(m)
	}

	defer c.lockMirror(m.Name)()
	// The mirror as stored now: an RPC may have changed it since the
	// cycle's snapshot.
	cur, err := c.store.GetMirror(m.Name)
	if err != nil {
		return metaErr, cfgErr // deleted meanwhile
	}
	changed := false
	for _, t := range sortedTopics(cur.Topics) {
		if cur.Topics[t] != state.StateMirroring {
			continue
		}
		info, ok := c.parts.Info(t)
		if !ok || info.Mirror != cur.Name || c.beingStopped(cur.Name, t) {
			continue // a stop's final sync is the last sync it gets
		}
		switch {
		case rules.excluded(t):
			// The rules changed (an altered topics.exclude): as the
			// prototype does, the topic is stopped, not left half-synced.
			c.log.Info("metadata sync: stopping a topic the mirror now excludes", "mirror", cur.Name, "topic", t)
			if code, msg := c.stopTopic(&cur, t); code != 0 {
				metaErr = errors.Join(metaErr, fmt.Errorf("stopping excluded topic %s: %s", t, msg))
			}
			changed = true
		case v.deleted[t]:
			c.failTopic(cur, t, info.Partitions, fmt.Sprintf("topic %s was deleted at the source; mirroring stopped"+
				" (deletes are not propagated: the local copy is kept)", t))
		case v.topics[t].ID != ([16]byte{}) && v.topics[t].ID != info.ID:
			c.failTopic(cur, t, info.Partitions, fmt.Sprintf("topic %s was deleted and recreated at the source"+
				" (topic id %s, mirrored %s); mirroring stopped", t, topicid.String(v.topics[t].ID), topicid.String(info.ID)))
		default:
			metaErr = errors.Join(metaErr, c.growTopic(cur, t, info.Partitions, v.topics[t].Partitions))
			cfgErr = errors.Join(cfgErr, c.applyTopicConfigs(t, v.configs[t]))
		}
	}
	for _, t := range discovered {
		if _, in := cur.Topics[t]; in {
			continue
		}
		d := v.topics[t]
		code, msg := c.startTopic(&cur, mirrorapi.StartMirrorTopicsRequestTopic{TopicID: d.ID, TopicName: t,
			NumPartitions: d.Partitions}, v.configs[t], loops)
		if code != 0 {
			// A same-name topic with another id here, a loop, another
			// mirror's topic: reported each cycle, never forced.
			metaErr = errors.Join(metaErr, fmt.Errorf("discovered topic %s not mirrored: %s", t, msg))
			continue
		}
		c.log.Info("metadata sync: discovered a topic", "mirror", cur.Name, "topic", t)
		changed = true
	}
	if changed {
		if err := c.store.PutMirror(cur); err != nil {
			metaErr = errors.Join(metaErr, fmt.Errorf("storing the mirror: %w", err))
		}
	}
	return metaErr, cfgErr
}

// growTopic mirrors a source topic's new partitions: the local topic grows
// and the new partitions start mirroring from offset 0. REQUIRES: m's lock held.
func (c *Plane) growTopic(m state.Mirror, topic string, have, want int32) error {
	if want <= have {
		return nil
	}
	if err := c.b.GrowMirrorTopic(topic, want); err != nil {
		return fmt.Errorf("adding partitions to %s: %w", topic, err)
	}
	for p := have; p < want; p++ {
		if err := c.startPartition(m, topic, p); err != nil {
			return fmt.Errorf("starting %s-%d: %w", topic, p, err)
		}
	}
	c.log.Info("metadata sync: source partitions added", "mirror", m.Name, "topic", topic, "partitions", want)
	return nil
}

// failTopic moves every partition of a topic to FAILED, non-retryable.
// REQUIRES: m's lock held.
func (c *Plane) failTopic(m state.Mirror, topic string, partitions int32, msg string) {
	for p := int32(0); p < partitions; p++ {
		c.failNonRetryable(c.partitionState(m.Name, topic, p), msg)
	}
}

// failNonRetryable removes a partition's fetcher and persists FAILED with
// no retry: only an operator's recover or start resumes it. Partitions
// already stopped or failed that way are left alone. REQUIRES: m's lock held.
func (c *Plane) failNonRetryable(ps state.MirrorPartitionState, msg string) {
	if ps.State == state.StateStopped || ps.State == state.StateFailed && ps.RetryAttempt < 0 {
		return
	}
	c.stopFetcher(ps.Mirror, ps.Topic, ps.Partition)
	ps.RetryAttempt = -1
	if err := c.setState(ps, state.StateFailed, msg); err != nil {
		c.log.Warn("marking a partition failed", "mirror", ps.Mirror, "topic", ps.Topic, "partition", ps.Partition, "err", err)
		return
	}
	c.log.Error("mirror partition failed", "mirror", ps.Mirror, "topic", ps.Topic, "partition", ps.Partition, "reason", msg)
}

func sortedTopics(topics map[string]state.PartitionState) []string {
	out := make([]string, 0, len(topics))
	for t := range topics {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
