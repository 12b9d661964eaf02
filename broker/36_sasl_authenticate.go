package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/state"
)

// SaslAuthenticate: v0-2
//
// Behavior:
// Carries the SASL messages of the mechanism SaslHandshake chose. PLAIN
// takes one message; SCRAM two (client-first, answered with server-first;
// client-final, answered with server-final). On success the connection's
// principal becomes User:<name> and every API is served. A failure is
// SASL_AUTHENTICATION_FAILED, answered only after 100 ms (Kafka's
// connection.failed.authentication.delay.ms) to slow password guessing;
// the next request on that connection closes it. Before SaslHandshake it
// is ILLEGAL_SASL_STATE. Unknown SCRAM users get the same exchange as
// known ones and fail at the proof, so the answers do not tell which
// users exist.
//
// Version notes:
// v1 adds SessionLifetimeMs (0: no re-authentication is required); v2
// flexible.
func init() { regKey(saslAuthenticateKey, 0, 2, (*Broker).handleSASLAuthenticate) }

func (b *Broker) handleSASLAuthenticate(r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	cs := connState(r.conn)
	fail := func(err *kerr.Error, msg string) (kmsg.Response, error) {
		cs.sasl.failed = true
		if err == kerr.SaslAuthenticationFailed {
			time.Sleep(failedAuthenticationDelay * time.Millisecond)
			b.log.Info("SASL authentication failed", "listener", r.conn.Listener(), "remote", r.conn.RemoteAddr(),
				"mechanism", cs.sasl.mechanism, "reason", msg)
		}
		resp.ErrorCode, resp.ErrorMessage = err.Code, &msg
		return resp, nil
	}
	if cs.sasl.mechanism == "" || cs.sasl.authenticated {
		return fail(kerr.IllegalSaslState, "SaslAuthenticate without a SaslHandshake, or after authentication")
	}
	if cs.sasl.mechanism == "PLAIN" {
		user, err := plainAuthenticate(b.cfg.Security.PlainUsers, req.SASLAuthBytes)
		if err != nil {
			return fail(kerr.SaslAuthenticationFailed, err.Error())
		}
		b.authenticated(r, cs, user)
		return resp, nil
	}
	mech, _ := scramMechanism(cs.sasl.mechanism)
	if cs.sasl.scram == nil {
		lookup := func(user string) (state.SCRAMCredential, bool, error) {
			return b.store.SCRAMCredential(mech, user)
		}
		s, first, err := scramFirst(mech, lookup, b.saslDecoyKey, string(req.SASLAuthBytes))
		if err != nil {
			return fail(kerr.SaslAuthenticationFailed, err.Error())
		}
		cs.sasl.scram = s
		resp.SASLAuthBytes = []byte(first)
		return resp, nil
	}
	final, err := cs.sasl.scram.final(string(req.SASLAuthBytes))
	if err != nil {
		return fail(kerr.SaslAuthenticationFailed, err.Error())
	}
	user := cs.sasl.scram.user
	cs.sasl.scram = nil
	b.authenticated(r, cs, user)
	resp.SASLAuthBytes = []byte(final)
	return resp, nil
}

// authenticated records a successful authentication.
func (b *Broker) authenticated(r *request, cs *connScratch, user string) {
	cs.sasl.authenticated = true
	cs.principal = "User:" + user
	b.log.Debug("SASL authenticated", "listener", r.conn.Listener(), "remote", r.conn.RemoteAddr(),
		"principal", cs.principal, "mechanism", cs.sasl.mechanism)
}
