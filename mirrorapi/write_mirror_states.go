package mirrorapi

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// WriteMirrorStates (key 101): a mirror partition's leader persists the
// partition's mirror state through the controller, which writes it into
// the metadata log (SPEC.md section 2: the prototype's inter-broker
// WriteMirrorStates, there to the state topic's coordinator; in kmirror the
// metadata log holds mirror states, DESIGN.md "Mirroring"). An inter-node
// RPC: served on the CONTROLLER listener only.
//
// The prototype's schema (MirrorName, Topics[]{Name, Partitions[]
// {PartitionIndex, LastMirrorEpoch, State}}, StoppedTopics[]) carries
// kmirror's tagged BrokerID (tag 0 of the request), the writing node, and
// two kmirror tagged fields per partition: LeaderEpoch (tag 0), the writer's
// leader epoch, which the controller checks against the partition's
// assignment so that a leader that lost the partition writes nothing; and
// Record (tag 1), the partition's whole state in the state store's own
// versioned encoding (the retry count, error, previous state, offsets
// that the prototype's fields do not hold). Its answer adds a tagged
// ErrorMessage per partition (tag 0) and AppliedIndex (tag 0 of the
// response), the metadata log index the writer waits for before it reads
// its own write.

// WriteMirrorStatesRequest names a mirror's partition states to persist.
type WriteMirrorStatesRequest struct {
	Version       int16
	MirrorName    string
	Topics        []WriteMirrorStatesRequestTopic
	StoppedTopics []string // the prototype's, unused (as there)
	// BrokerID is the writing node (tag 0; -1 when absent).
	BrokerID int32
}

// WriteMirrorStatesRequestTopic is one topic of the request, by name.
type WriteMirrorStatesRequestTopic struct {
	Name       string
	Partitions []WriteMirrorStatesRequestPartition
}

// WriteMirrorStatesRequestPartition is one partition's state.
type WriteMirrorStatesRequestPartition struct {
	PartitionIndex  int32
	LastMirrorEpoch int32
	State           int8
	// LeaderEpoch is the writer's leader epoch of the partition (tag 0;
	// -1 when absent).
	LeaderEpoch int32
	// Record is the state record's value (tag 1; empty when absent).
	Record []byte
}

const (
	minWriteStatesTopic           = 1 + 1 + 1     // Name, Partitions, tags
	minWriteStatesPartition       = 4 + 4 + 1 + 1 // PartitionIndex, LastMirrorEpoch, State, tags
	minWriteStatesResultTopic     = 1 + 1 + 1     // Name, Partitions, tags
	minWriteStatesResultPartition = 4 + 2 + 1     // PartitionIndex, ErrorCode, tags
)

func (p *WriteMirrorStatesRequestPartition) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendInt32(dst, p.LastMirrorEpoch)
	dst = kbin.AppendInt8(dst, p.State)
	var tags tagWriter
	if p.LeaderEpoch != -1 {
		tags.add(0, kbin.AppendInt32(nil, p.LeaderEpoch))
	}
	if len(p.Record) > 0 {
		tags.add(1, kbin.AppendCompactBytes(nil, p.Record))
	}
	return tags.appendTo(dst)
}

func (p *WriteMirrorStatesRequestPartition) readFrom(r *reader) {
	p.PartitionIndex = r.Int32()
	p.LastMirrorEpoch = r.Int32()
	p.State = r.Int8()
	p.LeaderEpoch = -1
	r.tags(func(tag uint32, sub *reader) bool {
		switch tag {
		case 0:
			p.LeaderEpoch = sub.Int32()
		case 1:
			p.Record = append([]byte{}, sub.CompactBytes()...)
		default:
			return false
		}
		return true
	})
}

func (t *WriteMirrorStatesRequestTopic) appendTo(dst []byte) []byte {
	dst = appendStr(dst, t.Name)
	dst = appendArray(dst, t.Partitions)
	return appendNoTags(dst)
}

func (t *WriteMirrorStatesRequestTopic) readFrom(r *reader) {
	t.Name = r.str()
	t.Partitions = readArray[WriteMirrorStatesRequestPartition](r, minWriteStatesPartition)
	r.noTags()
}

func (*WriteMirrorStatesRequest) Key() int16                 { return KeyWriteMirrorStates }
func (*WriteMirrorStatesRequest) MaxVersion() int16          { return MaxVersion }
func (v *WriteMirrorStatesRequest) SetVersion(version int16) { v.Version = version }
func (v *WriteMirrorStatesRequest) GetVersion() int16        { return v.Version }
func (v *WriteMirrorStatesRequest) IsFlexible() bool         { return v.Version >= 0 }

// ResponseKind returns an empty response of the same version.
func (v *WriteMirrorStatesRequest) ResponseKind() kmsg.Response {
	r := NewPtrWriteMirrorStatesResponse()
	r.Version = v.Version
	return r
}

// Default sets the fields that have defaults (none).
func (*WriteMirrorStatesRequest) Default() {}

// NewPtrWriteMirrorStatesRequest returns a request with defaults set.
func NewPtrWriteMirrorStatesRequest() *WriteMirrorStatesRequest {
	return &WriteMirrorStatesRequest{BrokerID: -1}
}

// AppendTo appends the body (no request header) to dst.
func (v *WriteMirrorStatesRequest) AppendTo(dst []byte) []byte {
	dst = appendStr(dst, v.MirrorName)
	dst = appendArray(dst, v.Topics)
	dst = appendStrings(dst, v.StoppedTopics)
	var tags tagWriter
	if v.BrokerID != -1 {
		tags.add(0, kbin.AppendInt32(nil, v.BrokerID))
	}
	return tags.appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *WriteMirrorStatesRequest) ReadFrom(src []byte) error {
	if err := checkVersion("WriteMirrorStatesRequest", v.Version); err != nil {
		return err
	}
	*v = WriteMirrorStatesRequest{Version: v.Version, BrokerID: -1}
	r := newReader(src)
	v.MirrorName = r.str()
	v.Topics = readArray[WriteMirrorStatesRequestTopic](&r, minWriteStatesTopic)
	v.StoppedTopics = r.strings()
	r.tags(func(tag uint32, sub *reader) bool {
		if tag != 0 {
			return false
		}
		v.BrokerID = sub.Int32()
		return true
	})
	return r.complete()
}

// WriteMirrorStatesResponse answers WriteMirrorStatesRequest per
// partition.
type WriteMirrorStatesResponse struct {
	Version int16
	Topics  []WriteMirrorStatesResponseTopic
	// AppliedIndex is kmirror's tagged field 0: the metadata log index
	// the controller had applied once it wrote the states.
	AppliedIndex uint64
}

// WriteMirrorStatesResponseTopic is one topic's answer.
type WriteMirrorStatesResponseTopic struct {
	Name       string
	Partitions []WriteMirrorStatesResponsePartition
}

// WriteMirrorStatesResponsePartition is one partition's answer.
type WriteMirrorStatesResponsePartition struct {
	PartitionIndex int32
	ErrorCode      int16
	// ErrorMessage is kmirror's tagged field 0 (nil when absent).
	ErrorMessage *string
}

func (p *WriteMirrorStatesResponsePartition) appendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendInt16(dst, p.ErrorCode)
	var tags tagWriter
	if p.ErrorMessage != nil {
		tags.add(0, appendStr(nil, *p.ErrorMessage))
	}
	return tags.appendTo(dst)
}

func (p *WriteMirrorStatesResponsePartition) readFrom(r *reader) {
	p.PartitionIndex = r.Int32()
	p.ErrorCode = r.Int16()
	r.tags(func(tag uint32, sub *reader) bool {
		if tag != 0 {
			return false
		}
		msg := sub.str()
		p.ErrorMessage = &msg
		return true
	})
}

func (t *WriteMirrorStatesResponseTopic) appendTo(dst []byte) []byte {
	dst = appendStr(dst, t.Name)
	dst = appendArray(dst, t.Partitions)
	return appendNoTags(dst)
}

func (t *WriteMirrorStatesResponseTopic) readFrom(r *reader) {
	t.Name = r.str()
	t.Partitions = readArray[WriteMirrorStatesResponsePartition](r, minWriteStatesResultPartition)
	r.noTags()
}

func (*WriteMirrorStatesResponse) Key() int16                 { return KeyWriteMirrorStates }
func (*WriteMirrorStatesResponse) MaxVersion() int16          { return MaxVersion }
func (v *WriteMirrorStatesResponse) SetVersion(version int16) { v.Version = version }
func (v *WriteMirrorStatesResponse) GetVersion() int16        { return v.Version }
func (v *WriteMirrorStatesResponse) IsFlexible() bool         { return v.Version >= 0 }

// RequestKind returns an empty request of the same version.
func (v *WriteMirrorStatesResponse) RequestKind() kmsg.Request {
	r := NewPtrWriteMirrorStatesRequest()
	r.Version = v.Version
	return r
}

// Default sets the fields that have defaults (none).
func (*WriteMirrorStatesResponse) Default() {}

// NewPtrWriteMirrorStatesResponse returns a response with defaults set.
func NewPtrWriteMirrorStatesResponse() *WriteMirrorStatesResponse {
	return new(WriteMirrorStatesResponse)
}

// AppendTo appends the body (no response header) to dst.
func (v *WriteMirrorStatesResponse) AppendTo(dst []byte) []byte {
	dst = appendArray(dst, v.Topics)
	var tags tagWriter
	if v.AppliedIndex != 0 {
		tags.add(0, kbin.AppendInt64(nil, int64(v.AppliedIndex)))
	}
	return tags.appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *WriteMirrorStatesResponse) ReadFrom(src []byte) error {
	if err := checkVersion("WriteMirrorStatesResponse", v.Version); err != nil {
		return err
	}
	*v = WriteMirrorStatesResponse{Version: v.Version}
	r := newReader(src)
	v.Topics = readArray[WriteMirrorStatesResponseTopic](&r, minWriteStatesResultTopic)
	r.tags(func(tag uint32, sub *reader) bool {
		if tag != 0 {
			return false
		}
		v.AppliedIndex = uint64(sub.Int64())
		return true
	})
	return r.complete()
}
