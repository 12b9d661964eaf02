package netio

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kmirror/kmirror/internal/bufpool"
)

// TLS listeners (Kafka's SSL and SASL_SSL protocols).
//
// gnet cannot do TLS, so a listener with Listener.TLS set is served by
// crypto/tls on the standard library's net package instead: one accept
// loop per listener and one goroutine per connection, which does the
// handshake, then reads a frame, serves it and writes its response, in a
// loop. The handler sees the same *Conn as on gnet.
//
// Ordering: the goroutine reads the next frame only after the current
// response is written, so Serve calls of a connection come one at a time,
// in request order, and responses leave in request order, as on gnet.
// Kafka's own network layer does the same (it mutes a channel from a
// request until its response is sent). Pipelined requests wait in the
// kernel's receive buffer and crypto/tls's record buffer; reading them
// later costs a memory copy, so a reader goroutine with a queue (what the
// gnet path needs, because an event loop must not block) would only
// overlap decrypting request n+1 with serving request n, for a second
// goroutine and a queue per connection. Without one, back pressure is
// TCP's: a client that pipelines without reading fills its own window, and
// no "pipelined too much" limit is needed.
//
// Writes: a splice cannot go out with sendfile(2) through crypto/tls (the
// bytes must be encrypted in user space; kernel TLS, which could, needs
// the session keys that crypto/tls does not export). Each file range is
// read with pread(2) into a pooled chunk of tlsChunkBytes, with the
// response bytes around it, and the chunk is written through the tls.Conn
// when full: few large writes, so few TLS records and syscalls, also for
// Fetch responses made of many small pieces.
//
// The same goroutine-per-connection path serves a listener handed in
// (Listener.Conns), TLS or plain: a plain connection skips the handshake
// and reads and writes the net.Conn itself (tlsConn.rw), with the same
// frame loop, ordering and write deadlines.
//
// Limits: frames are bounded by MaxRequestBytes as on gnet; the handshake
// must finish within 10 s; each write of a chunk must finish within
// writeTimeoutMs (a client that reads nothing for 120 s is cut off, as on
// gnet). Idle connections are not limited: Kafka's
// connections.max.idle.ms is not implemented on either transport yet.

// defaultHandshakeTimeout bounds a TLS handshake, so that a client that
// connects and stalls does not hold a goroutine and a socket forever.
const defaultHandshakeTimeout = 10 * time.Second

// tlsChunkBytes is the most a response write hands crypto/tls at once:
// large enough that syscalls and records are full (crypto/tls cuts 16 KiB
// records), small enough that the pooled chunk stays in L2 cache and
// that each write's deadline measures progress, not the whole response.
const tlsChunkBytes = 256 << 10

// tlsFirstFrameBytes caps the buffer taken for a frame before its bytes
// arrive. A larger frame grows by doubling as bytes come in, so a client
// that sends a size prefix and stalls pins at most this much, not
// MaxRequestBytes (on gnet, bytes are buffered only as they arrive).
const tlsFirstFrameBytes = 1 << 20

// tlsListener is one TLS listener, or one Conns listener (TLS or plain):
// its accept loop and its connections.
type tlsListener struct {
	srv  *Server
	name string
	cfg  *tls.Config // nil: plain connections (a Conns listener)
	ln   net.Listener
	addr *net.TCPAddr
	// wg counts the accept loop and every connection's goroutine.
	wg sync.WaitGroup
	// closing is closed by close: accept retries stop waiting, and
	// errors caused by the shutdown are not logged.
	closing chan struct{}

	mu     sync.Mutex
	conns  map[*tlsConn]struct{} // open connections, for close
	closed bool
}

func (s *Server) listenTLS(l Listener) (*tlsListener, error) {
	ln := l.Conns
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", l.Addr); err != nil {
			return nil, fmt.Errorf("listener %s on %s: %w", l.Name, l.Addr, err)
		}
	}
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		var err error
		if addr, err = net.ResolveTCPAddr("tcp", ln.Addr().String()); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("listener %s: address %s: %w", l.Name, ln.Addr(), err)
		}
	}
	tl := &tlsListener{
		srv:     s,
		name:    l.Name,
		cfg:     l.TLS,
		ln:      ln,
		addr:    addr,
		closing: make(chan struct{}),
		conns:   map[*tlsConn]struct{}{},
	}
	tl.wg.Add(1)
	go tl.accept()
	s.log.Info("listening", "listener", l.Name, "addr", tl.addr.String(), "tls", l.TLS != nil)
	return tl, nil
}

func (l *tlsListener) isClosing() bool {
	select {
	case <-l.closing:
		return true
	default:
		return false
	}
}

// accept runs until the listener closes. The handshake happens on the
// connection's goroutine, so a slow or stalled client never delays
// accepting the next one.
func (l *tlsListener) accept() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || l.isClosing() {
				return
			}
			// Out of descriptors or memory: wait and retry, as net/http
			// does; the doubling wait bounds the log lines too.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.srv.log.Warn("accepting a connection failed", "listener", l.name, "err", err,
				"retry_in", backoff.String())
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-l.closing:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		l.srv.stats.ConnectionsOpened.Add(1)
		c := newTLSConn(l, nc)
		if !l.track(c) {
			_ = nc.Close()
			l.srv.stats.ConnectionsClosed.Add(1)
			continue
		}
		go c.run()
	}
}

// track registers c and counts its goroutine, unless the listener closed.
// wg.Add runs while the accept loop's own count holds wg above zero, so it
// never races with close's Wait.
func (l *tlsListener) track(c *tlsConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c] = struct{}{}
	l.wg.Add(1)
	return true
}

func (l *tlsListener) untrack(c *tlsConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// close stops accepting, closes every connection's socket (a goroutine
// blocked reading, writing or handshaking returns at once; one inside
// Serve returns when Serve does) and waits for the goroutines until ctx
// is done.
func (l *tlsListener) close(ctx context.Context) error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.closing)
		// The raw socket, not the tls.Conn: tls.Conn.Close would send a
		// close_notify behind a write that may be blocked.
		for c := range l.conns {
			_ = c.nc.Close()
		}
	}
	l.mu.Unlock()
	_ = l.ln.Close()
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("listener %s: connections still being served: %w", l.name, ctx.Err())
	}
}

// tlsConn is a connection on a TLS listener or a Conns listener, served
// by its own goroutine (run). Every field but Conn's is that goroutine's,
// except nc, which close may also close.
type tlsConn struct {
	Conn
	l  *tlsListener
	nc net.Conn
	// rw is what frames are read from and responses written to: tc, or
	// nc on a plain connection.
	rw net.Conn
	// tc is the TLS session over cc; nil on a plain connection, as cc.
	tc *tls.Conn
	// cc sits between tc and nc and gathers the TLS records of one write
	// into one syscall (see coalescingConn).
	cc *coalescingConn
	// state backs Conn.tlsState once the handshake is done.
	state tls.ConnectionState
	// size receives each frame's size prefix.
	size [4]byte
	// chunk is the pooled buffer of the response being written (owner:
	// writeResponse, which Puts it before returning); nil in between.
	chunk []byte
	// writeFailed: a write failed or timed out, so no close_notify.
	writeFailed bool
}

func newTLSConn(l *tlsListener, nc net.Conn) *tlsConn {
	c := &tlsConn{
		Conn: Conn{srv: l.srv, listener: l.name, remote: nc.RemoteAddr().String()},
		l:    l,
		nc:   nc,
		rw:   nc,
	}
	if l.cfg != nil {
		c.cc = &coalescingConn{Conn: nc}
		c.tc = tls.Server(c.cc, l.cfg)
		c.rw = c.tc
	}
	c.out = c
	return c
}

// coalescingConn gathers what crypto/tls writes between two flushes.
// crypto/tls cuts application data into 16 KiB records and writes each
// with its own write(2): a 256 KiB chunk took 16 syscalls, about a quarter
// of the TLS serving CPU (netio benchmark profile). Gathered, a chunk's
// records leave in one. Everything written is sent by the next flush, by
// the next Read (the handshake writes a flight, then waits for the
// answer) or by Close (close_notify).
type coalescingConn struct {
	net.Conn
	buf []byte // pooled while it holds bytes, nil when empty
}

func (c *coalescingConn) Write(b []byte) (int, error) {
	if c.buf == nil {
		c.buf = bufpool.Get(tlsChunkBytes + 64<<10)[:0]
	}
	c.buf = append(c.buf, b...)
	return len(b), nil
}

// flush sends the gathered bytes in one write (net.Conn.Write writes all
// of b or fails).
func (c *coalescingConn) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	bufpool.Put(c.buf)
	c.buf = nil
	return err
}

func (c *coalescingConn) Read(b []byte) (int, error) {
	if err := c.flush(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *coalescingConn) Close() error {
	err := c.flush()
	if cerr := c.Conn.Close(); err == nil {
		err = cerr
	}
	return err
}

// run is the connection's goroutine: the handshake (TLS only), then
// serve until the client leaves, a request fails or the listener closes.
func (c *tlsConn) run() {
	defer c.l.wg.Done()
	defer c.finish()
	srv := c.srv
	if c.tc == nil {
		c.serveFrames()
		return
	}
	if err := c.handshake(); err != nil {
		switch {
		case c.l.isClosing():
			// Close cut the handshake short: not the client's fault.
		case errors.Is(err, io.EOF):
			// Connected and closed without a byte: a port probe or a
			// load balancer's health check, not a failed handshake.
			srv.log.Debug("connection closed before the TLS handshake", "listener", c.listener, "remote", c.remote)
		default:
			srv.log.Warn("TLS handshake failed", "listener", c.listener, "remote", c.remote, "err", err)
		}
		return
	}
	c.state = c.tc.ConnectionState()
	c.tlsState = &c.state
	c.serveFrames()
}

// serveFrames reads, serves and answers frames until the client leaves,
// a request fails or the listener closes.
func (c *tlsConn) serveFrames() {
	srv := c.srv
	for {
		// A muted connection is not read (mute.go).
		c.waitMuted(c.l.closing)
		frame, err := c.readFrame()
		if err != nil {
			switch {
			case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrFrameInvalid):
				srv.stats.FramingErrors.Add(1)
				srv.log.Warn("closing connection", "listener", c.listener, "remote", c.remote, "err", err)
			case errors.Is(err, io.EOF), c.l.isClosing():
			default:
				srv.log.Debug("connection closed", "listener", c.listener, "remote", c.remote, "err", err)
			}
			return
		}
		ok := c.serve(frame)
		bufpool.Put(frame)
		if !ok {
			return
		}
	}
}

// handshake runs the TLS handshake within the handshake timeout. A client
// certificate, when the config asks for one, is verified here, so a
// refused client never reaches the handler.
func (c *tlsConn) handshake() error {
	if err := c.nc.SetDeadline(time.Now().Add(c.srv.cfg.handshakeTimeout)); err != nil {
		return err
	}
	if err := c.tc.Handshake(); err != nil {
		return err
	}
	// No read deadline from here: idle connections are not limited (see
	// the top of this file). Writes set their own deadlines.
	return c.nc.SetDeadline(time.Time{})
}

// finish closes the connection and forgets it.
func (c *tlsConn) finish() {
	c.l.untrack(c)
	if c.tc == nil || c.writeFailed || c.l.isClosing() {
		_ = c.nc.Close()
	} else {
		// Sends close_notify after a completed handshake (crypto/tls
		// bounds that write by 5 s), then closes the socket.
		_ = c.tc.Close()
	}
	c.srv.stats.ConnectionsClosed.Add(1)
}

// readFrame reads one request frame into a pooled buffer; the caller owns
// it and Puts it. Sizes are checked before anything is allocated.
func (c *tlsConn) readFrame() ([]byte, error) {
	if _, err := io.ReadFull(c.rw, c.size[:]); err != nil {
		return nil, err
	}
	size, err := checkFrameSize(c.size[:], c.srv.cfg.MaxRequestBytes)
	if err != nil {
		return nil, err
	}
	frame := bufpool.Get(min(size, tlsFirstFrameBytes))
	for len(frame) < size {
		if len(frame) == cap(frame) {
			grown := append(bufpool.Get(min(2*cap(frame), size)), frame...)
			bufpool.Put(frame)
			frame = grown
		}
		n, err := c.rw.Read(frame[len(frame):min(cap(frame), size)])
		frame = frame[:len(frame)+n]
		if err != nil && len(frame) < size {
			bufpool.Put(frame)
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // a partial frame is not a clean close
			}
			return nil, err
		}
	}
	c.srv.stats.BytesIn.Add(int64(4 + size))
	return frame, nil
}

// writeResponse implements responseWriter for TLS connections: msg and the
// splices' file bytes, in order, through the tls.Conn.
func (c *tlsConn) writeResponse(msg []byte, shift int) error {
	if len(c.splices) == 0 {
		// Nothing to read from files: write the handler's buffer as is,
		// without copying it into a chunk.
		return c.write(msg)
	}
	c.chunk = bufpool.Get(tlsChunkBytes)
	err := c.writeSpliced(msg, shift)
	bufpool.Put(c.chunk)
	c.chunk = nil
	return err
}

func (c *tlsConn) writeSpliced(msg []byte, shift int) error {
	pos := 0
	for _, s := range c.splices {
		at := s.At - shift
		if err := c.appendBytes(msg[pos:at]); err != nil {
			return err
		}
		if err := c.appendFile(s); err != nil {
			return err
		}
		pos = at
	}
	if err := c.appendBytes(msg[pos:]); err != nil {
		return err
	}
	return c.flush()
}

// appendBytes copies b into the chunk, writing the chunk each time it
// fills.
func (c *tlsConn) appendBytes(b []byte) error {
	for len(b) > 0 {
		if len(c.chunk) == cap(c.chunk) {
			if err := c.flush(); err != nil {
				return err
			}
		}
		n := copy(c.chunk[len(c.chunk):cap(c.chunk)], b)
		c.chunk = c.chunk[:len(c.chunk)+n]
		b = b[n:]
	}
	return nil
}

// appendFile reads a splice's file range into the chunk with pread(2),
// writing the chunk each time it fills. pread leaves the file's offset
// alone, so the storage layer's other readers of the same file are not
// disturbed, and needs no dup.
func (c *tlsConn) appendFile(s Splice) error {
	fd := int(s.File.Fd())
	off, left := s.Off, s.Len
	for left > 0 {
		if len(c.chunk) == cap(c.chunk) {
			if err := c.flush(); err != nil {
				return err
			}
		}
		room := c.chunk[len(c.chunk):cap(c.chunk)]
		room = room[:min(int64(len(room)), left)]
		n, err := unix.Pread(fd, room, off)
		if n > 0 {
			c.chunk = c.chunk[:len(c.chunk)+n]
			off += int64(n)
			left -= int64(n)
		}
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return fmt.Errorf("netio: reading a spliced file: %w", err)
		case n == 0:
			return fmt.Errorf("netio: splice: file ended %d bytes early", left)
		}
	}
	return nil
}

// flush writes the chunk and empties it.
func (c *tlsConn) flush() error {
	err := c.write(c.chunk)
	c.chunk = c.chunk[:0]
	return err
}

// write sends b through the tls.Conn in pieces of at most tlsChunkBytes,
// each with its own deadline: a client that reads nothing for the write
// timeout (writeTimeoutMs, writer.go) is cut off, one that reads slowly is
// not.
func (c *tlsConn) write(b []byte) error {
	for len(b) > 0 {
		if err := c.rw.SetWriteDeadline(time.Now().Add(c.srv.cfg.tlsWriteTimeout)); err != nil {
			c.writeFailed = true
			return err
		}
		n, err := c.rw.Write(b[:min(len(b), tlsChunkBytes)])
		if err == nil && c.cc != nil {
			err = c.cc.flush()
		}
		c.srv.stats.BytesOut.Add(int64(n))
		if err != nil {
			c.writeFailed = true
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("netio: client read nothing for %v: %w", c.srv.cfg.tlsWriteTimeout, err)
			}
			return err
		}
		b = b[n:]
	}
	return nil
}
