package control

import (
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
	inc, _ := listConfig(m, "groups.include")
	exc, _ := listConfig(m, "groups.exclude")
	return syncgroups.Compile(inc, exc)
}
