package mirrorapi

import (
	"context"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateClusterMirror (key 94), DeleteClusterMirror (key 104) and
// ListClusterMirrors (key 98): the mirror-level RPCs.

// CreateClusterMirrorRequest creates a named cluster mirror with its
// mirror-level configs (SPEC.md section 3). bootstrap.servers is required;
// the admin side fills mirror.source.cluster.id from the source cluster.
type CreateClusterMirrorRequest struct {
	// Version is the version of this message; only 0 exists.
	Version int16

	// MirrorName names the mirror: 1-249 characters of [A-Za-z0-9._-],
	// not "." or "..".
	MirrorName string

	// Configs are the mirror-level configs (the schema calls the field
	// Config).
	Configs []CreateClusterMirrorRequestConfig
}

// CreateClusterMirrorRequestConfig is one mirror-level config.
type CreateClusterMirrorRequestConfig struct {
	Name  string
	Value *string
}

func (c *CreateClusterMirrorRequestConfig) appendTo(dst []byte) []byte {
	dst = appendStr(dst, c.Name)
	dst = appendNullableStr(dst, c.Value)
	return appendNoTags(dst)
}

func (c *CreateClusterMirrorRequestConfig) readFrom(r *reader) {
	c.Name = r.str()
	c.Value = r.nullableStr()
	r.noTags()
}

func (*CreateClusterMirrorRequest) Key() int16                 { return KeyCreateClusterMirror }
func (*CreateClusterMirrorRequest) MaxVersion() int16          { return MaxVersion }
func (v *CreateClusterMirrorRequest) SetVersion(version int16) { v.Version = version }
func (v *CreateClusterMirrorRequest) GetVersion() int16        { return v.Version }
func (v *CreateClusterMirrorRequest) IsFlexible() bool         { return v.Version >= 0 }
func (*CreateClusterMirrorRequest) IsAdminRequest()            {}

// ResponseKind returns an empty response of the same version.
func (v *CreateClusterMirrorRequest) ResponseKind() kmsg.Response {
	r := NewPtrCreateClusterMirrorResponse()
	r.Version = v.Version
	return r
}

// RequestWith issues v on r (a *kgo.Client) and returns the typed response.
func (v *CreateClusterMirrorRequest) RequestWith(ctx context.Context, r kmsg.Requestor) (*CreateClusterMirrorResponse, error) {
	kresp, err := r.Request(ctx, v)
	resp, _ := kresp.(*CreateClusterMirrorResponse)
	return resp, err
}

// Default sets the fields that have defaults (none).
func (*CreateClusterMirrorRequest) Default() {}

// NewPtrCreateClusterMirrorRequest returns a request with defaults set.
func NewPtrCreateClusterMirrorRequest() *CreateClusterMirrorRequest {
	v := new(CreateClusterMirrorRequest)
	v.Default()
	return v
}

// AppendTo appends the body (no request header) to dst.
func (v *CreateClusterMirrorRequest) AppendTo(dst []byte) []byte {
	dst = appendStr(dst, v.MirrorName)
	dst = appendArray(dst, v.Configs)
	return appendNoTags(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *CreateClusterMirrorRequest) ReadFrom(src []byte) error {
	if err := checkVersion("CreateClusterMirrorRequest", v.Version); err != nil {
		return err
	}
	*v = CreateClusterMirrorRequest{Version: v.Version}
	r := newReader(src)
	v.MirrorName = r.str()
	v.Configs = readArray[CreateClusterMirrorRequestConfig](&r, minConfig)
	r.noTags()
	return r.complete()
}

// CreateClusterMirrorResponse answers CreateClusterMirrorRequest.
type CreateClusterMirrorResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	ErrorMessage   *string
}

func (*CreateClusterMirrorResponse) Key() int16                   { return KeyCreateClusterMirror }
func (*CreateClusterMirrorResponse) MaxVersion() int16            { return MaxVersion }
func (v *CreateClusterMirrorResponse) SetVersion(version int16)   { v.Version = version }
func (v *CreateClusterMirrorResponse) GetVersion() int16          { return v.Version }
func (v *CreateClusterMirrorResponse) IsFlexible() bool           { return v.Version >= 0 }
func (v *CreateClusterMirrorResponse) Throttle() (int32, bool)    { return v.ThrottleMillis, true }
func (v *CreateClusterMirrorResponse) SetThrottle(throttle int32) { v.ThrottleMillis = throttle }

// RequestKind returns an empty request of the same version.
func (v *CreateClusterMirrorResponse) RequestKind() kmsg.Request {
	r := NewPtrCreateClusterMirrorRequest()
	r.Version = v.Version
	return r
}

// Default sets the fields that have defaults (none).
func (*CreateClusterMirrorResponse) Default() {}

// NewPtrCreateClusterMirrorResponse returns a response with defaults set.
func NewPtrCreateClusterMirrorResponse() *CreateClusterMirrorResponse {
	v := new(CreateClusterMirrorResponse)
	v.Default()
	return v
}

// AppendTo appends the body (no response header) to dst.
func (v *CreateClusterMirrorResponse) AppendTo(dst []byte) []byte {
	return appendErrorResponse(dst, v.ThrottleMillis, v.ErrorCode, v.ErrorMessage)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *CreateClusterMirrorResponse) ReadFrom(src []byte) error {
	if err := checkVersion("CreateClusterMirrorResponse", v.Version); err != nil {
		return err
	}
	*v = CreateClusterMirrorResponse{Version: v.Version}
	return readErrorResponse(src, &v.ThrottleMillis, &v.ErrorCode, &v.ErrorMessage)
}

// appendErrorResponse encodes the {ThrottleTimeMs, ErrorCode, ErrorMessage}
// body shared by CreateClusterMirror and DeleteClusterMirror.
func appendErrorResponse(dst []byte, throttle int32, code int16, msg *string) []byte {
	dst = kbin.AppendInt32(dst, throttle)
	dst = kbin.AppendInt16(dst, code)
	dst = appendNullableStr(dst, msg)
	return appendNoTags(dst)
}

func readErrorResponse(src []byte, throttle *int32, code *int16, msg **string) error {
	r := newReader(src)
	*throttle = r.Int32()
	*code = r.Int16()
	*msg = r.nullableStr()
	r.noTags()
	return r.complete()
}

// DeleteClusterMirrorRequest deletes a cluster mirror whose topics are all
// stopped (else CLUSTER_MIRROR_NOT_EMPTY).
type DeleteClusterMirrorRequest struct {
	Version    int16
	MirrorName string

	// StateValidationOffset is the metadata offset at which the forwarding
	// broker validated partition states; -1 (the default) skips the check.
	StateValidationOffset int64
}

func (*DeleteClusterMirrorRequest) Key() int16                 { return KeyDeleteClusterMirror }
func (*DeleteClusterMirrorRequest) MaxVersion() int16          { return MaxVersion }
func (v *DeleteClusterMirrorRequest) SetVersion(version int16) { v.Version = version }
func (v *DeleteClusterMirrorRequest) GetVersion() int16        { return v.Version }
func (v *DeleteClusterMirrorRequest) IsFlexible() bool         { return v.Version >= 0 }
func (*DeleteClusterMirrorRequest) IsAdminRequest()            {}

// ResponseKind returns an empty response of the same version.
func (v *DeleteClusterMirrorRequest) ResponseKind() kmsg.Response {
	r := NewPtrDeleteClusterMirrorResponse()
	r.Version = v.Version
	return r
}

// RequestWith issues v on r (a *kgo.Client) and returns the typed response.
func (v *DeleteClusterMirrorRequest) RequestWith(ctx context.Context, r kmsg.Requestor) (*DeleteClusterMirrorResponse, error) {
	kresp, err := r.Request(ctx, v)
	resp, _ := kresp.(*DeleteClusterMirrorResponse)
	return resp, err
}

// Default sets StateValidationOffset to -1.
func (v *DeleteClusterMirrorRequest) Default() { v.StateValidationOffset = -1 }

// NewPtrDeleteClusterMirrorRequest returns a request with defaults set.
func NewPtrDeleteClusterMirrorRequest() *DeleteClusterMirrorRequest {
	v := new(DeleteClusterMirrorRequest)
	v.Default()
	return v
}

// AppendTo appends the body (no request header) to dst.
func (v *DeleteClusterMirrorRequest) AppendTo(dst []byte) []byte {
	dst = appendStr(dst, v.MirrorName)
	dst = kbin.AppendInt64(dst, v.StateValidationOffset)
	return appendNoTags(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *DeleteClusterMirrorRequest) ReadFrom(src []byte) error {
	if err := checkVersion("DeleteClusterMirrorRequest", v.Version); err != nil {
		return err
	}
	*v = DeleteClusterMirrorRequest{Version: v.Version}
	r := newReader(src)
	v.MirrorName = r.str()
	v.StateValidationOffset = r.Int64()
	r.noTags()
	return r.complete()
}

// DeleteClusterMirrorResponse answers DeleteClusterMirrorRequest.
type DeleteClusterMirrorResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	ErrorMessage   *string
}

func (*DeleteClusterMirrorResponse) Key() int16                   { return KeyDeleteClusterMirror }
func (*DeleteClusterMirrorResponse) MaxVersion() int16            { return MaxVersion }
func (v *DeleteClusterMirrorResponse) SetVersion(version int16)   { v.Version = version }
func (v *DeleteClusterMirrorResponse) GetVersion() int16          { return v.Version }
func (v *DeleteClusterMirrorResponse) IsFlexible() bool           { return v.Version >= 0 }
func (v *DeleteClusterMirrorResponse) Throttle() (int32, bool)    { return v.ThrottleMillis, true }
func (v *DeleteClusterMirrorResponse) SetThrottle(throttle int32) { v.ThrottleMillis = throttle }

// RequestKind returns an empty request of the same version.
func (v *DeleteClusterMirrorResponse) RequestKind() kmsg.Request {
	r := NewPtrDeleteClusterMirrorRequest()
	r.Version = v.Version
	return r
}

// Default sets the fields that have defaults (none).
func (*DeleteClusterMirrorResponse) Default() {}

// NewPtrDeleteClusterMirrorResponse returns a response with defaults set.
func NewPtrDeleteClusterMirrorResponse() *DeleteClusterMirrorResponse {
	v := new(DeleteClusterMirrorResponse)
	v.Default()
	return v
}

// AppendTo appends the body (no response header) to dst.
func (v *DeleteClusterMirrorResponse) AppendTo(dst []byte) []byte {
	return appendErrorResponse(dst, v.ThrottleMillis, v.ErrorCode, v.ErrorMessage)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *DeleteClusterMirrorResponse) ReadFrom(src []byte) error {
	if err := checkVersion("DeleteClusterMirrorResponse", v.Version); err != nil {
		return err
	}
	*v = DeleteClusterMirrorResponse{Version: v.Version}
	return readErrorResponse(src, &v.ThrottleMillis, &v.ErrorCode, &v.ErrorMessage)
}

// ListClusterMirrorsRequest lists the cluster mirrors of the cluster; any
// broker answers.
type ListClusterMirrorsRequest struct {
	Version int16

	// IncludeTopicNames asks for each mirror's topic names.
	IncludeTopicNames bool
}

func (*ListClusterMirrorsRequest) Key() int16                 { return KeyListClusterMirrors }
func (*ListClusterMirrorsRequest) MaxVersion() int16          { return MaxVersion }
func (v *ListClusterMirrorsRequest) SetVersion(version int16) { v.Version = version }
func (v *ListClusterMirrorsRequest) GetVersion() int16        { return v.Version }
func (v *ListClusterMirrorsRequest) IsFlexible() bool         { return v.Version >= 0 }
func (*ListClusterMirrorsRequest) IsAdminRequest()            {}

// ResponseKind returns an empty response of the same version.
func (v *ListClusterMirrorsRequest) ResponseKind() kmsg.Response {
	r := NewPtrListClusterMirrorsResponse()
	r.Version = v.Version
	return r
}

// RequestWith issues v on r (a *kgo.Client) and returns the typed response.
func (v *ListClusterMirrorsRequest) RequestWith(ctx context.Context, r kmsg.Requestor) (*ListClusterMirrorsResponse, error) {
	kresp, err := r.Request(ctx, v)
	resp, _ := kresp.(*ListClusterMirrorsResponse)
	return resp, err
}

// Default sets the fields that have defaults (none).
func (*ListClusterMirrorsRequest) Default() {}

// NewPtrListClusterMirrorsRequest returns a request with defaults set.
func NewPtrListClusterMirrorsRequest() *ListClusterMirrorsRequest {
	v := new(ListClusterMirrorsRequest)
	v.Default()
	return v
}

// AppendTo appends the body (no request header) to dst.
func (v *ListClusterMirrorsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendBool(dst, v.IncludeTopicNames)
	return appendNoTags(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *ListClusterMirrorsRequest) ReadFrom(src []byte) error {
	if err := checkVersion("ListClusterMirrorsRequest", v.Version); err != nil {
		return err
	}
	*v = ListClusterMirrorsRequest{Version: v.Version}
	r := newReader(src)
	v.IncludeTopicNames = r.Bool()
	r.noTags()
	return r.complete()
}

// ListClusterMirrorsResponse answers ListClusterMirrorsRequest.
type ListClusterMirrorsResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16

	// ErrorMessage is the top-level error message, or nil.
	ErrorMessage *string

	Mirrors []ListClusterMirrorsResponseMirror
}

// ListClusterMirrorsResponseMirror is one listed mirror.
type ListClusterMirrorsResponseMirror struct {
	MirrorName string

	// SourceBootstrap is the mirror's bootstrap.servers.
	SourceBootstrap string

	// SourceClusterID is the source cluster's id, nil while unknown. The
	// prototype's schema has a non-nullable string here (default ""): nil
	// is sent as "" and "" decodes as nil.
	SourceClusterID *string

	// TopicCount counts the topics that are MIRRORING.
	TopicCount int32

	// TopicNames are the topics of the mirror that are not STOPPED
	// (mirroring or paused), when the request asked for them.
	TopicNames []string
}

func (m *ListClusterMirrorsResponseMirror) appendTo(dst []byte) []byte {
	dst = appendStr(dst, m.MirrorName)
	dst = appendStr(dst, m.SourceBootstrap)
	if m.SourceClusterID != nil {
		dst = appendStr(dst, *m.SourceClusterID)
	} else {
		dst = appendStr(dst, "")
	}
	dst = kbin.AppendInt32(dst, m.TopicCount)
	dst = appendStrings(dst, m.TopicNames)
	return appendNoTags(dst)
}

func (m *ListClusterMirrorsResponseMirror) readFrom(r *reader) {
	m.MirrorName = r.str()
	m.SourceBootstrap = r.str()
	if id := r.str(); id != "" {
		m.SourceClusterID = &id
	}
	m.TopicCount = r.Int32()
	m.TopicNames = r.strings()
	r.noTags()
}

func (*ListClusterMirrorsResponse) Key() int16                   { return KeyListClusterMirrors }
func (*ListClusterMirrorsResponse) MaxVersion() int16            { return MaxVersion }
func (v *ListClusterMirrorsResponse) SetVersion(version int16)   { v.Version = version }
func (v *ListClusterMirrorsResponse) GetVersion() int16          { return v.Version }
func (v *ListClusterMirrorsResponse) IsFlexible() bool           { return v.Version >= 0 }
func (v *ListClusterMirrorsResponse) Throttle() (int32, bool)    { return v.ThrottleMillis, true }
func (v *ListClusterMirrorsResponse) SetThrottle(throttle int32) { v.ThrottleMillis = throttle }

// RequestKind returns an empty request of the same version.
func (v *ListClusterMirrorsResponse) RequestKind() kmsg.Request {
	r := NewPtrListClusterMirrorsRequest()
	r.Version = v.Version
	return r
}

// Default sets the fields that have defaults (none).
func (*ListClusterMirrorsResponse) Default() {}

// NewPtrListClusterMirrorsResponse returns a response with defaults set.
func NewPtrListClusterMirrorsResponse() *ListClusterMirrorsResponse {
	v := new(ListClusterMirrorsResponse)
	v.Default()
	return v
}

// AppendTo appends the body (no response header) to dst.
func (v *ListClusterMirrorsResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, v.ThrottleMillis)
	dst = kbin.AppendInt16(dst, v.ErrorCode)
	dst = appendNullableStr(dst, v.ErrorMessage)
	dst = appendArray(dst, v.Mirrors)
	return appendNoTags(dst)
}

// ReadFrom decodes a body, replacing every field but Version.
func (v *ListClusterMirrorsResponse) ReadFrom(src []byte) error {
	if err := checkVersion("ListClusterMirrorsResponse", v.Version); err != nil {
		return err
	}
	*v = ListClusterMirrorsResponse{Version: v.Version}
	r := newReader(src)
	v.ThrottleMillis = r.Int32()
	v.ErrorCode = r.Int16()
	v.ErrorMessage = r.nullableStr()
	v.Mirrors = readArray[ListClusterMirrorsResponseMirror](&r, minListMirror)
	r.noTags()
	return r.complete()
}
