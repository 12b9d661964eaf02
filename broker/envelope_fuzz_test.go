package broker

import (
	"bytes"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzEnvelope feeds arbitrary principal, address and inner request bytes
// to the Envelope's decoding (parseEnvelope): it never panics, it serves
// only forwardable keys at served versions, and what it accepts survives
// a round trip: the principal and address, forwarded again, decode to the
// same, and the inner request, wrapped again as a forwarding node wraps
// it, decodes to the same header and request. (The input is one message,
// not a stream, so there is no split-in-two variant.)
func FuzzEnvelope(f *testing.F) {
	ct := createTopicsReq("orders")
	ct.Topics[0].Configs = append(ct.Topics[0].Configs, kmsg.CreateTopicsRequestTopicConfig{
		Name: "retention.ms", Value: kmsg.StringPtr("1000")})
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ia.Version = 1
	ia.Resources = append(ia.Resources, kmsg.IncrementalAlterConfigsRequestResource{ResourceType: 2, ResourceName: "t"})
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.Creations = append(ca.Creations, creationOf(aliceReadOrders))
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version = 3 // not flexible
	dt.TopicNames = []string{"a"}
	md := kmsg.NewPtrMetadataRequest()
	for i, req := range []kmsg.Request{ct, ia, ca, dt, md} {
		env := envelopeOf(req, int32(i), alicePrincipal, "10.0.0.1")
		f.Add(env.RequestPrincipal, env.ClientHostAddress, env.RequestData)
	}
	v6 := envelopeOf(ct, 9, "User:CN=a,O=b", "::1")
	f.Add(v6.RequestPrincipal, v6.ClientHostAddress, v6.RequestData)
	f.Add([]byte{0, 0, 1, 1, 0, 0}, []byte{}, []byte{0, 19, 0, 7})
	f.Fuzz(func(t *testing.T, principal, host, data []byte) {
		env := kmsg.NewPtrEnvelopeRequest()
		env.RequestPrincipal, env.ClientHostAddress, env.RequestData = principal, host, data
		fr, code := parseEnvelope(env)
		if code != 0 {
			if kerr.ErrorForCode(code) == nil {
				t.Fatalf("refused with code %d, which is no error", code)
			}
			return
		}
		if !isForwardable(fr.hdr.Key) {
			t.Fatalf("accepted key %d, which is not forwardable", fr.hdr.Key)
		}
		if _, ok := lookupHandler(fr.hdr.Key, fr.hdr.Version); !ok {
			t.Fatalf("accepted %s v%d, which is not served", nameForKey(fr.hdr.Key), fr.hdr.Version)
		}
		pd := principalData(fr.id.principal)
		if err := pd.ReadFrom(pd.AppendTo(nil)); err != nil || pd.Type+":"+pd.Name != fr.id.principal {
			t.Fatalf("principal %q forwarded again decodes as %+v (%v)", fr.id.principal, pd, err)
		}
		if !net.IP(hostAddress(fr.id.host)).Equal(net.IP(host)) {
			t.Fatalf("address % x decoded as %q", host, fr.id.host)
		}
		again := kmsg.NewPtrEnvelopeRequest()
		again.RequestPrincipal, again.ClientHostAddress = principal, host
		again.RequestData = appendForwardedRequest(nil, &fr.hdr, fr.kreq.AppendTo(nil))
		fr2, code := parseEnvelope(again)
		if code != 0 {
			t.Fatalf("re-wrapped %s v%d refused with %d", nameForKey(fr.hdr.Key), fr.hdr.Version, code)
		}
		if fr2.hdr.Key != fr.hdr.Key || fr2.hdr.Version != fr.hdr.Version || fr2.hdr.CorrelationID != fr.hdr.CorrelationID ||
			!bytes.Equal(fr2.hdr.ClientID, fr.hdr.ClientID) {
			t.Fatalf("header %+v re-wrapped as %+v", fr.hdr, fr2.hdr)
		}
		if !bytes.Equal(fr2.kreq.AppendTo(nil), fr.kreq.AppendTo(nil)) {
			t.Fatalf("%s v%d does not survive a round trip", nameForKey(fr.hdr.Key), fr.hdr.Version)
		}
	})
}
