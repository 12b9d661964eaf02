package mirrorapi

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BumpLeaderEpochs (key 105): a partition's leader asks the controller to
// raise the partitions' leader epochs to at least a minimum, the leaders
// unchanged (SPEC.md section 2: the KIP's EPOCH_FENCING, which keeps a
// mirror partition's epoch above the source's across the cluster). An
// inter-node RPC: served on the CONTROLLER listener only.
//
// kmirror's answer adds one tagged field (tag 0 of the response):
// AppliedIndex, the metadata log index of the entry that made the change
// (0 when none was needed), so the asking node can wait until it applied
// it before it appends with the new epoch.

// BumpLeaderEpochsRequest names the partitions and their minimum epochs.
type BumpLeaderEpochsRequest struct {
	Version int16
	Topics  []BumpLeaderEpochsRequestTopic
}

// BumpLeaderEpochsRequestTopic is one topic of the request, by id.
type BumpLeaderEpochsRequestTopic struct {
	TopicID    [16]byte
	Partitions []BumpLeaderEpochsRequestPartition
}

// BumpLeaderEpochsRequestPartition is one partition and the epoch its
// leader epoch must reach.
type BumpLeaderEpochsRequestPartition struct {
	PartitionIndex int32
	MinLeaderEpoch int32
}

const (
	minBumpTopic           = 16 + 1 + 1    // TopicID, Partitions, tags
	minBumpPartition       = 4 + 4 + 1     // PartitionIndex, MinLeaderEpoch, tags
	minBumpResultTopic     = 1 + 1 + 1     // TopicName, Partitions, tags
	minBumpResultPartition = 4 + 2 + 1 + 1 // PartitionIndex, ErrorCode, ErrorMessage, tags
)

func (p *BumpLeaderEpochsRequestPartition) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendInt32(dst, p.MinLeaderEpoch)
	return appendNoTags(dst)
}

func (p *BumpLeaderEpochsRequestPartition) readFrom(r *reader) {
	p.PartitionIndex = r.Int32()
	p.MinLeaderEpoch = r.Int32()
	r.noTags()
}

func (t *BumpLeaderEpochsRequestTopic) appendTo(dst []byte) []byte {
	dst = kbin.AppendUuid(dst, t.TopicID)
	dst = appendArray(dst, t.Partitions)
	return appendNoTags(dst)
}

func (t *BumpLeaderEpochsRequestTopic) readFrom(r *reader) {
	t.TopicID = r.Uuid()
	t.Partitions = readArray[BumpLeaderEpochsRequestPartition](r, minBumpPartition)
	r.noTags()
}

func (*BumpLeaderEpochsRequest) Key() int16                 { return KeyBumpLeaderEpochs }
func (*BumpLeaderEpochsRequest) MaxVersion() int16          { return MaxVersion }
func (v *BumpLeaderEpochsRequest) SetVersion(version int16) { v.Version = version }
func (v *BumpLeaderEpochsRequest) GetVersion() int16        { return v.Version }
func (v *BumpLeaderEpochsRequest) IsFlexible() bool         { return v.Version >= 0 }

// ResponseKind returns an empty response of the same version.
func (v *BumpLeaderEpochsRequest) ResponseKind() kmsg.Response {
	r := NewPtrBumpLeaderEpochsResponse()
	r.Version = v.Version
	return r
}

// Default sets the fields that have defaults (none).
func (*BumpLeaderEpochsRequest) Default() {}

// NewPtrBumpLeaderEpochsRequest returns a request with defaults set.
func NewPtrBumpLeaderEpochsRequest() *BumpLeaderEpochsRequest { return new(BumpLeaderEpochsRequest) }

// AppendTo appends the body (no request header) to dst.
func (v *BumpLeaderEpochsRequest) AppendTo(dst []byte) []byte {
	dst = appendArray(dst, v.Topics)
	return appendNoTags(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *BumpLeaderEpochsRequest) ReadFrom(src []byte) error {
	if err := checkVersion("BumpLeaderEpochsRequest", v.Version); err != nil {
		return err
	}
	*v = BumpLeaderEpochsRequest{Version: v.Version}
	r := newReader(src)
	v.Topics = readArray[BumpLeaderEpochsRequestTopic](&r, minBumpTopic)
	r.noTags()
	return r.complete()
}

// BumpLeaderEpochsResponse answers BumpLeaderEpochsRequest per partition.
type BumpLeaderEpochsResponse struct {
	Version int16
	Topics  []BumpLeaderEpochsResponseTopic
	// AppliedIndex is kmirror's tagged field 0: the metadata log index of
	// the change (0: none was needed).
	AppliedIndex uint64
}

// BumpLeaderEpochsResponseTopic is one topic's answer, by name as the
// prototype's schema has it.
type BumpLeaderEpochsResponseTopic struct {
	TopicName  string
	Partitions []BumpLeaderEpochsResponsePartition
}

// BumpLeaderEpochsResponsePartition is one partition's answer.
type BumpLeaderEpochsResponsePartition struct {
	PartitionIndex int32
	ErrorCode      int16
	ErrorMessage   *string
}

func (p *BumpLeaderEpochsResponsePartition) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendInt16(dst, p.ErrorCode)
	dst = appendNullableStr(dst, p.ErrorMessage)
	return appendNoTags(dst)
}

func (p *BumpLeaderEpochsResponsePartition) readFrom(r *reader) {
	p.PartitionIndex = r.Int32()
	p.ErrorCode = r.Int16()
	p.ErrorMessage = r.nullableStr()
	r.noTags()
}

func (t *BumpLeaderEpochsResponseTopic) appendTo(dst []byte) []byte {
	dst = appendStr(dst, t.TopicName)
	dst = appendArray(dst, t.Partitions)
	return appendNoTags(dst)
}

func (t *BumpLeaderEpochsResponseTopic) readFrom(r *reader) {
	t.TopicName = r.str()
	t.Partitions = readArray[BumpLeaderEpochsResponsePartition](r, minBumpResultPartition)
	r.noTags()
}

func (*BumpLeaderEpochsResponse) Key() int16                 { return KeyBumpLeaderEpochs }
func (*BumpLeaderEpochsResponse) MaxVersion() int16          { return MaxVersion }
func (v *BumpLeaderEpochsResponse) SetVersion(version int16) { v.Version = version }
func (v *BumpLeaderEpochsResponse) GetVersion() int16        { return v.Version }
func (v *BumpLeaderEpochsResponse) IsFlexible() bool         { return v.Version >= 0 }

// RequestKind returns an empty request of the same version.
func (v *BumpLeaderEpochsResponse) RequestKind() kmsg.Request {
	r := NewPtrBumpLeaderEpochsRequest()
	r.Version = v.Version
	return r
}

// Default sets the fields that have defaults (none).
func (*BumpLeaderEpochsResponse) Default() {}

// NewPtrBumpLeaderEpochsResponse returns a response with defaults set.
func NewPtrBumpLeaderEpochsResponse() *BumpLeaderEpochsResponse { return new(BumpLeaderEpochsResponse) }

// AppendTo appends the body (no response header) to dst.
func (v *BumpLeaderEpochsResponse) AppendTo(dst []byte) []byte {
	dst = appendArray(dst, v.Topics)
	var tags tagWriter
	if v.AppliedIndex != 0 {
		tags.add(0, kbin.AppendInt64(nil, int64(v.AppliedIndex)))
	}
	return tags.appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *BumpLeaderEpochsResponse) ReadFrom(src []byte) error {
	if err := checkVersion("BumpLeaderEpochsResponse", v.Version); err != nil {
		return err
	}
	*v = BumpLeaderEpochsResponse{Version: v.Version}
	r := newReader(src)
	v.Topics = readArray[BumpLeaderEpochsResponseTopic](&r, minBumpResultTopic)
	r.tags(func(tag uint32, sub *reader) bool {
		if tag != 0 {
			return false
		}
		v.AppliedIndex = uint64(sub.Int64())
		return true
	})
	return r.complete()
}
