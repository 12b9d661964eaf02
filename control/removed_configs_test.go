package control

import (
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/testutil"
)

// A source topic carrying configs Apache Kafka has removed (an upgraded
// 2.x cluster's message.format.version) starts and syncs: the removed
// configs are skipped, each named in one info line for the whole life of
// the mirror (not one per cycle), no config sync error is counted, and
// the other configs are copied. topic.properties.exclude is set to a list
// that does not name them, as an operator's own list would not.
func TestSyncSkipsRemovedTopicConfigs(t *testing.T) {
	t.Parallel()
	var logs testutil.SyncBuffer
	f := newSyncFixtureWith(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	f.setMirrorConfigs(t, "topic.properties.exclude", "min\\.insync\\.replicas")

	removed := map[string]string{
		"message.format.version":              "2.8-IV1",
		"message.downconversion.enable":       "true",
		"message.timestamp.difference.max.ms": "3600000",
	}
	kept := map[string]string{"cleanup.policy": "compact", "retention.ms": "86400000"}
	configs := map[string]*string{}
	for _, set := range []map[string]string{removed, kept} {
		for k, v := range set {
			configs[k] = &v
		}
	}
	f.createSourceTopic(t, "upgraded", 1, configs)
	f.n.startTopics(t, f.ctx, "upgraded")
	for range 3 {
		f.n.ctl.SyncOnce()
	}

	got := f.n.b.Partitions().Topic("upgraded").Configs()
	for k, v := range kept {
		if got[k] != v {
			t.Errorf("%s = %q here, want the source's %q (all: %v)", k, got[k], v, got)
		}
	}
	for k := range removed {
		if _, ok := got[k]; ok {
			t.Errorf("removed config %s was copied: %v", k, got)
		}
		if c := strings.Count(logs.String(), "config="+k+" "); c != 1 {
			t.Errorf("%s named in %d log lines, want 1:\n%s", k, c, logs.String())
		}
	}
	if e := f.syncErrors(t)[SyncTopicConfigs]; e != 0 {
		t.Fatalf("%d config sync errors, want 0:\n%s", e, logs.String())
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("a warning was logged:\n%s", logs.String())
	}
}

// withoutRemovedConfigs leaves its input alone, returns it as it is when
// it holds no removed config, and reports each (mirror, topic, config)
// once.
func TestWithoutRemovedConfigs(t *testing.T) {
	t.Parallel()
	var logs testutil.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var seen removedConfigLog
	for _, c := range []struct {
		name          string
		mirror, topic string
		in, want      map[string]string
		logged        int // new log lines
	}{
		{"none removed", "m", "a", map[string]string{"retention.ms": "1"}, map[string]string{"retention.ms": "1"}, 0},
		{"one removed", "m", "a", map[string]string{"retention.ms": "1", "message.format.version": "2.1"},
			map[string]string{"retention.ms": "1"}, 1},
		{"again", "m", "a", map[string]string{"message.format.version": "2.1"}, map[string]string{}, 0},
		{"another topic", "m", "b", map[string]string{"message.format.version": "2.1"}, map[string]string{}, 1},
		{"another mirror", "n", "a", map[string]string{"message.format.version": "2.1", "message.downconversion.enable": "true"},
			map[string]string{}, 2},
	} {
		before := strings.Count(logs.String(), "\n")
		in := maps.Clone(c.in)
		got := withoutRemovedConfigs(in, log, &seen, c.mirror, c.topic)
		if !maps.Equal(got, c.want) || !maps.Equal(in, c.in) {
			t.Errorf("%s: got %v (input now %v), want %v (input unchanged)", c.name, got, in, c.want)
		}
		if n := strings.Count(logs.String(), "\n") - before; n != c.logged {
			t.Errorf("%s: %d log lines, want %d:\n%s", c.name, n, c.logged, logs.String())
		}
	}
}
