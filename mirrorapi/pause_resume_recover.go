package mirrorapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// PauseMirrorTopics (102), ResumeMirrorTopics (103) and RecoverMirrorTopics
// (107): the topic-level RPCs that change how a mirror topic is fetched,
// on the shapes of mirror_topics.go (their responses: mirror_topics_responses.go).

// PauseMirrorTopicsRequest pauses mirroring of topics (they stay read-only).
type PauseMirrorTopicsRequest struct {
	Version    int16
	MirrorName string
	Topics     []MirrorTopicsRequestTopic

	// StateValidationOffset is the metadata offset at which the forwarding
	// broker validated partition states; -1 (the default) skips the check.
	StateValidationOffset int64
}

func (*PauseMirrorTopicsRequest) Key() int16                 { return KeyPauseMirrorTopics }
func (*PauseMirrorTopicsRequest) MaxVersion() int16          { return MaxVersion }
func (v *PauseMirrorTopicsRequest) SetVersion(version int16) { v.Version = version }
func (v *PauseMirrorTopicsRequest) GetVersion() int16        { return v.Version }
func (v *PauseMirrorTopicsRequest) IsFlexible() bool         { return v.Version >= 0 }
func (*PauseMirrorTopicsRequest) IsAdminRequest()            {}

// ResponseKind returns an empty response of the same version.
func (v *PauseMirrorTopicsRequest) ResponseKind() kmsg.Response {
	r := NewPtrPauseMirrorTopicsResponse()
	r.Version = v.Version
	return r
}

// RequestWith issues v on r (a *kgo.Client) and returns the typed response.
func (v *PauseMirrorTopicsRequest) RequestWith(ctx context.Context, r kmsg.Requestor) (*PauseMirrorTopicsResponse, error) {
	kresp, err := r.Request(ctx, v)
	resp, _ := kresp.(*PauseMirrorTopicsResponse)
	return resp, err
}

// Default sets StateValidationOffset to -1.
func (v *PauseMirrorTopicsRequest) Default() { v.StateValidationOffset = -1 }

// NewPtrPauseMirrorTopicsRequest returns a request with defaults set.
func NewPtrPauseMirrorTopicsRequest() *PauseMirrorTopicsRequest {
	v := new(PauseMirrorTopicsRequest)
	v.Default()
	return v
}

// AppendTo appends the body (no request header) to dst.
func (v *PauseMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	return (*mirrorTopicsRequest)(v).appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *PauseMirrorTopicsRequest) ReadFrom(src []byte) error {
	return (*mirrorTopicsRequest)(v).readFrom("PauseMirrorTopicsRequest", src)
}

// ResumeMirrorTopicsRequest resumes mirroring of paused topics.
type ResumeMirrorTopicsRequest struct {
	Version    int16
	MirrorName string
	Topics     []MirrorTopicsRequestTopic

	// StateValidationOffset is the metadata offset at which the forwarding
	// broker validated partition states; -1 (the default) skips the check.
	StateValidationOffset int64
}

func (*ResumeMirrorTopicsRequest) Key() int16                 { return KeyResumeMirrorTopics }
func (*ResumeMirrorTopicsRequest) MaxVersion() int16          { return MaxVersion }
func (v *ResumeMirrorTopicsRequest) SetVersion(version int16) { v.Version = version }
func (v *ResumeMirrorTopicsRequest) GetVersion() int16        { return v.Version }
func (v *ResumeMirrorTopicsRequest) IsFlexible() bool         { return v.Version >= 0 }
func (*ResumeMirrorTopicsRequest) IsAdminRequest()            {}

// ResponseKind returns an empty response of the same version.
func (v *ResumeMirrorTopicsRequest) ResponseKind() kmsg.Response {
	r := NewPtrResumeMirrorTopicsResponse()
	r.Version = v.Version
	return r
}

// RequestWith issues v on r (a *kgo.Client) and returns the typed response.
func (v *ResumeMirrorTopicsRequest) RequestWith(ctx context.Context, r kmsg.Requestor) (*ResumeMirrorTopicsResponse, error) {
	kresp, err := r.Request(ctx, v)
	resp, _ := kresp.(*ResumeMirrorTopicsResponse)
	return resp, err
}

// Default sets StateValidationOffset to -1.
func (v *ResumeMirrorTopicsRequest) Default() { v.StateValidationOffset = -1 }

// NewPtrResumeMirrorTopicsRequest returns a request with defaults set.
func NewPtrResumeMirrorTopicsRequest() *ResumeMirrorTopicsRequest {
	v := new(ResumeMirrorTopicsRequest)
	v.Default()
	return v
}

// AppendTo appends the body (no request header) to dst.
func (v *ResumeMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	return (*mirrorTopicsRequest)(v).appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *ResumeMirrorTopicsRequest) ReadFrom(src []byte) error {
	return (*mirrorTopicsRequest)(v).readFrom("ResumeMirrorTopicsRequest", src)
}

// RecoverMirrorTopicsRequest asks FAILED mirror partitions of topics to
// retry now (a later addition to the prototype: no StateValidationOffset).
type RecoverMirrorTopicsRequest struct {
	Version    int16
	MirrorName string
	Topics     []MirrorTopicsRequestTopic
}

func (*RecoverMirrorTopicsRequest) Key() int16                 { return KeyRecoverMirrorTopics }
func (*RecoverMirrorTopicsRequest) MaxVersion() int16          { return MaxVersion }
func (v *RecoverMirrorTopicsRequest) SetVersion(version int16) { v.Version = version }
func (v *RecoverMirrorTopicsRequest) GetVersion() int16        { return v.Version }
func (v *RecoverMirrorTopicsRequest) IsFlexible() bool         { return v.Version >= 0 }
func (*RecoverMirrorTopicsRequest) IsAdminRequest()            {}

// ResponseKind returns an empty response of the same version.
func (v *RecoverMirrorTopicsRequest) ResponseKind() kmsg.Response {
	r := NewPtrRecoverMirrorTopicsResponse()
	r.Version = v.Version
	return r
}

// RequestWith issues v on r (a *kgo.Client) and returns the typed response.
func (v *RecoverMirrorTopicsRequest) RequestWith(ctx context.Context, r kmsg.Requestor) (*RecoverMirrorTopicsResponse, error) {
	kresp, err := r.Request(ctx, v)
	resp, _ := kresp.(*RecoverMirrorTopicsResponse)
	return resp, err
}

// Default sets the fields that have defaults (none).
func (*RecoverMirrorTopicsRequest) Default() {}

// NewPtrRecoverMirrorTopicsRequest returns a request with defaults set.
func NewPtrRecoverMirrorTopicsRequest() *RecoverMirrorTopicsRequest {
	v := new(RecoverMirrorTopicsRequest)
	v.Default()
	return v
}

// AppendTo appends the body (no request header) to dst.
func (v *RecoverMirrorTopicsRequest) AppendTo(dst []byte) []byte {
	dst = appendStr(dst, v.MirrorName)
	dst = appendArray(dst, v.Topics)
	return appendNoTags(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *RecoverMirrorTopicsRequest) ReadFrom(src []byte) error {
	if err := checkVersion("RecoverMirrorTopicsRequest", v.Version); err != nil {
		return err
	}
	*v = RecoverMirrorTopicsRequest{Version: v.Version}
	r := newReader(src)
	v.MirrorName = r.str()
	v.Topics = readArray[MirrorTopicsRequestTopic](&r, minRequestTopic)
	r.noTags()
	return r.complete()
}
