package netio

// Helpers of the TLS tests: a test PKI, handlers, a log recorder, and
// servers and clients on TLS listeners.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// testPKI is a CA with a server and a client certificate, and a second CA
// with a client certificate the first one does not know.
type testPKI struct {
	caPool      *x509.CertPool
	otherPool   *x509.CertPool
	server      tls.Certificate // CN=kmirror, 127.0.0.1 and localhost, by the CA
	client      tls.Certificate // CN=alice, by the CA
	otherClient tls.Certificate // CN=mallory, by the other CA
}

var pki = sync.OnceValue(func() *testPKI {
	ca, caKey := newTestCert("test CA", nil, nil, true, 0)
	other, otherKey := newTestCert("other CA", nil, nil, true, 0)
	p := &testPKI{caPool: x509.NewCertPool(), otherPool: x509.NewCertPool()}
	p.caPool.AddCert(ca.Leaf)
	p.otherPool.AddCert(other.Leaf)
	p.server, _ = newTestCert("kmirror", &ca, caKey, false, x509.ExtKeyUsageServerAuth)
	p.client, _ = newTestCert("alice", &ca, caKey, false, x509.ExtKeyUsageClientAuth)
	p.otherClient, _ = newTestCert("mallory", &other, otherKey, false, x509.ExtKeyUsageClientAuth)
	return p
})

// newTestCert makes a certificate for cn, self-signed when parent is nil.
// Test setup: it panics on error (sync.OnceValue reports it).
func newTestCert(cn string, parent *tls.Certificate, parentKey *ecdsa.PrivateKey, isCA bool,
	usage x509.ExtKeyUsage) (tls.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.Leaf, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		panic(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, key
}

// serverTLS is a listener's config: the server certificate, client
// certificates checked against the CA as auth says.
func serverTLS(auth tls.ClientAuthType) *tls.Config {
	p := pki()
	return &tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.caPool, ClientAuth: auth}
}

// clientTLS trusts the CA and presents certs.
func clientTLS(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: pki().caPool, Certificates: certs, ServerName: "localhost"}
}

// Test keys served by tlsTestHandler on top of testHandler's.
const (
	keyWhoAmI     int16 = 110 // answers what Conn.TLS shows
	keyTwoSplices int16 = 111 // answers "<" + file[3:3+n1] + "|" + file[off2:] + ">" + body
)

type tlsTestHandler struct{ *testHandler }

func newTLSTestHandler() tlsTestHandler { return tlsTestHandler{newTestHandler()} }

func (h tlsTestHandler) Serve(c *Conn, hdr *Header, body, resp []byte) ([]byte, bool, error) {
	switch hdr.Key {
	case keyWhoAmI:
		st := c.TLS()
		if st == nil {
			return fmt.Appendf(resp, "%s plaintext", c.Listener()), true, nil
		}
		peer := "-"
		if len(st.PeerCertificates) > 0 {
			peer = st.PeerCertificates[0].Subject.CommonName
		}
		return fmt.Appendf(resp, "%s %s peer=%s chains=%d", c.Listener(),
			tls.VersionName(st.Version), peer, len(st.VerifiedChains)), true, nil
	case keyTwoSplices:
		n1, off2 := int64(1<<20+5), h.spliceLen-(1<<20)-1
		resp = append(resp, '<')
		c.AddSplice(len(resp), h.spliceFile, 3, n1)
		resp = append(resp, '|')
		c.AddSplice(len(resp), h.spliceFile, off2, h.spliceLen-off2)
		resp = append(resp, '>')
		return append(resp, body...), true, nil
	}
	return h.testHandler.Serve(c, hdr, body, resp)
}

// logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu   sync.Mutex
	recs []logRecord
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	lr := logRecord{level: rec.Level, msg: rec.Message, attrs: map[string]string{}}
	rec.Attrs(func(a slog.Attr) bool {
		lr.attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, lr)
	r.mu.Unlock()
	return nil
}

// about returns the records about one client address.
func (r *logRecorder) about(remote string) []logRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logRecord
	for _, lr := range r.recs {
		if lr.attrs["remote"] == remote {
			out = append(out, lr)
		}
	}
	return out
}

// startTLSServer serves h on one TLS listener named SSL, with cfg's limits
// (MaxRequestBytes defaults to testMaxRequestBytes).
func startTLSServer(tb testing.TB, h Handler, tlsCfg *tls.Config, cfg Config) (*Server, string) {
	tb.Helper()
	cfg.Listeners = []Listener{{Name: "SSL", Addr: "127.0.0.1:0", TLS: tlsCfg}}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = testMaxRequestBytes
	}
	s, err := Listen(cfg, h)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s, s.Listeners()[0].Addr.String()
}

// dialTLS connects and completes the handshake.
func dialTLS(tb testing.TB, addr string, cfg *tls.Config) *testClient {
	tb.Helper()
	c, err := tryDialTLS(tb, addr, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func tryDialTLS(tb testing.TB, addr string, cfg *tls.Config) (*testClient, error) {
	tb.Helper()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: ioTimeout}, Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		tb.Fatal(err)
	}
	return &testClient{tb: tb, Conn: c, r: bufio.NewReader(c)}, nil
}

// spliceTestFile is a temp file of n bytes, each byte a function of its
// offset, so any misplaced range shows.
func spliceTestFile(tb testing.TB, n int) (*os.File, []byte) {
	tb.Helper()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	f, err := os.CreateTemp(tb.TempDir(), "splice")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() }) // after the server's cleanup: LIFO
	if _, err := f.Write(data); err != nil {
		tb.Fatal(err)
	}
	return f, data
}

// kmsgHandler answers ApiVersions as a broker would, with one key, and
// records the client certificate's common name of every request.
type kmsgHandler struct {
	mu    sync.Mutex
	peers []string
}

func (h *kmsgHandler) Flexible(key, version int16) bool { return kmsgFlexible(key, version) }

func (h *kmsgHandler) Serve(c *Conn, hdr *Header, body, resp []byte) ([]byte, bool, error) {
	peer := ""
	if st := c.TLS(); st != nil && len(st.PeerCertificates) > 0 {
		peer = st.PeerCertificates[0].Subject.CommonName
	}
	h.mu.Lock()
	h.peers = append(h.peers, peer)
	h.mu.Unlock()
	if hdr.Key != apiVersionsKey {
		return resp, false, fmt.Errorf("key %d not served", hdr.Key)
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(hdr.Version)
	if err := req.ReadFrom(body); err != nil {
		return resp, false, err
	}
	r := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: apiVersionsKey, MinVersion: 0, MaxVersion: req.MaxVersion()}}
	return r.AppendTo(resp), true, nil
}

func (h *kmsgHandler) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.peers)
}

// isTLSAlert reports whether b is one TLS alert record.
func isTLSAlert(b []byte) bool {
	return len(b) == 7 && b[0] == 21 && b[1] == 3 && b[3] == 0 && b[4] == 2
}
