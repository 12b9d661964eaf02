package broker

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/netio"
)

// Envelope: v0
//
// Behavior:
// A request forwarded by another node (KIP-590, forward.go): only the
// controller serves it, elsewhere the Envelope answers NOT_CONTROLLER.
// The inner request is decoded as Serve decodes a client's and served by
// its own handler as if its client had sent it here: its principal and
// address are the Envelope's (RequestPrincipal, a DefaultPrincipalData;
// ClientHostAddress, 4 or 16 bytes), so ACLs are checked on the
// controller, for the forwarded principal, as in Kafka. ResponseData is
// the inner answer with its response header (correlation id, and the
// tagged-field section of header v1 for flexible versions). The answer
// carries the controller's applied metadata log index in tagged field
// appliedIndexTag (10000), for the forwarding node's read-your-writes.
// Refusals, in the Envelope's ErrorCode as Kafka's EnvelopeUtils:
// PRINCIPAL_DESERIALIZATION_FAILURE for principal bytes that do not
// decode, INVALID_REQUEST for an address of another length or an API key
// not on the forwardable list, UNSUPPORTED_VERSION for an inner header or
// request that does not decode or a version not served. An inner handler
// that fails (which would close a client's connection) answers
// UNKNOWN_SERVER_ERROR, and the forwarding node's connection stays open.
//
// Authorization: CLUSTER_ACTION on the cluster for the forwarding node's
// principal, else CLUSTER_AUTHORIZATION_FAILED, as Kafka. With an
// authorizer on and a PLAINTEXT inter-node listener, that principal is
// User:ANONYMOUS: list it in super.users or grant it CLUSTER_ACTION, as
// Kafka's documentation asks of inter-broker listeners without
// authentication.
//
// Version notes:
// v0 only (flexible). Served on the CONTROLLER listener only (not
// enforced here).
func init() { regKey(58, 0, 0, (*Broker).handleEnvelope) }

func (b *Broker) handleEnvelope(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.EnvelopeRequest)
	resp := req.ResponseKind().(*kmsg.EnvelopeResponse)
	if !b.isController() {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	if az := b.authz(r); !az.cluster(aclOperationClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	fr, code := parseEnvelope(req)
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	h, _ := lookupHandler(fr.hdr.Key, fr.hdr.Version) // parseEnvelope checked the version
	b.stats.Requests[fr.hdr.Key].Add(1)
	inner := &request{conn: r.conn, hdr: &fr.hdr, kreq: fr.kreq, fwd: &fr.id}
	iresp, err := h.serve(b, inner)
	if err != nil {
		b.log.Warn("serving a forwarded request failed", "api", nameForKey(fr.hdr.Key), "principal", fr.id.principal,
			"err", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil
	}
	if iresp == nil {
		panic("BUG: the " + nameForKey(fr.hdr.Key) + " handler returned no response to a forwarded request")
	}
	resp.ResponseData = appendForwardedResponse(nil, &fr.hdr, iresp)
	if q := b.cfg.MetadataQuorum; q != nil {
		// The handler's writes went through Apply, which returns once this
		// node applied them: Applied covers them.
		setAppliedIndex(&resp.UnknownTags, q.Applied())
	}
	return resp, nil
}

// forwardedRequest is what an Envelope carries, decoded.
type forwardedRequest struct {
	hdr  netio.Header
	kreq kmsg.Request
	id   forwardedIdentity
}

// parseEnvelope decodes an Envelope's principal, client address and inner
// request. It returns the Envelope's error code for what it refuses, 0
// for a request to serve.
func parseEnvelope(req *kmsg.EnvelopeRequest) (forwardedRequest, int16) {
	var fr forwardedRequest
	var pd kmsg.DefaultPrincipalData
	if err := pd.ReadFrom(req.RequestPrincipal); err != nil || pd.Type == "" {
		return fr, kerr.PrincipalDeserializationFailure.Code
	}
	if n := len(req.ClientHostAddress); n != net.IPv4len && n != net.IPv6len {
		return fr, kerr.InvalidRequest.Code
	}
	fr.id = forwardedIdentity{principal: pd.Type + ":" + pd.Name, host: net.IP(req.ClientHostAddress).String()}
	hdr, body, err := netio.ParseHeader(req.RequestData, flexibleVersion)
	if err != nil {
		return fr, kerr.UnsupportedVersion.Code
	}
	if !isForwardable(hdr.Key) {
		return fr, kerr.InvalidRequest.Code
	}
	if _, ok := lookupHandler(hdr.Key, hdr.Version); !ok {
		return fr, kerr.UnsupportedVersion.Code
	}
	kreq, err := decodeRequest(hdr.Key, hdr.Version, body)
	if err != nil {
		return fr, kerr.UnsupportedVersion.Code
	}
	fr.hdr, fr.kreq = hdr, kreq
	return fr, 0
}
