package control

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
	"github.com/kmirror/kmirror/storage"
)

// The dry run of StartMirrorTopics (ValidateOnly, issue 18 item 3): per
// partition, what LOG_ALIGNMENT would cut and what the copy would then
// fetch, changing nothing.
//
// WHY on the node and not in the CLI: a real start cuts in three places,
// and each needs what only the node has. (1) alignTopic cuts at the end of
// the last mirror epoch the source reports, read with the mirror's own
// source credentials and the node's cluster id; (2) the fetcher's check at
// start asks the source OffsetForLeaderEpoch for the latest epoch of the
// local epoch cache, which no Kafka API lists; (3) a log left below the
// source's log start restarts there. The dry run runs the same code for
// each: startCheck (the refusals), sourceLastMirrorEpochs and
// lastMirrorEpochCut for (1), fetch.Manager.PreviewAlign, which shares
// fetch's divergence function with the fetcher, for (2), and
// storage.Log.PreviewTruncateTo, which shares TruncateTo's cut (a batch
// straddling the cut goes whole), for the records and bytes. A CLI-side
// copy of these rules would drift from them unseen.
//
// Not foreseen: what changes between the dry run and the start (records
// written to the topic meanwhile, a source that moves on).

// previewTopic is startTopic's dry run. REQUIRES: m's lock held.
func (c *Plane) previewTopic(m state.Mirror, t mirrorapi.StartMirrorTopicsRequestTopic,
	loops sourceMirrors) mirrorapi.MirrorTopicsResponseTopic {
	rt := mirrorapi.MirrorTopicsResponseTopic{Name: t.TopicName}
	fail := func(code int16, msg string) mirrorapi.MirrorTopicsResponseTopic {
		rt.ErrorCode, rt.ErrorMessage, rt.Preview = code, strp(msg), nil
		return rt
	}
	sc, info, code, msg := c.startCheck(m, t, loops)
	if code != 0 {
		return fail(code, msg)
	}
	if sc == startRunning {
		return rt // mirroring already: the start changes nothing (no preview)
	}
	var lme map[int32]int32
	if sc == startAlign {
		lme = c.sourceLastMirrorEpochs(m, info.ID, t.NumPartitions)
	}
	for p := int32(0); p < t.NumPartitions; p++ {
		pp, err := c.previewPartition(m, sc, t.TopicName, p, lme)
		if err != nil {
			return fail(kerr.UnknownServerError.Code, fmt.Sprintf("partition %d: %v", p, err))
		}
		rt.Preview = append(rt.Preview, pp)
	}
	return rt
}

// previewPartition is what starting one partition would do: the cuts of
// LOG_ALIGNMENT in the order a real start makes them (see above), then
// where the copy begins. REQUIRES: m's lock held.
func (c *Plane) previewPartition(m state.Mirror, sc startCase, topic string, p int32,
	lme map[int32]int32) (mirrorapi.StartPreviewPartition, error) {
	pp := mirrorapi.StartPreviewPartition{PartitionIndex: p, LocalEnd: -1, TruncateFrom: -1, Cause: mirrorapi.AlignNone}
	if sc == startCreate {
		ap, err := c.fm.PreviewAlign(m.Name, topic, p, nil, 0)
		if err != nil {
			return pp, err
		}
		pp.CopyFrom, pp.SourceEnd = ap.SourceStart, ap.SourceEnd
		return pp, nil
	}
	l, err := c.parts.View(topic, p)
	if err != nil {
		return pp, err
	}
	pp.LocalEnd = l.LogEndOffset()
	// cut is the offset the log would be truncated to, -1 for none;
	// full: truncated whole.
	cut, full := int64(-1), false
	end := l.LogEndOffset() // where the log would end before the fetcher's check
	if l.LogEndOffset() != l.LogStartOffset() {
		epoch, ok := lme[p]
		to, scratch := lastMirrorEpochCut(l, epoch, ok)
		switch {
		case scratch:
			cut, full, pp.Cause = 0, true, mirrorapi.AlignFromScratch
		case to < l.LogEndOffset():
			cut, end, pp.Cause = to, to, mirrorapi.AlignLastMirrorEpoch
		}
	}
	view := l
	if full {
		view = nil // the log restarts empty: the fetcher checks nothing
	}
	ap, err := c.fm.PreviewAlign(m.Name, topic, p, view, end)
	if err != nil {
		return pp, err
	}
	pp.SourceEnd = ap.SourceEnd
	if ap.DivergeAt >= 0 {
		cut, pp.Cause = ap.DivergeAt, mirrorapi.AlignDiverged
	}
	var tr storage.Truncation
	truncated := false
	if cut >= 0 {
		if tr, truncated, err = l.PreviewTruncateTo(cut); err != nil {
			return pp, err
		}
	}
	newEnd := l.LogEndOffset()
	switch {
	case full:
		newEnd = 0
	case truncated:
		newEnd = tr.End
	}
	if !full && newEnd > l.LogStartOffset() && newEnd < ap.SourceStart {
		// The first fetch is OFFSET_OUT_OF_RANGE below the source's log
		// start: the fetcher restarts the log empty there
		// (fetch.resetOutOfRange), and what was left goes too.
		if tr, truncated, err = l.PreviewTruncateTo(l.LogStartOffset() - 1); err != nil {
			return pp, err
		}
		full, pp.Cause = true, mirrorapi.AlignSourceStart
	}
	if truncated {
		pp.TruncateFrom, pp.TruncateRecords, pp.TruncateBytes = tr.End, tr.Records, tr.Bytes
		if full {
			pp.TruncateFrom = l.LogStartOffset()
		}
	}
	pp.CopyFrom = max(newEnd, ap.SourceStart)
	return pp, nil
}
