package netio

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"testing"
	"time"
)

// keyMute mutes the connection for the duration (ms, a be32) in the body,
// then echoes it.
const keyMute int16 = 112

type muteHandler struct{ tlsTestHandler }

func (h muteHandler) Serve(c *Conn, hdr *Header, body, resp []byte) ([]byte, bool, error) {
	if hdr.Key == keyMute {
		c.Mute(time.Duration(binary.BigEndian.Uint32(body)) * time.Millisecond)
		return append(resp, body...), true, nil
	}
	return h.tlsTestHandler.Serve(c, hdr, body, resp)
}

func muteReq(corr int32, d time.Duration) testReq {
	return testReq{key: keyMute, version: 1, corr: corr, body: binary.BigEndian.AppendUint32(nil, uint32(d.Milliseconds()))}
}

// A muted connection is answered at once, then not served until the mute
// ends, on both transports; closing the server ends a mute at once.
func TestConnMute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (*Server, func() *testClient)
	}{
		{"transport=gnet", func(t *testing.T) (*Server, func() *testClient) {
			s, addr := startServer(t, muteHandler{newTLSTestHandler()})
			return s, func() *testClient { return dial(t, addr) }
		}},
		{"transport=tls", func(t *testing.T) (*Server, func() *testClient) {
			s, addr := startTLSServer(t, muteHandler{newTLSTestHandler()}, serverTLS(tls.NoClientCert), Config{})
			return s, func() *testClient { return dialTLS(t, addr, clientTLS()) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, connect := tc.start(t)
			c := connect()
			const mute = 300 * time.Millisecond
			m := muteReq(1, mute)
			start := time.Now()
			c.send(m, testReq{key: keyEcho, version: 1, corr: 2, body: []byte("after")})
			c.expect(1, false, m.body)
			c.expect(2, false, []byte("after"))
			if got := time.Since(start); got < mute {
				t.Fatalf("the request behind a %v mute was answered after %v", mute, got)
			}
			c.echo(3) // unmuted again

			// A connection muted for an hour does not hold up Close.
			c.send(muteReq(4, time.Hour))
			c.expect(4, false, muteReq(4, time.Hour).body)
			c.send(testReq{key: keyEcho, version: 1, corr: 5})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.Close(ctx); err != nil {
				t.Fatalf("closing with a muted connection: %v", err)
			}
		})
	}
}
