package control

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/state"
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
	SyncACLs          = "acls"
)

// SyncKinds lists the sync error kinds in cycle order.
var SyncKinds = []string{SyncClusterID, SyncTopicMetadata, SyncTopicConfigs, SyncGroupOffsets, SyncACLs}

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
func (c *Controller) syncResult(mirror, kind string, err error) {
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
func (c *Controller) SyncStats() []SyncStat {
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
func (c *Controller) syncLoop() {
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
		c.SyncOnce()
	}
}

// SyncOnce runs one metadata sync cycle for every mirror.
func (c *Controller) SyncOnce() {
	c.mu.Lock()
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
	c.mu.Unlock()
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
func (c *Controller) syncMirror(m state.Mirror, cl *kgo.Client) {
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

	res, err := c.syncACLs(m, src)
	if res.Added+res.Removed > 0 {
		c.log.Info("metadata sync: ACLs", "mirror", m.Name, "added", res.Added, "removed", res.Removed)
	}
	c.syncResult(m.Name, SyncACLs, err)
}

// clusterIDGuard checks that the source is still the cluster the mirror
// was created against (SPEC.md section 6). A changed cluster id (the
// bootstrap servers now reach another cluster) stops every partition of
// the mirror in FAILED, non-retryable, until an operator recovers it. It
// reports whether the sync may go on.
func (c *Controller) clusterIDGuard(m state.Mirror, src *kadm.Client) bool {
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
	c.mu.Lock()
	defer c.mu.Unlock()
	states, err := c.store.MirrorPartitionStates(m.Name)
	if err != nil {
		return false
	}
	for _, ps := range states {
		c.failNonRetryable(ps, msg)
	}
	return false
}
