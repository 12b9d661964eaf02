package netio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testutil"
)

// Test API keys. flexibleV2 decides their header version; ApiVersions
// (18) is flexible from v3, as in Kafka.
const (
	keyEcho   int16 = 100 // answers with the request body
	keyNoSend int16 = 101 // answers nothing (send=false, like acks=0)
	keyFail   int16 = 102 // returns an error: the connection must close
	keyBlock  int16 = 103 // reports on entered, waits on block, then echoes
	keySplice int16 = 104 // answers "<" + spliceFile + ">" + body, the file sent with sendfile
)

type call struct {
	key      int16
	corr     int32
	clientID string
}

// testHandler echoes bodies and records the order of Serve calls.
type testHandler struct {
	entered chan int32    // keyBlock sends its correlation id on entry
	block   chan struct{} // keyBlock waits for a value or a close
	// keySplice sends this file's first spliceLen bytes.
	spliceFile *os.File
	spliceLen  int64

	mu    sync.Mutex
	calls []call
}

func newTestHandler() *testHandler {
	return &testHandler{entered: make(chan int32, 256), block: make(chan struct{})}
}

func (h *testHandler) Flexible(key, version int16) bool {
	if key == apiVersionsKey {
		return version >= 3
	}
	return flexibleV2(key, version)
}

func (h *testHandler) Serve(c *Conn, hdr *Header, body, resp []byte) ([]byte, bool, error) {
	h.mu.Lock()
	h.calls = append(h.calls, call{hdr.Key, hdr.CorrelationID, string(hdr.ClientID)})
	h.mu.Unlock()
	switch hdr.Key {
	case keyNoSend:
		return resp, false, nil
	case keyFail:
		return resp, false, errors.New("handler failed")
	case keyBlock:
		h.entered <- hdr.CorrelationID
		<-h.block
	case keySplice:
		resp = append(resp, '<')
		c.AddSplice(len(resp), h.spliceFile, 0, h.spliceLen)
		resp = append(resp, '>')
	}
	return append(resp, body...), true, nil
}

func (h *testHandler) served() []call {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

const testMaxRequestBytes = 1 << 20

func startServer(tb testing.TB, h Handler) (*Server, string) {
	tb.Helper()
	s, err := Listen(Config{
		Listeners:         []Listener{{Name: "PLAINTEXT", Addr: "127.0.0.1:0"}},
		MaxRequestBytes:   testMaxRequestBytes,
		MaxQueuedRequests: 4,
	}, h)
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

// testClient is a raw Kafka client connection.
type testClient struct {
	tb testing.TB
	net.Conn
	r *bufio.Reader
	// lastSent is what the last send wrote.
	lastSent []byte
}

// ioTimeout bounds every test read and write, so a server bug fails the
// test instead of hanging it. It is a safety net, not synchronisation.
const ioTimeout = 10 * time.Second

func dial(tb testing.TB, addr string) *testClient {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		tb.Fatal(err)
	}
	return &testClient{tb: tb, Conn: c, r: bufio.NewReader(c)}
}

func (c *testClient) send(reqs ...testReq) {
	c.tb.Helper()
	var b []byte
	for _, r := range reqs {
		b = r.appendTo(b)
	}
	c.lastSent = b
	if _, err := c.Write(b); err != nil {
		c.tb.Fatal(err)
	}
}

// readRaw reads one response: its size prefix and that many bytes.
func (c *testClient) readRaw() []byte {
	c.tb.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		c.tb.Fatalf("reading a response size: %v", err)
	}
	msg := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
	copy(msg, size[:])
	if _, err := io.ReadFull(c.r, msg[4:]); err != nil {
		c.tb.Fatalf("reading a response: %v", err)
	}
	return msg
}

// expect reads one response and requires it to be exactly the header for
// corr (with the empty tag section when tagged) followed by body.
func (c *testClient) expect(corr int32, tagged bool, body []byte) {
	c.tb.Helper()
	want := binary.BigEndian.AppendUint32(nil, 0)
	want = binary.BigEndian.AppendUint32(want, uint32(corr))
	if tagged {
		want = append(want, 0)
	}
	want = append(want, body...)
	binary.BigEndian.PutUint32(want, uint32(len(want)-4))
	if got := c.readRaw(); !bytes.Equal(got, want) {
		c.tb.Fatalf("response:\n got % x\nwant % x", got, want)
	}
}

// expectClosed requires the server to close the connection with nothing
// more sent: EOF, or a reset when the server closed with unread input.
func (c *testClient) expectClosed() {
	c.tb.Helper()
	b, err := io.ReadAll(c.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.tb.Fatalf("connection still open after %v", ioTimeout)
	}
	if len(b) > 0 {
		c.tb.Fatalf("got % x before the close, want nothing", b)
	}
}

// echo round-trips one request, proving the connection is served.
func (c *testClient) echo(corr int32) {
	c.tb.Helper()
	body := fmt.Appendf(nil, "echo %d", corr)
	c.send(testReq{key: keyEcho, version: 1, corr: corr, body: body})
	c.expect(corr, false, body)
}

func counterIs(name string, got func() int64, want int64) func() error {
	return func() error {
		if v := got(); v != want {
			return fmt.Errorf("%s = %d, want %d", name, v, want)
		}
		return nil
	}
}

func recv[T any](tb testing.TB, ch <-chan T) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(ioTimeout):
		tb.Fatal("nothing received")
		panic("unreachable")
	}
}

func TestServerResponseHeader(t *testing.T) {
	t.Parallel()
	h := newTestHandler()
	_, addr := startServer(t, h)
	tests := []struct {
		name    string
		req     testReq
		wantTag bool
	}{
		{
			name: "header v1 answered with v0",
			req:  testReq{key: keyEcho, version: 1, corr: 11, clientID: strp("kgo"), body: []byte("ping")},
		},
		{
			name: "header v2 answered with v1",
			req: testReq{key: keyEcho, version: 2, corr: 12, clientID: strp("kgo"), flexible: true,
				rawTags: cat(uvarints(1, 7, 3), []byte("tag")), body: []byte("ping")},
			wantTag: true,
		},
		{
			name:    "header v2 with null client id and empty body",
			req:     testReq{key: keyEcho, version: 5, corr: -3, flexible: true},
			wantTag: true,
		},
		{
			name: "ApiVersions v3 answered with v0",
			req: testReq{key: apiVersionsKey, version: 3, corr: 13, clientID: strp("kgo"), flexible: true,
				body: []byte{4, 'k', 'g', 'o', 2, '1', 0}},
		},
		{
			name: "ApiVersions v2 answered with v0",
			req:  testReq{key: apiVersionsKey, version: 2, corr: 14, clientID: strp("")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := dial(t, addr)
			c.send(tt.req)
			c.expect(tt.req.corr, tt.wantTag, tt.req.body)
		})
	}
	t.Run("client id reaches the handler", func(t *testing.T) {
		t.Parallel()
		c := dial(t, addr)
		c.send(testReq{key: keyEcho, version: 1, corr: 99, clientID: strp("who-am-i")})
		c.expect(99, false, nil)
		if !slices.Contains(h.served(), call{keyEcho, 99, "who-am-i"}) {
			t.Fatalf("handler saw %+v", h.served())
		}
	})
}

// pipelineInOrder writes stream to c in writes of chunk bytes while it
// reads the answers to reqs, which must come in request order, and checks
// the handler served clientID's requests in order.
func pipelineInOrder(t *testing.T, c *testClient, stream []byte, chunk int, reqs []testReq, served func() []call, clientID string) {
	t.Helper()
	wrote := make(chan error, 1)
	go func() {
		for rest := stream; len(rest) > 0; {
			k := min(chunk, len(rest))
			if _, err := c.Write(rest[:k]); err != nil {
				wrote <- err
				return
			}
			rest = rest[k:]
		}
		wrote <- nil
	}()
	for _, r := range reqs {
		c.expect(r.corr, r.flexible, r.body)
	}
	if err := recv(t, wrote); err != nil {
		t.Fatal(err)
	}
	var corrs []int32
	for _, cl := range served() {
		if cl.clientID == clientID {
			corrs = append(corrs, cl.corr)
		}
	}
	if len(corrs) != len(reqs) || !slices.IsSorted(corrs) {
		t.Fatalf("Serve calls in order %v, want 0 to %d", corrs, len(reqs)-1)
	}
}

func TestServerPipelinedInOrder(t *testing.T) {
	t.Parallel()
	h := newTestHandler()
	_, addr := startServer(t, h)
	const n = 100
	for _, chunk := range []int{0, 1, 7} { // 0: the whole stream in one write
		clientID := fmt.Sprintf("chunk=%d", chunk)
		t.Run(clientID, func(t *testing.T) {
			t.Parallel()
			var stream []byte
			var reqs []testReq
			for i := range n {
				r := testReq{key: keyEcho, version: int16(i % 4), corr: int32(i), clientID: &clientID,
					flexible: i%4 >= 2, body: bytes.Repeat([]byte{byte(i)}, i%50)}
				reqs = append(reqs, r)
				stream = r.appendTo(stream)
			}
			if chunk == 0 {
				chunk = len(stream)
			}
			pipelineInOrder(t, dial(t, addr), stream, chunk, reqs, h.served, clientID)
		})
	}
}

// A request blocked in the handler holds up its own connection only.
func TestServerConnectionsInParallel(t *testing.T) {
	t.Parallel()
	h := newTestHandler()
	_, addr := startServer(t, h)
	a, b := dial(t, addr), dial(t, addr)

	a.send(testReq{key: keyBlock, version: 1, corr: 1, body: []byte("slow")})
	if corr := recv(t, h.entered); corr != 1 {
		t.Fatalf("entered with %d", corr)
	}
	for i := range int32(10) {
		b.echo(100 + i)
	}
	close(h.block)
	a.expect(1, false, []byte("slow"))
}

func TestServerNoResponse(t *testing.T) {
	t.Parallel()
	h := newTestHandler()
	_, addr := startServer(t, h)
	c := dial(t, addr)

	// Pipelined and one at a time: the next answer is the next one sent.
	c.send(testReq{key: keyNoSend, version: 1, corr: 1}, testReq{key: keyEcho, version: 2, corr: 2, flexible: true, body: []byte("x")})
	c.expect(2, true, []byte("x"))
	c.send(testReq{key: keyNoSend, version: 2, corr: 3, flexible: true, body: []byte("dropped")})
	c.echo(4)

	want := []call{{keyNoSend, 1, ""}, {keyEcho, 2, ""}, {keyNoSend, 3, ""}, {keyEcho, 4, ""}}
	if got := h.served(); !slices.Equal(got, want) {
		t.Fatalf("Serve calls %+v, want %+v", got, want)
	}
}

// A bad frame closes its connection and nothing else: a bystander
// connection outlives every bad one, and new connections are served.
func TestServerFramingErrors(t *testing.T) {
	t.Parallel()
	h := newTestHandler()
	s, addr := startServer(t, h)
	bystander := dial(t, addr)
	bystander.echo(0)
	tests := []struct {
		name string
		raw  []byte
	}{
		{name: "frame over MaxRequestBytes", raw: cat(be32(testMaxRequestBytes+1), make([]byte, 64))},
		{name: "negative size", raw: cat(be32(-5), testReq{key: keyEcho}.appendTo(nil))},
		{name: "size below the minimum header", raw: cat(be32(3), []byte{0, 1, 2})},
		{name: "client id beyond the frame",
			raw: cat(be32(minFrame+2), testReq{key: keyEcho}.frame()[:8], []byte{0, 50, 'a', 'b'})},
		{name: "client id length -2",
			raw: cat(be32(minFrame+2), testReq{key: keyEcho}.frame()[:8], []byte{0xff, 0xfe, 'a', 'b'})},
		{name: "flexible header without tag section",
			raw: testReq{key: keyEcho, version: 2, corr: 1, clientID: strp("c")}.appendTo(nil)},
		{name: "truncated tagged field",
			raw: testReq{key: keyEcho, version: 2, corr: 1, flexible: true, rawTags: cat(uvarints(1, 0, 9), []byte("ab"))}.appendTo(nil)},
	}
	// Sequential: each case moves the server's counters by exactly one.
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			corr := int32(10 * (i + 1))
			framingErrors := s.Stats().FramingErrors.Load()
			bad := dial(t, addr)
			bad.echo(corr) // served before the bad frame
			if _, err := bad.Write(tt.raw); err != nil {
				t.Fatal(err)
			}
			bad.expectClosed()
			testutil.CheckFor(t, ioTimeout, counterIs("FramingErrors", s.Stats().FramingErrors.Load, framingErrors+1))
			bystander.echo(corr + 1)
			dial(t, addr).echo(corr + 2)
		})
	}
	if got, want := s.Stats().FramingErrors.Load(), int64(len(tests)); got != want {
		t.Fatalf("FramingErrors = %d, want %d", got, want)
	}
	for _, cl := range h.served() {
		if cl.key != keyEcho || cl.corr%10 > 2 {
			t.Fatalf("a bad frame reached the handler: %+v", cl)
		}
	}
}

// A frame of exactly MaxRequestBytes is served; it spans many reads.
func TestServerMaxSizeFrame(t *testing.T) {
	t.Parallel()
	_, addr := startServer(t, newTestHandler())
	c := dial(t, addr)
	body := bytes.Repeat([]byte("0123456789abcdef"), (testMaxRequestBytes-minFrame)/16)
	body = append(body, make([]byte, testMaxRequestBytes-minFrame-len(body))...)
	req := testReq{key: keyEcho, version: 1, corr: 5, clientID: strp(""), body: body}
	if got := len(req.frame()); got != testMaxRequestBytes {
		t.Fatalf("frame of %d bytes", got)
	}
	c.send(req)
	c.expect(5, false, body)
	c.echo(6)
}

func TestServerHandlerErrorClosesConnection(t *testing.T) {
	t.Parallel()
	h := newTestHandler()
	s, addr := startServer(t, h)
	c := dial(t, addr)
	c.echo(1)
	c.send(testReq{key: keyFail, version: 1, corr: 2})
	c.expectClosed()
	dial(t, addr).echo(3)
	if got := s.Stats().FramingErrors.Load(); got != 0 {
		t.Fatalf("FramingErrors = %d, want 0: a handler error is not a framing error", got)
	}
	testutil.CheckFor(t, ioTimeout, counterIs("ConnectionsClosed", s.Stats().ConnectionsClosed.Load, 1))
}

// Requests pipelined behind one whose handler failed must not be served:
// the handler's error means "close this connection" (STYLE.md item 19),
// and a broker must not, say, append a Produce that follows a failed
// SaslAuthenticate.
func TestServerHandlerErrorStopsPipeline(t *testing.T) {
	t.Parallel()
	malformed := testReq{key: keyEcho, version: 1, corr: 1, clientID: strp("abcd")}.appendTo(nil)
	malformed[4+minFrame-1] = 50 // client id length beyond the frame
	tests := []struct {
		name  string
		first []byte
	}{
		{name: "handler error", first: testReq{key: keyFail, version: 1, corr: 1}.appendTo(nil)},
		{name: "malformed header", first: malformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newTestHandler()
			s, addr := startServer(t, h)
			c := dial(t, addr)
			raw := slices.Clone(tt.first)
			for i := range int32(3) {
				raw = testReq{key: keyEcho, version: 1, corr: 2 + i}.appendTo(raw)
			}
			if _, err := c.Write(raw); err != nil {
				t.Fatal(err)
			}
			c.expectClosed()
			// OnClose has run: from here a fixed worker stops.
			testutil.CheckFor(t, ioTimeout, counterIs("ConnectionsClosed", s.Stats().ConnectionsClosed.Load, 1))
			for _, cl := range h.served() {
				if cl.key == keyEcho {
					t.Fatalf("served %+v after the connection failed; Serve calls: %+v", cl, h.served())
				}
			}
		})
	}
}

// With MaxQueuedRequests 4 and the handler blocked, OnTraffic stops
// framing; the worker's Wake must resume it so that every pipelined
// request is answered, in order, once the handler is released.
func TestServerBackpressure(t *testing.T) {
	t.Parallel()
	h := newTestHandler()
	s, addr := startServer(t, h)
	c := dial(t, addr)

	const n = 20
	var reqs []testReq
	for i := range n {
		key := keyEcho
		if i%5 == 0 {
			key = keyBlock // 0, 5, 10, 15 block until released
		}
		reqs = append(reqs, testReq{key: key, version: 1, corr: int32(i), body: fmt.Appendf(nil, "r%d", i)})
	}
	c.send(reqs...)
	if corr := recv(t, h.entered); corr != 0 {
		t.Fatalf("entered with %d", corr)
	}
	// One request in the handler, four queued, the rest left in gnet's
	// buffer: framing stops there.
	frameLen := int64(len(reqs[0].appendTo(nil)))
	testutil.CheckFor(t, ioTimeout, counterIs("BytesIn", s.Stats().BytesIn.Load, 5*frameLen))

	for i := 0; i < n; i += 5 {
		if i > 0 {
			if corr := recv(t, h.entered); corr != int32(i) {
				t.Fatalf("entered with %d, want %d", corr, i)
			}
		}
		h.block <- struct{}{}
		for _, r := range reqs[i : i+5] {
			c.expect(r.corr, false, r.body)
		}
	}
	if got, want := s.Stats().BytesIn.Load(), int64(len(c.lastSent)); got != want {
		t.Fatalf("BytesIn = %d, want %d", got, want)
	}
	c.echo(n)
}

// Close returns with connections open, one of them inside the handler.
func TestServerCloseWithOpenConnections(t *testing.T) {
	t.Parallel()
	h := newTestHandler()
	s, addr := startServer(t, h)
	idle := dial(t, addr)
	used := dial(t, addr)
	used.echo(1)
	busy := dial(t, addr)
	busy.send(testReq{key: keyBlock, version: 1, corr: 2})
	recv(t, h.entered)

	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		closed <- s.Close(ctx)
	}()
	if err := recv(t, closed); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, c := range []*testClient{idle, used, busy} {
		c.expectClosed()
	}
	// The blocked request finishes on its worker after the engine is
	// gone; its response is dropped. Close again is a no-op.
	close(h.block)
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	testutil.CheckFor(t, ioTimeout, counterIs("ConnectionsClosed", s.Stats().ConnectionsClosed.Load, 3))
}

// echoHandler answers every request with its body and records nothing, so
// benchmarks measure netio and not the test handler.
type echoHandler struct{}

func (echoHandler) Flexible(_, version int16) bool { return flexibleV2(0, version) }

func (echoHandler) Serve(_ *Conn, _ *Header, body, resp []byte) ([]byte, bool, error) {
	return append(resp, body...), true, nil
}

func BenchmarkServerRoundTrip(b *testing.B) {
	const bodySize = 1 << 10
	body := bytes.Repeat([]byte{'k'}, bodySize)
	for _, bc := range []struct {
		name  string
		depth int
	}{
		{"mode=sequential", 1},
		{"mode=pipelined16", 16},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := Listen(Config{
				Listeners:       []Listener{{Name: "PLAINTEXT", Addr: "127.0.0.1:0"}},
				MaxRequestBytes: testMaxRequestBytes,
			}, echoHandler{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close(context.Background()) })
			conn, err := net.Dial("tcp", s.Listeners()[0].Addr.String())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { conn.Close() })

			var batch []byte
			for i := range bc.depth {
				batch = testReq{key: keyEcho, version: 1, corr: int32(i), clientID: strp("bench"), body: body}.appendTo(batch)
			}
			respLen := 4 + 4 + bodySize
			resp := make([]byte, bc.depth*respLen)

			b.SetBytes(bodySize)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				k := min(bc.depth, b.N-done)
				if _, err := conn.Write(batch[:k*len(batch)/bc.depth]); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(conn, resp[:k*respLen]); err != nil {
					b.Fatal(err)
				}
				done += k
			}
		})
	}
}

// A response may carry file ranges sent with sendfile between its bytes;
// the size header counts them and the pieces arrive in order, also when
// the file is far larger than the socket buffer.
func TestServerSplicesFileRanges(t *testing.T) {
	t.Parallel()
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	f, err := os.CreateTemp(t.TempDir(), "splice")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // after the server's cleanup: LIFO
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	h := newTestHandler()
	h.spliceFile, h.spliceLen = f, int64(len(data))
	_, addr := startServer(t, h)
	c := dial(t, addr)
	for corr := int32(1); corr <= 3; corr++ {
		c.send(testReq{key: keySplice, version: 1, corr: corr, body: []byte("tail")})
		want := append(append(append([]byte("<"), data...), '>'), "tail"...)
		c.expect(corr, false, want)
	}
	c.echo(4)
}
