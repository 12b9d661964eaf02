package mirrorapi

import (
	"github.com/twmb/franz-go/pkg/kbin"
)

// The dry run of StartMirrorTopics (a kmirror addition, issue 18 item 3).
// A request with ValidateOnly set (tag 2) is checked as a real start is,
// changes nothing, and is answered, per topic that would start, with one
// StartPreviewPartition per partition (MirrorTopicsResponseTopic tag 3):
// what LOG_ALIGNMENT would cut from the local log and what the copy would
// then fetch. The answer has DryRun set (tag 0 of the response). WHY the
// flag in the answer: a node that predates the dry run skips the unknown
// request tag and starts the topics for real; a client first sends a
// ValidateOnly request naming no topic (which such a node answers as a
// harmless no-op, without DryRun) and sends the real one only when DryRun
// comes back.

// StartPreviewPartition is what starting one partition would do.
type StartPreviewPartition struct {
	PartitionIndex int32

	// LocalEnd is the local log end now; -1 when the topic does not exist
	// here (the start would create it).
	LocalEnd int64

	// TruncateFrom is the offset the local log would be cut back to, its
	// new end; -1 when nothing would be cut. TruncateRecords and
	// TruncateBytes are the records and bytes of the batches cut.
	TruncateFrom    int64
	TruncateRecords int64
	TruncateBytes   int64

	// Cause says which rule of LOG_ALIGNMENT cuts (an AlignX value).
	Cause int8

	// CopyFrom is the offset the fetcher would copy from; SourceEnd the
	// source's high watermark now, -1 if unknown.
	CopyFrom  int64
	SourceEnd int64
}

// Cause values of a StartPreviewPartition. These are part of the wire
// format.
const (
	// AlignNone: nothing is cut; the copy continues at the local end.
	AlignNone int8 = 0
	// AlignLastMirrorEpoch: cut at the end of the last epoch the source
	// mirrored from this cluster (a failback).
	AlignLastMirrorEpoch int8 = 1
	// AlignFromScratch: the source never mirrored from this cluster; the
	// whole log is replaced by the source's.
	AlignFromScratch int8 = 2
	// AlignDiverged: cut where the source's OffsetForLeaderEpoch answer
	// says the logs diverge.
	AlignDiverged int8 = 3
	// AlignSourceStart: what is left ends below the source's log start;
	// the log restarts empty there.
	AlignSourceStart int8 = 4
)

// minPreviewPartition is the smallest encoded StartPreviewPartition.
const minPreviewPartition = 4 + 8 + 8 + 8 + 8 + 1 + 8 + 8 + 1 // PartitionIndex .. SourceEnd, tags

func (p *StartPreviewPartition) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendInt64(dst, p.LocalEnd)
	dst = kbin.AppendInt64(dst, p.TruncateFrom)
	dst = kbin.AppendInt64(dst, p.TruncateRecords)
	dst = kbin.AppendInt64(dst, p.TruncateBytes)
	dst = kbin.AppendInt8(dst, p.Cause)
	dst = kbin.AppendInt64(dst, p.CopyFrom)
	dst = kbin.AppendInt64(dst, p.SourceEnd)
	return appendNoTags(dst)
}

func (p *StartPreviewPartition) readFrom(r *reader) {
	p.PartitionIndex = r.Int32()
	p.LocalEnd = r.Int64()
	p.TruncateFrom = r.Int64()
	p.TruncateRecords = r.Int64()
	p.TruncateBytes = r.Int64()
	p.Cause = r.Int8()
	p.CopyFrom = r.Int64()
	p.SourceEnd = r.Int64()
	r.noTags()
}
