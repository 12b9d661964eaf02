package broker

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirrorapi"
)

// The authorization of the KIP-1279 mirror RPCs (authz_checks.go has the
// other APIs').

// mirrorRPCDenied applies the authorization of the mirror RPCs that change
// a mirror (SPEC.md section 7, as the KIP-1279 prototype): CREATE on the
// mirror for CreateClusterMirror, DELETE for DeleteClusterMirror, ALTER
// for the topic RPCs, which also need ALTER_CONFIGS on every topic they
// name. It returns the answer of a refused request, or nil.
func (c *authzCtx) mirrorRPCDenied(req kmsg.Request) kmsg.Response {
	if !c.on() {
		return nil
	}
	var (
		name   string
		op     int8
		topics []string
	)
	named := func(ts []mirrorapi.MirrorTopicsRequestTopic) {
		for _, t := range ts {
			topics = append(topics, t.TopicName)
		}
	}
	switch r := req.(type) {
	case *mirrorapi.CreateClusterMirrorRequest:
		name, op = r.MirrorName, aclOperationCreate
	case *mirrorapi.DeleteClusterMirrorRequest:
		name, op = r.MirrorName, aclOperationDelete
	case *mirrorapi.StartMirrorTopicsRequest:
		name, op = r.MirrorName, aclOperationAlter
		for _, t := range r.Topics {
			topics = append(topics, t.TopicName)
		}
	case *mirrorapi.StopMirrorTopicsRequest:
		name, op = r.MirrorName, aclOperationAlter
		named(r.Topics)
	case *mirrorapi.PauseMirrorTopicsRequest:
		name, op = r.MirrorName, aclOperationAlter
		named(r.Topics)
	case *mirrorapi.ResumeMirrorTopicsRequest:
		name, op = r.MirrorName, aclOperationAlter
		named(r.Topics)
	case *mirrorapi.RecoverMirrorTopicsRequest:
		name, op = r.MirrorName, aclOperationAlter
		named(r.Topics)
	default:
		return nil // ListClusterMirrors, DescribeClusterMirrors: filtered
	}
	var code int16
	var msg *string
	if !c.mirror(op, name) {
		code, msg = mirrorAuthorizationFailed()
	} else {
		var denied []string
		for _, t := range topics {
			if !c.topic(aclOperationAlterConfigs, t) && !slices.Contains(denied, t) {
				denied = append(denied, t)
			}
		}
		if len(denied) == 0 {
			return nil
		}
		m := "Not authorized to access topics: [" + strings.Join(denied, ", ") + "]"
		code, msg = kerr.TopicAuthorizationFailed.Code, &m
	}
	resp := req.ResponseKind()
	setMirrorError(resp, code, msg)
	return resp
}

// setMirrorError sets the top-level error of the answer of a mirror RPC
// that changes a mirror, the whole answer of a refused one. It reports
// false for any other response.
func setMirrorError(resp kmsg.Response, code int16, msg *string) bool {
	switch r := resp.(type) {
	case *mirrorapi.CreateClusterMirrorResponse:
		r.ErrorCode, r.ErrorMessage = code, msg
	case *mirrorapi.DeleteClusterMirrorResponse:
		r.ErrorCode, r.ErrorMessage = code, msg
	case *mirrorapi.StartMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, msg
	case *mirrorapi.StopMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, msg
	case *mirrorapi.PauseMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, msg
	case *mirrorapi.ResumeMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, msg
	case *mirrorapi.RecoverMirrorTopicsResponse:
		r.ErrorCode, r.ErrorMessage = code, msg
	default:
		return false
	}
	return true
}

// mirrorRPCFilter applies DESCRIBE on each mirror to the control plane's
// answer of a listing: ListClusterMirrors and DescribeClusterMirrors of
// every mirror leave out the mirrors without it, silently; a mirror named
// in DescribeClusterMirrors answers CLUSTER_MIRROR_AUTHORIZATION_FAILED
// and nothing else. Described mirrors carry the sender's operations when
// asked for.
func (c *authzCtx) mirrorRPCFilter(req kmsg.Request, resp kmsg.Response) {
	if !c.on() {
		return
	}
	switch r := resp.(type) {
	case *mirrorapi.ListClusterMirrorsResponse:
		r.Mirrors = slices.DeleteFunc(r.Mirrors, func(m mirrorapi.ListClusterMirrorsResponseMirror) bool {
			return !c.check(aclOperationDescribe, aclResourceClusterMirror, m.MirrorName, false)
		})
	case *mirrorapi.DescribeClusterMirrorsResponse:
		q, ok := req.(*mirrorapi.DescribeClusterMirrorsRequest)
		if !ok {
			return
		}
		all := len(q.MirrorNames) == 0
		out := r.Mirrors[:0]
		for _, m := range r.Mirrors {
			switch {
			case !c.check(aclOperationDescribe, aclResourceClusterMirror, m.MirrorName, !all):
				if all {
					continue
				}
				denied := mirrorapi.NewDescribeClusterMirrorsResponseMirror()
				denied.MirrorName = m.MirrorName
				denied.ErrorCode, denied.ErrorMessage = mirrorAuthorizationFailed()
				m = denied
			case q.IncludeAuthorizedOperations && m.ErrorCode == 0:
				m.AuthorizedOperations = c.operations(aclResourceClusterMirror, m.MirrorName, clusterMirrorOperations)
			}
			out = append(out, m)
		}
		r.Mirrors = out
	}
}
