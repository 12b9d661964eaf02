package mirrorapi

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// API keys of the mirror RPCs, the prototype's (SPEC.md section 2). Key 94 is
// also Apache Kafka's UnregisterController (kmsg.RequestForKey(94)), a
// controller-only API: a broker dispatching on the key must ask this package
// first. These constants are part of the wire format.
const (
	KeyCreateClusterMirror    int16 = 94
	KeyStartMirrorTopics      int16 = 95
	KeyStopMirrorTopics       int16 = 96
	KeyListClusterMirrors     int16 = 98
	KeyDescribeClusterMirrors int16 = 99
	KeyPauseMirrorTopics      int16 = 102
	KeyResumeMirrorTopics     int16 = 103
	KeyWriteMirrorStates      int16 = 101
	KeyDeleteClusterMirror    int16 = 104
	KeyBumpLeaderEpochs       int16 = 105
	KeyRecoverMirrorTopics    int16 = 107
)

// apis is the one table of the mirror RPCs: key, name, and a constructor of
// a fresh request with defaults. Keys, RequestForKey, ResponseForKey and
// NameForKey all read it. Every RPC has exactly version 0, flexible.
var apis = [...]struct {
	key  int16
	name string
	new  func() kmsg.Request
}{
	{KeyCreateClusterMirror, "CreateClusterMirror", func() kmsg.Request { return NewPtrCreateClusterMirrorRequest() }},
	{KeyStartMirrorTopics, "StartMirrorTopics", func() kmsg.Request { return NewPtrStartMirrorTopicsRequest() }},
	{KeyStopMirrorTopics, "StopMirrorTopics", func() kmsg.Request { return NewPtrStopMirrorTopicsRequest() }},
	{KeyListClusterMirrors, "ListClusterMirrors", func() kmsg.Request { return NewPtrListClusterMirrorsRequest() }},
	{KeyDescribeClusterMirrors, "DescribeClusterMirrors", func() kmsg.Request { return NewPtrDescribeClusterMirrorsRequest() }},
	{KeyWriteMirrorStates, "WriteMirrorStates", func() kmsg.Request { return NewPtrWriteMirrorStatesRequest() }},
	{KeyPauseMirrorTopics, "PauseMirrorTopics", func() kmsg.Request { return NewPtrPauseMirrorTopicsRequest() }},
	{KeyResumeMirrorTopics, "ResumeMirrorTopics", func() kmsg.Request { return NewPtrResumeMirrorTopicsRequest() }},
	{KeyDeleteClusterMirror, "DeleteClusterMirror", func() kmsg.Request { return NewPtrDeleteClusterMirrorRequest() }},
	{KeyBumpLeaderEpochs, "BumpLeaderEpochs", func() kmsg.Request { return NewPtrBumpLeaderEpochsRequest() }},
	{KeyRecoverMirrorTopics, "RecoverMirrorTopics", func() kmsg.Request { return NewPtrRecoverMirrorTopicsRequest() }},
}

// MaxVersion is the highest (and only) version of every mirror RPC. An
// ApiVersions answer lists each of Keys with min and max 0.
const MaxVersion int16 = 0

// Keys lists every mirror API key with its name, in key order (for
// ApiVersions and the CLI). Treat it as read-only.
var Keys = func() []struct {
	Key  int16
	Name string
} {
	out := make([]struct {
		Key  int16
		Name string
	}, len(apis))
	for i, a := range apis {
		out[i].Key, out[i].Name = a.key, a.name
	}
	return out
}()

// RequestForKey returns a fresh request of a mirror key, with defaults set
// (as NewPtrXRequest), or nil for any other key.
func RequestForKey(key int16) kmsg.Request {
	for _, a := range apis {
		if a.key == key {
			return a.new()
		}
	}
	return nil
}

// ResponseForKey returns a fresh response of a mirror key, or nil for any
// other key.
func ResponseForKey(key int16) kmsg.Response {
	if r := RequestForKey(key); r != nil {
		return r.ResponseKind()
	}
	return nil
}

// NameForKey returns the name of a mirror key ("CreateClusterMirror"), or ""
// for any other key.
func NameForKey(key int16) string {
	for _, a := range apis {
		if a.key == key {
			return a.name
		}
	}
	return ""
}

// Every request is a kmsg.AdminRequest: kgo sends it to the controller named
// in the Metadata response (a kmirror node names itself), and every response
// reports its throttle.
var (
	_ kmsg.AdminRequest = (*CreateClusterMirrorRequest)(nil)
	_ kmsg.AdminRequest = (*StartMirrorTopicsRequest)(nil)
	_ kmsg.AdminRequest = (*StopMirrorTopicsRequest)(nil)
	_ kmsg.AdminRequest = (*ListClusterMirrorsRequest)(nil)
	_ kmsg.AdminRequest = (*DescribeClusterMirrorsRequest)(nil)
	_ kmsg.AdminRequest = (*PauseMirrorTopicsRequest)(nil)
	_ kmsg.AdminRequest = (*ResumeMirrorTopicsRequest)(nil)
	_ kmsg.AdminRequest = (*DeleteClusterMirrorRequest)(nil)
	_ kmsg.AdminRequest = (*RecoverMirrorTopicsRequest)(nil)

	_ throttled = (*CreateClusterMirrorResponse)(nil)
	_ throttled = (*StartMirrorTopicsResponse)(nil)
	_ throttled = (*StopMirrorTopicsResponse)(nil)
	_ throttled = (*ListClusterMirrorsResponse)(nil)
	_ throttled = (*DescribeClusterMirrorsResponse)(nil)
	_ throttled = (*PauseMirrorTopicsResponse)(nil)
	_ throttled = (*ResumeMirrorTopicsResponse)(nil)
	_ throttled = (*DeleteClusterMirrorResponse)(nil)
	_ throttled = (*RecoverMirrorTopicsResponse)(nil)
)

type throttled interface {
	kmsg.Response
	kmsg.ThrottleResponse
	kmsg.SetThrottleResponse
}
