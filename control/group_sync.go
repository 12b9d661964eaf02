package control

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/state"
	syncgroups "github.com/kmirror/kmirror/sync/groups"
)

// groupDest is this node as a mirror's group offset sync sees it. Only
// partitions of topics the mirror still mirrors (MIRRORING, PAUSED or
// FAILED: read-only here) take offsets: a stopped topic belongs to this
// node, and its consumers' commits here must not be overwritten by the
// source's.
type groupDest struct {
	c      *Plane
	mirror string
	// final is set for the last sync of a stop (sync.go): only the topics
	// it holds take offsets, and Commit takes no lock: they are being
	// stopped, so no other path changes them (locks.go).
	final map[string]bool
}

func (d groupDest) GroupActive(ctx context.Context, group string) (bool, error) {
	return d.c.b.GroupActive(ctx, group)
}

// Bounds answers for partitions this mirror mirrors: its log start and
// high watermark (what a consumer can read).
func (d groupDest) Bounds(topic string, partition int32) (int64, int64, bool) {
	if d.final != nil && !d.final[topic] {
		return 0, 0, false
	}
	info, ok := d.c.parts.Info(topic)
	if !ok || info.Mirror != d.mirror {
		return 0, 0, false
	}
	p, err := d.c.parts.MirrorPartition(topic, partition)
	if err != nil {
		return 0, 0, false
	}
	return p.LogStartOffset(), p.HighWatermark(), true
}

// Commit commits offs for group. In the periodic sync it takes the
// mirror's lock and
// drops the offsets of topics stopped since Bounds answered for them: the
// source was read without the lock, and a stop in between has made the
// topic this node's.
func (d groupDest) Commit(ctx context.Context, group string, offs []syncgroups.Offset) error {
	if d.final == nil {
		defer d.c.lockMirror(d.mirror)()
		mirrored := d.mirroredNow()
		if offs = slices.DeleteFunc(offs, func(o syncgroups.Offset) bool { return !mirrored(o.Topic) }); len(offs) == 0 {
			return nil
		}
	}
	out := make([]state.GroupOffset, len(offs))
	for i, o := range offs {
		out[i] = state.GroupOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch,
			Metadata: o.Metadata}
	}
	return d.c.b.CommitGroupOffsets(ctx, group, out)
}

// AlterShareOffsets sets a share group's start offsets, dropping the
// topics stopped meanwhile as Commit does.
func (d groupDest) AlterShareOffsets(ctx context.Context, group string, offs []syncgroups.ShareStartOffset) error {
	if d.final == nil {
		defer d.c.lockMirror(d.mirror)()
		mirrored := d.mirroredNow()
		if offs = slices.DeleteFunc(offs, func(o syncgroups.ShareStartOffset) bool { return !mirrored(o.Topic) }); len(offs) == 0 {
			return nil
		}
	}
	set := map[string]map[int32]int64{}
	for _, o := range offs {
		if set[o.Topic] == nil {
			set[o.Topic] = map[int32]int64{}
		}
		set[o.Topic][o.Partition] = o.StartOffset
	}
	if err := d.c.b.AlterShareStartOffsets(ctx, group, set); errors.Is(err, broker.ErrShareGroupActive) {
		return syncgroups.ErrShareGroupActive
	} else if err != nil {
		return err
	}
	return nil
}

// mirroredNow reports, per topic, whether the mirror still mirrors it
// (not stopped, nor being stopped, since the source was read without the
// lock); none if the mirror was deleted meanwhile. REQUIRES: the
// mirror's lock held.
func (d groupDest) mirroredNow() func(topic string) bool {
	cur, err := d.c.store.GetMirror(d.mirror)
	if err != nil {
		return func(string) bool { return false } // deleted: nothing of it is synced any more
	}
	return func(topic string) bool {
		desired, in := cur.Topics[topic]
		if !in || desired == state.StateStopped || d.c.beingStopped(d.mirror, topic) {
			return false
		}
		info, ok := d.c.parts.Info(topic)
		return ok && info.Mirror == d.mirror
	}
}

// groupFilter reads a mirror's groups.include and groups.exclude (SPEC.md
// section 3: include defaults to every group, exclude to none).
func groupFilter(m state.Mirror) (syncgroups.Filter, error) {
	inc, _ := listConfig(m, "groups.include")
	exc, _ := listConfig(m, "groups.exclude")
	return syncgroups.Compile(inc, exc)
}

// syncGroups runs the group offset part of one cycle for m and, when it
// succeeds, records when (LastGroupSync). A mirror that has failed over
// is not synced any more.
func (c *Plane) syncGroups(m state.Mirror, src *kadm.Client) error {
	f, err := groupFilter(m)
	if err != nil || failedOver(m) {
		return err
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
	res, err := syncgroups.Sync(ctx, src, groupDest{c: c, mirror: m.Name}, f)
	cancel()
	c.log.Debug("metadata sync: group offsets", "mirror", m.Name, "groups", res.Groups,
		"offsets", res.Offsets, "clamped", res.Clamped, "skipped_active", res.SkippedActive)
	if err != nil {
		return err
	}
	// The offsets copied were committed at the source no earlier than
	// began: that is the time describe shows.
	if err := c.store.PutLastGroupSync(m.Name, began); err != nil && c.ctx.Err() == nil {
		c.log.Warn("recording the last group offset sync", "mirror", m.Name, "err", err)
	}
	return nil
}

// syncShareGroups runs the share group part of one cycle for m (share
// groups on here: "share" in group.coordinator.rebalance.protocols).
func (c *Plane) syncShareGroups(m state.Mirror, src *kadm.Client) error {
	f, err := groupFilter(m)
	if err != nil || failedOver(m) || !c.b.ShareGroups() {
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SourceTimeout)
	defer cancel()
	res, err := syncgroups.SyncShare(ctx, src, groupDest{c: c, mirror: m.Name}, f)
	c.log.Debug("metadata sync: share group start offsets", "mirror", m.Name, "groups", res.Groups,
		"offsets", res.Offsets, "clamped", res.Clamped, "skipped_active", res.SkippedActive)
	return err
}

// LastGroupSync returns when mirror's group offsets were last synced from
// its source by a periodic cycle that succeeded; the zero time if never.
// It is persisted (state), so it survives a restart: the offsets here
// are as old as it says whether or not the node restarted since, and an
// operator judging a failover needs that age, not "never" after every
// restart. A stop's final sync (which syncs only the stopped topics)
// reports itself in the stop's answer and is not counted here.
func (c *Plane) LastGroupSync(mirror string) time.Time {
	at, err := c.store.LastGroupSync(mirror)
	if err != nil {
		c.log.Warn("reading the last group offset sync", "mirror", mirror, "err", err)
	}
	return at
}
