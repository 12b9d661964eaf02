package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/netio"
)

// Forwarding (KIP-590, Kafka's ForwardingManager). Only the controller
// appends to the metadata log, so a node that is not the controller sends
// the admin requests that change replicated records to it, in an Envelope
// (58_envelope.go), and answers its client with the controller's answer:
//
//	client --CreateTopics--> node 2 --Envelope{CreateTopics, principal, ip}--> controller
//	client <--answer-------- node 2 <--Envelope{answer, applied index}-------- controller
//
// The Envelope carries the request as the client sent it (its header
// re-encoded, its body's bytes), the client's principal as Kafka's
// DefaultKafkaPrincipalBuilder serializes it (kmsg.DefaultPrincipalData) and
// the client's IP address. As in Kafka, the forwarding node checks no ACL:
// the controller authorizes the request as the forwarded principal, from
// the forwarded address.
//
// Failures, as Kafka's: when no answer comes (no controller known, the
// channel failed, forwardTimeout passed) every item of the client's answer
// carries REQUEST_TIMED_OUT, retriable, or NOT_CONTROLLER when the channel
// says no controller is elected or the controller moved before the
// Envelope arrived (the Envelope's NOT_CONTROLLER), also retriable; an
// Envelope refused for another reason is UNKNOWN_SERVER_ERROR on every item
// (a misconfigured cluster, which the client could not act on), except
// UNSUPPORTED_VERSION, which closes the client's connection so that it
// asks again for the versions served (Kafka does the same).
//
// Read-your-writes: the controller's answer carries, in the Envelope
// response's tagged field appliedIndexTag, the index of the last metadata
// log entry it had applied once the request was served. The forwarding
// node waits (at most readYourWritesWait) until it has applied that entry
// before it answers, so a client that creates a topic through node 2 and
// then asks node 2 for metadata sees the topic. A wait that times out
// still sends the answer: the change was made, only this node lags.

// forwardable are the API keys forwarded to the controller: the requests
// that write replicated records (state/replicated.go). Everything else is
// served where it arrives.
var forwardable = [maxAPIKey]bool{
	19: true, // CreateTopics
	20: true, // DeleteTopics
	30: true, // CreateAcls
	31: true, // DeleteAcls
	33: true, // AlterConfigs
	37: true, // CreatePartitions
	43: true, // ElectLeaders
	44: true, // IncrementalAlterConfigs
	45: true, // AlterPartitionReassignments
	49: true, // AlterClientQuotas
	51: true, // AlterUserScramCredentials

	94: true, 95: true, 96: true, 102: true, 103: true, 104: true, 107: true, // the mirror RPCs that change a mirror
}

// isMirrorRPC reports the operator's mirror RPCs among the forwarded
// keys: they read the source, a stop for up to 25 s.
func isMirrorRPC(key int16) bool {
	switch key {
	case mirrorapi.KeyCreateClusterMirror, mirrorapi.KeyStartMirrorTopics, mirrorapi.KeyStopMirrorTopics,
		mirrorapi.KeyPauseMirrorTopics, mirrorapi.KeyResumeMirrorTopics, mirrorapi.KeyDeleteClusterMirror,
		mirrorapi.KeyRecoverMirrorTopics:
		return true
	}
	return false
}

// isForwardable reports whether key is on the forwardable list.
func isForwardable(key int16) bool {
	return key >= 0 && int(key) < len(forwardable) && forwardable[key]
}

const (
	// forwardTimeout bounds a forward, as request.timeout.ms (Kafka's
	// default, 30 s) bounds Kafka's forwarding channel.
	forwardTimeout = 30 * time.Second
	// readYourWritesWait bounds the wait for the controller's entry.
	readYourWritesWait = 5 * time.Second
)

// appliedIndexTag is the tagged field of EnvelopeResponse in which kmirror's
// controller returns its applied metadata log index: an 8-byte big-endian
// unsigned integer. Kafka defines no tag of EnvelopeResponse and ignores
// unknown ones. This constant is part of the cluster's wire format.
const appliedIndexTag = 10000

// isController reports whether this node is the controller: a node
// without a metadata log is alone, its own controller.
func (b *Broker) isController() bool {
	q := b.cfg.MetadataQuorum
	return q == nil || q.IsController()
}

// IsController is isController for the mirror control plane
// (control.Node).
func (b *Broker) IsController() bool { return b.isController() }

// NodeID is this node's node.id (control.Node).
func (b *Broker) NodeID() int32 { return b.cfg.NodeID }

// InCluster reports whether this node is one of several (control.Node).
func (b *Broker) InCluster() bool { return b.cfg.Cluster.Several() }

// forwards reports whether a request of key goes to the controller.
func (b *Broker) forwards(key int16) bool {
	return isForwardable(key) && b.cfg.ControllerChannel != nil && !b.isController()
}

// errForwardUnsupported closes the connection of a client whose forwarded
// request the controller could not decode (UNSUPPORTED_VERSION in the
// Envelope): the controller serves other versions than this node, so the
// client must ask again which versions are served.
var errForwardUnsupported = errors.New("broker: the controller does not serve the version of a forwarded request")

// forward sends r (body is its body as received) to the controller and
// returns the controller's answer, or the answer of a failed forward.
func (b *Broker) forward(r *request, body []byte) (kmsg.Response, error) {
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = appendForwardedRequest(nil, r.hdr, body)
	pd := principalData(b.senderPrincipal(r))
	env.RequestPrincipal = pd.AppendTo(nil)
	env.ClientHostAddress = hostAddress(r.host())

	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	go func() { // a closing broker gives up its forwards
		select {
		case <-b.closing:
			cancel()
		case <-ctx.Done():
		}
	}()

	name := nameForKey(r.hdr.Key)
	ch := b.cfg.ControllerChannel
	if isMirrorRPC(r.hdr.Key) && b.cfg.MirrorControllerChannel != nil {
		ch = b.cfg.MirrorControllerChannel
	}
	kresp, err := ch.Request(ctx, env)
	if err != nil {
		code := kerr.RequestTimedOut
		if errors.Is(err, meta.ErrNotController) {
			code = kerr.NotController
		}
		b.log.Debug("forwarding to the controller failed", "api", name, "err", err)
		return errorResponse(r.kreq, code, "forwarding to the controller: "+err.Error()), nil
	}
	eresp, ok := kresp.(*kmsg.EnvelopeResponse)
	if !ok {
		panic(fmt.Sprintf("BUG: the controller channel answered an Envelope with a %T", kresp))
	}
	switch eresp.ErrorCode {
	case 0:
	case kerr.NotController.Code:
		return errorResponse(r.kreq, kerr.NotController, "the controller moved while the request was forwarded"), nil
	case kerr.UnsupportedVersion.Code:
		return nil, fmt.Errorf("%w: %s v%d", errForwardUnsupported, name, r.hdr.Version)
	default:
		b.log.Warn("the controller refused a forwarded request", "api", name, "err", kerr.ErrorForCode(eresp.ErrorCode))
		return errorResponse(r.kreq, kerr.UnknownServerError,
			"the controller refused the forwarded request: "+kerr.ErrorForCode(eresp.ErrorCode).Error()), nil
	}
	resp, err := decodeForwardedResponse(r.kreq, r.hdr, eresp.ResponseData)
	if err != nil {
		b.log.Warn("decoding the controller's answer failed", "api", name, "err", err)
		return errorResponse(r.kreq, kerr.UnknownServerError, "decoding the controller's answer: "+err.Error()), nil
	}
	if index, ok := appliedIndex(&eresp.UnknownTags); ok {
		wctx, wcancel := context.WithTimeout(ctx, readYourWritesWait)
		if err := b.cfg.MetadataQuorum.WaitApplied(wctx, index); err != nil {
			b.log.Debug("answering a forwarded request before applying the controller's entry", "api", name,
				"index", index, "err", err)
		}
		wcancel()
	}
	return resp, nil
}

// senderPrincipal is who sent r, as the authorizer names it (the test
// seam included), also when authorization is off.
func (b *Broker) senderPrincipal(r *request) string {
	if a := b.authzState.Load(); a != nil {
		return a.principalOf(r)
	}
	return r.principal()
}

// appendForwardedRequest appends a request as a client sends it, without
// the size prefix: header v1 (v2 with an empty tagged-field section for
// flexible versions), then body.
func appendForwardedRequest(dst []byte, hdr *netio.Header, body []byte) []byte {
	dst = appendI16(dst, hdr.Key)
	dst = appendI16(dst, hdr.Version)
	dst = appendI32(dst, hdr.CorrelationID)
	dst = appendI16(dst, int16(len(hdr.ClientID)))
	dst = append(dst, hdr.ClientID...)
	if hdr.Flexible {
		dst = append(dst, 0)
	}
	return append(dst, body...)
}

// appendForwardedResponse appends the answer to a forwarded request as the
// client reads it, without the size prefix: the response header (its
// correlation id, then an empty tagged-field section where hdr calls for
// header v1), then resp at hdr's version.
func appendForwardedResponse(dst []byte, hdr *netio.Header, resp kmsg.Response) []byte {
	dst = appendI32(dst, hdr.CorrelationID)
	if hdr.ResponseFlexible() {
		dst = append(dst, 0)
	}
	resp.SetVersion(hdr.Version)
	return resp.AppendTo(dst)
}

// decodeForwardedResponse decodes what appendForwardedResponse wrote, the
// answer to req.
func decodeForwardedResponse(req kmsg.Request, hdr *netio.Header, data []byte) (kmsg.Response, error) {
	rd := kbin.Reader{Src: data}
	if corr := rd.Int32(); corr != hdr.CorrelationID && rd.Ok() {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, hdr.CorrelationID)
	}
	if hdr.ResponseFlexible() {
		for n := rd.Uvarint(); n > 0 && rd.Ok(); n-- {
			rd.Uvarint()
			rd.Span(int(rd.Uvarint()))
		}
	}
	if !rd.Ok() {
		return nil, errors.New("the response header ends early")
	}
	resp := req.ResponseKind()
	resp.SetVersion(hdr.Version)
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("decoding a %s v%d response: %w", nameForKey(hdr.Key), hdr.Version, err)
	}
	return resp, nil
}

// principalData is a principal ("User:alice") as Kafka serializes it in an
// Envelope.
func principalData(principal string) kmsg.DefaultPrincipalData {
	pd := kmsg.NewDefaultPrincipalData()
	typ, name, ok := strings.Cut(principal, ":")
	if !ok {
		typ, name = "User", principal
	}
	pd.Type, pd.Name = typ, name
	return pd
}

// hostAddress is a client's address as an Envelope carries it: the IP's 4
// or 16 bytes, nil for a host that is no IP.
func hostAddress(host string) []byte {
	ip := net.ParseIP(host)
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip
}

// setAppliedIndex and appliedIndex write and read appliedIndexTag.
func setAppliedIndex(tags *kmsg.Tags, index uint64) {
	tags.Set(appliedIndexTag, binary.BigEndian.AppendUint64(nil, index))
}

func appliedIndex(tags *kmsg.Tags) (index uint64, ok bool) {
	tags.Each(func(tag uint32, v []byte) {
		if tag == appliedIndexTag && len(v) == 8 {
			index, ok = binary.BigEndian.Uint64(v), true
		}
	})
	return index, ok
}

// errorResponse is the answer to req with err on every item (every topic,
// resource, ACL creation or filter, user, quota entity; the top-level
// error of the mirror RPCs), as Kafka's getErrorResponse. REQUIRES: req is
// of a forwardable key.
func errorResponse(req kmsg.Request, err *kerr.Error, msg string) kmsg.Response {
	code, m := err.Code, &msg
	resp := req.ResponseKind()
	switch q := req.(type) {
	case *kmsg.CreateTopicsRequest:
		r := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range q.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = t.Topic, code, m
			r.Topics = append(r.Topics, st)
		}
	case *kmsg.DeleteTopicsRequest:
		r := resp.(*kmsg.DeleteTopicsResponse)
		add := func(name *string, id [16]byte) {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.TopicID, st.ErrorCode, st.ErrorMessage = name, id, code, m
			r.Topics = append(r.Topics, st)
		}
		for _, name := range q.TopicNames {
			add(&name, [16]byte{})
		}
		for _, t := range q.Topics {
			add(t.Topic, t.TopicID)
		}
	case *kmsg.CreatePartitionsRequest:
		r := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range q.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode, st.ErrorMessage = t.Topic, code, m
			r.Topics = append(r.Topics, st)
		}
	case *kmsg.AlterConfigsRequest:
		r := resp.(*kmsg.AlterConfigsResponse)
		for _, rr := range q.Resources {
			res := kmsg.NewAlterConfigsResponseResource()
			res.ResourceType, res.ResourceName, res.ErrorCode, res.ErrorMessage = rr.ResourceType, rr.ResourceName, code, m
			r.Resources = append(r.Resources, res)
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		r := resp.(*kmsg.IncrementalAlterConfigsResponse)
		for _, rr := range q.Resources {
			res := kmsg.NewIncrementalAlterConfigsResponseResource()
			res.ResourceType, res.ResourceName, res.ErrorCode, res.ErrorMessage = rr.ResourceType, rr.ResourceName, code, m
			r.Resources = append(r.Resources, res)
		}
	case *kmsg.CreateACLsRequest:
		r := resp.(*kmsg.CreateACLsResponse)
		for range q.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, m
			r.Results = append(r.Results, res)
		}
	case *kmsg.DeleteACLsRequest:
		r := resp.(*kmsg.DeleteACLsResponse)
		for range q.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code, m
			r.Results = append(r.Results, res)
		}
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		r := resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
		seen := make(map[string]bool)
		add := func(user string) {
			if !seen[user] {
				seen[user] = true
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode, res.ErrorMessage = user, code, m
				r.Results = append(r.Results, res)
			}
		}
		for _, d := range q.Deletions {
			add(d.Name)
		}
		for _, u := range q.Upsertions {
			add(u.Name)
		}
	case *kmsg.AlterClientQuotasRequest:
		r := resp.(*kmsg.AlterClientQuotasResponse)
		for _, e := range q.Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			re.ErrorCode, re.ErrorMessage = code, m
			for _, c := range e.Entity {
				re.Entity = append(re.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: c.Type, Name: c.Name})
			}
			r.Entries = append(r.Entries, re)
		}
	case *kmsg.ElectLeadersRequest:
		r := resp.(*kmsg.ElectLeadersResponse)
		r.ErrorCode = code
		for _, t := range q.Topics {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.ErrorMessage = p, code, m
				st.Partitions = append(st.Partitions, sp)
			}
			r.Topics = append(r.Topics, st)
		}
	case *kmsg.AlterPartitionAssignmentsRequest:
		r := resp.(*kmsg.AlterPartitionAssignmentsResponse)
		r.ErrorCode, r.ErrorMessage = code, m
	default:
		if !setMirrorError(resp, code, m) {
			panic(fmt.Sprintf("BUG: no error answer for a %s request", nameForKey(req.Key())))
		}
	}
	return resp
}
