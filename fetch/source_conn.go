package fetch

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// A source connection speaks the Kafka wire protocol to one source broker,
// without kgo: the fetchers' hot path is a steady stream of Fetch requests
// on one socket, and this file keeps that stream allocation-free (kmsg's
// decoding of the response structs aside).
//
// Framing, as sent and read here (big endian):
//
//	request:  | size int32 | key int16 | version int16 | correlation id int32 |
//	          | client id (int16 length + bytes) | [tags 0x00 if flexible] | body |
//	response: | size int32 | correlation id int32 | [tagged fields if flexible] | body |
//
// size counts the bytes after itself. A flexible request uses header v2
// (the client id stays a non-compact string so that pre-flexible brokers
// can still read ApiVersions); its response uses header v1, except
// ApiVersions, whose response header is always v0 (KIP-511). These
// constants are part of the wire format.

// Defaults of sourceConnConfig.
const (
	defaultSourceClientID         = "kmirror"
	defaultSourceDialTimeout      = 10 * time.Second
	defaultSourceRequestTimeout   = 30 * time.Second
	defaultSourceMaxResponseBytes = 256 << 20

	// sourceConnRetainBytes bounds what an idle connection keeps: a read
	// or write buffer that grew past it is dropped before the next
	// request instead of being reused.
	sourceConnRetainBytes = 64 << 20

	// sourceConnFirstChunk is the first allocation when a response is
	// larger than the read buffer. The buffer then doubles as bytes
	// arrive, so a size header alone (which a broken or hostile broker
	// controls) never makes us allocate more than twice what was sent.
	sourceConnFirstChunk = 64 << 10

	sourceApiVersionsKey = int16(kmsg.ApiVersions)

	// sourceApiVersionsMax is the ApiVersions version we ask first: v3
	// is the first flexible one and carries the client software name and
	// version (KIP-511).
	sourceApiVersionsMax = 3

	sourceSoftwareName = "kmirror"
)

// Errors of source connections. roundTrip and dialSource wrap them with
// the broker address.
var (
	ErrSourceConnClosed    = errors.New("fetch: source connection closed")
	ErrSourceCorrelationID = errors.New("fetch: source response correlation id mismatch")
	ErrSourceFrameSize     = errors.New("fetch: source response size out of range")
	ErrSourceResponse      = errors.New("fetch: malformed source response")
	ErrSourceVersions      = errors.New("fetch: source ApiVersions negotiation failed")
)

// sourceSoftwareVersion is the ClientSoftwareVersion of ApiVersions v3+.
var sourceSoftwareVersion = softwareVersion()

// sourceConnConfig configures a connection.
type sourceConnConfig struct {
	ClientID         string        // "kmirror-mirror-<name>"; default "kmirror"
	DialTimeout      time.Duration // socket.connection.setup.timeout.ms, default 10s
	RequestTimeout   time.Duration // request.timeout.ms, default 30s
	ReceiveBuffer    int           // socket.receive.buffer.bytes (SO_RCVBUF), <= 0 = OS default
	MaxResponseBytes int32         // refuse a response frame larger than this (default 256 MiB)
	// Dialer opens the socket; nil = net.Dialer. Tests inject faults.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS, when set, wraps the socket (security.protocol SSL, SASL_SSL).
	TLS *tls.Config
	// SASL, when set, authenticates after ApiVersions (SASL_*).
	SASL sasl.Mechanism
}

func (cfg sourceConnConfig) withDefaults() sourceConnConfig {
	if cfg.ClientID == "" {
		cfg.ClientID = defaultSourceClientID
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = defaultSourceDialTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = defaultSourceRequestTimeout
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = defaultSourceMaxResponseBytes
	}
	return cfg
}

// versionRange is what the broker advertised for one key, already capped
// at what kmsg can encode. max < 0: not usable.
type versionRange struct{ min, max int16 }

// sourceConn is one connection to one source broker. Not safe for
// concurrent use: one fetcher goroutine owns it. The only other goroutine
// that touches it is the context watcher (interrupt), which only sets the
// socket deadline.
type sourceConn struct {
	conn    net.Conn // never reassigned: interrupt reads it unlocked
	address string
	cfg     sourceConnConfig

	corr     int32
	versions [maxAPIKey + 1]versionRange

	// wbuf holds the request being written, rbuf the last response
	// frame (minus its size). Both are reused; see roundTrip.
	wbuf []byte
	rbuf []byte
	hdr  [4]byte

	closed bool

	// The context watcher. One context.AfterFunc registration is kept per
	// distinct ctx.Done() channel, so a fetcher that passes the same
	// long-lived ctx every time registers once, not per request. watchGen
	// (under watchMu) tells a stale callback that it no longer owns the
	// deadline; see watch.
	watchMu   sync.Mutex
	watchGen  uint64
	watchDone <-chan struct{}
	watchStop func() bool
}

// dialSource connects and negotiates versions: it sends ApiVersions v3
// (flexible, with client software name "kmirror" and version) and, if the
// broker answers UNSUPPORTED_VERSION (KIP-511: it then answers in v0 form
// with its ranges), uses those ranges, or, when the broker lists only its
// ApiVersions range (as Kafka 2.4+ does), asks again at that version on
// the same connection. Old brokers that close the connection on v3 are
// retried once with ApiVersions v0 on a new connection.
func dialSource(ctx context.Context, addr string, cfg sourceConnConfig) (*sourceConn, error) {
	cfg = cfg.withDefaults()
	c, err := openSource(ctx, addr, cfg)
	if err != nil {
		return nil, err
	}
	err = c.negotiate(ctx, sourceApiVersionsMax)
	if err != nil && ctx.Err() == nil && closedByPeer(err) {
		// Brokers before Kafka 2.4 cannot parse the flexible request
		// header of ApiVersions v3 and drop the connection.
		if c, err = openSource(ctx, addr, cfg); err != nil {
			return nil, err
		}
		err = c.negotiate(ctx, 0)
	}
	if err == nil && cfg.SASL != nil {
		err = c.authenticate(ctx)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.unwatch()
	return c, nil
}

// openSource dials addr and wraps the socket; no request is sent.
func openSource(ctx context.Context, addr string, cfg sourceConnConfig) (*sourceConn, error) {
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	dial := cfg.Dialer
	if dial == nil {
		d := &net.Dialer{Timeout: cfg.DialTimeout}
		dial = d.DialContext
	}
	conn, err := dial(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dialing source %s: %w", addr, err)
	}
	if cfg.ReceiveBuffer > 0 {
		if rb, ok := conn.(interface{ SetReadBuffer(int) error }); ok {
			if err := rb.SetReadBuffer(cfg.ReceiveBuffer); err != nil {
				conn.Close()
				return nil, fmt.Errorf("source %s: setting receive buffer: %w", addr, err)
			}
		}
	}
	if cfg.TLS != nil {
		tc, err := startTLS(dctx, conn, addr, cfg.TLS)
		if err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	return newSourceConn(conn, addr, cfg), nil
}

// newSourceConn wraps an open socket. It negotiates nothing: versions
// answer -1 until negotiate ran (tests use it on net.Pipe).
func newSourceConn(conn net.Conn, addr string, cfg sourceConnConfig) *sourceConn {
	c := &sourceConn{conn: conn, address: addr, cfg: cfg.withDefaults()}
	for i := range c.versions {
		c.versions[i] = versionRange{-1, -1}
	}
	return c
}

// negotiate runs ApiVersions starting at version v and records the
// broker's ranges. Every retry asks a strictly lower version, so it ends.
func (c *sourceConn) negotiate(ctx context.Context, v int16) error {
	for {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName = sourceSoftwareName
		req.ClientSoftwareVersion = sourceSoftwareVersion
		body, err := c.exchange(ctx, req)
		if err != nil {
			return err
		}
		if len(body) < 2 {
			return c.fail(ctx, "reading ApiVersions response", ErrSourceResponse)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = v
		unsupported := int16(binary.BigEndian.Uint16(body)) == kerr.UnsupportedVersion.Code
		if unsupported {
			// KIP-511: whatever version we asked, the answer is in v0
			// form.
			resp.Version = 0
		}
		if err := resp.ReadFrom(body); err != nil {
			return c.fail(ctx, "decoding ApiVersions response", fmt.Errorf("%w: %w", ErrSourceResponse, err))
		}
		if unsupported {
			if v == 0 {
				return c.fail(ctx, "ApiVersions v0", fmt.Errorf("%w: %w", ErrSourceVersions, kerr.UnsupportedVersion))
			}
			switch {
			case len(resp.ApiKeys) == 0:
				v = 0
				continue
			case len(resp.ApiKeys) == 1 && resp.ApiKeys[0].ApiKey == sourceApiVersionsKey:
				next := resp.ApiKeys[0].MaxVersion
				if next < 0 || next >= v {
					return c.fail(ctx, "ApiVersions", fmt.Errorf("%w: v%d answered UNSUPPORTED_VERSION with max v%d",
						ErrSourceVersions, v, next))
				}
				v = next
				continue
			}
			// The broker listed every key: use them as they are.
		} else if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return c.fail(ctx, "ApiVersions", fmt.Errorf("%w: %w", ErrSourceVersions, err))
		}
		if len(resp.ApiKeys) == 0 {
			return c.fail(ctx, "ApiVersions", fmt.Errorf("%w: no api keys", ErrSourceVersions))
		}
		c.setVersions(resp.ApiKeys)
		return nil
	}
}

// maxAPIKey is the largest API key whose versions a connection keeps:
// kmsg's keys and kmirror's mirror keys (mirrorapi, 94-107), which kmsg
// does not know and the other nodes of a cluster serve.
const maxAPIKey = 255

func (c *sourceConn) setVersions(keys []kmsg.ApiVersionsResponseApiKey) {
	for _, k := range keys {
		if k.ApiKey < 0 || int(k.ApiKey) >= len(c.versions) || k.MinVersion < 0 || k.MaxVersion < k.MinVersion {
			continue
		}
		hi := k.MaxVersion
		// A key kmsg does not know is capped by the caller's maxVer
		// alone (version), who encodes it.
		if req := kmsg.RequestForKey(k.ApiKey); req != nil && req.MaxVersion() < hi {
			hi = req.MaxVersion()
		}
		if hi < k.MinVersion {
			continue
		}
		c.versions[k.ApiKey] = versionRange{k.MinVersion, hi}
	}
}

// version returns the highest version of key that both the broker and
// kmsg support (for a key kmsg does not know, the broker alone), capped at
// maxVer, or -1 when the broker does not serve key or the range does not
// overlap [minVer, maxVer].
func (c *sourceConn) version(key, minVer, maxVer int16) int16 {
	if key < 0 || int(key) >= len(c.versions) {
		return -1
	}
	r := c.versions[key]
	if r.max < 0 {
		return -1
	}
	hi := r.max
	if maxVer < hi {
		hi = maxVer
	}
	lo := r.min
	if minVer > lo {
		lo = minVer
	}
	if hi < lo {
		return -1
	}
	return hi
}

// roundTrip sends req (its version must already be set) and decodes the
// response into resp, a kmsg response of the same key, reused by the
// caller; its version is set to req's.
//
// Byte fields of resp (FetchResponse RecordBatches, unknown tags) ALIAS
// the connection's read buffer and stay valid until the next roundTrip or
// Close. Strings are copied (ReadFrom, not UnsafeReadFrom): a topic name
// kept in a map must not change under the caller when the buffer is
// reused. Fetch v13+ carries topic ids, not names, so it has none.
//
// The deadline is now + RequestTimeout (plus the request's own wait:
// Fetch MaxWaitMillis or a kmsg.TimeoutRequest's timeout, as kgo does) or
// ctx's deadline, whichever is earlier; cancelling ctx interrupts a
// blocked read at once.
//
// Any error (I/O, timeout, cancellation, a correlation id mismatch, an
// undecodable or oversized response) closes the connection and is
// returned wrapped with the broker address; callers reconnect. The one
// exception is a resp whose key differs from req's: nothing is sent and
// the connection stays open.
func (c *sourceConn) roundTrip(ctx context.Context, req kmsg.Request, resp kmsg.Response) error {
	if resp.Key() != req.Key() {
		return fmt.Errorf("source %s: %w: %s response for a %s request",
			c.address, ErrSourceResponse, kmsg.NameForKey(resp.Key()), kmsg.NameForKey(req.Key()))
	}
	body, err := c.exchange(ctx, req)
	if err != nil {
		return err
	}
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return c.fail(ctx, "decoding response", fmt.Errorf("%w: %s v%d: %w",
			ErrSourceResponse, kmsg.NameForKey(req.Key()), req.GetVersion(), err))
	}
	return nil
}

// exchange writes req and reads its response frame. It returns the body
// after the response header, a sub-slice of c.rbuf. This is the whole hot
// path minus kmsg's decoding, so the allocation tests measure it alone.
func (c *sourceConn) exchange(ctx context.Context, req kmsg.Request) ([]byte, error) {
	if c.closed {
		return nil, fmt.Errorf("source %s: %w", c.address, ErrSourceConnClosed)
	}
	// The previous response is consumed now: drop a buffer that grew
	// too big to keep for every idle connection.
	if cap(c.rbuf) > sourceConnRetainBytes {
		c.rbuf = nil
	}
	if cap(c.wbuf) > sourceConnRetainBytes {
		c.wbuf = nil
	}

	c.watch(ctx)
	deadline := time.Now().Add(c.requestTimeout(req))
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return nil, c.fail(ctx, "setting deadline", err)
	}
	// Checked after SetDeadline: a cancellation that raced with it has
	// either already happened (seen here) or its callback runs after
	// SetDeadline and overrides it with an expired deadline.
	if ctx.Err() != nil {
		return nil, c.fail(ctx, "before writing request", nil)
	}

	corr := c.corr
	c.corr++
	c.wbuf = appendSourceRequest(c.wbuf[:0], req, corr, c.cfg.ClientID)
	if _, err := c.conn.Write(c.wbuf); err != nil {
		return nil, c.fail(ctx, "writing request", err)
	}

	if _, err := io.ReadFull(c.conn, c.hdr[:]); err != nil {
		return nil, c.fail(ctx, "reading response size", err)
	}
	size := int32(binary.BigEndian.Uint32(c.hdr[:]))
	if size < 4 || size > c.cfg.MaxResponseBytes {
		return nil, c.fail(ctx, "reading response size", fmt.Errorf("%w: %d bytes (max %d)",
			ErrSourceFrameSize, size, c.cfg.MaxResponseBytes))
	}
	frame, err := c.readFrame(int(size))
	if err != nil {
		return nil, c.fail(ctx, "reading response", err)
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		return nil, c.fail(ctx, "reading response", fmt.Errorf("%w: got %d, want %d",
			ErrSourceCorrelationID, got, corr))
	}
	body := frame[4:]
	if req.IsFlexible() && req.Key() != sourceApiVersionsKey {
		var ok bool
		if body, ok = skipSourceTags(body); !ok {
			return nil, c.fail(ctx, "reading response header", fmt.Errorf("%w: bad header tags", ErrSourceResponse))
		}
	}
	return body, nil
}

// requestTimeout is RequestTimeout plus the time the broker may hold req
// on purpose, so a long-poll Fetch does not time out while it waits.
func (c *sourceConn) requestTimeout(req kmsg.Request) time.Duration {
	d := c.cfg.RequestTimeout
	var wait int32
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		wait = r.MaxWaitMillis
	case kmsg.TimeoutRequest:
		wait = r.Timeout()
	}
	if wait > 0 {
		d += time.Duration(wait) * time.Millisecond
	}
	return d
}

// readFrame reads size bytes into c.rbuf and returns them. A frame that
// fits the buffer is read in place; a larger one grows the buffer as the
// bytes arrive (see sourceConnFirstChunk).
//
// REQUIRES: 0 < size <= c.cfg.MaxResponseBytes.
func (c *sourceConn) readFrame(size int) ([]byte, error) {
	if size <= cap(c.rbuf) {
		c.rbuf = c.rbuf[:size]
		_, err := io.ReadFull(c.conn, c.rbuf)
		return c.rbuf, err
	}
	b := c.rbuf[:0]
	for len(b) < size {
		if len(b) == cap(b) {
			// Doubling, not size: at most twice what has arrived.
			// It may pass size (fewer regrowths when responses grow
			// slowly), never the cap. It always grows: len(b) < size
			// <= MaxResponseBytes.
			n := max(2*cap(b), sourceConnFirstChunk)
			n = min(n, int(c.cfg.MaxResponseBytes))
			nb := make([]byte, len(b), n)
			copy(nb, b)
			b = nb
			c.rbuf = b
		}
		n, err := c.conn.Read(b[len(b):min(cap(b), size)])
		b = b[:len(b)+n]
		c.rbuf = b
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return b, nil
}

// appendSourceRequest appends one request frame: request header v1, or v2
// for a flexible request, then kmsg's body, then patches the size.
func appendSourceRequest(dst []byte, req kmsg.Request, corr int32, clientID string) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	// Even flexible headers keep the int16-length client id (KIP-482).
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(clientID)))
	dst = append(dst, clientID...)
	if req.IsFlexible() {
		dst = append(dst, 0) // no header tags
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// skipSourceTags skips the tagged fields of a flexible response header.
func skipSourceTags(b []byte) ([]byte, bool) {
	num, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, false
	}
	b = b[n:]
	for ; num > 0; num-- {
		if _, n = binary.Uvarint(b); n <= 0 { // tag
			return nil, false
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, false
		}
		b = b[n+int(size):]
	}
	return b, true
}

// watch makes a cancellation of ctx interrupt this connection's I/O.
//
// A fresh context.AfterFunc per request would allocate three objects per
// Fetch; instead the registration is kept while ctx.Done() stays the same
// channel. The callback (interrupt) may run at any time on another
// goroutine, so a callback of a replaced registration must not touch the
// deadline of a request that uses another ctx. Walkthrough:
//
//  1. watch bumps watchGen under watchMu, then stops the old registration.
//  2. An old callback that took watchMu before step 1 finished setting its
//     expired deadline before step 1; exchange sets a fresh one after.
//  3. An old callback that takes watchMu after step 1 sees a newer
//     watchGen and does nothing.
//
// A ctx whose Done is nil can never be cancelled and needs no watcher.
func (c *sourceConn) watch(ctx context.Context) {
	done := ctx.Done()
	if done == c.watchDone {
		return // the same registration, or none needed
	}
	c.unwatch()
	if done == nil {
		return
	}
	c.watchMu.Lock()
	gen := c.watchGen
	c.watchMu.Unlock()
	c.watchDone = done
	c.watchStop = context.AfterFunc(ctx, func() { c.interrupt(gen) })
}

// unwatch drops the context registration, if any.
func (c *sourceConn) unwatch() {
	c.watchMu.Lock()
	c.watchGen++
	c.watchMu.Unlock()
	if c.watchStop != nil {
		c.watchStop()
	}
	c.watchStop = nil
	c.watchDone = nil
}

// interrupt runs on the goroutine of a cancelled context: an expired
// deadline makes the owner's blocked Read or Write return at once.
func (c *sourceConn) interrupt(gen uint64) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if gen == c.watchGen {
		c.conn.SetDeadline(time.Unix(1, 0))
	}
}

// fail closes the connection and wraps err with the broker address and
// op. If ctx is done, its cause is wrapped too, so callers can test for
// context.Canceled or context.DeadlineExceeded.
func (c *sourceConn) fail(ctx context.Context, op string, err error) error {
	c.Close()
	cerr := context.Cause(ctx)
	if cerr == nil && errors.Is(err, os.ErrDeadlineExceeded) {
		// The socket deadline was ctx's and fired before ctx's own
		// timer did.
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			cerr = context.DeadlineExceeded
		}
	}
	if cerr != nil {
		if err == nil {
			return fmt.Errorf("source %s: %s: %w", c.address, op, cerr)
		}
		return fmt.Errorf("source %s: %s: %w (%w)", c.address, op, cerr, err)
	}
	return fmt.Errorf("source %s: %s: %w", c.address, op, err)
}

// Close closes the socket and releases the buffers; byte fields of the
// last response must not be used after it. It is idempotent.
func (c *sourceConn) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.unwatch()
	c.rbuf, c.wbuf = nil, nil
	return c.conn.Close()
}

// addr returns the broker address the connection was dialed with.
func (c *sourceConn) addr() string { return c.address }

// closedByPeer reports whether err means the broker dropped the
// connection, which is what brokers before KIP-511 do on ApiVersions v3.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// softwareVersion returns the module version in the form Kafka accepts for
// ClientSoftwareVersion ([a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?):
// other characters become '-', and a version without any (a development
// build) is "dev".
func softwareVersion() string {
	v := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version
	}
	b := []byte(v)
	for i, ch := range b {
		if !isAlnum(ch) && ch != '-' && ch != '.' {
			b[i] = '-'
		}
	}
	for len(b) > 0 && !isAlnum(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && !isAlnum(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	if len(b) == 0 || string(b) == "devel" {
		return "dev"
	}
	return string(b)
}

func isAlnum(ch byte) bool {
	return ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9'
}

// swapReadBuffer installs b as the buffer the next response is read into
// and returns the current one, with the last response's bytes in it. A
// fetcher keeps applying one response while the next is read into the
// other buffer; byte fields decoded from the returned buffer stay valid
// until the caller hands it back.
func (c *sourceConn) swapReadBuffer(b []byte) []byte {
	cur := c.rbuf
	c.rbuf = b[:0]
	return cur
}
