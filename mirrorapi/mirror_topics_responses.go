package mirrorapi

import "github.com/twmb/franz-go/pkg/kmsg"

// The responses of the five topic-level RPCs: one layout
// (mirrorTopicsResponse, mirror_topics.go), a named type each.

// StartMirrorTopicsResponse answers StartMirrorTopicsRequest.
type StartMirrorTopicsResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	ErrorMessage   *string
	Topics         []MirrorTopicsResponseTopic

	// DryRun (tag 0, a kmirror addition) is set only in the answer to
	// a StartMirrorTopics dry run (start_preview.go).
	DryRun bool
}

func (*StartMirrorTopicsResponse) Key() int16                   { return KeyStartMirrorTopics }
func (*StartMirrorTopicsResponse) MaxVersion() int16            { return MaxVersion }
func (v *StartMirrorTopicsResponse) SetVersion(version int16)   { v.Version = version }
func (v *StartMirrorTopicsResponse) GetVersion() int16          { return v.Version }
func (v *StartMirrorTopicsResponse) IsFlexible() bool           { return v.Version >= 0 }
func (v *StartMirrorTopicsResponse) Throttle() (int32, bool)    { return v.ThrottleMillis, true }
func (v *StartMirrorTopicsResponse) SetThrottle(throttle int32) { v.ThrottleMillis = throttle }
func (v *StartMirrorTopicsResponse) RequestKind() kmsg.Request {
	r := NewPtrStartMirrorTopicsRequest()
	r.Version = v.Version
	return r
}

// Default sets the fields that have defaults (none).
func (*StartMirrorTopicsResponse) Default() {}

// NewPtrStartMirrorTopicsResponse returns a response with defaults set.
func NewPtrStartMirrorTopicsResponse() *StartMirrorTopicsResponse {
	v := new(StartMirrorTopicsResponse)
	v.Default()
	return v
}

// AppendTo appends the body (no response header) to dst.
func (v *StartMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return (*mirrorTopicsResponse)(v).appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *StartMirrorTopicsResponse) ReadFrom(src []byte) error {
	return (*mirrorTopicsResponse)(v).readFrom("StartMirrorTopicsResponse", src)
}

// StopMirrorTopicsResponse answers StopMirrorTopicsRequest.
type StopMirrorTopicsResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	ErrorMessage   *string
	Topics         []MirrorTopicsResponseTopic

	// DryRun (tag 0, a kmirror addition) is set only in the answer to
	// a StartMirrorTopics dry run (start_preview.go).
	DryRun bool
}

func (*StopMirrorTopicsResponse) Key() int16                   { return KeyStopMirrorTopics }
func (*StopMirrorTopicsResponse) MaxVersion() int16            { return MaxVersion }
func (v *StopMirrorTopicsResponse) SetVersion(version int16)   { v.Version = version }
func (v *StopMirrorTopicsResponse) GetVersion() int16          { return v.Version }
func (v *StopMirrorTopicsResponse) IsFlexible() bool           { return v.Version >= 0 }
func (v *StopMirrorTopicsResponse) Throttle() (int32, bool)    { return v.ThrottleMillis, true }
func (v *StopMirrorTopicsResponse) SetThrottle(throttle int32) { v.ThrottleMillis = throttle }
func (v *StopMirrorTopicsResponse) RequestKind() kmsg.Request {
	r := NewPtrStopMirrorTopicsRequest()
	r.Version = v.Version
	return r
}

// Default sets the fields that have defaults (none).
func (*StopMirrorTopicsResponse) Default() {}

// NewPtrStopMirrorTopicsResponse returns a response with defaults set.
func NewPtrStopMirrorTopicsResponse() *StopMirrorTopicsResponse {
	v := new(StopMirrorTopicsResponse)
	v.Default()
	return v
}

// AppendTo appends the body (no response header) to dst.
func (v *StopMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return (*mirrorTopicsResponse)(v).appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *StopMirrorTopicsResponse) ReadFrom(src []byte) error {
	return (*mirrorTopicsResponse)(v).readFrom("StopMirrorTopicsResponse", src)
}

// PauseMirrorTopicsResponse answers PauseMirrorTopicsRequest.
type PauseMirrorTopicsResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	ErrorMessage   *string
	Topics         []MirrorTopicsResponseTopic

	// DryRun (tag 0, a kmirror addition) is set only in the answer to
	// a StartMirrorTopics dry run (start_preview.go).
	DryRun bool
}

func (*PauseMirrorTopicsResponse) Key() int16                   { return KeyPauseMirrorTopics }
func (*PauseMirrorTopicsResponse) MaxVersion() int16            { return MaxVersion }
func (v *PauseMirrorTopicsResponse) SetVersion(version int16)   { v.Version = version }
func (v *PauseMirrorTopicsResponse) GetVersion() int16          { return v.Version }
func (v *PauseMirrorTopicsResponse) IsFlexible() bool           { return v.Version >= 0 }
func (v *PauseMirrorTopicsResponse) Throttle() (int32, bool)    { return v.ThrottleMillis, true }
func (v *PauseMirrorTopicsResponse) SetThrottle(throttle int32) { v.ThrottleMillis = throttle }
func (v *PauseMirrorTopicsResponse) RequestKind() kmsg.Request {
	r := NewPtrPauseMirrorTopicsRequest()
	r.Version = v.Version
	return r
}

// Default sets the fields that have defaults (none).
func (*PauseMirrorTopicsResponse) Default() {}

// NewPtrPauseMirrorTopicsResponse returns a response with defaults set.
func NewPtrPauseMirrorTopicsResponse() *PauseMirrorTopicsResponse {
	v := new(PauseMirrorTopicsResponse)
	v.Default()
	return v
}

// AppendTo appends the body (no response header) to dst.
func (v *PauseMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return (*mirrorTopicsResponse)(v).appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *PauseMirrorTopicsResponse) ReadFrom(src []byte) error {
	return (*mirrorTopicsResponse)(v).readFrom("PauseMirrorTopicsResponse", src)
}

// ResumeMirrorTopicsResponse answers ResumeMirrorTopicsRequest.
type ResumeMirrorTopicsResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	ErrorMessage   *string
	Topics         []MirrorTopicsResponseTopic

	// DryRun (tag 0, a kmirror addition) is set only in the answer to
	// a StartMirrorTopics dry run (start_preview.go).
	DryRun bool
}

func (*ResumeMirrorTopicsResponse) Key() int16                   { return KeyResumeMirrorTopics }
func (*ResumeMirrorTopicsResponse) MaxVersion() int16            { return MaxVersion }
func (v *ResumeMirrorTopicsResponse) SetVersion(version int16)   { v.Version = version }
func (v *ResumeMirrorTopicsResponse) GetVersion() int16          { return v.Version }
func (v *ResumeMirrorTopicsResponse) IsFlexible() bool           { return v.Version >= 0 }
func (v *ResumeMirrorTopicsResponse) Throttle() (int32, bool)    { return v.ThrottleMillis, true }
func (v *ResumeMirrorTopicsResponse) SetThrottle(throttle int32) { v.ThrottleMillis = throttle }
func (v *ResumeMirrorTopicsResponse) RequestKind() kmsg.Request {
	r := NewPtrResumeMirrorTopicsRequest()
	r.Version = v.Version
	return r
}

// Default sets the fields that have defaults (none).
func (*ResumeMirrorTopicsResponse) Default() {}

// NewPtrResumeMirrorTopicsResponse returns a response with defaults set.
func NewPtrResumeMirrorTopicsResponse() *ResumeMirrorTopicsResponse {
	v := new(ResumeMirrorTopicsResponse)
	v.Default()
	return v
}

// AppendTo appends the body (no response header) to dst.
func (v *ResumeMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return (*mirrorTopicsResponse)(v).appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *ResumeMirrorTopicsResponse) ReadFrom(src []byte) error {
	return (*mirrorTopicsResponse)(v).readFrom("ResumeMirrorTopicsResponse", src)
}

// RecoverMirrorTopicsResponse answers RecoverMirrorTopicsRequest.
type RecoverMirrorTopicsResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	ErrorMessage   *string
	Topics         []MirrorTopicsResponseTopic

	// DryRun (tag 0, a kmirror addition) is set only in the answer to
	// a StartMirrorTopics dry run (start_preview.go).
	DryRun bool
}

func (*RecoverMirrorTopicsResponse) Key() int16                   { return KeyRecoverMirrorTopics }
func (*RecoverMirrorTopicsResponse) MaxVersion() int16            { return MaxVersion }
func (v *RecoverMirrorTopicsResponse) SetVersion(version int16)   { v.Version = version }
func (v *RecoverMirrorTopicsResponse) GetVersion() int16          { return v.Version }
func (v *RecoverMirrorTopicsResponse) IsFlexible() bool           { return v.Version >= 0 }
func (v *RecoverMirrorTopicsResponse) Throttle() (int32, bool)    { return v.ThrottleMillis, true }
func (v *RecoverMirrorTopicsResponse) SetThrottle(throttle int32) { v.ThrottleMillis = throttle }
func (v *RecoverMirrorTopicsResponse) RequestKind() kmsg.Request {
	r := NewPtrRecoverMirrorTopicsRequest()
	r.Version = v.Version
	return r
}

// Default sets the fields that have defaults (none).
func (*RecoverMirrorTopicsResponse) Default() {}

// NewPtrRecoverMirrorTopicsResponse returns a response with defaults set.
func NewPtrRecoverMirrorTopicsResponse() *RecoverMirrorTopicsResponse {
	v := new(RecoverMirrorTopicsResponse)
	v.Default()
	return v
}

// AppendTo appends the body (no response header) to dst.
func (v *RecoverMirrorTopicsResponse) AppendTo(dst []byte) []byte {
	return (*mirrorTopicsResponse)(v).appendTo(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *RecoverMirrorTopicsResponse) ReadFrom(src []byte) error {
	return (*mirrorTopicsResponse)(v).readFrom("RecoverMirrorTopicsResponse", src)
}
