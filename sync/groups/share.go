package groups

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Share groups (KIP-932) are synced by their start offsets (SPSO), not by
// committed offsets (KIP-1279): the source's, read with
// DescribeShareGroupOffsets, are set here with AlterShareGroupOffsets,
// which creates the group here if need be. The same filters apply and the
// same clamp into the local log. A share group with members here is
// skipped (its coordinator refuses the alter: NON_EMPTY_GROUP, the moment
// it matters); a name that is a classic or consumer group here (or a
// share group here that is classic at the source, whose commit the
// classic sync reports) fails for that group alone, named in the error.
// A source that serves no share groups (before Kafka 4.1, ListGroups
// without group types) has none to sync.

// ShareDest is this node as the share group sync sees it.
type ShareDest interface {
	// Bounds is Dest's.
	Bounds(topic string, partition int32) (start, end int64, ok bool)
	// AlterShareOffsets sets group's start offsets. ErrShareGroupActive
	// when the group has members here.
	AlterShareOffsets(ctx context.Context, group string, offs []ShareStartOffset) error
}

// ErrShareGroupActive is AlterShareOffsets' error for a share group with
// members here.
var ErrShareGroupActive = errors.New("the share group has members here")

// ShareStartOffset is one share partition's start offset.
type ShareStartOffset struct {
	Topic       string
	Partition   int32
	StartOffset int64
}

// SyncShare copies the source's share group start offsets once.
func SyncShare(ctx context.Context, src *kadm.Client, dst ShareDest, f Filter) (Result, error) {
	var res Result
	listed, err := src.ListGroupsByType(ctx, []string{"share"})
	if err != nil {
		return res, fmt.Errorf("listing source share groups: %w", err)
	}
	var names []string
	for _, g := range listed {
		if g.GroupType == "share" && f.Match(g.Group) {
			names = append(names, g.Group)
		}
	}
	if len(names) == 0 {
		return res, nil
	}
	sort.Strings(names)
	described, err := src.DescribeShareGroupOffsets(ctx, names...)
	if err != nil && len(described) == 0 {
		return res, fmt.Errorf("describing source share group offsets: %w", err)
	}
	return eachGroup(names, func(group string) groupOutcome { return syncShareGroup(ctx, dst, group, described) })
}

// syncShareGroup sets group's source start offsets here, clamped.
func syncShareGroup(ctx context.Context, dst ShareDest, group string, all kadm.DescribedShareGroupsOffsets) groupOutcome {
	d, ok := all[group]
	switch {
	case !ok:
		return groupOutcome{err: fmt.Errorf("describing share group offsets of %s: no answer", group)}
	case d.Err != nil:
		return groupOutcome{err: fmt.Errorf("describing share group offsets of %s: %w", group, d.Err)}
	}
	var out groupOutcome
	var offs []ShareStartOffset
	for topic, ps := range d.Offsets {
		for p, o := range ps {
			if o.Err != nil || o.StartOffset < 0 {
				continue // no start offset at the source: nothing to carry
			}
			start, end, ok := dst.Bounds(topic, p)
			if !ok {
				continue
			}
			c, clamped := Clamp(Offset{Topic: topic, Partition: p, Offset: o.StartOffset}, start, end)
			if clamped {
				out.clamped++
			}
			offs = append(offs, ShareStartOffset{Topic: topic, Partition: p, StartOffset: c.Offset})
		}
	}
	if len(offs) == 0 {
		return groupOutcome{}
	}
	sort.Slice(offs, func(i, j int) bool {
		if offs[i].Topic != offs[j].Topic {
			return offs[i].Topic < offs[j].Topic
		}
		return offs[i].Partition < offs[j].Partition
	})
	switch err := dst.AlterShareOffsets(ctx, group, offs); {
	case errors.Is(err, ErrShareGroupActive):
		return groupOutcome{active: true}
	case err != nil:
		return groupOutcome{err: fmt.Errorf("setting share group start offsets of %s: %w", group, err)}
	}
	out.offsets = len(offs)
	return out
}
