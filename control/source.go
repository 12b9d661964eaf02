package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/internal/pattern"
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

// sourceTopic is a topic as a source's metadata describes it.
type sourceTopic struct {
	ID         [16]byte
	Partitions int32
	Err        error
}

// listSourceTopics asks the source for its topics (names nil: all of them,
// internal ones left out), always with a fresh Metadata request. WHY not
// kadm.ListTopics: it answers from kgo's metadata cache for up to
// MetadataMinAge, and a sync cycle that follows a deletion or a
// recreation within that window would act on the old topic.
func listSourceTopics(ctx context.Context, cl *kgo.Client, names []string) (map[string]sourceTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	if names != nil {
		req.Topics = make([]kmsg.MetadataRequestTopic, 0, len(names))
		for _, n := range names {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := make(map[string]sourceTopic, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic == nil || names == nil && t.IsInternal {
			continue
		}
		out[*t.Topic] = sourceTopic{ID: t.TopicID, Partitions: int32(len(t.Partitions)), Err: kerr.ErrorForCode(t.ErrorCode)}
	}
	return out, nil
}

// How long Start looks again for a named source topic (see sourceTopics).
const (
	startLookupRetries = 10
	startLookupBackoff = 200 * time.Millisecond
)

// missingNamed reports whether a topic named in a Start is not (or not yet)
// in the source's listing.
func missingNamed(details map[string]sourceTopic, named []mirrorapi.StartMirrorTopicsRequestTopic) bool {
	for _, t := range named {
		if d, ok := details[t.TopicName]; !ok || d.Err != nil {
			return true
		}
	}
	return false
}

// sourceTopics resolves the topics a Start names or matches at the source,
// filling topic ids and partition counts the caller left out. Internal
// topics (__*) match a pattern only when named explicitly.
func (c *Plane) sourceTopics(m state.Mirror, include, exclude []string,
	named []mirrorapi.StartMirrorTopicsRequestTopic) ([]mirrorapi.StartMirrorTopicsRequestTopic, error) {
	inc, err := pattern.CompileAll(include)
	if err != nil {
		return nil, err
	}
	exc, err := pattern.CompileAll(append(append([]string{}, m.Exclude...), exclude...))
	if err != nil {
		return nil, err
	}
	cl, err := c.sourceClient(m)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
	defer cancel()
	details, err := listSourceTopics(ctx, cl, nil)
	// A topic created at the source just before the Start may not be in
	// every broker's metadata yet (KRaft brokers catch up with the
	// controller asynchronously): a named topic missing from the listing
	// is looked for again, briefly, before it is answered as unknown.
	for try := 0; err == nil && try < startLookupRetries && missingNamed(details, named); try++ {
		// Within half the source timeout: the answer that the topic is
		// unknown must still arrive well before the caller gives up.
		if d, ok := ctx.Deadline(); ok && time.Until(d) < c.cfg.SourceTimeout/2 {
			break
		}
		time.Sleep(startLookupBackoff)
		again, lerr := listSourceTopics(ctx, cl, nil)
		if lerr != nil {
			break // keep the listing we have
		}
		details = again
	}
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
				t.NumPartitions = d.Partitions
			}
		}
		seen[t.TopicName] = true
		out = append(out, t)
	}
	var matched []string
	for name, d := range details {
		if seen[name] || d.Err != nil || internalTopic(name) || !pattern.MatchAny(inc, name) || pattern.MatchAny(exc, name) {
			continue
		}
		matched = append(matched, name)
	}
	sort.Strings(matched)
	for _, name := range matched {
		d := details[name]
		out = append(out, mirrorapi.StartMirrorTopicsRequestTopic{TopicID: d.ID, TopicName: name,
			NumPartitions: d.Partitions})
	}
	return out, nil
}

// startConfigs reads the source configs of the topics a Start is about to
// create. A failure is logged, not fatal: the next sync cycle copies them.
// No lock is needed (Handle calls it before taking the mirror's lock).
func (c *Plane) startConfigs(m state.Mirror, topics []mirrorapi.StartMirrorTopicsRequestTopic) map[string]map[string]string {
	adm, err := c.source(m)
	if err != nil {
		return nil
	}
	var names []string
	for _, t := range topics {
		if t.NumPartitions > 0 {
			names = append(names, t.TopicName)
		}
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
	defer cancel()
	configs, err := sourceTopicConfigs(ctx, adm, m, names)
	if err != nil {
		c.log.Warn("reading source topic configs", "mirror", m.Name, "err", err)
	}
	return configs
}

// explainSource turns a failed source call into the reason an operator
// can act on: kgo often reports a refused SASL login or TLS handshake as
// a closed connection, so the source is probed the fetchers' way, which
// names the step and the source's own error.
func (c *Plane) explainSource(m state.Mirror, err error) error {
	fc, ferr := fetchConfig(m.Name, m.Configs)
	if ferr != nil {
		return ferr
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
	defer cancel()
	if perr := fetch.Probe(ctx, fc); perr != nil {
		return perr
	}
	return err
}

var errLoop = errors.New("mirror loop")

// sourceMirrors is what the source mirrors (its ListClusterMirrors), for
// the loop check; err is a source client that could not be made.
type sourceMirrors struct {
	mirrors []mirrorapi.ListClusterMirrorsResponseMirror
	err     error
}

// readSourceMirrors asks the source what it mirrors. It runs before the
// mirror's lock is taken (a source that stalls holds up no transition).
func (c *Plane) readSourceMirrors(m state.Mirror) sourceMirrors {
	cl, err := c.sourceClient(m)
	if err != nil {
		return sourceMirrors{err: err}
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
	defer cancel()
	req := mirrorapi.NewPtrListClusterMirrorsRequest()
	req.IncludeTopicNames = true
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		return sourceMirrors{} // a source without mirrors (not kmirror, or older): no loop possible
	}
	lresp, ok := kresp.(*mirrorapi.ListClusterMirrorsResponse)
	if !ok {
		return sourceMirrors{}
	}
	return sourceMirrors{mirrors: lresp.Mirrors}
}

// loopCheck refuses to mirror a topic the source is itself actively
// mirroring from this cluster (SPEC.md section 4, LOG_ALIGNMENT (1)).
func (c *Plane) loopCheck(src sourceMirrors, topic string) error {
	if src.err != nil {
		return src.err
	}
	for _, sm := range src.mirrors {
		if sm.SourceClusterID != nil && *sm.SourceClusterID == c.b.ClusterID() && slices.Contains(sm.TopicNames, topic) {
			return fmt.Errorf("%w: the source mirrors %s from this cluster (its mirror %s); stop that first",
				errLoop, topic, sm.MirrorName)
		}
	}
	return nil
}

// internalTopic reports whether name is an internal topic (Kafka's
// __consumer_offsets, __transaction_state, __cluster_metadata, a mirror's
// __mirror_state...): each cluster's own, never mirrored.
func internalTopic(name string) bool { return strings.HasPrefix(name, "__") }
