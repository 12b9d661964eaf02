package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Security of source connections (SPEC.md section 7): each mirror's
// fetchers dial its source with that mirror's TLS config and SASL
// mechanism (internal/clientauth builds them from the mirror's configs),
// never another mirror's.

// ErrSourceAuth marks a source that refused the mirror's credentials (or
// its SASL mechanism). Retrying with the same credentials cannot succeed.
var ErrSourceAuth = errors.New("fetch: source SASL authentication failed")

// startTLS wraps a dialed socket in TLS and completes the handshake. The
// server name is the source's host unless the config names one.
func startTLS(ctx context.Context, conn net.Conn, addr string, cfg *tls.Config) (net.Conn, error) {
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS handshake with source %s: %w", addr, err)
	}
	return tc, nil
}

// authenticate runs SASL on a negotiated connection: SaslHandshake v1
// names the mechanism, then SaslAuthenticate carries its messages until
// the mechanism is done (Kafka's KIP-152 flow).
func (c *sourceConn) authenticate(ctx context.Context) error {
	mech := c.cfg.SASL
	hv := c.version(int16(kmsg.SASLHandshake), 1, 1)
	av := c.version(int16(kmsg.SASLAuthenticate), 0, 2)
	if hv < 0 || av < 0 {
		return c.fail(ctx, "SASL", fmt.Errorf("%w: the source serves no SaslHandshake v1 / SaslAuthenticate (Kafka 1.0+)", ErrSourceAuth))
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = hv
	hs.Mechanism = mech.Name()
	hr := kmsg.NewPtrSASLHandshakeResponse()
	if err := c.roundTrip(ctx, hs, hr); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(hr.ErrorCode); err != nil {
		return c.fail(ctx, "SASL handshake", fmt.Errorf("%w: mechanism %s: %w (the source offers %v)",
			ErrSourceAuth, mech.Name(), err, hr.SupportedMechanisms))
	}
	host, _, _ := net.SplitHostPort(c.address)
	session, msg, err := mech.Authenticate(ctx, host)
	if err != nil {
		return c.fail(ctx, "SASL", fmt.Errorf("%w: %s: %w", ErrSourceAuth, mech.Name(), err))
	}
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = av
		req.SASLAuthBytes = msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := c.roundTrip(ctx, req, resp); err != nil {
			// Some brokers drop the connection instead of answering
			// SASL_AUTHENTICATION_FAILED.
			return fmt.Errorf("%w: %s: the source ended the exchange (credentials refused?): %w", ErrSourceAuth, mech.Name(), err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			detail := ""
			if resp.ErrorMessage != nil {
				detail = ": " + *resp.ErrorMessage
			}
			return c.fail(ctx, "SASL authentication", fmt.Errorf("%w: %s: %w%s", ErrSourceAuth, mech.Name(), err, detail))
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return c.fail(ctx, "SASL authentication", fmt.Errorf("%w: %s: %w", ErrSourceAuth, mech.Name(), err))
		}
		if done && len(next) == 0 {
			return nil
		}
		msg = next
		if done {
			// A last message the mechanism wants written; its answer
			// carries nothing more to check.
			req := kmsg.NewPtrSASLAuthenticateRequest()
			req.Version = av
			req.SASLAuthBytes = msg
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			if err := c.roundTrip(ctx, req, resp); err != nil {
				return err
			}
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				return c.fail(ctx, "SASL authentication", fmt.Errorf("%w: %s: %w", ErrSourceAuth, mech.Name(), err))
			}
			return nil
		}
	}
}

// Probe connects to the first reachable bootstrap server of cfg the way
// the fetchers do (dial, TLS, ApiVersions, SASL) and closes again. Its
// error says which step failed, with the source's own error (a refused
// password, an untrusted certificate), where a client library often sees
// only a closed connection: the control plane uses it to explain a source
// it cannot reach.
func Probe(ctx context.Context, cfg MirrorConfig) error {
	cfg = cfg.withDefaults()
	var errs []error
	for _, addr := range cfg.Bootstrap {
		c, err := dialSource(ctx, addr, sourceConnConfig{ClientID: "kmirror-mirror-" + cfg.Name,
			DialTimeout: cfg.DialTimeout, RequestTimeout: cfg.RequestTimeout, Dialer: cfg.Dialer,
			TLS: cfg.TLS, SASL: cfg.SASL})
		if err == nil {
			c.Close()
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
