package control

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
	syncgroups "github.com/kmirror/kmirror/sync/groups"

	"github.com/kmirror/kmirror/internal/topicid"
)

// The metadata sync (SPEC.md section 6): every
// mirror.metadata.refresh.interval.ms each mirror's source is read with
// kadm, on this loop (never on a network event loop), and this node is
// brought in step: the cluster-id guard first, then topics (deletion,
// growth, discovery), topic configs, group offsets and ACLs (each in its
// own file here or package under sync/). Each part's
// errors are counted by kind and logged once until that part succeeds
// again; none stops the loop or the other parts.
//
// A stopped topic belongs to this node: the sync changes nothing of it
// any more, neither its configs (topic_sync.go syncs MIRRORING topics
// only), nor its groups' offsets (groupDest), nor the ACLs on it
// (frozenACLs). Once every topic of a mirror is stopped (failedOver), no
// group offset or ACL sync runs for it at all. The ACL sync deletes only
// bindings it created itself, recorded per mirror in state.

// Sync error kinds, the kind label of kmirror_mirror_sync_errors_total.
const (
	SyncClusterID     = "cluster_id"
	SyncTopicMetadata = "topic_metadata"
	SyncTopicConfigs  = "topic_configs"
	SyncGroupOffsets  = "group_offsets"
	// SyncShareGroupOffsets is the share groups' start offsets (KIP-932).
	SyncShareGroupOffsets = "share_group_offsets"
	SyncACLs              = "acls"
	SyncClientQuotas      = "client_quotas"
)

// SyncKinds lists the sync error kinds in cycle order.
var SyncKinds = []string{SyncClusterID, SyncTopicMetadata, SyncTopicConfigs, SyncGroupOffsets, SyncShareGroupOffsets, SyncACLs,
	SyncClientQuotas}

// SyncStat is one mirror's metadata sync record.
type SyncStat struct {
	Mirror string
	// Cycles counts the cycles run; LastCycle is the last one's duration.
	Cycles    int64
	LastCycle time.Duration
	// Errors counts failed cycle parts by kind (SyncKinds).
	Errors map[string]int64
}

// syncRecord keeps the sync stats and which kinds are failing, so each
// failure is logged when it starts and when it ends, not every cycle.
type syncRecord struct {
	mu      sync.Mutex
	stats   map[string]*SyncStat
	failing map[[2]string]bool // {mirror, kind}
}

func (r *syncRecord) stat(mirror string) *SyncStat {
	if r.stats == nil {
		r.stats = map[string]*SyncStat{}
		r.failing = map[[2]string]bool{}
	}
	s := r.stats[mirror]
	if s == nil {
		s = &SyncStat{Mirror: mirror, Errors: map[string]int64{}}
		r.stats[mirror] = s
	}
	return s
}

// syncResult records one part of a cycle.
func (c *Plane) syncResult(mirror, kind string, err error) {
	r := &c.syncRec
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stat(mirror)
	key := [2]string{mirror, kind}
	switch {
	case err != nil:
		s.Errors[kind]++
		if !r.failing[key] {
			r.failing[key] = true
			c.log.Warn("metadata sync failed (logged once until it recovers)", "mirror", mirror, "kind", kind, "err", err)
		}
	case r.failing[key]:
		delete(r.failing, key)
		c.log.Info("metadata sync recovered", "mirror", mirror, "kind", kind)
	}
}

// SyncStats returns each mirror's sync record, by mirror name.
func (c *Plane) SyncStats() []SyncStat {
	r := &c.syncRec
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]SyncStat, 0, len(r.stats))
	for _, s := range r.stats {
		cp := *s
		cp.Errors = make(map[string]int64, len(s.Errors))
		for k, v := range s.Errors {
			cp.Errors[k] = v
		}
		out = append(out, cp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Mirror < out[j].Mirror })
	return out
}

// syncLoop runs SyncOnce every interval.
func (c *Plane) syncLoop() {
	defer c.wg.Done()
	if c.cfg.RefreshInterval < 0 {
		return // mirror.metadata.refresh.interval.ms=0: off
	}
	t := time.NewTicker(c.cfg.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		if c.b.IsController() { // one node syncs each mirror: the controller
			c.SyncOnce()
		}
	}
}

// SyncOnce runs one metadata sync cycle for every mirror.
func (c *Plane) SyncOnce() {
	mirrors, err := c.store.Mirrors()
	type job struct {
		m   state.Mirror
		src *kgo.Client
	}
	var jobs []job
	for _, m := range mirrors {
		cl, err := c.sourceClient(m)
		if err != nil {
			c.syncResult(m.Name, SyncClusterID, err)
			continue
		}
		jobs = append(jobs, job{m, cl})
	}
	if err != nil {
		c.log.Warn("metadata sync: reading mirrors", "err", err)
		return
	}
	for _, j := range jobs {
		if c.ctx.Err() != nil {
			return
		}
		c.syncMirror(j.m, j.src)
	}
}

// syncMirror runs one cycle for one mirror.
func (c *Plane) syncMirror(m state.Mirror, cl *kgo.Client) {
	src := kadm.NewClient(cl)
	began := time.Now()
	defer func() {
		c.syncRec.mu.Lock()
		s := c.syncRec.stat(m.Name)
		s.Cycles++
		s.LastCycle = time.Since(began)
		c.syncRec.mu.Unlock()
	}()
	if !c.clusterIDGuard(m, src) {
		return
	}
	metaErr, cfgErr := c.syncTopics(m, cl)
	c.syncResult(m.Name, SyncTopicMetadata, metaErr)
	c.syncResult(m.Name, SyncTopicConfigs, cfgErr)

	c.syncResult(m.Name, SyncGroupOffsets, c.syncGroups(m, src))
	c.syncResult(m.Name, SyncShareGroupOffsets, c.syncShareGroups(m, src))

	res, err := c.syncACLs(m, src)
	if res.Added+res.Removed > 0 {
		c.log.Info("metadata sync: ACLs", "mirror", m.Name, "added", res.Added, "removed", res.Removed)
	}
	c.syncResult(m.Name, SyncACLs, err)

	qres, err := c.syncQuotas(m, src)
	if qres.Set+qres.Removed > 0 {
		c.log.Info("metadata sync: client quotas", "mirror", m.Name, "set", qres.Set, "removed", qres.Removed,
			"kept_local", qres.Kept)
	}
	c.syncResult(m.Name, SyncClientQuotas, err)
}

// clusterIDGuard checks that the source is still the cluster the mirror
// was created against (SPEC.md section 6). A changed cluster id (the
// bootstrap servers now reach another cluster) stops every partition of
// the mirror in FAILED, non-retryable, until an operator recovers it. It
// reports whether the sync may go on.
func (c *Plane) clusterIDGuard(m state.Mirror, src *kadm.Client) bool {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
	meta, err := describeCluster(ctx, src)
	cancel()
	if err != nil {
		c.syncResult(m.Name, SyncClusterID, err)
		return false
	}
	if meta.clusterID == m.SourceClusterID {
		c.syncResult(m.Name, SyncClusterID, nil)
		return true
	}
	msg := "the source cluster id changed from " + m.SourceClusterID + " to " + meta.clusterID +
		": the bootstrap servers reach another cluster; mirroring stopped"
	c.syncResult(m.Name, SyncClusterID, errors.New(msg))
	defer c.lockMirror(m.Name)()
	states, err := c.store.MirrorPartitionStates(m.Name)
	if err != nil {
		return false
	}
	for _, ps := range states {
		c.failNonRetryable(ps, msg)
	}
	return false
}

// maxFinalSync bounds a stop's final sync (finalSync): the stop waits at
// most min(Config.SourceTimeout, maxFinalSync) for the source before it
// goes on without it. WHY 10 s: a stop is a failover, and in a disaster
// the source is down, so every second the stop waits for it is downtime
// of the topics being failed over; a live source answers the few round
// trips of the final sync (metadata, end offsets, groups, offsets,
// configs) well within it, even a slow one across regions; and it stays
// far below the request timeouts of admin clients (30 s and more, the
// CLI's --timeout 60 s), so the stop's answer, with its report, arrives
// before the caller gives up. A constant rather than a setting: the
// source timeout already shortens it (tests, impatient deployments), and
// waiting longer than this for a source that is not answering gains
// nothing a later --describe and a manual offset reset could not.
const maxFinalSync = 10 * time.Second

func (c *Plane) finalSyncTimeout() time.Duration { return min(c.cfg.SourceTimeout, maxFinalSync) }

// stopReport is what a stop answers for one topic: how its final sync
// went and where the copy of each partition ended (the kmirror additions
// of mirrorapi.MirrorTopicsResponseTopic).
type stopReport struct {
	status int8 // a mirrorapi.FinalSync value
	msg    string
	parts  []mirrorapi.StopMirrorTopicsResponsePartition
}

// The final sync is the first half of a stop of topics (Cluster Linking's
// "promote"): finalSyncBegin makes their copies final and then
// finalSyncEnd, if the source answers within finalSyncTimeout, brings
// their group offsets and topic configs in step one last time; the caller
// then runs the stop proper (stopPartitions: markers, STOPPED, writable). The
// order matters:
//
//  1. each partition's last source offset the fetcher saw is taken, and
//     its fetcher is removed: from then on the local log end is final;
//  2. the source's end offsets are read: against the final log end, they
//     say how far behind the copy is (the stop's report);
//  3. configs are copied (before the topic takes writes, so a retention
//     or compaction setting of the source applies from the first one);
//  4. group offsets are synced, clamped to the final log end (see
//     sync/groups), so a consumer that committed at the source just
//     before the stop resumes here where it stopped, or at the end of
//     what was copied, and never past it; synced before 1, the clamp
//     would use an end the fetcher still moves, and after the stop the
//     topic is writable, so the end could already hold records of this
//     node's own that a source offset must not point into. A group
//     whose coordinator here cannot be asked within the bound is named
//     in the report (FinalSyncFailed), never skipped in silence.
//
// A source that does not answer (or is another cluster now) skips 2-4
// and the stop goes on: the report says so, with the last source offsets
// the fetcher saw. A topic the source holds under another topic id
// (deleted and recreated there) is not synced: its offsets are another
// topic's.
//
// Steps 2-4 read the source, so finalSyncEnd runs without the mirror's
// lock (locks.go): the topics are marked as being stopped meanwhile
// (mirrorCtl.stopping), which keeps every other path from restarting
// their fetchers or changing them.

// finalSyncBegin is step 1, and marks the topics as being stopped; the
// stop clears the marks (doneStopping). It returns the reports and the
// topics' ids for finalSyncEnd.
// REQUIRES: m's lock held; topics are mirror topics of m.
func (c *Plane) finalSyncBegin(m state.Mirror, topics []string) (map[string]*stopReport, map[string][16]byte) {
	reps := make(map[string]*stopReport, len(topics))
	ids := map[string][16]byte{}
	stopping := c.ctl(m.Name).stopping
	parts := make(map[string][]int32, len(topics))
	for _, t := range topics {
		stopping[t] = true
		info, _ := c.parts.Info(t)
		ids[t] = info.ID
		rep := &stopReport{status: mirrorapi.FinalSyncDone}
		for p := int32(0); p < info.Partitions; p++ {
			sp := mirrorapi.StopMirrorTopicsResponsePartition{PartitionIndex: p, SourceOffset: -1, SourceOffsetMillis: -1,
				DestinationOffset: -1, Lag: -1}
			if st, err := c.fm.Status(m.Name, t, p); err == nil && st.SourceHighWatermark >= 0 && !st.SourceUpdated.IsZero() {
				sp.SourceOffset, sp.SourceOffsetMillis = st.SourceHighWatermark, st.SourceUpdated.UnixMilli()
			} else if ps := c.partitionState(m.Name, t, p); !ps.SourceOffsetTime.IsZero() {
				// No live fetcher (a FAILED partition): the last one persisted.
				sp.SourceOffset, sp.SourceOffsetMillis = ps.SourceOffset, ps.SourceOffsetTime.UnixMilli()
			}
			parts[t] = append(parts[t], p)
			rep.parts = append(rep.parts, sp)
		}
		reps[t] = rep
	}
	// One write for all the last source offsets (a write per partition
	// cost a stop of 1,000 partitions half a second); the log ends are
	// final only once the fetchers are gone.
	c.stopFetchers(m.Name, parts)
	for t, rep := range reps {
		for i := range rep.parts {
			if local, err := c.parts.MirrorPartition(t, rep.parts[i].PartitionIndex); err == nil {
				rep.parts[i].DestinationOffset = local.LogEndOffset()
			}
		}
	}
	return reps, ids
}

// finalSyncEnd is steps 2-4, within finalSyncTimeout. It takes no lock:
// the topics are marked as being stopped (finalSyncBegin).
func (c *Plane) finalSyncEnd(m state.Mirror, topics []string, ids map[string][16]byte, reps map[string]*stopReport) {
	if len(topics) > 0 {
		ctx, cancel := context.WithTimeout(c.ctx, c.finalSyncTimeout())
		c.finalSyncFrom(ctx, m, topics, ids, reps)
		cancel()
	}
	for _, rep := range reps {
		for i, sp := range rep.parts {
			if sp.SourceOffset >= 0 && sp.DestinationOffset >= 0 {
				rep.parts[i].Lag = max(sp.SourceOffset-sp.DestinationOffset, 0)
			}
		}
	}
}

// finalSyncFrom runs steps 2-4 within ctx and notes in reps what failed.
func (c *Plane) finalSyncFrom(ctx context.Context, m state.Mirror, topics []string, ids map[string][16]byte,
	reps map[string]*stopReport) {
	problems := map[string][]string{}
	note := func(t, format string, args ...any) { problems[t] = append(problems[t], fmt.Sprintf(format, args...)) }
	skipAll := func(format string, args ...any) {
		for _, rep := range reps {
			rep.status, rep.msg = mirrorapi.FinalSyncSkipped, fmt.Sprintf(format, args...)
		}
	}
	// A probe first: a source that refuses connections (the usual
	// disaster: its brokers are down) fails it at once, where the
	// client's requests would retry their dials until ctx ends, holding
	// the failover up for the whole bound.
	fc, err := fetchConfig(m.Name, m.Configs)
	if err == nil {
		err = fetch.Probe(ctx, fc)
	}
	if err != nil {
		skipAll("%v: %v", errSourceUnreachable, err)
		return
	}
	cl, err := c.sourceClient(m)
	if err != nil {
		skipAll("no source client: %v", err)
		return
	}
	adm := kadm.NewClient(cl)
	meta, err := describeCluster(ctx, adm)
	switch {
	case err != nil:
		skipAll("%v within %v: %v", errSourceUnreachable, c.finalSyncTimeout(), err)
		return
	case m.SourceClusterID != "" && meta.clusterID != m.SourceClusterID:
		skipAll("the source is another cluster now (id %s, mirrored %s)", meta.clusterID, m.SourceClusterID)
		return
	}
	listed, err := listSourceTopics(ctx, cl, topics)
	if err != nil {
		skipAll("%v: reading the source topics: %v", errSourceUnreachable, err)
		return
	}
	var synced []string
	for _, t := range topics {
		st, ok := listed[t]
		switch {
		case !ok || st.Err != nil:
			msg := "the source has no topic " + t
			if st.Err != nil {
				msg += ": " + st.Err.Error()
			}
			reps[t].status, reps[t].msg = mirrorapi.FinalSyncSkipped, msg
		case st.ID != ([16]byte{}) && st.ID != ids[t]:
			reps[t].status, reps[t].msg = mirrorapi.FinalSyncSkipped, fmt.Sprintf("topic %s at the source is another topic"+
				" (id %s, mirrored %s): not synced", t, topicid.String(st.ID), topicid.String(ids[t]))
		default:
			synced = append(synced, t)
		}
	}
	if len(synced) == 0 {
		return
	}
	now := time.Now().UnixMilli()
	ends, err := adm.ListEndOffsets(ctx, synced...)
	if err != nil {
		for _, t := range synced {
			note(t, "source end offsets: %v", err)
		}
	}
	ends.Each(func(o kadm.ListedOffset) {
		rep := reps[o.Topic]
		switch {
		case rep == nil || o.Partition < 0 || int(o.Partition) >= len(rep.parts):
		case o.Err != nil:
			note(o.Topic, "source end offset of partition %d: %v", o.Partition, o.Err)
		default:
			rep.parts[o.Partition].SourceOffset, rep.parts[o.Partition].SourceOffsetMillis = o.Offset, now
		}
	})
	only := make(map[string]bool, len(synced))
	for _, t := range synced {
		only[t] = true
	}
	// Configs before group offsets: the group part may wait its whole
	// bound for a coordinator that is moving (sync/groups), and must not
	// leave the configs no time.
	configs, cfgErr := sourceTopicConfigs(ctx, adm, m, synced)
	for _, t := range synced {
		set, ok := configs[t]
		if !ok {
			note(t, "configs: not described: %v", cfgErr)
		} else if err := c.applyTopicConfigs(t, set); err != nil {
			note(t, "configs: %v", err)
		}
	}
	f, err := groupFilter(m)
	if err == nil {
		_, err = syncgroups.Sync(ctx, adm, groupDest{c: c, mirror: m.Name, final: only}, f)
	}
	if err != nil {
		for _, t := range synced {
			note(t, "group offsets: %v", err)
		}
	}
	if f, err := groupFilter(m); err == nil && c.b.ShareGroups() {
		if _, err := syncgroups.SyncShare(ctx, adm, groupDest{c: c, mirror: m.Name, final: only}, f); err != nil {
			for _, t := range synced {
				note(t, "share group start offsets: %v", err)
			}
		}
	}
	for t, ps := range problems {
		reps[t].status, reps[t].msg = mirrorapi.FinalSyncFailed, strings.Join(ps, "; ")
	}
}

// logStops logs how each topic a Stop failed over went, once its report
// is final (awaitStops: the ends its leaders persisted), loudly when it
// left records behind at the source. Topics it did not stop (an error,
// or stopped already: no partitions in the report) are not logged.
func (c *Plane) logStops(mirror string, resp *mirrorapi.StopMirrorTopicsResponse) {
	for _, rt := range resp.Topics {
		if rt.ErrorCode == kerr.RequestTimedOut.Code && len(rt.Partitions) > 0 && rt.ErrorMessage != nil {
			// awaitStops gave up waiting: the leaders go on.
			c.log.Warn("topic stop answered before every partition was STOPPED", "mirror", mirror, "topic", rt.Name,
				"reason", *rt.ErrorMessage)
			continue
		}
		if rt.ErrorCode != 0 || len(rt.Partitions) == 0 {
			continue
		}
		var behind, unknown int64
		for _, p := range rt.Partitions {
			if p.Lag < 0 {
				unknown++
			}
			behind += max(p.Lag, 0)
		}
		reason := ""
		if rt.FinalSyncMessage != nil {
			reason = *rt.FinalSyncMessage
		}
		args := []any{"mirror", mirror, "topic", rt.Name, "final_sync", finalSyncName(rt.FinalSync), "reason", reason,
			"records_behind", behind, "partitions_source_offset_unknown", unknown}
		if behind > 0 || unknown > 0 || rt.FinalSync != mirrorapi.FinalSyncDone {
			c.log.Warn("topic stopped, the copy may lack records the source holds", args...)
			continue
		}
		c.log.Info("topic stopped after a final sync, nothing left behind", args...)
	}
}

func finalSyncName(s int8) string {
	switch s {
	case mirrorapi.FinalSyncDone:
		return "done"
	case mirrorapi.FinalSyncSkipped:
		return "skipped"
	case mirrorapi.FinalSyncFailed:
		return "failed"
	}
	return "unknown"
}

// resumeUnstopped restarts the fetchers of a topic's partitions that a
// failed stop left MIRRORING. REQUIRES: the mirror's lock held.
func (c *Plane) resumeUnstopped(m state.Mirror, topic string) {
	info, ok := c.parts.Info(topic)
	if !ok || info.Mirror != m.Name {
		return
	}
	for p := int32(0); p < info.Partitions; p++ {
		if ps := c.partitionState(m.Name, topic, p); fetchingState(ps.State) {
			if err := c.startPartition(m, topic, p); err != nil {
				c.log.Warn("restarting a partition a failed stop left", "mirror", m.Name, "topic", topic, "partition", p, "err", err)
			}
		}
	}
}
