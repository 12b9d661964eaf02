// Package groups syncs consumer group offsets from a mirror's source to
// this node (SPEC.md section 6), so consumers fail over without offset
// translation: they resume at the offsets their group committed at the
// source, which are valid here because a mirror keeps the source's offsets.
//
// A group is copied unless it is filtered out (groups.include and
// groups.exclude, full-match regexes, exclude wins) or active here (it has
// members: after a failover the destination's own commits win). Each
// offset is clamped into what the local partition holds:
// max(local log start, min(source offset, local log end)). An offset that
// needed no clamp keeps its leader epoch and metadata; a clamped one gets
// epoch -1 and no metadata. Partitions not mirrored here are skipped.
//
// The package talks to the source with kadm and to this node through the
// Dest interface; it runs on the control plane's loop, never on an event
// loop. It is one of the sync/ packages, with sync/acls and sync/quotas;
// the topic and config part and the cluster-id guard are control's own
// (they are state transitions control owns).
package groups

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/pattern"
)

// Dest is this node, as the sync sees it.
type Dest interface {
	// GroupActive reports whether group has members here.
	GroupActive(group string) bool
	// Bounds returns a mirrored partition's local log start and end; ok is
	// false when topic/partition is not mirrored here by this mirror.
	Bounds(topic string, partition int32) (start, end int64, ok bool)
	// Commit stores group's offsets (a simple commit).
	Commit(group string, offs []Offset) error
}

// Offset is one committed offset.
type Offset struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
}

// Filter selects the groups to copy.
type Filter struct {
	Include, Exclude []*regexp.Regexp
}

// Compile builds a Filter from comma lists of full-match regexes; an empty
// include list means every group (the default groups.include is ".*").
func Compile(include, exclude []string) (Filter, error) {
	var f Filter
	for _, p := range include {
		re, err := pattern.Compile(p)
		if err != nil {
			return f, fmt.Errorf("groups.include %q: %w", p, err)
		}
		f.Include = append(f.Include, re)
	}
	for _, p := range exclude {
		re, err := pattern.Compile(p)
		if err != nil {
			return f, fmt.Errorf("groups.exclude %q: %w", p, err)
		}
		f.Exclude = append(f.Exclude, re)
	}
	return f, nil
}

// Match reports whether the filter selects group.
func (f Filter) Match(group string) bool {
	if pattern.MatchAny(f.Exclude, group) {
		return false
	}
	return len(f.Include) == 0 || pattern.MatchAny(f.Include, group)
}

// Result counts what a sync did.
type Result struct {
	Groups        int // groups whose offsets were committed here
	SkippedActive int // groups skipped because they have members here
	Offsets       int // offsets committed
	Clamped       int // of which clamped into the local log
}

// Clamp places a source offset into the local log [start, end].
func Clamp(o Offset, start, end int64) (Offset, bool) {
	v := max(start, min(o.Offset, end))
	if v == o.Offset {
		return o, false
	}
	return Offset{Topic: o.Topic, Partition: o.Partition, Offset: v, LeaderEpoch: -1}, true
}

// Sync copies the source's consumer group offsets once.
func Sync(ctx context.Context, src *kadm.Client, dst Dest, f Filter) (Result, error) {
	var res Result
	listed, err := src.ListGroups(ctx)
	if err != nil {
		return res, fmt.Errorf("listing source groups: %w", err)
	}
	var names []string
	for _, g := range listed {
		if (g.ProtocolType == "consumer" || g.ProtocolType == "") && f.Match(g.Group) {
			names = append(names, g.Group)
		}
	}
	sort.Strings(names)
	var fetch []string
	for _, group := range names {
		if dst.GroupActive(group) {
			res.SkippedActive++
			continue
		}
		fetch = append(fetch, group)
	}
	// One OffsetFetch for all groups (v8+, per coordinator; kadm splits
	// per group for older sources): a cycle over 100 groups is one round
	// trip, not 100.
	all := src.FetchManyOffsets(ctx, fetch...)
	var errs []error
	for _, group := range fetch {
		fetched, ok := all[group]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("fetching offsets of %s: no answer", group))
			continue
		case fetched.Err != nil:
			errs = append(errs, fmt.Errorf("fetching offsets of %s: %w", group, fetched.Err))
			continue
		}
		// Checked again just before the commit: a consumer may have
		// joined here while the offsets were fetched.
		if dst.GroupActive(group) {
			res.SkippedActive++
			continue
		}
		var offs []Offset
		fetched.Fetched.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil || o.At < 0 {
				return
			}
			start, end, ok := dst.Bounds(o.Topic, o.Partition)
			if !ok {
				return
			}
			c, clamped := Clamp(Offset{Topic: o.Topic, Partition: o.Partition, Offset: o.At,
				LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}, start, end)
			if clamped {
				res.Clamped++
			}
			offs = append(offs, c)
		})
		if len(offs) == 0 {
			continue
		}
		sort.Slice(offs, func(i, j int) bool {
			if offs[i].Topic != offs[j].Topic {
				return offs[i].Topic < offs[j].Topic
			}
			return offs[i].Partition < offs[j].Partition
		})
		if err := dst.Commit(group, offs); err != nil {
			errs = append(errs, fmt.Errorf("committing offsets of %s: %w", group, err))
			continue
		}
		res.Groups++
		res.Offsets += len(offs)
	}
	return res, errors.Join(errs...)
}
