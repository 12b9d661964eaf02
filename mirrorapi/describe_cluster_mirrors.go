package mirrorapi

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeClusterMirrors (key 99): per-partition state and lag of mirrors,
// and (tagged) the last-mirror-epoch lookup a failback uses. The admin side
// asks every broker and merges; each broker reports the partitions it leads.

// DescribeClusterMirrorsRequest describes cluster mirrors.
type DescribeClusterMirrorsRequest struct {
	Version int16

	// MirrorNames are the mirrors to describe; empty means all.
	MirrorNames []string

	IncludeAuthorizedOperations bool

	// ClusterID (tag 0) is the asking cluster's id: the answer's
	// LookupResults cover the local mirrors whose
	// mirror.source.cluster.id equals it. Omitted when nil.
	ClusterID *string

	// LastMirrorEpochLookups (tag 1) are the partitions whose last mirror
	// epoch is asked for. Omitted when empty.
	LastMirrorEpochLookups []DescribeClusterMirrorsLookup

	// LedPartitionsOnly (tag 2, a kmirror addition) asks the answering
	// node for the partitions it leads only, as it sees them, without
	// asking the other nodes: set by a node of a cluster that gathers the
	// leaders' rows for its own answer. Omitted when false.
	LedPartitionsOnly bool
}

// DescribeClusterMirrorsLookup asks for the last mirror epochs of some
// partitions of one topic.
type DescribeClusterMirrorsLookup struct {
	TopicID    [16]byte
	Partitions []int32
}

func (l *DescribeClusterMirrorsLookup) appendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, l.TopicID)
	dst = appendInt32s(dst, l.Partitions)
	return appendNoTags(dst)
}

func (l *DescribeClusterMirrorsLookup) readFrom(r *reader) {
	l.TopicID = r.Uuid()
	l.Partitions = r.int32s()
	r.noTags()
}

func (*DescribeClusterMirrorsRequest) Key() int16                 { return KeyDescribeClusterMirrors }
func (*DescribeClusterMirrorsRequest) MaxVersion() int16          { return MaxVersion }
func (v *DescribeClusterMirrorsRequest) SetVersion(version int16) { v.Version = version }
func (v *DescribeClusterMirrorsRequest) GetVersion() int16        { return v.Version }
func (v *DescribeClusterMirrorsRequest) IsFlexible() bool         { return v.Version >= 0 }
func (*DescribeClusterMirrorsRequest) IsAdminRequest()            {}

// ResponseKind returns an empty response of the same version.
func (v *DescribeClusterMirrorsRequest) ResponseKind() kmsg.Response {
	r := NewPtrDescribeClusterMirrorsResponse()
	r.Version = v.Version
	return r
}

// RequestWith issues v on r (a *kgo.Client) and returns the typed response.
func (v *DescribeClusterMirrorsRequest) RequestWith(ctx context.Context, r kmsg.Requestor) (*DescribeClusterMirrorsResponse, error) {
	kresp, err := r.Request(ctx, v)
	resp, _ := kresp.(*DescribeClusterMirrorsResponse)
	return resp, err
}

// Default sets the fields that have defaults (none).
func (*DescribeClusterMirrorsRequest) Default() {}

// NewPtrDescribeClusterMirrorsRequest returns a request with defaults set.
func NewPtrDescribeClusterMirrorsRequest() *DescribeClusterMirrorsRequest {
	v := new(DescribeClusterMirrorsRequest)
	v.Default()
	return v
}

// AppendTo appends the body (no request header) to dst.
func (v *DescribeClusterMirrorsRequest) AppendTo(dst []byte) []byte {
	dst = appendStrings(dst, v.MirrorNames)
	dst = kbin.AppendBool(dst, v.IncludeAuthorizedOperations)
	var tags tagWriter
	if v.ClusterID != nil {
		tags.add(0, appendNullableStr(nil, v.ClusterID))
	}
	if len(v.LastMirrorEpochLookups) > 0 {
		tags.add(1, appendArray(nil, v.LastMirrorEpochLookups))
	}
	if v.LedPartitionsOnly {
		tags.add(2, kbin.AppendBool(nil, true))
	}
	return tags.appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *DescribeClusterMirrorsRequest) ReadFrom(src []byte) error {
	if err := checkVersion("DescribeClusterMirrorsRequest", v.Version); err != nil {
		return err
	}
	*v = DescribeClusterMirrorsRequest{Version: v.Version}
	r := newReader(src)
	v.MirrorNames = r.strings()
	v.IncludeAuthorizedOperations = r.Bool()
	r.tags(func(tag uint32, sub *reader) bool {
		switch tag {
		case 0:
			v.ClusterID = sub.nullableStr()
		case 1:
			v.LastMirrorEpochLookups = readArray[DescribeClusterMirrorsLookup](sub, minLookup)
		case 2:
			v.LedPartitionsOnly = sub.Bool()
		default:
			return false
		}
		return true
	})
	return r.complete()
}

// DescribeClusterMirrorsResponse answers DescribeClusterMirrorsRequest.
type DescribeClusterMirrorsResponse struct {
	Version        int16
	ThrottleMillis int32

	// ErrorCode and ErrorMessage are the top-level error (the prototype's
	// schema has them; kmirror reports per-mirror errors in Mirrors).
	ErrorCode    int16
	ErrorMessage *string

	Mirrors []DescribeClusterMirrorsResponseMirror

	// LookupResults (tag 0) answer the request's LastMirrorEpochLookups.
	// Omitted when empty.
	LookupResults []DescribeClusterMirrorsLookupResult
}

// DescribeClusterMirrorsResponseMirror is one described mirror.
type DescribeClusterMirrorsResponseMirror struct {
	ErrorCode int16

	// ErrorMessage goes in tagged field 0 of the mirror, a kmirror
	// addition the prototype's schema lacks (its readers skip the tag).
	// Omitted when nil.
	ErrorMessage *string

	MirrorName string

	// AuthorizedOperations is a bit field of ACL operations, or
	// math.MinInt32 (the default) when not asked for.
	AuthorizedOperations int32

	Topics []DescribeClusterMirrorsResponseTopic

	// LastGroupSyncMillis (tag 1, a kmirror addition) is when the
	// mirror's consumer group offsets were last synced from the source
	// (Unix milliseconds); 0 means never, or not reported. Omitted when 0.
	LastGroupSyncMillis int64
}

// DescribeClusterMirrorsResponseTopic is one topic of a described mirror.
type DescribeClusterMirrorsResponseTopic struct {
	TopicName  string
	Partitions []DescribeClusterMirrorsResponsePartition

	// TopicID (tag 0, a kmirror addition) is the topic's id, which a
	// mirror topic shares with its source topic. Omitted when zero.
	TopicID [16]byte
	// NoSourceTopicIDs (tag 1, a kmirror addition) is set when the source
	// has no topic ids (Kafka before 2.8): TopicID was assigned by this
	// node, and the topic is checked by comparing batches instead.
	NoSourceTopicIDs bool
}

// DescribeClusterMirrorsResponsePartition is one partition of a described
// mirror topic.
type DescribeClusterMirrorsResponsePartition struct {
	PartitionIndex int32

	// SourceOffset is the source high watermark, live from the fetcher
	// or, without a fetcher answer, the last one read (see
	// SourceOffsetAgeMillis); DestinationOffset is the local high
	// watermark, or for a STOPPED partition the offset mirroring stopped
	// at; Lag is SourceOffset - DestinationOffset, never negative. Each
	// is -1 when unknown. (The prototype reported them for MIRRORING
	// partitions only.)
	SourceOffset      int64
	DestinationOffset int64
	Lag               int64

	// StateValue is the mirror partition state's name ("MIRRORING").
	StateValue string

	// RetryAttempt is, when FAILED, the retry count, or -1 when the failure
	// is not retryable. The wire carries an int16: values outside
	// [-32768, 32767] are clamped.
	RetryAttempt int32

	ErrorMessage *string

	// SourceOffsetAgeMillis (tag 0, a kmirror addition) is how long ago,
	// when the broker answered, SourceOffset was read from the source:
	// a lag is only as current as this. -1 (the default, omitted) when
	// SourceOffset is unknown; readers that predate the tag see -1 too.
	SourceOffsetAgeMillis int64

	// Stalled (tag 1, a kmirror addition) is set when the partition's
	// fetcher has had no answer without error for longer than the
	// mirror's request.timeout.ms (a dead source broker, a leader that
	// cannot be found): its lag is not being measured. Omitted when false.
	Stalled bool

	// LagMillis (tag 2, a kmirror addition) is the lag in time, the RPO:
	// how long ago, at most, the oldest source record the copy lacks
	// reached the source (fetch.Status.LagSince). It keeps growing while
	// the partition is stalled. -1 (the default, omitted) when unknown:
	// no fetcher on this node (PAUSED, STOPPED), or nothing answered or
	// copied yet; readers that predate the tag see -1 too.
	LagMillis int64

	// ReportedBy (tag 3, a kmirror addition) is the node whose view the
	// row gives: the partition's leader, which runs its fetcher, so the
	// offsets, Stalled and LagMillis are live. -1 (the default, omitted)
	// when no leader answered (none elected, or a leader that could not
	// be asked): the row then holds what the metadata log does, the
	// source offset of the last checkpoint (see SourceOffsetAgeMillis),
	// no lag in time and no Stalled flag.
	ReportedBy int32
}

// Default sets AuthorizedOperations to math.MinInt32 ("not asked for").
func (m *DescribeClusterMirrorsResponseMirror) Default() {
	m.AuthorizedOperations = math.MinInt32
}

// NewDescribeClusterMirrorsResponseMirror returns a mirror with defaults set.
func NewDescribeClusterMirrorsResponseMirror() DescribeClusterMirrorsResponseMirror {
	var m DescribeClusterMirrorsResponseMirror
	m.Default()
	return m
}

// Default sets SourceOffset, DestinationOffset, Lag,
// SourceOffsetAgeMillis, LagMillis and ReportedBy to -1.
func (p *DescribeClusterMirrorsResponsePartition) Default() {
	p.SourceOffset, p.DestinationOffset, p.Lag, p.SourceOffsetAgeMillis, p.LagMillis = -1, -1, -1, -1, -1
	p.ReportedBy = -1
}

// NewDescribeClusterMirrorsResponsePartition returns a partition with
// defaults set.
func NewDescribeClusterMirrorsResponsePartition() DescribeClusterMirrorsResponsePartition {
	var p DescribeClusterMirrorsResponsePartition
	p.Default()
	return p
}

func (m *DescribeClusterMirrorsResponseMirror) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, m.ErrorCode)
	dst = appendStr(dst, m.MirrorName)
	dst = kbin.AppendInt32(dst, m.AuthorizedOperations)
	dst = appendArray(dst, m.Topics)
	var tags tagWriter
	if m.ErrorMessage != nil {
		tags.add(0, appendNullableStr(nil, m.ErrorMessage))
	}
	if m.LastGroupSyncMillis != 0 {
		tags.add(1, kbin.AppendInt64(nil, m.LastGroupSyncMillis))
	}
	return tags.appendTo(dst)
}

func (m *DescribeClusterMirrorsResponseMirror) readFrom(r *reader) {
	m.ErrorCode = r.Int16()
	m.MirrorName = r.str()
	m.AuthorizedOperations = r.Int32()
	m.Topics = readArray[DescribeClusterMirrorsResponseTopic](r, minDescribeTopic)
	r.tags(func(tag uint32, sub *reader) bool {
		switch tag {
		case 0:
			m.ErrorMessage = sub.nullableStr()
		case 1:
			m.LastGroupSyncMillis = sub.Int64()
		default:
			return false
		}
		return true
	})
}

func (t *DescribeClusterMirrorsResponseTopic) appendTo(dst []byte) []byte {
	dst = appendStr(dst, t.TopicName)
	dst = appendArray(dst, t.Partitions)
	var tags tagWriter
	if t.TopicID != ([16]byte{}) {
		tags.add(0, kbin.AppendUuid(nil, t.TopicID))
	}
	if t.NoSourceTopicIDs {
		tags.add(1, kbin.AppendBool(nil, true))
	}
	return tags.appendTo(dst)
}

func (t *DescribeClusterMirrorsResponseTopic) readFrom(r *reader) {
	t.TopicName = r.str()
	t.Partitions = readArray[DescribeClusterMirrorsResponsePartition](r, minDescribePartition)
	r.tags(func(tag uint32, sub *reader) bool {
		switch tag {
		case 0:
			t.TopicID = sub.Uuid()
		case 1:
			t.NoSourceTopicIDs = sub.Bool()
		default:
			return false
		}
		return true
	})
}

func (p *DescribeClusterMirrorsResponsePartition) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendInt64(dst, p.SourceOffset)
	dst = kbin.AppendInt64(dst, p.DestinationOffset)
	dst = kbin.AppendInt64(dst, p.Lag)
	dst = appendStr(dst, p.StateValue)
	dst = kbin.AppendInt16(dst, saturate16(p.RetryAttempt))
	dst = appendNullableStr(dst, p.ErrorMessage)
	var tags tagWriter
	if p.SourceOffsetAgeMillis != -1 {
		tags.add(0, kbin.AppendInt64(nil, p.SourceOffsetAgeMillis))
	}
	if p.Stalled {
		tags.add(1, kbin.AppendBool(nil, true))
	}
	if p.LagMillis != -1 {
		tags.add(2, kbin.AppendInt64(nil, p.LagMillis))
	}
	if p.ReportedBy != -1 {
		tags.add(3, kbin.AppendInt32(nil, p.ReportedBy))
	}
	return tags.appendTo(dst)
}

func (p *DescribeClusterMirrorsResponsePartition) readFrom(r *reader) {
	p.PartitionIndex = r.Int32()
	p.SourceOffset = r.Int64()
	p.DestinationOffset = r.Int64()
	p.Lag = r.Int64()
	p.StateValue = r.str()
	p.RetryAttempt = int32(r.Int16())
	p.ErrorMessage = r.nullableStr()
	p.SourceOffsetAgeMillis, p.Stalled, p.LagMillis, p.ReportedBy = -1, false, -1, -1 // absent tags: the defaults
	r.tags(func(tag uint32, sub *reader) bool {
		switch tag {
		case 0:
			p.SourceOffsetAgeMillis = sub.Int64()
		case 1:
			p.Stalled = sub.Bool()
		case 2:
			p.LagMillis = sub.Int64()
		case 3:
			p.ReportedBy = sub.Int32()
		default:
			return false
		}
		return true
	})
}

// DescribeClusterMirrorsLookupResult answers one DescribeClusterMirrorsLookup.
type DescribeClusterMirrorsLookupResult struct {
	TopicID    [16]byte
	Partitions []DescribeClusterMirrorsLookupPartition
}

// DescribeClusterMirrorsLookupPartition is the last mirror epoch of one
// partition, -1 when unknown.
type DescribeClusterMirrorsLookupPartition struct {
	PartitionIndex  int32
	LastMirrorEpoch int32
}

func (l *DescribeClusterMirrorsLookupResult) appendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, l.TopicID)
	dst = appendArray(dst, l.Partitions)
	return appendNoTags(dst)
}

func (l *DescribeClusterMirrorsLookupResult) readFrom(r *reader) {
	l.TopicID = r.Uuid()
	l.Partitions = readArray[DescribeClusterMirrorsLookupPartition](r, minLookupPartition)
	r.noTags()
}

func (p *DescribeClusterMirrorsLookupPartition) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendInt32(dst, p.LastMirrorEpoch)
	return appendNoTags(dst)
}

func (p *DescribeClusterMirrorsLookupPartition) readFrom(r *reader) {
	p.PartitionIndex = r.Int32()
	p.LastMirrorEpoch = r.Int32()
	r.noTags()
}

func (*DescribeClusterMirrorsResponse) Key() int16                   { return KeyDescribeClusterMirrors }
func (*DescribeClusterMirrorsResponse) MaxVersion() int16            { return MaxVersion }
func (v *DescribeClusterMirrorsResponse) SetVersion(version int16)   { v.Version = version }
func (v *DescribeClusterMirrorsResponse) GetVersion() int16          { return v.Version }
func (v *DescribeClusterMirrorsResponse) IsFlexible() bool           { return v.Version >= 0 }
func (v *DescribeClusterMirrorsResponse) Throttle() (int32, bool)    { return v.ThrottleMillis, true }
func (v *DescribeClusterMirrorsResponse) SetThrottle(throttle int32) { v.ThrottleMillis = throttle }

// RequestKind returns an empty request of the same version.
func (v *DescribeClusterMirrorsResponse) RequestKind() kmsg.Request {
	r := NewPtrDescribeClusterMirrorsRequest()
	r.Version = v.Version
	return r
}

// Default sets the fields that have defaults (none at this level).
func (*DescribeClusterMirrorsResponse) Default() {}

// NewPtrDescribeClusterMirrorsResponse returns a response with defaults set.
func NewPtrDescribeClusterMirrorsResponse() *DescribeClusterMirrorsResponse {
	v := new(DescribeClusterMirrorsResponse)
	v.Default()
	return v
}

// AppendTo appends the body (no response header) to dst.
func (v *DescribeClusterMirrorsResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.ThrottleMillis)
	dst = kbin.AppendInt16(dst, v.ErrorCode)
	dst = appendNullableStr(dst, v.ErrorMessage)
	dst = appendArray(dst, v.Mirrors)
	var tags tagWriter
	if len(v.LookupResults) > 0 {
		tags.add(0, appendArray(nil, v.LookupResults))
	}
	return tags.appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *DescribeClusterMirrorsResponse) ReadFrom(src []byte) error {
	if err := checkVersion("DescribeClusterMirrorsResponse", v.Version); err != nil {
		return err
	}
	*v = DescribeClusterMirrorsResponse{Version: v.Version}
	r := newReader(src)
	v.ThrottleMillis = r.Int32()
	v.ErrorCode = r.Int16()
	v.ErrorMessage = r.nullableStr()
	v.Mirrors = readArray[DescribeClusterMirrorsResponseMirror](&r, minDescribeMirror)
	r.tags(func(tag uint32, sub *reader) bool {
		if tag != 0 {
			return false
		}
		v.LookupResults = readArray[DescribeClusterMirrorsLookupResult](sub, minLookupResult)
		return true
	})
	return r.complete()
}
