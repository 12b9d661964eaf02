package broker

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake: v0-1
//
// Behavior:
// On a SASL_PLAINTEXT or SASL_SSL listener, names the mechanism the
// SaslAuthenticate requests that follow will use: PLAIN (when the
// PlainLoginModule JAAS config lists users), SCRAM-SHA-256 or
// SCRAM-SHA-512, as sasl.enabled.mechanisms allows. Another mechanism is
// UNSUPPORTED_SASL_MECHANISM with the enabled ones listed; a second
// handshake, or one on a listener without SASL, is ILLEGAL_SASL_STATE.
//
// Version notes:
// v0 is answered like v1, because librdkafka decides that a broker speaks
// SASL at all from v0 being listed; the raw, unframed SASL tokens a true
// v0 client (before KIP-152, Kafka 1.0) would send next are not served:
// they do not parse as a request and the connection closes.
func init() { regKey(saslHandshakeKey, 0, 1, (*Broker).handleSASLHandshake) }

func (b *Broker) handleSASLHandshake(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	for _, m := range b.cfg.Security.SASLMechanisms {
		if b.mechanismEnabled(m) {
			resp.SupportedMechanisms = append(resp.SupportedMechanisms, m)
		}
	}
	cs := connState(r.conn)
	switch {
	case !strings.HasPrefix(b.listenerProtocol(r.conn.Listener()), "SASL_"), cs.sasl.mechanism != "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case !b.mechanismEnabled(req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	default:
		cs.sasl.mechanism = req.Mechanism
	}
	return resp, nil
}
