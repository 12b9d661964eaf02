package control

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// kadmMeta is what create learns of a source.
type kadmMeta struct{ clusterID string }

// describeCluster asks a source for its cluster id.
func describeCluster(ctx context.Context, adm *kadm.Client) (kadmMeta, error) {
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return kadmMeta{}, err
	}
	if meta.Cluster == "" {
		return kadmMeta{}, fmt.Errorf("the source reports no cluster id")
	}
	return kadmMeta{clusterID: meta.Cluster}, nil
}

// sourceTopics resolves the topics a Start names or matches at the source,
// filling topic ids and partition counts the caller left out. Internal
// topics (__*) match a pattern only when named explicitly.
func (c *Controller) sourceTopics(m state.Mirror, include, exclude []string,
	named []mirrorapi.StartMirrorTopicsRequestTopic) ([]mirrorapi.StartMirrorTopicsRequestTopic, error) {
	inc, err := compilePatterns(include)
	if err != nil {
		return nil, err
	}
	exc, err := compilePatterns(append(append([]string{}, m.Exclude...), exclude...))
	if err != nil {
		return nil, err
	}
	adm, err := c.source(m)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
	defer cancel()
	details, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	var out []mirrorapi.StartMirrorTopicsRequestTopic
	seen := map[string]bool{}
	for _, t := range named {
		d, ok := details[t.TopicName]
		if ok && d.Err == nil {
			if t.TopicID == ([16]byte{}) {
				t.TopicID = d.ID
			}
			if t.NumPartitions <= 0 {
				t.NumPartitions = int32(len(d.Partitions))
			}
		}
		seen[t.TopicName] = true
		out = append(out, t)
	}
	var matched []string
	for name, d := range details {
		if seen[name] || d.Err != nil || strings.HasPrefix(name, "__") || !matchesAny(inc, name) || matchesAny(exc, name) {
			continue
		}
		matched = append(matched, name)
	}
	sort.Strings(matched)
	for _, name := range matched {
		d := details[name]
		out = append(out, mirrorapi.StartMirrorTopicsRequestTopic{TopicID: d.ID, TopicName: name,
			NumPartitions: int32(len(d.Partitions))})
	}
	return out, nil
}
