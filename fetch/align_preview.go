package fetch

import (
	"fmt"

	"github.com/kmirror/kmirror/partition"
)

// The divergence rule, once for the real start and its dry run.
//
// A partition started with StartAlign asks the source OffsetForLeaderEpoch
// for its latest local epoch before it fetches (truncateToSource), and a
// Fetch answer with a diverging epoch asks the same question
// (truncateDiverged): both cut where divergence says. The dry run of a
// start (`kmirror mirrors --start --dry-run`, control/align_preview.go)
// asks the source the same question through PreviewAlign and applies the
// same divergence function, to the log as it would be after the control
// plane's own LOG_ALIGNMENT cut (the last mirror epoch), which the dry run
// only plans. alignView is that log: the real one (end = its log end) or
// the real one seen as if cut at end first.

// alignView is a local log as the divergence rule reads it, as if it
// ended at end (<= its log end). REQUIRES: end is the log end or an
// offset where an epoch of the log begins (the last-mirror-epoch cut is
// always one), so that the cut would leave the epochs below end as they
// are.
type alignView struct {
	l   partition.View
	end int64
}

func wholeLog(l partition.View) alignView { return alignView{l: l, end: l.LogEndOffset()} }

// latest is the newest epoch of the view's records; false when it holds
// none.
func (v alignView) latest() (int32, bool) {
	if v.end <= v.l.LogStartOffset() {
		return 0, false
	}
	if v.end >= v.l.LogEndOffset() {
		return v.l.LatestEpoch()
	}
	return v.l.EpochForOffset(v.end - 1)
}

// endOffsetFor answers OffsetForLeaderEpoch for the view (REQUIRES: epoch
// <= latest): the log's answer, which for the epochs below end differs
// from the cut log's only in that the latest one ends at end.
func (v alignView) endOffsetFor(epoch int32) int64 {
	_, end := v.l.EndOffsetForEpoch(epoch)
	return min(end, v.end)
}

// divergence is where a Kafka follower cuts its log on learning that the
// source's epoch (at most the one asked about) ends at sourceEnd: there,
// or where our own history of that epoch ends when that is earlier. cut
// is false when the log ends at or before that point.
func divergence(v alignView, epoch int32, sourceEnd int64) (to int64, cut bool) {
	to = sourceEnd
	if localEnd := v.endOffsetFor(epoch); localEnd >= 0 && localEnd < to {
		to = localEnd
	}
	if to < 0 || to >= v.end {
		return 0, false
	}
	return to, true
}

// AlignPreview is what a StartAlign start would find at the source for a
// partition (PreviewAlign).
type AlignPreview struct {
	// DivergeAt is where the check at start would cut the log, -1 when it
	// would cut nothing.
	DivergeAt int64
	// SourceStart and SourceEnd are the source's log start and high
	// watermark.
	SourceStart, SourceEnd int64
}

// PreviewAlign asks the source what starting a partition with StartAlign
// would make of partition l, as if it ended at end (its log end, or
// a cut the caller plans first), and changes nothing: the source leader
// and epoch from its metadata, OffsetForLeaderEpoch for the view's latest
// epoch and divergence, as truncateToSource does; then the source's log
// start and high watermark. l nil: no local partition, only the source offsets
// are read. One thing a real start may still do that this cannot
// see: for a source without topic ids a cut first checks that the source
// topic is the one copied, and fails the partition if it was recreated.
func (m *Manager) PreviewAlign(mirrorName, topic string, partition int32, l partition.View, end int64) (AlignPreview, error) {
	mr, err := m.mirror(mirrorName)
	if err != nil {
		return AlignPreview{}, err
	}
	tp := topicPartition{topic, partition}
	out := AlignPreview{DivergeAt: -1}
	if l != nil {
		v := alignView{l: l, end: min(end, l.LogEndOffset())}
		if latest, ok := v.latest(); ok {
			meta, err := mr.metadata(map[string]bool{topic: true})
			if err != nil {
				return AlignPreview{}, fmt.Errorf("source metadata: %w", err)
			}
			li, ok := meta.leaders[tp]
			switch {
			case !ok:
				return AlignPreview{}, fmt.Errorf("the source has no partition %s/%d", topic, partition)
			case li.err != nil:
				return AlignPreview{}, fmt.Errorf("source partition %s/%d: %w", topic, partition, li.err)
			case li.leader < 0:
				return AlignPreview{}, fmt.Errorf("source partition %s/%d has no leader", topic, partition)
			}
			epoch, sourceEnd, err := mr.sourceEpochEnd(tp, li.epoch, latest)
			if err != nil {
				return AlignPreview{}, err
			}
			if to, cut := divergence(v, epoch, sourceEnd); cut {
				out.DivergeAt = to
			}
		}
	}
	if out.SourceStart, out.SourceEnd, err = mr.sourceOffsets(tp); err != nil {
		return AlignPreview{}, err
	}
	return out, nil
}
