package netio

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testutil"
)

// startConnsServer serves h on ln, handed in as Listener.Conns with name
// and tlsCfg.
func startConnsServer(tb testing.TB, h Handler, name string, ln net.Listener, tlsCfg *tls.Config) *Server {
	tb.Helper()
	s, err := Listen(Config{
		Listeners:       []Listener{{Name: name, Conns: ln, TLS: tlsCfg}},
		MaxRequestBytes: testMaxRequestBytes,
	}, h)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// A plain listener handed in (Conns) is served like any: its address is
// listed, the handler sees its name and no TLS, pipelined requests are
// answered in order, splices are written, and Close closes the listener
// and its connections.
func TestConnsListenerPlain(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, data := spliceTestFile(t, 3<<20)
	h := newTLSTestHandler()
	h.spliceFile, h.spliceLen = f, int64(len(data))
	s := startConnsServer(t, h, "CONTROLLER", ln, nil)
	ls := s.Listeners()
	if len(ls) != 1 || ls[0].Name != "CONTROLLER" || ls[0].Addr.String() != ln.Addr().String() {
		t.Fatalf("Listeners() = %+v, want CONTROLLER on %s", ls, ln.Addr())
	}
	addr := ln.Addr().String()
	c := dial(t, addr)
	c.send(testReq{key: keyWhoAmI, version: 1, corr: 1})
	c.expect(1, false, []byte("CONTROLLER plaintext"))

	const n = 50
	clientID := "conns"
	var stream []byte
	var reqs []testReq
	for i := range n {
		r := testReq{key: keyEcho, version: int16(i % 4), corr: int32(100 + i), clientID: &clientID,
			flexible: i%4 >= 2, body: bytes.Repeat([]byte{byte(i)}, i%50)}
		reqs = append(reqs, r)
		stream = r.appendTo(stream)
	}
	pipelineInOrder(t, dial(t, addr), stream, 7, reqs, h.served, clientID)

	c.send(testReq{key: keyTwoSplices, version: 1, corr: 2, body: []byte("!")})
	n1, off2 := int64(1<<20+5), int64(len(data))-(1<<20)-1
	want := append([]byte("<"), data[3:3+n1]...)
	want = append(append(want, '|'), data[off2:]...)
	c.expect(2, false, append(want, ">!"...))

	idle := dial(t, addr)
	idle.echo(3)
	testutil.CheckFor(t, ioTimeout, counterIs("ConnectionsOpened", s.Stats().ConnectionsOpened.Load, 3))
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	c.expectClosed()
	idle.expectClosed()
	if st := s.Stats(); st.ConnectionsOpened.Load() != st.ConnectionsClosed.Load() {
		t.Fatalf("opened %d, closed %d", st.ConnectionsOpened.Load(), st.ConnectionsClosed.Load())
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("the handed-in listener still accepts connections after Close")
	}
}

// A listener handed in with TLS set is served through crypto/tls.
func TestConnsListenerTLS(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startConnsServer(t, newTLSTestHandler(), "CONTROLLER_SSL", ln, serverTLS(tls.NoClientCert))
	c := dialTLS(t, ln.Addr().String(), clientTLS())
	c.send(testReq{key: keyWhoAmI, version: 1, corr: 1})
	c.expect(1, false, []byte("CONTROLLER_SSL TLS 1.3 peer=- chains=0"))
	c.echo(2)
}

// testAddrListener is a listener whose address is not a *net.TCPAddr.
type testAddrListener struct{ net.Listener }

type testAddr string

func (testAddr) Network() string  { return "tcp" }
func (a testAddr) String() string { return string(a) }

func (l testAddrListener) Addr() net.Addr { return testAddr(l.Listener.Addr().String()) }

// A handed-in listener's address need only print as host:port.
func TestConnsListenerAddr(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := startConnsServer(t, newTLSTestHandler(), "X", testAddrListener{ln}, nil)
	if got := s.Listeners()[0].Addr.String(); got != ln.Addr().String() {
		t.Fatalf("Listeners() address %s, want %s", got, ln.Addr())
	}
	dial(t, ln.Addr().String()).echo(1)
}
