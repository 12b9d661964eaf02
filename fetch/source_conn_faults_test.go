package fetch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
)

// Source connection tests against fake servers: timeouts, bad responses,
// the ApiVersions fallback, old brokers, and allocations.

func TestSourceConnRequestTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 150 * time.Millisecond
	for _, tc := range []struct {
		name   string
		during string // dial: the ApiVersions request hangs; request: a later one
		ctxTO  time.Duration
		want   error
	}{
		{name: "dial", during: "dial", want: os.ErrDeadlineExceeded},
		{name: "request", during: "request", want: os.ErrDeadlineExceeded},
		{name: "ctx deadline first", during: "request", ctxTO: timeout, want: context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := scFake(t, func(_ int, conn net.Conn) {
				if tc.during == "request" && !scServeApiVersions(t, conn) {
					return
				}
				io.Copy(io.Discard, conn) // read, never answer
			})
			cfg := sourceConnConfig{RequestTimeout: timeout}
			if tc.ctxTO > 0 {
				cfg.RequestTimeout = time.Minute
			}
			start := time.Now()
			var err error
			if tc.during == "dial" {
				_, err = dialSource(context.Background(), addr, cfg)
			} else {
				c := scDial(t, addr, cfg)
				ctx := context.Background()
				if tc.ctxTO > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.ctxTO)
					defer cancel()
				}
				start = time.Now()
				req := kmsg.NewPtrMetadataRequest()
				req.Version = 9
				err = c.roundTrip(ctx, req, kmsg.NewPtrMetadataResponse())
				if !c.closed {
					t.Error("connection not closed after a timeout")
				}
			}
			took := time.Since(start)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), addr) {
				t.Errorf("error %q does not name the broker %s", err, addr)
			}
			if took < timeout || took > 5*time.Second {
				t.Errorf("failed after %v, want about %v", took, timeout)
			}
		})
	}
}

// TestSourceConnBadResponses: every broken answer is an error that closes the
// connection, never a panic.
func TestSourceConnBadResponses(t *testing.T) {
	t.Parallel()
	const maxBytes = 1 << 20
	frame := func(size int32, rest ...byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(size)), rest...)
	}
	corrOf := func(corr int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(corr)) }
	for _, tc := range []struct {
		name    string
		version int16 // of the Metadata request; 9+ is flexible
		reply   func(corr int32, resp *kmsg.MetadataResponse) []byte
		want    error
	}{
		{"wrong correlation id", 1, func(corr int32, resp *kmsg.MetadataResponse) []byte {
			return scResponseFrame(corr+1, resp)
		}, ErrSourceCorrelationID},
		{"negative size", 1, func(int32, *kmsg.MetadataResponse) []byte {
			return frame(-1, 0, 0, 0, 1)
		}, ErrSourceFrameSize},
		{"oversized size", 1, func(corr int32, _ *kmsg.MetadataResponse) []byte {
			return frame(maxBytes+1, corrOf(corr)...)
		}, ErrSourceFrameSize},
		{"size without correlation id", 1, func(int32, *kmsg.MetadataResponse) []byte {
			return frame(3, 0, 0, 0)
		}, ErrSourceFrameSize},
		{"garbage body", 1, func(corr int32, _ *kmsg.MetadataResponse) []byte {
			return frame(8, append(corrOf(corr), 0x7f, 0xff, 0xff, 0xff)...) // 2 Gi brokers
		}, ErrSourceResponse},
		{"garbage flexible body", 9, func(corr int32, _ *kmsg.MetadataResponse) []byte {
			return frame(11, append(corrOf(corr), 0, 0, 0, 0, 0, 0xff, 0xff)...)
		}, ErrSourceResponse},
		{"bad header tags", 9, func(corr int32, _ *kmsg.MetadataResponse) []byte {
			return frame(6, append(corrOf(corr), 1, 0x80)...)
		}, ErrSourceResponse},
		{"header tag past the end", 9, func(corr int32, _ *kmsg.MetadataResponse) []byte {
			return frame(8, append(corrOf(corr), 1, 0, 5, 0)...)
		}, ErrSourceResponse},
		{"truncated frame", 1, func(corr int32, resp *kmsg.MetadataResponse) []byte {
			b := scResponseFrame(corr, resp)
			return b[:len(b)-3]
		}, io.ErrUnexpectedEOF},
		{"huge size then close", 1, func(corr int32, _ *kmsg.MetadataResponse) []byte {
			return frame(maxBytes, corrOf(corr)...)
		}, io.ErrUnexpectedEOF},
		{"no answer, closed", 1, func(int32, *kmsg.MetadataResponse) []byte { return nil }, io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := scFake(t, func(_ int, conn net.Conn) {
				if !scServeApiVersions(t, conn) {
					return
				}
				req, corr, _, err := scReadRequest(conn)
				if err != nil {
					t.Errorf("fake: %v", err)
					return
				}
				resp := req.ResponseKind().(*kmsg.MetadataResponse)
				b := kmsg.NewMetadataResponseBroker()
				b.Host, b.Port = "127.0.0.1", 9092
				resp.Brokers = append(resp.Brokers, b)
				conn.Write(tc.reply(corr, resp))
				// Closing now ends a frame the client still waits for.
			})
			c := scDial(t, addr, sourceConnConfig{MaxResponseBytes: maxBytes})
			req := kmsg.NewPtrMetadataRequest()
			req.Version = tc.version
			err := c.roundTrip(context.Background(), req, kmsg.NewPtrMetadataResponse())
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), addr) {
				t.Errorf("error %q does not name the broker %s", err, addr)
			}
			if !c.closed {
				t.Fatal("connection not closed")
			}
			if err := c.roundTrip(context.Background(), req, kmsg.NewPtrMetadataResponse()); !errors.Is(err, ErrSourceConnClosed) {
				t.Fatalf("second roundTrip = %v, want ErrSourceConnClosed", err)
			}
		})
	}
}

func TestSourceConnMismatchedResponse(t *testing.T) {
	t.Parallel()
	cl := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	c := scDial(t, cl.ListenAddrs()[0], sourceConnConfig{})
	err := c.roundTrip(context.Background(), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrFetchResponse())
	if !errors.Is(err, ErrSourceResponse) || c.closed {
		t.Fatalf("roundTrip = %v (closed %v), want ErrSourceResponse with the connection open", err, c.closed)
	}
	scMetadata(t, c, kmsg.NewPtrMetadataResponse(), "t")
}

// TestSourceConnApiVersionsFallback covers the ways an older broker answers
// ApiVersions v3.
func TestSourceConnApiVersionsFallback(t *testing.T) {
	t.Parallel()
	type step struct {
		version int16                     // the ApiVersions version expected
		answer  *kmsg.ApiVersionsResponse // nil: close the connection
		check   func(*kmsg.ApiVersionsRequest) error
	}
	softwareName := func(r *kmsg.ApiVersionsRequest) error {
		if r.ClientSoftwareName != "kmirror" || r.ClientSoftwareVersion == "" {
			return fmt.Errorf("software %q %q", r.ClientSoftwareName, r.ClientSoftwareVersion)
		}
		return nil
	}
	full := [][3]int16{{18, 0, 2}, {3, 0, 8}, {1, 4, 11}}
	for _, tc := range []struct {
		name  string
		conns [][]step // per connection, its requests
		want  error
		fetch int16 // version(Fetch, 0, 100) after the dial
		meta  int16
	}{
		{
			name: "unsupported, all ranges in v0 form",
			conns: [][]step{{
				{3, scApiVersions(0, kerr.UnsupportedVersion.Code, full...), softwareName},
			}},
			fetch: 11, meta: 8,
		},
		{
			name: "unsupported, KIP-511 ApiVersions range only",
			conns: [][]step{{
				{3, scApiVersions(0, kerr.UnsupportedVersion.Code, [3]int16{18, 0, 2}), softwareName},
				{2, scApiVersions(2, 0, full...), nil},
			}},
			fetch: 11, meta: 8,
		},
		{
			name: "unsupported, no ranges",
			conns: [][]step{{
				{3, scApiVersions(0, kerr.UnsupportedVersion.Code), nil},
				{0, scApiVersions(0, 0, [3]int16{18, 0, 0}, [3]int16{1, 4, 6}), nil},
			}},
			fetch: 6, meta: -1,
		},
		{
			name: "closes on v3, v0 on a new connection",
			conns: [][]step{
				{{3, nil, softwareName}},
				{{0, scApiVersions(0, 0, [3]int16{18, 0, 1}, [3]int16{3, 0, 5}, [3]int16{1, 4, 8}), nil}},
			},
			fetch: 8, meta: 5,
		},
		{
			name: "closes on v3 and v0",
			conns: [][]step{
				{{3, nil, nil}},
				{{0, nil, nil}},
			},
			want: io.EOF,
		},
		{
			name: "no downgrade offered",
			conns: [][]step{{
				{3, scApiVersions(0, kerr.UnsupportedVersion.Code, [3]int16{18, 0, 3}), nil},
			}},
			want: ErrSourceVersions,
		},
		{
			name: "unsupported at v0",
			conns: [][]step{{
				{3, scApiVersions(0, kerr.UnsupportedVersion.Code), nil},
				{0, scApiVersions(0, kerr.UnsupportedVersion.Code), nil},
			}},
			want: kerr.UnsupportedVersion,
		},
		{
			name: "other error",
			conns: [][]step{{
				{3, scApiVersions(3, kerr.InvalidRequest.Code), nil},
			}},
			want: kerr.InvalidRequest,
		},
		{
			name: "empty key list",
			conns: [][]step{{
				{3, scApiVersions(3, 0), nil},
			}},
			want: ErrSourceVersions,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := scFake(t, func(n int, conn net.Conn) {
				if n >= len(tc.conns) {
					t.Errorf("fake: unexpected connection %d", n)
					return
				}
				for _, s := range tc.conns[n] {
					req, corr, clientID, err := scReadRequest(conn)
					if err != nil {
						t.Errorf("fake: %v", err)
						return
					}
					av, ok := req.(*kmsg.ApiVersionsRequest)
					if !ok || av.Version != s.version {
						t.Errorf("fake: got key %d v%d, want ApiVersions v%d", req.Key(), req.GetVersion(), s.version)
						return
					}
					if clientID != "kmirror-mirror-m1" {
						t.Errorf("fake: client id %q", clientID)
					}
					if s.check != nil {
						if err := s.check(av); err != nil {
							t.Errorf("fake: %v", err)
						}
					}
					if s.answer == nil {
						return // close
					}
					if err := scWriteResponse(conn, corr, s.answer); err != nil {
						t.Errorf("fake: %v", err)
						return
					}
				}
				io.Copy(io.Discard, conn)
			})
			c, err := dialSource(context.Background(), addr, sourceConnConfig{ClientID: "kmirror-mirror-m1"})
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("dialSource = %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := c.version(int16(kmsg.Fetch), 0, 100); got != tc.fetch {
				t.Errorf("Fetch version %d, want %d", got, tc.fetch)
			}
			if got := c.version(int16(kmsg.Metadata), 0, 100); got != tc.meta {
				t.Errorf("Metadata version %d, want %d", got, tc.meta)
			}
		})
	}
}

// TestSourceConnOldKfake: kfake capped at Kafka 2.3 answers ApiVersions v3
// the KIP-511 way; the connection then works at 2.3's versions.
func TestSourceConnOldKfake(t *testing.T) {
	t.Parallel()
	cl := kfaketest.Source(t, kfake.SeedTopics(1, "t"), kfake.MaxVersions(kversion.V2_3_0()))
	recs := scRecords("old", 4, 10)
	scProduce(t, cl, "t", recs...)
	c := scDial(t, cl.ListenAddrs()[0], sourceConnConfig{})
	if got := c.version(int16(kmsg.ApiVersions), 0, 100); got != 2 {
		t.Errorf("ApiVersions version %d, want 2", got)
	}
	v := c.version(int16(kmsg.Fetch), 4, 100)
	if v != 11 {
		t.Fatalf("Fetch version %d, want 11 (Kafka 2.3)", v)
	}
	resp := kmsg.NewPtrFetchResponse()
	if err := c.roundTrip(context.Background(), scFetchRequest(v, "t", [16]byte{}, 0, 0), resp); err != nil {
		t.Fatal(err)
	}
	scEqual(t, "fetch", scDecode(t, scRecordBatches(t, resp)), scWant(recs, 0))
}

// scReplay serves one connection: it answers every request with frame
// (a captured response), its correlation id patched in. The loop
// allocates nothing, so allocation counts of the client are its own.
func scReplay(tb testing.TB, frame []byte) net.Conn {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer conn.Close()
		out := bytes.Clone(frame)
		in := make([]byte, 64<<10)
		hdr := make([]byte, 4)
		for {
			if _, err := io.ReadFull(conn, hdr); err != nil {
				return
			}
			n := int(binary.BigEndian.Uint32(hdr))
			if n > len(in) || n < 8 {
				return
			}
			if _, err := io.ReadFull(conn, in[:n]); err != nil {
				return
			}
			copy(out[4:8], in[4:8]) // after key and version
			if _, err := conn.Write(out); err != nil {
				return
			}
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		conn.Close()
		<-done
	})
	return conn
}

// scCaptureFetch produces a few small records to kfake and captures one
// whole Fetch response frame for them, then shuts kfake down so that
// nothing else allocates in the process.
func scCaptureFetch(tb testing.TB) (*kmsg.FetchRequest, []byte) {
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	scProduce(tb, cl, "t", scRecords("alloc", 10, 50)...)
	c, err := dialSource(context.Background(), cl.ListenAddrs()[0], sourceConnConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	topics := scMetadata(tb, c, kmsg.NewPtrMetadataResponse(), "t")
	req := scFetchRequest(c.version(int16(kmsg.Fetch), 4, 100), "t", topics["t"].id, 0, 0)
	if _, err := c.exchange(context.Background(), req); err != nil {
		tb.Fatal(err)
	}
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(c.rbuf)))
	return req, append(frame, c.rbuf...)
}

// TestSourceConnAllocs proves the hot path allocates nothing: the framing
// (encode, write, read, header) of a steady Fetch stream, and roundTrip
// as a whole beyond what kmsg's decoding allocates by itself. The server
// replays a Fetch response captured from kfake, because kfake allocates per
// request and AllocsPerRun counts the whole process.
//
// Not parallel: allocations of concurrent tests would count here.
func TestSourceConnAllocs(t *testing.T) {
	req, frame := scCaptureFetch(t)
	c := newSourceConn(scReplay(t, frame), "replay", sourceConnConfig{})
	defer c.Close()
	resp := kmsg.NewPtrFetchResponse()
	cancelCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 3 { // warm: buffers sized, resp slices grown
		if err := c.roundTrip(cancelCtx, req, resp); err != nil {
			t.Fatal(err)
		}
	}
	if len(scRecordBatches(t, resp)) == 0 {
		t.Fatal("captured fetch has no records")
	}
	if !req.IsFlexible() {
		t.Fatalf("Fetch v%d: the body offset below assumes a flexible version", req.Version)
	}
	rbuf, wbuf := &c.rbuf[:1][0], &c.wbuf[:1][0]

	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"background", context.Background()},
		{"cancelable", cancelCtx},
	} {
		framing := testing.AllocsPerRun(200, func() {
			if _, err := c.exchange(tc.ctx, req); err != nil {
				t.Fatal(err)
			}
		})
		whole := testing.AllocsPerRun(200, func() {
			if err := c.roundTrip(tc.ctx, req, resp); err != nil {
				t.Fatal(err)
			}
		})
		body := bytes.Clone(frame[4+4+1:]) // size, correlation id, header tags
		decodeOnly := testing.AllocsPerRun(200, func() {
			if err := resp.ReadFrom(body); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("ctx=%s: framing %v allocs, roundTrip %v, kmsg ReadFrom alone %v", tc.name, framing, whole, decodeOnly)
		if framing != 0 {
			t.Errorf("ctx=%s: framing allocates %v per request, want 0", tc.name, framing)
		}
		if whole > decodeOnly {
			t.Errorf("ctx=%s: roundTrip allocates %v, kmsg decoding alone %v", tc.name, whole, decodeOnly)
		}
	}
	if &c.rbuf[:1][0] != rbuf || &c.wbuf[:1][0] != wbuf {
		t.Error("read or write buffer was reallocated in steady state")
	}
}

func BenchmarkSourceConnFetch(b *testing.B) {
	req, frame := scCaptureFetch(b)
	for _, path := range []string{"exchange", "roundTrip"} {
		b.Run("path="+path, func(b *testing.B) {
			c := newSourceConn(scReplay(b, frame), "replay", sourceConnConfig{})
			defer c.Close()
			resp := kmsg.NewPtrFetchResponse()
			ctx := context.Background()
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if path == "exchange" {
					_, err = c.exchange(ctx, req)
				} else {
					err = c.roundTrip(ctx, req, resp)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestSoftwareVersion(t *testing.T) {
	t.Parallel()
	v := softwareVersion()
	if v == "" || !isAlnum(v[0]) || !isAlnum(v[len(v)-1]) {
		t.Fatalf("softwareVersion() = %q, not a valid Kafka ClientSoftwareVersion", v)
	}
	for i := range len(v) {
		if ch := v[i]; !isAlnum(ch) && ch != '-' && ch != '.' {
			t.Fatalf("softwareVersion() = %q has %q", v, ch)
		}
	}
}
