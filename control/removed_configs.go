package control

import (
	"log/slog"
	"maps"
	"sync"
)

// removedTopicConfigs are the topic configs Apache Kafka has removed, with
// why: the names Kafka 3.9.2's LogConfig.configNames() has and 4.4.0's no
// longer has. Kafka 4.0 dropped the message formats before record batch v2
// and down-conversion with them (KIP-724), and the timestamp bound that
// message.timestamp.before.max.ms and .after.max.ms replaced (KIP-937).
// Nothing else was removed between 2.1 and 3.9.
//
// Sources upgraded from 2.x often still carry them as dynamic topic
// configs. They mean nothing here (kmirror stores record batch v2 as it
// arrives and never down-converts), and a Kafka 4 cluster refuses them,
// so the copy skips them whatever topic.properties.exclude says: an
// operator's own exclude list replaces the default one and would
// otherwise let them through, to be refused at every cycle as a sync
// error.
var removedTopicConfigs = map[string]string{
	"message.format.version":              "removed in Apache Kafka 4.0 (KIP-724): record batch v2 only",
	"message.downconversion.enable":       "removed in Apache Kafka 4.0 (KIP-724): no down-conversion",
	"message.timestamp.difference.max.ms": "removed in Apache Kafka 4.0 (KIP-937): see message.timestamp.before.max.ms and message.timestamp.after.max.ms",
}

// removedConfigKey is one removed config of one mirrored topic.
type removedConfigKey struct{ mirror, topic, config string }

// removedConfigLog remembers which removed configs were already reported,
// so each is logged once per (mirror, topic, config) for the life of the
// process, not at every sync cycle. The zero value is ready. Entries are
// never dropped: at most three per mirrored topic.
type removedConfigLog struct {
	mu   sync.Mutex
	seen map[removedConfigKey]struct{}
}

// firstTime reports whether k is reported for the first time, and marks it.
func (r *removedConfigLog) firstTime(k removedConfigKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.seen[k]; ok {
		return false
	}
	if r.seen == nil {
		r.seen = map[removedConfigKey]struct{}{}
	}
	r.seen[k] = struct{}{}
	return true
}

// withoutRemovedConfigs returns set without the configs Kafka removed
// (set itself when it holds none), logging each skipped one once at info
// level: skipping them is expected, not a fault of the mirror.
func withoutRemovedConfigs(set map[string]string, log *slog.Logger, seen *removedConfigLog, mirror, topic string) map[string]string {
	var out map[string]string
	for k, v := range set {
		why, removed := removedTopicConfigs[k]
		if !removed {
			continue
		}
		if out == nil {
			out = maps.Clone(set)
		}
		delete(out, k)
		if seen.firstTime(removedConfigKey{mirror, topic, k}) {
			log.Info("source topic config not copied", "mirror", mirror, "topic", topic, "config", k, "value", v, "reason", why)
		}
	}
	if out == nil {
		return set
	}
	return out
}
