package netio

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"os"
	"testing"
)

// splicedHandler answers keySplice with n bytes of file, from slot
// (correlation id mod slots) * n, the way Fetch answers with segment
// ranges; it echoes any other request.
type splicedHandler struct {
	file  *os.File
	n     int64
	slots uint32
}

func (h *splicedHandler) Flexible(_, version int16) bool { return flexibleV2(0, version) }

func (h *splicedHandler) Serve(c *Conn, hdr *Header, body, resp []byte) ([]byte, bool, error) {
	if hdr.Key != keySplice {
		return append(resp, body...), true, nil
	}
	slot := int64(uint32(hdr.CorrelationID) % h.slots)
	c.AddSplice(len(resp), h.file, slot*h.n, h.n)
	return resp, true, nil
}

// BenchmarkServeSpliced is a consumer's view of the serving path: one
// connection asks for 1 MiB of a page-cached file at a time (a Fetch with
// one request in flight, as kgo consumes) and reads the whole response.
// Plaintext sends the range with sendfile(2) from the gnet worker; TLS
// reads it with pread(2) into 256 KiB chunks and writes them through
// crypto/tls (TLS 1.3, AES-128-GCM on CPUs with AES-NI). The client runs
// in the same process, over loopback, so TLS pays for its decryption too,
// as a consumer on the same machine would. MB/s are file bytes.
func BenchmarkServeSpliced(b *testing.B) {
	const (
		respBytes = 1 << 20
		fileBytes = 64 << 20 // responses walk the file: page cache, not CPU cache
	)
	f, _ := spliceTestFile(b, fileBytes)
	h := &splicedHandler{file: f, n: respBytes, slots: fileBytes / respBytes}
	for _, tr := range []struct {
		name string
		tls  *tls.Config
	}{
		{"plaintext", nil},
		{"tls", serverTLS(tls.NoClientCert)},
	} {
		b.Run("size=1MiB/transport="+tr.name, func(b *testing.B) {
			s, err := Listen(Config{
				Listeners:       []Listener{{Name: tr.name, Addr: "127.0.0.1:0", TLS: tr.tls}},
				MaxRequestBytes: testMaxRequestBytes,
			}, h)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close(context.Background()) })
			addr := s.Listeners()[0].Addr.String()
			var conn net.Conn
			if tr.tls != nil {
				conn, err = tls.Dial("tcp", addr, clientTLS())
			} else {
				conn, err = net.Dial("tcp", addr)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { conn.Close() })

			req := testReq{key: keySplice, version: 1, clientID: strp("bench")}.appendTo(nil)
			resp := make([]byte, 8+respBytes)
			roundTrip := func(corr int32) {
				binary.BigEndian.PutUint32(req[8:], uint32(corr))
				if _, err := conn.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(conn, resp); err != nil {
					b.Fatal(err)
				}
				if got := int32(binary.BigEndian.Uint32(resp[4:])); got != corr {
					b.Fatalf("response to %d, want %d", got, corr)
				}
			}
			for i := range int32(h.slots) { // warm: pools, TCP window, page cache
				roundTrip(i)
			}
			b.SetBytes(respBytes)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				roundTrip(int32(i))
			}
		})
	}
}
