package control

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/state"
	syncgroups "github.com/kmirror/kmirror/sync/groups"
)

// groupDest is this node as a mirror's group offset sync sees it.
type groupDest struct {
	b      *broker.Broker
	mirror string
}

func (d groupDest) GroupActive(group string) bool { return d.b.GroupActive(group) }

// Bounds answers for partitions this mirror mirrors: its log start and
// high watermark (what a consumer can read).
func (d groupDest) Bounds(topic string, partition int32) (int64, int64, bool) {
	info, ok := d.b.Topic(topic)
	if !ok || info.Mirror != d.mirror {
		return 0, 0, false
	}
	p, err := d.b.MirrorPartition(topic, partition)
	if err != nil {
		return 0, 0, false
	}
	l := p.Log()
	return l.LogStartOffset(), l.HighWatermark(), true
}

func (d groupDest) Commit(group string, offs []syncgroups.Offset) error {
	out := make([]broker.GroupOffset, len(offs))
	for i, o := range offs {
		out[i] = broker.GroupOffset(o)
	}
	return d.b.CommitGroupOffsets(group, out)
}

// groupFilter reads a mirror's groups.include and groups.exclude (SPEC.md
// section 3: include defaults to every group, exclude to none).
func groupFilter(m state.Mirror) (syncgroups.Filter, error) {
	get := func(name string) []string {
		if v, ok := m.Configs["mirror."+name]; ok {
			return splitList(v)
		}
		return splitList(m.Configs[name])
	}
	return syncgroups.Compile(get("groups.include"), get("groups.exclude"))
}

// syncLoop runs each mirror's metadata sync every interval
// (mirror.metadata.refresh.interval.ms). Today it copies group offsets;
// topic configs, ACLs and the cluster-id guard are still to come. A
// cycle's errors are logged, never fatal to the loop.
func (c *Controller) syncLoop() {
	defer c.wg.Done()
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
		src *kadm.Client
	}
	var jobs []job
	for _, m := range mirrors {
		if adm, err := c.source(m); err == nil {
			jobs = append(jobs, job{m, adm})
		}
	}
	c.mu.Unlock()
	if err != nil {
		c.log.Warn("metadata sync: reading mirrors", "err", err)
		return
	}
	for _, j := range jobs {
		if !c.clusterIDGuard(j.m, j.src) {
			continue
		}
		f, err := groupFilter(j.m)
		if err != nil {
			c.log.Warn("metadata sync: bad group filter", "mirror", j.m.Name, "err", err)
			continue
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
		res, err := syncgroups.Sync(ctx, j.src, groupDest{b: c.b, mirror: j.m.Name}, f)
		cancel()
		if err != nil {
			c.log.Warn("metadata sync: group offsets", "mirror", j.m.Name, "err", err)
		}
		c.log.Debug("metadata sync: group offsets", "mirror", j.m.Name, "groups", res.Groups,
			"offsets", res.Offsets, "clamped", res.Clamped, "skipped_active", res.SkippedActive)
	}
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
		c.log.Warn("metadata sync: source unreachable", "mirror", m.Name, "err", err)
		return false
	}
	if meta.clusterID == m.SourceClusterID {
		return true
	}
	msg := "the source cluster id changed from " + m.SourceClusterID + " to " + meta.clusterID +
		": the bootstrap servers reach another cluster; mirroring stopped"
	c.log.Error("metadata sync: source cluster id changed", "mirror", m.Name,
		"want", m.SourceClusterID, "got", meta.clusterID)
	c.mu.Lock()
	defer c.mu.Unlock()
	states, err := c.store.MirrorPartitionStates(m.Name)
	if err != nil {
		return false
	}
	for _, ps := range states {
		if ps.State == state.StateStopped || ps.State == state.StateFailed && ps.RetryAttempt < 0 {
			continue
		}
		_ = c.fm.StopPartition(m.Name, ps.Topic, ps.Partition)
		ps.RetryAttempt = -1
		if err := c.setState(ps, state.StateFailed, msg); err != nil {
			c.log.Warn("marking a partition failed", "mirror", m.Name, "topic", ps.Topic, "err", err)
		}
	}
	return false
}
