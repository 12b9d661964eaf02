package mirrorapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StartMirrorTopics (95), StopMirrorTopics (96), PauseMirrorTopics (102),
// ResumeMirrorTopics (103) and RecoverMirrorTopics (107): topic-level RPCs.
// Their responses share one layout, written by mirrorTopicsResponse; each
// RPC still has its own named response type so that Key() is right and a
// kgo caller gets a typed answer.

// MirrorTopicsRequestTopic names a destination topic.
type MirrorTopicsRequestTopic struct {
	TopicName string
}

func (t *MirrorTopicsRequestTopic) appendTo(dst []byte) []byte {
	dst = appendStr(dst, t.TopicName)
	return appendNoTags(dst)
}

func (t *MirrorTopicsRequestTopic) readFrom(r *reader) {
	t.TopicName = r.str()
	r.noTags()
}

// MirrorTopicsResponseTopic is the result for one topic.
type MirrorTopicsResponseTopic struct {
	Name         string
	ErrorCode    int16
	ErrorMessage *string

	// FinalSync (tag 0), FinalSyncMessage (tag 1) and Partitions (tag 2)
	// are kmirror additions to StopMirrorTopics answers, unset in the
	// other four: whether the stop ran its last group-offset and
	// topic-config sync (a FinalSync value), why not or what failed, and
	// where the copy of each partition ended. The prototype's readers
	// skip them (KIP-482); each is omitted when unset (0, nil, empty).
	FinalSync        int8
	FinalSyncMessage *string
	Partitions       []StopMirrorTopicsResponsePartition

	// Preview (tag 3) is, in the answer to a StartMirrorTopics dry run
	// (ValidateOnly), what starting each partition would do
	// (start_preview.go); unset otherwise, and omitted when empty.
	Preview []StartPreviewPartition
}

// FinalSync values of a stopped topic. These are part of the wire format.
const (
	// FinalSyncUnknown: not reported (an older kmirror, or not a stop).
	FinalSyncUnknown int8 = 0
	// FinalSyncDone: the topic's group offsets and configs were synced
	// from the source after its copy was final, and the source's end
	// offsets read.
	FinalSyncDone int8 = 1
	// FinalSyncSkipped: no final sync ran (the source did not answer, or
	// the topic was stopped already); FinalSyncMessage says why.
	FinalSyncSkipped int8 = 2
	// FinalSyncFailed: the final sync ran, but a part of it failed;
	// FinalSyncMessage says which.
	FinalSyncFailed int8 = 3
)

// StopMirrorTopicsResponsePartition is where the copy of one partition of
// a stopped topic ended, against the source.
type StopMirrorTopicsResponsePartition struct {
	PartitionIndex int32

	// SourceOffset is the source's end offset (high watermark): read at
	// the stop when the source answered, else the last one the fetcher
	// saw; -1 if unknown. SourceOffsetMillis is when it was read from the
	// source (Unix milliseconds), -1 if unknown.
	SourceOffset       int64
	SourceOffsetMillis int64

	// DestinationOffset is the local log end when mirroring stopped,
	// before the stop's markers. Lag is SourceOffset minus it, at least
	// 0: records the source held that this copy does not; -1 if the
	// source offset is unknown.
	DestinationOffset int64
	Lag               int64
}

func (p *StopMirrorTopicsResponsePartition) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendInt64(dst, p.SourceOffset)
	dst = kbin.AppendInt64(dst, p.SourceOffsetMillis)
	dst = kbin.AppendInt64(dst, p.DestinationOffset)
	dst = kbin.AppendInt64(dst, p.Lag)
	return appendNoTags(dst)
}

func (p *StopMirrorTopicsResponsePartition) readFrom(r *reader) {
	p.PartitionIndex = r.Int32()
	p.SourceOffset = r.Int64()
	p.SourceOffsetMillis = r.Int64()
	p.DestinationOffset = r.Int64()
	p.Lag = r.Int64()
	r.noTags()
}

func (t *MirrorTopicsResponseTopic) appendTo(dst []byte) []byte {
	dst = appendStr(dst, t.Name)
	dst = kbin.AppendInt16(dst, t.ErrorCode)
	dst = appendNullableStr(dst, t.ErrorMessage)
	var tags tagWriter
	if t.FinalSync != FinalSyncUnknown {
		tags.add(0, []byte{byte(t.FinalSync)})
	}
	if t.FinalSyncMessage != nil {
		tags.add(1, appendNullableStr(nil, t.FinalSyncMessage))
	}
	if len(t.Partitions) > 0 {
		tags.add(2, appendArray(nil, t.Partitions))
	}
	if len(t.Preview) > 0 {
		tags.add(3, appendArray(nil, t.Preview))
	}
	return tags.appendTo(dst)
}

func (t *MirrorTopicsResponseTopic) readFrom(r *reader) {
	t.Name = r.str()
	t.ErrorCode = r.Int16()
	t.ErrorMessage = r.nullableStr()
	r.tags(func(tag uint32, sub *reader) bool {
		switch tag {
		case 0:
			t.FinalSync = sub.Int8()
		case 1:
			t.FinalSyncMessage = sub.nullableStr()
		case 2:
			t.Partitions = readArray[StopMirrorTopicsResponsePartition](sub, minStopPartition)
		case 3:
			t.Preview = readArray[StartPreviewPartition](sub, minPreviewPartition)
		default:
			return false
		}
		return true
	})
}

// mirrorTopicsResponse is the shared layout of the five topic-level
// responses. Each named response type has exactly these fields, so a
// pointer converts to *mirrorTopicsResponse at no cost.
type mirrorTopicsResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	ErrorMessage   *string
	Topics         []MirrorTopicsResponseTopic
	DryRun         bool
}

func (v *mirrorTopicsResponse) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.ThrottleMillis)
	dst = kbin.AppendInt16(dst, v.ErrorCode)
	dst = appendNullableStr(dst, v.ErrorMessage)
	dst = appendArray(dst, v.Topics)
	var tags tagWriter
	if v.DryRun {
		tags.add(0, kbin.AppendBool(nil, true))
	}
	return tags.appendTo(dst)
}

func (v *mirrorTopicsResponse) readFrom(name string, src []byte) error {
	if err := checkVersion(name, v.Version); err != nil {
		return err
	}
	*v = mirrorTopicsResponse{Version: v.Version}
	r := newReader(src)
	v.ThrottleMillis = r.Int32()
	v.ErrorCode = r.Int16()
	v.ErrorMessage = r.nullableStr()
	v.Topics = readArray[MirrorTopicsResponseTopic](&r, minResponseTopic)
	r.tags(func(tag uint32, sub *reader) bool {
		if tag != 0 {
			return false
		}
		v.DryRun = sub.Bool()
		return true
	})
	return r.complete()
}

// mirrorTopicsRequest is the shared layout of PauseMirrorTopicsRequest and
// ResumeMirrorTopicsRequest.
type mirrorTopicsRequest struct {
	Version               int16
	MirrorName            string
	Topics                []MirrorTopicsRequestTopic
	StateValidationOffset int64
}

func (v *mirrorTopicsRequest) appendTo(dst []byte) []byte {
	dst = appendStr(dst, v.MirrorName)
	dst = appendArray(dst, v.Topics)
	dst = kbin.AppendInt64(dst, v.StateValidationOffset)
	return appendNoTags(dst)
}

func (v *mirrorTopicsRequest) readFrom(name string, src []byte) error {
	if err := checkVersion(name, v.Version); err != nil {
		return err
	}
	*v = mirrorTopicsRequest{Version: v.Version}
	r := newReader(src)
	v.MirrorName = r.str()
	v.Topics = readArray[MirrorTopicsRequestTopic](&r, minRequestTopic)
	v.StateValidationOffset = r.Int64()
	r.noTags()
	return r.complete()
}

// StartMirrorTopicsRequest starts mirroring source topics into a mirror.
type StartMirrorTopicsRequest struct {
	Version    int16
	MirrorName string

	// Topics are the source topics, with the id and partition count the
	// admin side read from the source.
	Topics []StartMirrorTopicsRequestTopic

	// IncludePatterns (tag 0) are regexes added to mirror.topics.include.
	// Omitted when empty.
	IncludePatterns []string

	// ExcludePatterns (tag 1) are regexes added to mirror.topics.exclude.
	// Omitted when empty.
	ExcludePatterns []string

	// StateValidationOffset is the metadata offset at which the forwarding
	// broker validated partition states; -1 (the default) skips the check.
	StateValidationOffset int64

	// ValidateOnly (tag 2, a kmirror addition) asks for a dry run: the
	// request is checked and answered with what it would do, and nothing
	// changes (start_preview.go). Omitted when false.
	ValidateOnly bool
}

// StartMirrorTopicsRequestTopic is one source topic to mirror.
type StartMirrorTopicsRequestTopic struct {
	TopicID       [16]byte
	TopicName     string
	NumPartitions int32
}

func (t *StartMirrorTopicsRequestTopic) appendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, t.TopicID)
	dst = appendStr(dst, t.TopicName)
	dst = kbin.AppendInt32(dst, t.NumPartitions)
	return appendNoTags(dst)
}

func (t *StartMirrorTopicsRequestTopic) readFrom(r *reader) {
	t.TopicID = r.Uuid()
	t.TopicName = r.str()
	t.NumPartitions = r.Int32()
	r.noTags()
}

func (*StartMirrorTopicsRequest) Key() int16                 { return KeyStartMirrorTopics }
func (*StartMirrorTopicsRequest) MaxVersion() int16          { return MaxVersion }
func (v *StartMirrorTopicsRequest) SetVersion(version int16) { v.Version = version }
func (v *StartMirrorTopicsRequest) GetVersion() int16        { return v.Version }
func (v *StartMirrorTopicsRequest) IsFlexible() bool         { return v.Version >= 0 }
func (*StartMirrorTopicsRequest) IsAdminRequest()            {}

// ResponseKind returns an empty response of the same version.
func (v *StartMirrorTopicsRequest) ResponseKind() kmsg.Response {
	r := NewPtrStartMirrorTopicsResponse()
	r.Version = v.Version
	return r
}

// RequestWith issues v on r (a *kgo.Client) and returns the typed response.
func (v *StartMirrorTopicsRequest) RequestWith(ctx context.Context, r kmsg.Requestor) (*StartMirrorTopicsResponse, error) {
	kresp, err := r.Request(ctx, v)
	resp, _ := kresp.(*StartMirrorTopicsResponse)
	return resp, err
}

// Default sets StateValidationOffset to -1.
func (v *StartMirrorTopicsRequest) Default() { v.StateValidationOffset = -1 }

// NewPtrStartMirrorTopicsRequest returns a request with defaults set.
func NewPtrStartMirrorTopicsRequest() *StartMirrorTopicsRequest {
	v := new(StartMirrorTopicsRequest)
	v.Default()
	return v
}

// AppendTo appends the body (no request header) to dst.
func (v *StartMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	dst = appendStr(dst, v.MirrorName)
	dst = appendArray(dst, v.Topics)
	dst = kbin.AppendInt64(dst, v.StateValidationOffset)
	var tags tagWriter
	if len(v.IncludePatterns) > 0 {
		tags.add(0, appendStrings(nil, v.IncludePatterns))
	}
	if len(v.ExcludePatterns) > 0 {
		tags.add(1, appendStrings(nil, v.ExcludePatterns))
	}
	if v.ValidateOnly {
		tags.add(2, kbin.AppendBool(nil, true))
	}
	return tags.appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *StartMirrorTopicsRequest) ReadFrom(src []byte) error {
	if err := checkVersion("StartMirrorTopicsRequest", v.Version); err != nil {
		return err
	}
	*v = StartMirrorTopicsRequest{Version: v.Version}
	r := newReader(src)
	v.MirrorName = r.str()
	v.Topics = readArray[StartMirrorTopicsRequestTopic](&r, minStartTopic)
	v.StateValidationOffset = r.Int64()
	r.tags(func(tag uint32, sub *reader) bool {
		switch tag {
		case 0:
			v.IncludePatterns = sub.strings()
		case 1:
			v.ExcludePatterns = sub.strings()
		case 2:
			v.ValidateOnly = sub.Bool()
		default:
			return false
		}
		return true
	})
	return r.complete()
}

// StopMirrorTopicsRequest stops mirroring topics: each becomes a writable
// ordinary topic (failover).
type StopMirrorTopicsRequest struct {
	Version    int16
	MirrorName string
	Topics     []MirrorTopicsRequestTopic

	// Patterns (tag 0) are regexes removed from mirror.topics.include, or
	// added to mirror.topics.exclude when not there. Omitted when empty.
	Patterns []string

	// StateValidationOffset is the metadata offset at which the forwarding
	// broker validated partition states; -1 (the default) skips the check.
	StateValidationOffset int64
}

func (*StopMirrorTopicsRequest) Key() int16                 { return KeyStopMirrorTopics }
func (*StopMirrorTopicsRequest) MaxVersion() int16          { return MaxVersion }
func (v *StopMirrorTopicsRequest) SetVersion(version int16) { v.Version = version }
func (v *StopMirrorTopicsRequest) GetVersion() int16        { return v.Version }
func (v *StopMirrorTopicsRequest) IsFlexible() bool         { return v.Version >= 0 }
func (*StopMirrorTopicsRequest) IsAdminRequest()            {}

// ResponseKind returns an empty response of the same version.
func (v *StopMirrorTopicsRequest) ResponseKind() kmsg.Response {
	r := NewPtrStopMirrorTopicsResponse()
	r.Version = v.Version
	return r
}

// RequestWith issues v on r (a *kgo.Client) and returns the typed response.
func (v *StopMirrorTopicsRequest) RequestWith(ctx context.Context, r kmsg.Requestor) (*StopMirrorTopicsResponse, error) {
	kresp, err := r.Request(ctx, v)
	resp, _ := kresp.(*StopMirrorTopicsResponse)
	return resp, err
}

// Default sets StateValidationOffset to -1.
func (v *StopMirrorTopicsRequest) Default() { v.StateValidationOffset = -1 }

// NewPtrStopMirrorTopicsRequest returns a request with defaults set.
func NewPtrStopMirrorTopicsRequest() *StopMirrorTopicsRequest {
	v := new(StopMirrorTopicsRequest)
	v.Default()
	return v
}

// AppendTo appends the body (no request header) to dst.
func (v *StopMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	dst = appendStr(dst, v.MirrorName)
	dst = appendArray(dst, v.Topics)
	dst = kbin.AppendInt64(dst, v.StateValidationOffset)
	var tags tagWriter
	if len(v.Patterns) > 0 {
		tags.add(0, appendStrings(nil, v.Patterns))
	}
	return tags.appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *StopMirrorTopicsRequest) ReadFrom(src []byte) error {
	if err := checkVersion("StopMirrorTopicsRequest", v.Version); err != nil {
		return err
	}
	*v = StopMirrorTopicsRequest{Version: v.Version}
	r := newReader(src)
	v.MirrorName = r.str()
	v.Topics = readArray[MirrorTopicsRequestTopic](&r, minRequestTopic)
	v.StateValidationOffset = r.Int64()
	r.tags(func(tag uint32, sub *reader) bool {
		if tag != 0 {
			return false
		}
		v.Patterns = sub.strings()
		return true
	})
	return r.complete()
}
