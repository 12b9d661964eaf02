package control

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/internal/pattern"
	"github.com/kmirror/kmirror/internal/topicid"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"
)

// Handle answers a mirror RPC (the broker's handlers for keys 94-107 call
// it). It blocks on the state store and the source: broker workers only.
//
// The RPCs that change a mirror run under that mirror's lock (locks.go),
// one at a time per mirror, so that its persisted states and fetchers
// never disagree. List and Describe only read and take no lock. A Start
// reads the source (topics, ids, configs, the loop check) and a Create
// the source's cluster id before they take the lock; a Stop drops it
// while its final sync reads the source (stop).
func (c *Plane) Handle(req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *mirrorapi.ListClusterMirrorsRequest:
		return c.list(r), nil
	case *mirrorapi.DescribeClusterMirrorsRequest:
		return c.describe(r), nil
	case *mirrorapi.CreateClusterMirrorRequest:
		return c.create(r), nil
	case *mirrorapi.StartMirrorTopicsRequest:
		looked := c.startLookups(r)
		defer c.lockMirror(r.MirrorName)()
		return c.start(r, looked), nil
	case *mirrorapi.StopMirrorTopicsRequest:
		deadline := time.Now().Add(stopWait) // for the whole Stop: its final sync and markers count too
		defer c.lockStops(r.MirrorName)()
		resp := c.stop(r).(*mirrorapi.StopMirrorTopicsResponse) // takes the mirror's lock, and drops it for the final sync
		c.awaitStops(r.MirrorName, resp, deadline)
		c.logStops(r.MirrorName, resp)
		return resp, nil
	case *mirrorapi.PauseMirrorTopicsRequest:
		defer c.lockMirror(r.MirrorName)()
		return c.pause(r), nil
	case *mirrorapi.ResumeMirrorTopicsRequest:
		defer c.lockMirror(r.MirrorName)()
		return c.resumeTopics(r), nil
	case *mirrorapi.RecoverMirrorTopicsRequest:
		defer c.lockMirror(r.MirrorName)()
		return c.recover(r), nil
	case *mirrorapi.DeleteClusterMirrorRequest:
		defer c.lockStops(r.MirrorName)()
		defer c.lockMirror(r.MirrorName)()
		return c.delete(r), nil
	}
	return nil, fmt.Errorf("control: not a mirror request: %T", req)
}

func strp(s string) *string { return &s }

// metadataWriteCode is the Kafka error code of a mirror RPC's failed
// write (meta.WriteError): NOT_CONTROLLER in an election, which `kmirror
// mirrors` sends again at the new controller, REQUEST_TIMED_OUT when the
// entry was not committed in time, else UNKNOWN_SERVER_ERROR.
func metadataWriteCode(err error) int16 {
	return meta.WriteError(err, kerr.UnknownServerError).Code
}

var mirrorNameRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

func (c *Plane) create(r *mirrorapi.CreateClusterMirrorRequest) kmsg.Response {
	resp := r.ResponseKind().(*mirrorapi.CreateClusterMirrorResponse)
	fail := func(code int16, format string, args ...any) kmsg.Response {
		resp.ErrorCode, resp.ErrorMessage = code, strp(fmt.Sprintf(format, args...))
		return resp
	}
	if !mirrorNameRe.MatchString(r.MirrorName) || r.MirrorName == "." || r.MirrorName == ".." {
		return fail(kerr.InvalidRequest.Code, "invalid mirror name %q: 1-249 characters of [A-Za-z0-9._-], not . or ..", r.MirrorName)
	}
	if _, err := c.store.GetMirror(r.MirrorName); err == nil {
		return fail(mirrorapi.ErrClusterMirrorAlreadyExists, "cluster mirror %s already exists", r.MirrorName)
	}
	configs := map[string]string{}
	for _, kv := range r.Configs {
		if kv.Value == nil {
			return fail(kerr.InvalidConfig.Code, "%s: a value is required", kv.Name)
		}
		configs[kv.Name] = *kv.Value
	}
	if err := validateMirrorConfigs(configs); err != nil {
		return fail(kerr.InvalidConfig.Code, "%v", err)
	}
	m := state.Mirror{Name: r.MirrorName, Configs: configs, Topics: map[string]state.PartitionState{},
		SourceClusterID: configs["mirror.source.cluster.id"]}
	if m.SourceClusterID == "" {
		// Captured at create, as the prototype's admin client fills it:
		// the sync loop's cluster-id guard compares against it. Asked
		// before the mirror's lock, on a client of its own: a create that
		// loses a race for the name leaves no client behind.
		cl, err := newSourceClient(m)
		if err == nil {
			ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
			var meta kadmMeta
			meta, err = describeCluster(ctx, kadm.NewClient(cl))
			cancel()
			cl.Close()
			m.SourceClusterID = meta.clusterID
		}
		if err != nil {
			return fail(kerr.InvalidConfig.Code, "bootstrap.servers: %v: %v", errSourceUnreachable, c.explainSource(m, err))
		}
	}
	if m.SourceClusterID == c.b.ClusterID() {
		return fail(kerr.InvalidConfig.Code, "the source is this cluster (%s): a mirror of itself is a loop", m.SourceClusterID)
	}
	defer c.lockMirror(m.Name)()
	if _, err := c.store.GetMirror(r.MirrorName); err == nil {
		return fail(mirrorapi.ErrClusterMirrorAlreadyExists, "cluster mirror %s already exists", r.MirrorName)
	}
	if err := c.store.PutMirror(m); err != nil {
		code := metadataWriteCode(err)
		if errors.Is(err, state.ErrNoSecret) {
			code = kerr.InvalidConfig.Code
		}
		return fail(code, "storing the mirror: %v", err)
	}
	if err := c.addFetchers(m); err != nil {
		// Not a metadata write: the mirror is stored, so a retry would
		// find it exists (only NOT_CONTROLLER is sent again).
		return fail(kerr.UnknownServerError.Code, "starting the mirror: %v", err)
	}
	c.log.Info("cluster mirror created", "mirror", m.Name, "source_cluster_id", m.SourceClusterID)
	return resp
}

func (c *Plane) dropSource(name string) {
	c.srcMu.Lock()
	defer c.srcMu.Unlock()
	if cl := c.sources[name]; cl != nil {
		cl.Close()
		delete(c.sources, name)
	}
}

// topicsResult collects per-topic answers of Start, Stop, Pause, Resume
// and Recover.
type topicsResult struct {
	code   int16
	msg    *string
	topics []mirrorapi.MirrorTopicsResponseTopic
}

func (t *topicsResult) add(name string, code int16, format string, args ...any) {
	rt := mirrorapi.MirrorTopicsResponseTopic{Name: name, ErrorCode: code}
	if code != 0 {
		rt.ErrorMessage = strp(fmt.Sprintf(format, args...))
	}
	t.topics = append(t.topics, rt)
}

func (t *topicsResult) fail(code int16, format string, args ...any) {
	t.code, t.msg = code, strp(fmt.Sprintf(format, args...))
}

func (c *Plane) mirrorFor(name string, res *topicsResult) (state.Mirror, bool) {
	m, err := c.store.GetMirror(name)
	if err != nil {
		res.fail(mirrorapi.ErrUnknownClusterMirror, "no cluster mirror %s", name)
		return m, false
	}
	return m, true
}

// startLookup is what a Start reads from the source before it takes the
// mirror's lock.
type startLookup struct {
	looked  bool // the request names topics or patterns: they were resolved
	topics  []mirrorapi.StartMirrorTopicsRequestTopic
	configs map[string]map[string]string
	loops   sourceMirrors
	err     error
}

// startLookups resolves a Start's names and patterns against the source:
// ids and partition counts come from there when the caller left them out,
// and the source's topic configs. No lock is held: the source may be slow.
// A mirror that is missing here is answered by start, under its lock.
func (c *Plane) startLookups(r *mirrorapi.StartMirrorTopicsRequest) startLookup {
	if len(r.IncludePatterns) == 0 && len(r.Topics) == 0 {
		return startLookup{}
	}
	m, err := c.store.GetMirror(r.MirrorName)
	if err != nil {
		return startLookup{}
	}
	found, err := c.sourceTopics(m, r.IncludePatterns, r.ExcludePatterns, r.Topics)
	if err != nil {
		return startLookup{looked: true, err: err}
	}
	l := startLookup{looked: true, topics: found, loops: c.readSourceMirrors(m)}
	if !r.ValidateOnly { // a dry run applies no configs
		l.configs = c.startConfigs(m, found)
	}
	return l
}

func (c *Plane) start(r *mirrorapi.StartMirrorTopicsRequest, looked startLookup) kmsg.Response {
	resp := r.ResponseKind().(*mirrorapi.StartMirrorTopicsResponse)
	var res topicsResult
	defer func() { resp.ErrorCode, resp.ErrorMessage, resp.Topics = res.code, res.msg, res.topics }()
	m, ok := c.mirrorFor(r.MirrorName, &res)
	if !ok {
		return resp
	}
	resp.DryRun = r.ValidateOnly
	topics := r.Topics
	configs := looked.configs
	switch {
	case looked.err != nil:
		res.fail(kerr.UnknownServerError.Code, "%v: %v", errSourceUnreachable, looked.err)
		return resp
	case looked.looked:
		topics = looked.topics
	case len(r.IncludePatterns) > 0 || len(topics) > 0:
		// The mirror was created between the lookups and the lock.
		res.fail(kerr.UnknownServerError.Code, "cluster mirror %s changed during the start: ask again", m.Name)
		return resp
	}
	// SPEC.md section 2: names and patterns join the include set; a
	// pattern included is no longer excluded and vice versa; a topic named
	// explicitly but excluded (by this request, the mirror's exclusions
	// or topics.exclude) is refused.
	m.Exclude = mergePatterns(m.Exclude, r.ExcludePatterns)
	rules, err := mirrorTopicRules(m)
	if err != nil {
		res.fail(kerr.InvalidRequest.Code, "%v", err)
		return resp
	}
	named := map[string]bool{}
	for _, t := range r.Topics {
		named[t.TopicName] = true
	}
	for _, p := range r.IncludePatterns {
		m.Exclude = slices.DeleteFunc(m.Exclude, func(e string) bool { return e == p })
	}
	for _, p := range r.ExcludePatterns {
		m.Include = slices.DeleteFunc(m.Include, func(i string) bool { return i == p })
	}
	m.Include = mergePatterns(m.Include, r.IncludePatterns)
	for _, t := range topics {
		if internalTopic(t.TopicName) {
			// Discovery never matches them; a name asked for is refused:
			// a mirror topic of that name would take this cluster's own
			// group or transaction state.
			res.add(t.TopicName, kerr.InvalidTopicException.Code,
				"topic %s is internal: each cluster keeps its own, it is never mirrored", t.TopicName)
			continue
		}
		if named[t.TopicName] && rules.excluded(t.TopicName) {
			res.add(t.TopicName, kerr.InvalidRequest.Code, "topic %s is excluded from cluster mirror %s", t.TopicName, m.Name)
			continue
		}
		if r.ValidateOnly {
			res.topics = append(res.topics, c.previewTopic(m, t, looked.loops))
			continue
		}
		if named[t.TopicName] {
			m.Include = mergePatterns(m.Include, []string{regexp.QuoteMeta(t.TopicName)})
		}
		code, msg := c.startTopic(&m, t, configs[t.TopicName], looked.loops)
		res.add(t.TopicName, code, "%s", msg)
	}
	if r.ValidateOnly {
		return resp // a dry run stores nothing
	}
	if err := c.store.PutMirror(m); err != nil {
		res.fail(metadataWriteCode(err), "storing the mirror: %v", err)
	}
	return resp
}

func mergePatterns(have, add []string) []string {
	for _, p := range add {
		if !slices.Contains(have, p) {
			have = append(have, p)
		}
	}
	return have
}

// startCase is what starting a topic means, by what exists here.
type startCase int8

const (
	startCreate  startCase = iota // no local topic: it is created
	startRunning                  // mirroring already: nothing to do
	startAlign                    // a writable topic (a failback, a migration): aligned first
)

// startCheck is the validation of startTopic, shared with its dry run
// (align_preview.go): what starting t means here, and the local topic, or
// why the start is refused (code != 0). It changes nothing. loops is what
// the source mirrors, read before the lock (readSourceMirrors).
// REQUIRES: m's lock held.
func (c *Plane) startCheck(m state.Mirror, t mirrorapi.StartMirrorTopicsRequestTopic,
	loops sourceMirrors) (sc startCase, info partition.TopicInfo, code int16, msg string) {
	if t.NumPartitions <= 0 {
		return 0, info, kerr.UnknownTopicOrPartition.Code, "the source has no topic " + t.TopicName
	}
	if err := c.loopCheck(loops, t.TopicName); err != nil {
		return 0, info, kerr.InvalidRequest.Code, err.Error()
	}
	info, exists := c.parts.Info(t.TopicName)
	switch {
	case !exists:
		return startCreate, info, 0, ""
	case t.TopicID != ([16]byte{}) && info.ID != t.TopicID:
		return 0, info, kerr.InconsistentTopicID.Code, fmt.Sprintf("topic %s exists here with topic id %s, at the source with %s",
			t.TopicName, topicid.String(info.ID), topicid.String(t.TopicID))
	case info.Mirror != "" && info.Mirror != m.Name:
		return 0, info, mirrorapi.ErrTopicAlreadyInClusterMirror, fmt.Sprintf("topic %s belongs to cluster mirror %s", t.TopicName, info.Mirror)
	case info.Mirror == m.Name && m.Topics[t.TopicName] == state.StateMirroring:
		return startRunning, info, 0, ""
	case info.Mirror == m.Name && m.Topics[t.TopicName] != state.StateStopped:
		return 0, info, mirrorapi.ErrMirrorTopicNotStopped, fmt.Sprintf("topic %s is %v", t.TopicName, m.Topics[t.TopicName])
	case info.Partitions < t.NumPartitions:
		return 0, info, kerr.InvalidPartitions.Code, fmt.Sprintf("topic %s has %d partitions here, %d at the source",
			t.TopicName, info.Partitions, t.NumPartitions)
	}
	// An existing writable topic (a failback, or a migration into a topic
	// created by hand): it becomes read-only and is aligned.
	return startAlign, info, 0, ""
}

// startTopic associates one topic with the mirror, gives it the source's
// topic configs and starts its partitions. REQUIRES: m's lock held.
func (c *Plane) startTopic(m *state.Mirror, t mirrorapi.StartMirrorTopicsRequestTopic, configs map[string]string,
	loops sourceMirrors) (int16, string) {
	code, msg, sc, info := c.claimTopic(m, t, loops)
	if code != 0 {
		return code, msg
	}
	switch sc {
	case startRunning:
		return 0, ""
	case startAlign:
		if err := c.alignTopic(*m, info, t.NumPartitions); err != nil {
			return metadataWriteCode(err), fmt.Sprintf("aligning %s: %v", t.TopicName, err)
		}
		for p := int32(0); p < t.NumPartitions; p++ {
			// A stopped partition starts over at LOG_ALIGNMENT.
			ps := c.partitionState(m.Name, t.TopicName, p)
			if ps.State != state.StateStopped {
				continue
			}
			if err := c.setState(ps, state.StateLogAlignment, ""); err != nil {
				return metadataWriteCode(err), fmt.Sprintf("partition %d: persisting LOG_ALIGNMENT: %v", p, err)
			}
		}
	}
	// The configs land before the first record: a compacted or
	// never-expiring source topic must not meet this node's default
	// retention in between.
	if err := c.applyTopicConfigs(t.TopicName, configs); err != nil {
		c.log.Warn("copying source topic configs", "mirror", m.Name, "topic", t.TopicName, "err", err)
	}
	m.Topics[t.TopicName] = state.StateMirroring
	for p := int32(0); p < t.NumPartitions; p++ {
		if err := c.startPartition(*m, t.TopicName, p); err != nil {
			return metadataWriteCode(err), fmt.Sprintf("partition %d: %v", p, err)
		}
	}
	c.log.Info("mirroring topic", "mirror", m.Name, "topic", t.TopicName, "partitions", t.NumPartitions)
	return 0, ""
}

// claimTopic is startCheck and, if the start goes on, the topic taken
// for m (created, or made read-only), one step under topicsMu: two
// mirrors starting one topic at once cannot both see it free.
// REQUIRES: m's lock held.
func (c *Plane) claimTopic(m *state.Mirror, t mirrorapi.StartMirrorTopicsRequestTopic,
	loops sourceMirrors) (code int16, msg string, sc startCase, info partition.TopicInfo) {
	c.topicsMu.Lock()
	defer c.topicsMu.Unlock()
	sc, info, code, msg = c.startCheck(*m, t, loops)
	if code != 0 {
		return code, msg, sc, info
	}
	var err error
	switch sc {
	case startCreate:
		err = c.b.CreateMirrorTopic(t.TopicName, t.TopicID, t.NumPartitions, m.Name)
	case startAlign:
		err = c.b.SetTopicsMirror([]string{t.TopicName}, m.Name)
	}
	if err != nil {
		return metadataWriteCode(err), err.Error(), sc, info
	}
	return 0, "", sc, info
}

// stop runs a Stop in three steps: under the mirror's lock the final
// sync's first step (the fetchers removed, the topics marked as being
// stopped); without it the final sync's source reads; under it again the
// stop proper, against the mirror as stored then. REQUIRES: the mirror's
// stopMu held, its lock not.
func (c *Plane) stop(r *mirrorapi.StopMirrorTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*mirrorapi.StopMirrorTopicsResponse)
	var res topicsResult
	defer func() { resp.ErrorCode, resp.ErrorMessage, resp.Topics = res.code, res.msg, res.topics }()
	unlock := c.lockMirror(r.MirrorName)
	m, ok := c.mirrorFor(r.MirrorName, &res)
	if !ok {
		unlock()
		return resp
	}
	names, err := c.selectTopics(m, r.Topics, r.Patterns)
	if err != nil {
		unlock()
		res.fail(kerr.InvalidRequest.Code, "%v", err)
		return resp
	}
	// The topics this stop fails over get a final sync first (sync.go);
	// the others (unknown, another mirror's, stopped already) none.
	var stopping []string
	for _, name := range names {
		if info, ok := c.parts.Info(name); ok && info.Mirror == m.Name {
			if _, in := m.Topics[name]; in {
				stopping = append(stopping, name)
			}
		}
	}
	reps, ids := c.finalSyncBegin(m, stopping)
	// In a cluster the other leaders fail their partitions over while the
	// final sync reads the source: the topic becomes writable only after
	// both (awaitStops), which is all the final sync's order asks.
	if err := c.persistRemoteStopping(m, stopping); err != nil {
		c.log.Warn("recording STOPPING for the partitions led elsewhere before the final sync (retried after it)",
			"mirror", m.Name, "err", err)
	}
	unlock()
	c.finalSyncEnd(m, stopping, ids, reps)
	defer c.lockMirror(r.MirrorName)()
	for _, t := range stopping {
		delete(c.ctl(m.Name).stopping, t)
	}
	// The mirror as stored now: a Pause or a sync of its other topics
	// may have changed it meanwhile (a Delete could not: stopMu).
	if m, ok = c.mirrorFor(r.MirrorName, &res); !ok {
		return resp
	}
	// SPEC.md section 2: a stopped pattern leaves the include set, or, if
	// it was not there, joins the exclude set (so discovery does not start
	// its topics again); a stopped name leaves the include set.
	for _, p := range r.Patterns {
		if slices.Contains(m.Include, p) {
			m.Include = slices.DeleteFunc(m.Include, func(i string) bool { return i == p })
		} else {
			m.Exclude = mergePatterns(m.Exclude, []string{p})
		}
	}
	for _, t := range r.Topics {
		q := regexp.QuoteMeta(t.TopicName)
		m.Include = slices.DeleteFunc(m.Include, func(i string) bool { return i == q })
	}
	// Every topic's partitions are failed over together: a few writes
	// for all of them (stopPartitions).
	type outcome struct {
		code int16
		msg  string
	}
	outcomes := map[string]outcome{}
	toStop := map[string][]int32{}
	for _, name := range names {
		code, msg, parts := c.stopCheck(&m, name)
		outcomes[name] = outcome{code, msg}
		if parts != nil {
			toStop[name] = parts
		}
	}
	failed, err := c.stopPartitions(m, toStop)
	var done []string
	for name := range toStop {
		switch {
		case err != nil:
			outcomes[name] = outcome{metadataWriteCode(err), err.Error()}
		case failed[name] != nil:
			outcomes[name] = outcome{metadataWriteCode(failed[name]), failed[name].Error()}
		default:
			done = append(done, name)
		}
	}
	c.releaseStopped(m, done)
	for _, name := range names {
		code, msg := outcomes[name].code, outcomes[name].msg
		res.add(name, code, "%s", msg)
		rt := &res.topics[len(res.topics)-1]
		rep := reps[name]
		switch {
		case rep == nil && code == 0:
			rt.FinalSync, rt.FinalSyncMessage = mirrorapi.FinalSyncSkipped, strp("topic "+name+" was stopped already")
		case rep != nil:
			rt.FinalSync, rt.Partitions = rep.status, rep.parts
			if rep.msg != "" {
				rt.FinalSyncMessage = strp(rep.msg)
			}
		}
		if code != 0 && rep != nil {
			// The final sync removed the fetchers; partitions this stop
			// did not reach mirror on.
			c.resumeUnstopped(m, name)
		}
	}
	if err := c.store.PutMirror(m); err != nil {
		res.fail(metadataWriteCode(err), "storing the mirror: %v", err)
	}
	return resp
}

// stopTopic fails one topic over (stopCheck, stopPartitions).
// REQUIRES: m's lock held.
func (c *Plane) stopTopic(m *state.Mirror, name string) (int16, string) {
	code, msg, parts := c.stopCheck(m, name)
	if parts == nil {
		return code, msg
	}
	failed, err := c.stopPartitions(*m, map[string][]int32{name: parts})
	if err = errors.Join(err, failed[name]); err != nil {
		return metadataWriteCode(err), err.Error()
	}
	c.releaseStopped(*m, []string{name})
	return 0, ""
}

// stopCheck checks that a Stop may fail topic name over and marks it
// desired STOPPED in m; parts are its partitions to fail over, nil with
// the topic's answer when there is nothing to do (an error, or stopped
// already). REQUIRES: m's lock held.
func (c *Plane) stopCheck(m *state.Mirror, name string) (code int16, msg string, parts []int32) {
	desired, ok := m.Topics[name]
	info, exists := c.parts.Info(name)
	switch {
	case !exists:
		return kerr.UnknownTopicOrPartition.Code, "no topic " + name, nil
	case !ok:
		return mirrorapi.ErrTopicNotInClusterMirror, fmt.Sprintf("topic %s is not in cluster mirror %s", name, m.Name), nil
	case desired == state.StateStopped && info.Mirror == "":
		return 0, "", nil
	}
	m.Topics[name] = state.StateStopped
	parts = make([]int32, info.Partitions)
	for p := range parts {
		parts[p] = int32(p)
	}
	return 0, "", parts
}

// topicsOp runs op on each named topic of a mirror (pause, resume,
// recover) and stores the mirror's desired states afterwards.
func (c *Plane) topicsOp(name string, topics []mirrorapi.MirrorTopicsRequestTopic,
	op func(m *state.Mirror, topic string, partitions int32, res *topicsResult)) topicsResult {
	var res topicsResult
	m, ok := c.mirrorFor(name, &res)
	if !ok {
		return res
	}
	for _, t := range topics {
		if _, in := m.Topics[t.TopicName]; !in {
			res.add(t.TopicName, mirrorapi.ErrTopicNotInClusterMirror, "topic %s is not in cluster mirror %s", t.TopicName, m.Name)
			continue
		}
		info, _ := c.parts.Info(t.TopicName)
		op(&m, t.TopicName, info.Partitions, &res)
	}
	if err := c.store.PutMirror(m); err != nil {
		res.fail(metadataWriteCode(err), "storing the mirror: %v", err)
	}
	return res
}

func (c *Plane) pause(r *mirrorapi.PauseMirrorTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*mirrorapi.PauseMirrorTopicsResponse)
	res := c.topicsOp(r.MirrorName, r.Topics, func(m *state.Mirror, topic string, partitions int32, res *topicsResult) {
		if c.beingStopped(m.Name, topic) {
			res.add(topic, mirrorapi.ErrMirrorTopicBeingStopped, "topic %s is being stopped", topic)
			return
		}
		switch m.Topics[topic] {
		case state.StateStopped:
			res.add(topic, mirrorapi.ErrMirrorTopicBeingStopped, "topic %s is stopped", topic)
			return
		case state.StateMirroring:
			// Each transition is persisted before its action: PAUSING,
			// then the fetcher removed, then PAUSED. A partition whose
			// PAUSING cannot be persisted keeps mirroring, and the topic
			// stays MIRRORING, so that the pause can be asked again.
			var failed error
			for p := int32(0); p < partitions; p++ {
				ps := c.partitionState(m.Name, topic, p)
				switch {
				case ps.State == state.StatePaused:
					continue // a pause asked again after a partial failure
				case aligningState(ps.State):
					// Not aligned yet: PAUSING is entered from
					// MIRRORING only (SPEC.md section 4), so the
					// partition stays in its alignment, without a
					// fetcher, and the resume aligns (alignment.go).
					c.stopFetcher(m.Name, topic, p)
					continue
				}
				if err := c.setState(ps, state.StatePausing, ""); err != nil {
					failed = fmt.Errorf("partition %d: %w", p, err)
					continue
				}
				c.stopFetcher(m.Name, topic, p)
				if err := c.setState(c.partitionState(m.Name, topic, p), state.StatePaused, ""); err != nil {
					// PAUSING without a fetcher: a restart finishes it.
					c.log.Warn("persisting PAUSED", "mirror", m.Name, "topic", topic, "partition", p, "err", err)
				}
			}
			if failed != nil {
				res.add(topic, metadataWriteCode(failed), "pausing %s: %v", topic, failed)
				return
			}
			m.Topics[topic] = state.StatePaused
		}
		res.add(topic, 0, "")
	})
	resp.ErrorCode, resp.ErrorMessage, resp.Topics = res.code, res.msg, res.topics
	return resp
}

func (c *Plane) resumeTopics(r *mirrorapi.ResumeMirrorTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*mirrorapi.ResumeMirrorTopicsResponse)
	res := c.topicsOp(r.MirrorName, r.Topics, func(m *state.Mirror, topic string, partitions int32, res *topicsResult) {
		switch m.Topics[topic] {
		case state.StateMirroring:
		case state.StatePaused:
			m.Topics[topic] = state.StateMirroring
			for p := int32(0); p < partitions; p++ {
				if ps := c.partitionState(m.Name, topic, p); aligningState(ps.State) {
					// Paused before its alignment finished: it aligns now.
					if err := c.startPartition(*m, topic, p); err != nil {
						c.log.Warn("resuming an aligning partition", "mirror", m.Name, "topic", topic, "partition", p, "err", err)
					}
					continue
				}
				// PAUSED -> MIRRORING: no re-alignment, from the log end.
				err := c.setState(c.partitionState(m.Name, topic, p), state.StateMirroring, "")
				var local partition.Follower
				if err == nil {
					local, err = c.parts.MirrorPartition(topic, p)
				}
				if err == nil {
					err = c.fm.StartPartition(m.Name, topic, p, local, fetch.StartResume)
				}
				if err != nil {
					res.fail(metadataWriteCode(err), "resuming %s-%d: %v", topic, p, err)
				}
			}
		default:
			res.add(topic, mirrorapi.ErrMirrorTopicNotPaused, "topic %s is not paused", topic)
			return
		}
		res.add(topic, 0, "")
	})
	resp.ErrorCode, resp.ErrorMessage, resp.Topics = res.code, res.msg, res.topics
	return resp
}

func (c *Plane) recover(r *mirrorapi.RecoverMirrorTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*mirrorapi.RecoverMirrorTopicsResponse)
	res := c.topicsOp(r.MirrorName, r.Topics, func(m *state.Mirror, topic string, partitions int32, res *topicsResult) {
		for p := int32(0); p < partitions; p++ {
			if c.partitionState(m.Name, topic, p).State == state.StateFailed {
				// A recover never cuts the copy: it resumes from the log
				// end and runs the fetcher's checks again (the source topic
				// is the one copied, the source still holds what we hold).
				c.forgetRetry(partitionKey{m.Name, topic, p})
				if err := c.startPartitionFrom(*m, topic, p, true); err != nil {
					res.fail(metadataWriteCode(err), "recovering %s-%d: %v", topic, p, err)
				}
			}
		}
		res.add(topic, 0, "")
	})
	resp.ErrorCode, resp.ErrorMessage, resp.Topics = res.code, res.msg, res.topics
	return resp
}

// delete removes a mirror whose topics are all stopped (SPEC.md section
// 2) or FAILED. The KIP requires stopped topics; a topic whose partitions
// are all FAILED (deleted or recreated at the source, a source cluster
// that changed) cannot mirror again, and a delete that left it read-only
// would orphan it: no mirror would remain to stop it, and nothing else
// makes a topic writable. So delete stops such topics first, with the
// failover's steps (open transactions aborted, producer state reset,
// then writable with the records it holds) and no final sync: the source
// no longer has what the copy came from. What decides is the partitions'
// persisted states, not the desired state, which still says MIRRORING
// for a failed topic; a partition in any other state (MIRRORING, PAUSED,
// aligning) refuses the delete, named in the message.
func (c *Plane) delete(r *mirrorapi.DeleteClusterMirrorRequest) kmsg.Response {
	resp := r.ResponseKind().(*mirrorapi.DeleteClusterMirrorResponse)
	fail := func(code int16, format string, args ...any) kmsg.Response {
		resp.ErrorCode, resp.ErrorMessage = code, strp(fmt.Sprintf(format, args...))
		return resp
	}
	m, err := c.store.GetMirror(r.MirrorName)
	if err != nil {
		return fail(mirrorapi.ErrUnknownClusterMirror, "no cluster mirror %s", r.MirrorName)
	}
	var failed []string
	for _, t := range sortedTopics(m.Topics) {
		info, ok := c.parts.Info(t)
		if !ok || info.Mirror != m.Name {
			continue // deleted here, or stopped and released
		}
		for p := int32(0); p < info.Partitions; p++ {
			switch st := c.partitionState(m.Name, t, p).State; st {
			case state.StateStopped, state.StateStopping:
			case state.StateFailed:
				if !slices.Contains(failed, t) {
					failed = append(failed, t)
				}
			default:
				return fail(mirrorapi.ErrClusterMirrorNotEmpty, "topic %s partition %d is %v: stop it first", t, p, st)
			}
		}
	}
	for _, t := range sortedTopics(m.Topics) {
		if info, ok := c.parts.Info(t); !ok || info.Mirror != m.Name {
			continue
		}
		// Finishes a stop a crash interrupted, and fails over the FAILED
		// topics.
		if code, msg := c.stopTopic(&m, t); code != 0 {
			return fail(code, "stopping topic %s before the delete: %s", t, msg)
		}
	}
	if len(failed) > 0 {
		c.log.Warn("deleting a mirror: its FAILED topics were stopped, writable now", "mirror", m.Name, "topics", failed)
	}
	// The sync's record goes first: the sync writes it under the
	// mirror's lock, held here, and a crash before DeleteMirror leaves a mirror whose
	// bindings count as created here, never a record a later mirror of
	// the same name would take for its own.
	if err := c.store.DeleteMirrorSync(m.Name); err != nil {
		return fail(metadataWriteCode(err), "deleting the mirror's sync record: %v", err)
	}
	c.removeFetchers(m.Name)
	c.dropSource(m.Name)
	if err := c.store.DeleteMirror(m.Name); err != nil {
		return fail(metadataWriteCode(err), "%v", err)
	}
	mc := c.ctl(m.Name) // a mirror created again under this name starts with none
	for key := range mc.retries {
		c.forgetRetry(key)
	}
	clear(mc.aligning)
	return resp
}

func (c *Plane) list(r *mirrorapi.ListClusterMirrorsRequest) kmsg.Response {
	resp := r.ResponseKind().(*mirrorapi.ListClusterMirrorsResponse)
	mirrors, err := c.store.Mirrors()
	if err != nil {
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp
	}
	for _, m := range mirrors {
		lm := mirrorapi.ListClusterMirrorsResponseMirror{MirrorName: m.Name,
			SourceBootstrap: m.Configs["bootstrap.servers"], SourceClusterID: strp(m.SourceClusterID)}
		var names []string
		for t, desired := range m.Topics {
			if desired == state.StateMirroring {
				lm.TopicCount++
			}
			if desired != state.StateStopped {
				names = append(names, t)
			}
		}
		sort.Strings(names)
		if r.IncludeTopicNames {
			lm.TopicNames = names
		}
		resp.Mirrors = append(resp.Mirrors, lm)
	}
	return resp
}

// lastMirrorEpochs answers a failback's lookups: for the mirrors of this
// node whose source is clusterID, the last mirror epoch of each partition
// asked for (-1 when unknown); the highest across mirrors wins.
func (c *Plane) lastMirrorEpochs(mirrors []state.Mirror, clusterID string,
	lookups []mirrorapi.DescribeClusterMirrorsLookup) []mirrorapi.DescribeClusterMirrorsLookupResult {
	var out []mirrorapi.DescribeClusterMirrorsLookupResult
	for _, lk := range lookups {
		res := mirrorapi.DescribeClusterMirrorsLookupResult{TopicID: lk.TopicID}
		for _, p := range lk.Partitions {
			lme := int32(-1)
			for _, m := range mirrors {
				if m.SourceClusterID != clusterID {
					continue
				}
				for t := range m.Topics {
					if info, ok := c.parts.Info(t); ok && info.ID == lk.TopicID {
						if ps, err := c.store.MirrorPartitionState(m.Name, t, p); err == nil {
							lme = max(lme, ps.LastMirrorEpoch)
						}
					}
				}
			}
			res.Partitions = append(res.Partitions, mirrorapi.DescribeClusterMirrorsLookupPartition{PartitionIndex: p, LastMirrorEpoch: lme})
		}
		out = append(out, res)
	}
	return out
}

// selectTopics resolves the local topics a Stop names, by name or pattern.
func (c *Plane) selectTopics(m state.Mirror, topics []mirrorapi.MirrorTopicsRequestTopic, patterns []string) ([]string, error) {
	res, err := pattern.CompileAll(patterns)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range topics {
		names = append(names, t.TopicName)
	}
	for t := range m.Topics {
		if pattern.MatchAny(res, t) && !slices.Contains(names, t) {
			names = append(names, t)
		}
	}
	sort.Strings(names)
	return names, nil
}
