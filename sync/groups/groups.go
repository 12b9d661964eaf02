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
// epoch -1 and no metadata. Partitions not mirrored here are skipped. A
// group whose coordinator here cannot be asked is skipped too, and named
// in the sync's error: never overwritten, never left out in silence.
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
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/pattern"
)

// Dest is this node, as the sync sees it. Sync calls it for all groups
// at once: Dest bounds its own requests in flight.
type Dest interface {
	// GroupActive reports whether group has members here. An error
	// (its coordinator could not be asked within ctx) skips the group
	// and is reported: the sync never overwrites offsets it could not
	// prove are unused, and never hides that it left a group out.
	GroupActive(ctx context.Context, group string) (bool, error)
	// Bounds returns a mirrored partition's local log start and end; ok is
	// false when topic/partition is not mirrored here by this mirror.
	Bounds(topic string, partition int32) (start, end int64, ok bool)
	// Commit stores group's offsets (a simple commit).
	Commit(ctx context.Context, group string, offs []Offset) error
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
	// One OffsetFetch for all groups (v8+, per coordinator; kadm splits
	// per group for older sources): a cycle over 100 groups is one round
	// trip, not 100. Groups active here are fetched too: which ones are
	// is asked just before each commit, the moment it matters.
	all := src.FetchManyOffsets(ctx, names...)
	// Each group is then checked and committed at its coordinator here,
	// all at once (Dest bounds its own requests in flight): a coordinator
	// that cannot be asked holds up its own groups until ctx ends, not
	// the groups after it in the list (a failover's final sync has one
	// bound for all of them).
	return eachGroup(names, func(group string) groupOutcome { return syncGroup(ctx, dst, group, all) })
}

// eachGroup syncs every group at once and adds up what it did; the
// groups' errors are joined.
func eachGroup(names []string, syncOne func(group string) groupOutcome) (Result, error) {
	outcomes := make([]groupOutcome, len(names))
	var wg sync.WaitGroup
	for i, group := range names {
		wg.Go(func() { outcomes[i] = syncOne(group) })
	}
	wg.Wait()
	var res Result
	var errs []error
	for _, o := range outcomes {
		switch {
		case o.err != nil:
			errs = append(errs, o.err)
		case o.active:
			res.SkippedActive++
		case o.offsets > 0:
			res.Groups++
			res.Offsets += o.offsets
			res.Clamped += o.clamped
		}
	}
	return res, errors.Join(errs...)
}

// groupOutcome is what the sync did with one group.
type groupOutcome struct {
	active           bool // skipped: it has members here
	offsets, clamped int  // committed, and of them clamped
	err              error
}

// syncGroup commits group's source offsets here, clamped, unless the
// group has members here.
func syncGroup(ctx context.Context, dst Dest, group string, all kadm.FetchOffsetsResponses) groupOutcome {
	fetched, ok := all[group]
	var fetchErr error
	switch {
	case !ok:
		fetchErr = fmt.Errorf("fetching offsets of %s: no answer", group)
	case fetched.Err != nil:
		fetchErr = fmt.Errorf("fetching offsets of %s: %w", group, fetched.Err)
	}
	// Asked first, fetched or not: a group with members here is skipped
	// whatever the source answered for it.
	active, err := dst.GroupActive(ctx, group)
	switch {
	case err != nil:
		return groupOutcome{err: fmt.Errorf("group %s not synced: asking whether it has members here: %w", group, err)}
	case active:
		return groupOutcome{active: true}
	case fetchErr != nil:
		return groupOutcome{err: fetchErr}
	}
	var out groupOutcome
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
			out.clamped++
		}
		offs = append(offs, c)
	})
	if len(offs) == 0 {
		return groupOutcome{}
	}
	sort.Slice(offs, func(i, j int) bool {
		if offs[i].Topic != offs[j].Topic {
			return offs[i].Topic < offs[j].Topic
		}
		return offs[i].Partition < offs[j].Partition
	})
	if err := dst.Commit(ctx, group, offs); err != nil {
		return groupOutcome{err: fmt.Errorf("committing offsets of %s: %w", group, err)}
	}
	out.offsets = len(offs)
	return out
}
