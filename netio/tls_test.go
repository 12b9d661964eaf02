package netio

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
)

// A TLS listener and a plaintext one in one server: both are listed in
// Config order, both serve the same handler, and Conn.TLS tells them apart.
func TestTLSListenerNextToPlaintext(t *testing.T) {
	t.Parallel()
	h := newTLSTestHandler()
	s, err := Listen(Config{
		Listeners: []Listener{
			{Name: "PLAINTEXT", Addr: "127.0.0.1:0"},
			{Name: "SSL", Addr: "127.0.0.1:0", TLS: serverTLS(tls.NoClientCert)},
		},
		MaxRequestBytes: testMaxRequestBytes,
	}, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	ls := s.Listeners()
	if len(ls) != 2 || ls[0].Name != "PLAINTEXT" || ls[1].Name != "SSL" ||
		ls[0].Addr.Port == 0 || ls[1].Addr.Port == 0 || ls[0].Addr.Port == ls[1].Addr.Port {
		t.Fatalf("Listeners() = %+v", ls)
	}
	plain := dial(t, ls[0].Addr.String())
	plain.send(testReq{key: keyWhoAmI, version: 1, corr: 1})
	plain.expect(1, false, []byte("PLAINTEXT plaintext"))

	sec := dialTLS(t, ls[1].Addr.String(), clientTLS())
	sec.send(testReq{key: keyWhoAmI, version: 1, corr: 2})
	sec.expect(2, false, []byte("SSL TLS 1.3 peer=- chains=0"))
	tests := []struct {
		name    string
		req     testReq
		wantTag bool
	}{
		{name: "header v1", req: testReq{key: keyEcho, version: 1, corr: 3, clientID: strp("kgo"), body: []byte("ping")}},
		{name: "header v2", req: testReq{key: keyEcho, version: 2, corr: 4, clientID: strp("kgo"), flexible: true,
			rawTags: cat(uvarints(1, 7, 3), []byte("tag")), body: []byte("ping")}, wantTag: true},
		{name: "ApiVersions v3", req: testReq{key: apiVersionsKey, version: 3, corr: 5, flexible: true, body: []byte{0}}},
		{name: "no response", req: testReq{key: keyNoSend, version: 1, corr: 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sec.send(tt.req)
			if tt.req.key != keyNoSend {
				sec.expect(tt.req.corr, tt.wantTag, tt.req.body)
			}
		})
	}
	sec.echo(7)
}

// A kgo client over TLS with a client certificate: the handshake, kgo's
// ApiVersions negotiation and a request round trip, and the handler sees
// the client's certificate.
func TestTLSKgoClient(t *testing.T) {
	t.Parallel()
	h := &kmsgHandler{}
	_, addr := startTLSServer(t, h, serverTLS(tls.RequireAndVerifyClientCert), Config{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(clientTLS(pki().client)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	for range 3 {
		resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != apiVersionsKey {
			t.Fatalf("ApiVersions response %+v", resp)
		}
	}
	if peers := h.seen(); len(peers) < 4 || slices.ContainsFunc(peers, func(p string) bool { return p != "alice" }) {
		t.Fatalf("handler saw client certificates %q, want alice for every request", peers)
	}
}

// Splices of a file far larger than a TLS chunk arrive byte for byte, in
// place, also two ranges at unaligned offsets in one response; the
// counters see plaintext bytes.
func TestTLSSplicesFileRanges(t *testing.T) {
	t.Parallel()
	f, data := spliceTestFile(t, 6<<20+123)
	h := newTLSTestHandler()
	h.spliceFile, h.spliceLen = f, int64(len(data))
	s, addr := startTLSServer(t, h, serverTLS(tls.NoClientCert), Config{})
	c := dialTLS(t, addr, clientTLS())
	var out int64
	for corr := int32(1); corr <= 3; corr++ {
		c.send(testReq{key: keySplice, version: 1, corr: corr, body: []byte("tail")})
		want := cat([]byte("<"), data, []byte(">tail"))
		c.expect(corr, false, want)
		out += int64(8 + len(want))
	}
	c.send(testReq{key: keyTwoSplices, version: 2, corr: 4, flexible: true, body: []byte("end")})
	off2 := len(data) - (1 << 20) - 1
	want := cat([]byte("<"), data[3:3+1<<20+5], []byte("|"), data[off2:], []byte(">end"))
	c.expect(4, true, want)
	out += int64(9 + len(want))
	c.echo(5)
	out += 8 + int64(len("echo 5"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, ioTimeout, counterIs("ConnectionsClosed", s.Stats().ConnectionsClosed.Load, 1))
	st := s.Stats()
	if st.ConnectionsOpened.Load() != 1 || st.Requests.Load() != 5 || st.BytesOut.Load() != out {
		t.Fatalf("opened %d, requests %d, bytes out %d (want 1, 5, %d)",
			st.ConnectionsOpened.Load(), st.Requests.Load(), st.BytesOut.Load(), out)
	}
}

// Requests pipelined in one write or in tiny writes (one TLS record per
// byte) are served one at a time and answered in order.
func TestTLSPipelinedInOrder(t *testing.T) {
	t.Parallel()
	h := newTLSTestHandler()
	s, addr := startTLSServer(t, h, serverTLS(tls.NoClientCert), Config{})
	const n = 100
	var sent int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, chunk := range []int{0, 1, 7} { // 0: the whole stream in one write
		clientID := fmt.Sprintf("chunk=%d", chunk)
		wg.Add(1)
		t.Run(clientID, func(t *testing.T) {
			t.Parallel()
			defer wg.Done()
			var stream []byte
			var reqs []testReq
			for i := range n {
				r := testReq{key: keyEcho, version: int16(i % 4), corr: int32(i), clientID: &clientID,
					flexible: i%4 >= 2, body: bytes.Repeat([]byte{byte(i)}, i%50)}
				reqs = append(reqs, r)
				stream = r.appendTo(stream)
			}
			mu.Lock()
			sent += int64(len(stream))
			mu.Unlock()
			if chunk == 0 {
				chunk = len(stream)
			}
			pipelineInOrder(t, dialTLS(t, addr, clientTLS()), stream, chunk, reqs, h.served, clientID)
		})
	}
	t.Cleanup(func() {
		// After the parallel subtests: every frame byte was counted.
		wg.Wait()
		if got := s.Stats().BytesIn.Load(); got != sent {
			t.Errorf("BytesIn = %d, want %d", got, sent)
		}
	})
}

// Frames around the size where the reader starts growing its buffer, up
// to MaxRequestBytes, written in odd pieces, come through whole.
func TestTLSLargeFrames(t *testing.T) {
	t.Parallel()
	const maxBytes = 3<<20 + 17
	_, addr := startTLSServer(t, newTLSTestHandler(), serverTLS(tls.NoClientCert), Config{MaxRequestBytes: maxBytes})
	c := dialTLS(t, addr, clientTLS())
	for i, size := range []int{minFrame, tlsFirstFrameBytes - 1, tlsFirstFrameBytes, tlsFirstFrameBytes + 1, 2*tlsFirstFrameBytes + 3, maxBytes} {
		body := make([]byte, size-minFrame)
		for j := range body {
			body[j] = byte(j*13 + i)
		}
		req := testReq{key: keyEcho, version: 1, corr: int32(i), clientID: strp(""), body: body}
		raw := req.appendTo(nil)
		for len(raw) > 0 {
			k := min(len(raw), 300_001)
			if _, err := c.Write(raw[:k]); err != nil {
				t.Fatal(err)
			}
			raw = raw[k:]
		}
		c.expect(int32(i), false, body)
	}
}

// A failed handshake closes its connection with one Warn line naming the
// client; the server goes on serving a connected client and new ones.
func TestTLSHandshakeFailures(t *testing.T) {
	t.Parallel()
	logs := &logRecorder{}
	s, addr := startTLSServer(t, newTLSTestHandler(), serverTLS(tls.RequireAndVerifyClientCert),
		Config{Logger: slog.New(logs), handshakeTimeout: 300 * time.Millisecond})
	good := clientTLS(pki().client)
	bystander := dialTLS(t, addr, good)
	bystander.echo(0)

	// rawClient writes b over plain TCP and requires the server to close,
	// after at most a TLS alert.
	rawClient := func(b []byte) func(t *testing.T) string {
		return func(t *testing.T) string {
			c := dial(t, addr)
			if len(b) > 0 {
				if _, err := c.Write(b); err != nil {
					t.Fatal(err)
				}
			}
			got, err := io.ReadAll(c.r)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("connection still open after %v", ioTimeout)
			}
			if len(got) > 0 && !isTLSAlert(got) {
				t.Fatalf("got % x before the close, want nothing or a TLS alert", got)
			}
			return c.LocalAddr().String()
		}
	}
	// tlsClient handshakes with cfg; whether the client sees the refusal
	// at the handshake or at its first read (TLS 1.3 checks the client's
	// certificate after the client's side is done), nothing is served.
	tlsClient := func(cfg *tls.Config) func(t *testing.T) string {
		return func(t *testing.T) string {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(ioTimeout))
			tc := tls.Client(nc, cfg)
			if err := tc.Handshake(); err == nil {
				c := &testClient{tb: t, Conn: tc, r: bufio.NewReader(tc)}
				c.send(testReq{key: keyEcho, version: 1, corr: 1})
				c.expectClosed()
			}
			return nc.LocalAddr().String()
		}
	}
	noCert := clientTLS()
	strangerCert := clientTLS(pki().otherClient)
	distrustful := &tls.Config{RootCAs: pki().otherPool, Certificates: []tls.Certificate{pki().client}, ServerName: "localhost"}
	tests := []struct {
		name    string
		client  func(t *testing.T) string
		wantErr string // in the Warn line's err; "" for no Warn line at all
	}{
		{name: "garbage instead of a ClientHello", client: rawClient([]byte("\x16\x03\x01\xff\xffgarbage garbage garbage")), wantErr: "tls: "},
		{name: "not TLS at all", client: rawClient([]byte("GET / HTTP/1.1\r\nHost: kmirror\r\n\r\n")), wantErr: "does not look like a TLS handshake"},
		{name: "plaintext Kafka client", client: rawClient(testReq{key: keyEcho, version: 1, corr: 1}.appendTo(nil)),
			wantErr: "does not look like a TLS handshake"},
		{name: "client without a certificate", client: tlsClient(noCert), wantErr: "certificate"},
		{name: "client certificate from an unknown CA", client: tlsClient(strangerCert), wantErr: "certificate"},
		{name: "client that does not trust the server", client: tlsClient(distrustful), wantErr: "bad certificate"},
		{name: "silent client past the handshake timeout", client: rawClient(nil), wantErr: "timeout"},
		{name: "half a ClientHello then silence", client: rawClient([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}), wantErr: "timeout"},
		{name: "connect and close (a health check)", client: func(t *testing.T) string {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			return nc.LocalAddr().String()
		}},
	}
	// Sequential: each case moves the connection counters by two.
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			closed := s.Stats().ConnectionsClosed.Load()
			remote := tt.client(t)
			testutil.CheckFor(t, ioTimeout, counterIs("ConnectionsClosed", s.Stats().ConnectionsClosed.Load, closed+1))
			// The server logged all it will about this client.
			recs := logs.about(remote)
			switch {
			case tt.wantErr == "":
				if len(recs) != 1 || recs[0].level != slog.LevelDebug {
					t.Fatalf("log lines about %s: %+v, want one Debug line", remote, recs)
				}
			case len(recs) != 1 || recs[0].level != slog.LevelWarn || !strings.Contains(recs[0].attrs["err"], tt.wantErr):
				t.Fatalf("log lines about %s: %+v, want one Warn line with err containing %q", remote, recs, tt.wantErr)
			default:
				t.Logf("%s: %s", recs[0].msg, recs[0].attrs["err"])
			}
			bystander.echo(int32(10*i + 1))
			fresh := dialTLS(t, addr, good)
			fresh.echo(int32(10*i + 2))
			fresh.Close()
			testutil.CheckFor(t, ioTimeout, counterIs("ConnectionsClosed", s.Stats().ConnectionsClosed.Load, closed+2))
		})
	}
	if got := s.Stats().FramingErrors.Load(); got != 0 {
		t.Fatalf("FramingErrors = %d, want 0: a failed handshake is not a framing error", got)
	}
}

// Conn.TLS shows the client's verified certificate when there is one.
func TestTLSClientCertificate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		auth   tls.ClientAuthType
		client *tls.Config
		want   string
	}{
		{name: "required and given", auth: tls.RequireAndVerifyClientCert, client: clientTLS(pki().client),
			want: "SSL TLS 1.3 peer=alice chains=1"},
		{name: "verified if given, given", auth: tls.VerifyClientCertIfGiven, client: clientTLS(pki().client),
			want: "SSL TLS 1.3 peer=alice chains=1"},
		{name: "verified if given, none", auth: tls.VerifyClientCertIfGiven, client: clientTLS(),
			want: "SSL TLS 1.3 peer=- chains=0"},
		{name: "not asked for", auth: tls.NoClientCert, client: clientTLS(pki().client),
			want: "SSL TLS 1.3 peer=- chains=0"},
		{name: "TLS 1.2", auth: tls.RequireAndVerifyClientCert,
			client: &tls.Config{RootCAs: pki().caPool, Certificates: []tls.Certificate{pki().client}, ServerName: "localhost",
				MaxVersion: tls.VersionTLS12},
			want: "SSL TLS 1.2 peer=alice chains=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, addr := startTLSServer(t, newTLSTestHandler(), serverTLS(tt.auth), Config{})
			c := dialTLS(t, addr, tt.client)
			c.send(testReq{key: keyWhoAmI, version: 1, corr: 1})
			c.expect(1, false, []byte(tt.want))
		})
	}
}

// A bad frame closes its connection and is counted; others go on.
func TestTLSFramingErrors(t *testing.T) {
	t.Parallel()
	h := newTLSTestHandler()
	s, addr := startTLSServer(t, h, serverTLS(tls.NoClientCert), Config{})
	bystander := dialTLS(t, addr, clientTLS())
	bystander.echo(0)
	tests := []struct {
		name string
		raw  []byte
	}{
		{name: "frame over MaxRequestBytes", raw: cat(be32(testMaxRequestBytes+1), make([]byte, 64))},
		{name: "frame of 2 GiB", raw: be32(1<<31 - 1)},
		{name: "negative size", raw: cat(be32(-5), testReq{key: keyEcho}.appendTo(nil))},
		{name: "size below the minimum header", raw: cat(be32(3), []byte{0, 1, 2})},
		{name: "client id beyond the frame",
			raw: cat(be32(minFrame+2), testReq{key: keyEcho}.frame()[:8], []byte{0, 50, 'a', 'b'})},
		{name: "flexible header without tag section",
			raw: testReq{key: keyEcho, version: 2, corr: 1, clientID: strp("c")}.appendTo(nil)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			corr := int32(10 * (i + 1))
			framingErrors := s.Stats().FramingErrors.Load()
			bad := dialTLS(t, addr, clientTLS())
			bad.echo(corr)
			if _, err := bad.Write(tt.raw); err != nil {
				t.Fatal(err)
			}
			bad.expectClosed()
			testutil.CheckFor(t, ioTimeout, counterIs("FramingErrors", s.Stats().FramingErrors.Load, framingErrors+1))
			bystander.echo(corr + 1)
			dialTLS(t, addr, clientTLS()).echo(corr + 2)
		})
	}
	for _, cl := range h.served() {
		if cl.key != keyEcho || cl.corr%10 > 2 {
			t.Fatalf("a bad frame reached the handler: %+v", cl)
		}
	}
}

// A handler error closes the connection; requests pipelined behind it are
// never served (STYLE.md item 19).
func TestTLSHandlerErrorStopsPipeline(t *testing.T) {
	t.Parallel()
	h := newTLSTestHandler()
	s, addr := startTLSServer(t, h, serverTLS(tls.NoClientCert), Config{})
	c := dialTLS(t, addr, clientTLS())
	c.echo(1)
	raw := testReq{key: keyFail, version: 1, corr: 2}.appendTo(nil)
	for i := range int32(3) {
		raw = testReq{key: keyEcho, version: 1, corr: 3 + i}.appendTo(raw)
	}
	if _, err := c.Write(raw); err != nil {
		t.Fatal(err)
	}
	c.expectClosed()
	testutil.CheckFor(t, ioTimeout, counterIs("ConnectionsClosed", s.Stats().ConnectionsClosed.Load, 1))
	want := []call{{keyEcho, 1, ""}, {keyFail, 2, ""}}
	if got := h.served(); !slices.Equal(got, want) {
		t.Fatalf("Serve calls %+v, want %+v", got, want)
	}
	dialTLS(t, addr, clientTLS()).echo(9)
}

// Clients that stall (mid-handshake, after a size prefix, inside a frame,
// or in the handler) hold up nobody else, and a stalled frame is served
// once its last bytes come.
func TestTLSStalledClientsBlockNobody(t *testing.T) {
	t.Parallel()
	h := newTLSTestHandler()
	s, addr := startTLSServer(t, h, serverTLS(tls.NoClientCert), Config{MaxRequestBytes: 8 << 20})

	handshaking := dial(t, addr)
	if _, err := handshaking.Write([]byte{0x16, 0x03, 0x01}); err != nil { // part of a record header
		t.Fatal(err)
	}
	prefixOnly := dialTLS(t, addr, clientTLS())
	if _, err := prefixOnly.Write(be32(8 << 20)); err != nil { // the largest frame, none of it sent
		t.Fatal(err)
	}
	partial := dialTLS(t, addr, clientTLS())
	req := testReq{key: keyEcho, version: 1, corr: 7, body: bytes.Repeat([]byte("p"), 100_000)}
	raw := req.appendTo(nil)
	if _, err := partial.Write(raw[:len(raw)/2]); err != nil {
		t.Fatal(err)
	}
	busy := dialTLS(t, addr, clientTLS())
	busy.send(testReq{key: keyBlock, version: 1, corr: 8})
	recv(t, h.entered)

	for i := range int32(3) {
		c := dialTLS(t, addr, clientTLS())
		for j := range int32(5) {
			c.echo(100*i + j)
		}
	}
	if _, err := partial.Write(raw[len(raw)/2:]); err != nil {
		t.Fatal(err)
	}
	partial.expect(7, false, req.body)
	h.block <- struct{}{}
	busy.expect(8, false, nil)
	if got := s.Stats().FramingErrors.Load(); got != 0 {
		t.Fatalf("FramingErrors = %d", got)
	}
}

// Close returns with connections in every state, closes them all and
// leaves no goroutine behind. Not parallel: it counts goroutines.
func TestTLSCloseWithOpenConnections(t *testing.T) {
	before := runtime.NumGoroutine()
	f, _ := spliceTestFile(t, 6<<20)
	h := newTLSTestHandler()
	h.spliceFile, h.spliceLen = f, 6<<20
	s, err := Listen(Config{
		Listeners:       []Listener{{Name: "SSL", Addr: "127.0.0.1:0", TLS: serverTLS(tls.NoClientCert)}},
		MaxRequestBytes: testMaxRequestBytes,
	}, h)
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Listeners()[0].Addr.String()
	handshaking := dial(t, addr)
	idle := dialTLS(t, addr, clientTLS())
	used := dialTLS(t, addr, clientTLS())
	used.echo(1)
	partial := dialTLS(t, addr, clientTLS())
	if _, err := partial.Write(testReq{key: keyEcho, version: 1, corr: 2, body: []byte("abc")}.appendTo(nil)[:9]); err != nil {
		t.Fatal(err)
	}
	busy := dialTLS(t, addr, clientTLS())
	busy.send(testReq{key: keyBlock, version: 1, corr: 3})
	recv(t, h.entered)
	// A client that asks for far more than the socket buffers hold and
	// reads nothing: its goroutine is blocked in tls.Conn.Write.
	stuck := dialTLS(t, addr, clientTLS())
	for i := range int32(8) {
		stuck.send(testReq{key: keySplice, version: 1, corr: 10 + i})
	}
	testutil.CheckFor(t, ioTimeout, func() error {
		if out := s.Stats().BytesOut.Load(); out < 1<<20 {
			return fmt.Errorf("%d bytes out", out)
		}
		return nil
	})
	testutil.CheckFor(t, ioTimeout, counterIs("ConnectionsOpened", s.Stats().ConnectionsOpened.Load, 6))

	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		closed <- s.Close(ctx)
	}()
	for _, c := range []*testClient{handshaking, idle, used, partial} {
		c.expectClosed()
	}
	// Every goroutine but busy's returns, the stuck writer's too, though
	// its client still reads nothing.
	testutil.CheckFor(t, ioTimeout, counterIs("ConnectionsClosed", s.Stats().ConnectionsClosed.Load, 5))
	// Its socket still holds some responses; the close is behind them.
	if _, err := io.Copy(io.Discard, stuck.r); err == nil {
		stuck.expectClosed()
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a request was in Serve", err)
	default:
	}
	close(h.block) // Serve returns; its response cannot be written
	if err := recv(t, closed); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	st := s.Stats()
	if st.ConnectionsOpened.Load() != 6 || st.ConnectionsClosed.Load() != 6 {
		t.Fatalf("opened %d, closed %d, want 6 and 6", st.ConnectionsOpened.Load(), st.ConnectionsClosed.Load())
	}
	busy.expectClosed()
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("the listener still accepts connections")
	}
	testutil.CheckFor(t, ioTimeout, func() error {
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			return fmt.Errorf("%d goroutines, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
		return nil
	})
}

// Close with a request stuck in Serve gives up when ctx is done.
func TestTLSCloseGivesUpWithContext(t *testing.T) {
	t.Parallel()
	h := newTLSTestHandler()
	s, err := Listen(Config{
		Listeners:       []Listener{{Name: "SSL", Addr: "127.0.0.1:0", TLS: serverTLS(tls.NoClientCert)}},
		MaxRequestBytes: testMaxRequestBytes,
	}, h)
	if err != nil {
		t.Fatal(err)
	}
	busy := dialTLS(t, s.Listeners()[0].Addr.String(), clientTLS())
	busy.send(testReq{key: keyBlock, version: 1, corr: 1})
	recv(t, h.entered)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v, want context.Canceled", err)
	}
	busy.expectClosed()
	close(h.block)
}

// A client that reads nothing is cut off after the write timeout; the
// others are served meanwhile.
func TestTLSWriteTimeout(t *testing.T) {
	t.Parallel()
	f, _ := spliceTestFile(t, 6<<20)
	h := newTLSTestHandler()
	h.spliceFile, h.spliceLen = f, 6<<20
	logs := &logRecorder{}
	s, addr := startTLSServer(t, h, serverTLS(tls.NoClientCert),
		Config{Logger: slog.New(logs), tlsWriteTimeout: 200 * time.Millisecond})
	bystander := dialTLS(t, addr, clientTLS())
	deaf := dialTLS(t, addr, clientTLS())
	for i := range int32(8) { // 48 MiB asked for, far past the socket buffers
		deaf.send(testReq{key: keySplice, version: 1, corr: i})
	}
	bystander.echo(100)
	testutil.CheckFor(t, ioTimeout, counterIs("ConnectionsClosed", s.Stats().ConnectionsClosed.Load, 1))
	bystander.echo(101)
	recs := logs.about(deaf.LocalAddr().String())
	if len(recs) != 1 || !strings.Contains(recs[0].attrs["err"], "client read nothing for 200ms") {
		t.Fatalf("log lines about the deaf client: %+v", recs)
	}
	if out := s.Stats().BytesOut.Load(); out >= 8*(6<<20) {
		t.Fatalf("BytesOut = %d: everything was written", out)
	}
}

func TestTLSListenErrors(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() }) // after the parallel subtests
	tests := []struct {
		name      string
		listeners []Listener
		want      string
	}{
		{name: "no certificate", listeners: []Listener{{Name: "SSL", Addr: "127.0.0.1:0", TLS: &tls.Config{}}},
			want: "listener SSL: TLS config without a certificate"},
		{name: "address in use", listeners: []Listener{
			{Name: "PLAINTEXT", Addr: "127.0.0.1:0"},
			{Name: "SSL", Addr: taken.Addr().String(), TLS: serverTLS(tls.NoClientCert)},
		}, want: "listener SSL on " + taken.Addr().String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Listen(Config{Listeners: tt.listeners, MaxRequestBytes: testMaxRequestBytes}, echoHandler{})
			if err == nil {
				s.Close(context.Background())
				t.Fatal("Listen succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Listen: %v, want %q", err, tt.want)
			}
		})
	}
}

// The TLS write path allocates nothing per response (STYLE.md item 17),
// with or without splices. The peer drains the raw ciphertext instead of
// decrypting it: crypto/tls's read side allocates a small object per
// socket read (atLeastReader in readFromUntil), which is the standard
// library's, not ours, and would hide ours.
func TestTLSWriteResponseNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	f, _ := spliceTestFile(t, 1<<20)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		sc, _ := ln.Accept()
		accepted <- sc
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sc := recv(t, accepted)
	defer sc.Close()
	srv := &Server{cfg: Config{tlsWriteTimeout: ioTimeout}}
	cc := &coalescingConn{Conn: sc}
	tc := tls.Server(cc, serverTLS(tls.NoClientCert))
	c := &tlsConn{Conn: Conn{srv: srv}, nc: sc, rw: tc, tc: tc, cc: cc}
	c.out = c
	shook := make(chan error, 1)
	go func() { shook <- c.tc.Handshake() }()
	if err := tls.Client(nc, clientTLS()).Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, shook); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, nc)

	msg := make([]byte, 64<<10)
	for _, tt := range []struct {
		name    string
		splices []Splice
	}{
		{name: "no splices"},
		{name: "splices", splices: []Splice{
			{At: 100, File: f, Off: 0, Len: 300 << 10},
			{At: 200, File: f, Off: 7, Len: 1},
			{At: 60 << 10, File: f, Off: 1000, Len: 700 << 10},
		}},
	} {
		c.splices = tt.splices
		write := func() {
			if err := c.writeResponse(msg, 0); err != nil {
				t.Fatal(err)
			}
		}
		write()
		if allocs := testing.AllocsPerRun(100, write); allocs > 0 {
			t.Errorf("%s: %.1f allocations per response", tt.name, allocs)
		}
	}
}
