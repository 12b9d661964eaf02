package netio

import (
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/kmirror/kmirror/internal/bufpool"
)

// responseStartCap is the capacity of a fresh response buffer; handlers grow
// it by append when a response is larger (Fetch asks for what it needs).
const responseStartCap = 4096

// Conn is one client connection as the handler sees it. It is the same for
// both transports; each embeds it and hands the handler a pointer to it:
//
//   - gnetConn (this file, writer.go): plaintext listeners. Frames are cut
//     on a gnet event loop and queued; a worker goroutine serves them and
//     writes responses to a dup of the socket, splices with sendfile(2).
//   - tlsConn (tls.go): TLS listeners. One goroutine per connection reads a
//     frame from a crypto/tls conn, serves it and writes the response,
//     splices copied through a pooled buffer.
//
// Whatever the transport, Serve calls of one connection never overlap and
// come in request order, and each response is written completely before
// the next request is served.
type Conn struct {
	srv      *Server
	listener string
	remote   string
	// Context is the handler's per-connection state. Only Serve touches it,
	// and Serve calls of one connection never overlap.
	Context any
	// hdr is reused for every request: one goroutine at a time reads it.
	hdr Header
	// splices are the file ranges of the response being built, reused
	// across responses (AddSplice).
	splices []Splice
	// tlsState is the TLS session, set once before the first request on
	// TLS listeners; nil on plaintext ones.
	tlsState *tls.ConnectionState
	// out is the transport that embeds this Conn.
	out responseWriter
	// muteUntil is when a throttled connection may be served again (Mute,
	// mute.go); zero when not muted. The connection's goroutine's only.
	muteUntil time.Time
}

// responseWriter is the transport-specific half of serving a request.
type responseWriter interface {
	// writeResponse sends msg (header included) with the connection's
	// splices, whose At positions are shifted by shift (the bytes cut off
	// the front of the handler's buffer). It returns when every byte has
	// been handed to the kernel, or with the error that closes the
	// connection.
	writeResponse(msg []byte, shift int) error
}

// Listener is the name of the listener the connection came in on.
func (c *Conn) Listener() string { return c.listener }

// RemoteAddr is the client's address, host:port.
func (c *Conn) RemoteAddr() string { return c.remote }

// TLS is the connection's TLS state (version, cipher suite, the client's
// verified certificate chain), or nil on a plaintext listener. The
// handshake is complete before the first request is served, so it is set
// for every Serve call on a TLS listener. The caller must not modify it.
func (c *Conn) TLS() *tls.ConnectionState { return c.tlsState }

// gnetConn is a plaintext connection on a gnet event loop. Its requests are
// framed on the event loop, copied into pooled buffers and queued; a worker
// goroutine, started when the queue becomes non-empty and gone when it
// drains, serves them in order. No goroutine idles per connection, and the
// event loop never blocks.
type gnetConn struct {
	Conn
	gc gnet.Conn

	mu sync.Mutex
	// queue holds request frames (pooled, owned by the queue until the
	// worker takes one, then by the worker until it Puts it).
	queue    [][]byte
	running  bool
	stalled  bool // OnTraffic stopped framing because the queue was full
	isClosed bool

	// wfd is the worker's duplicate of the socket (writer.go). Guarded by
	// mu together with isClosed and running: closed exactly once, by the
	// worker or by OnClose, whichever sees the connection closed last.
	wfd       int
	wfdClosed bool
	// pollFds is the worker's, reused across responses.
	pollFds [1]unix.PollFd

	workFn func() // c.work bound once: no closure per worker start
	// closedCh is closed by closed: it ends a mute wait (mute.go).
	closedCh chan struct{}
}

func newGnetConn(srv *Server, listener string, gc gnet.Conn) (*gnetConn, error) {
	wfd, err := gc.Dup()
	if err != nil {
		return nil, fmt.Errorf("netio: duplicating the socket: %w", err)
	}
	c := &gnetConn{Conn: Conn{srv: srv, listener: listener}, gc: gc, wfd: wfd, closedCh: make(chan struct{})}
	if a := gc.RemoteAddr(); a != nil {
		c.remote = a.String()
	}
	c.out = c
	c.workFn = c.work
	return c, nil
}

// readFrames runs on the event loop: it moves every complete frame out of
// gnet's buffer into the queue. Partial frames stay in gnet's buffer until
// more bytes arrive (STYLE.md item 8).
func (c *gnetConn) readFrames(in inbound) error {
	maxQueued := c.srv.cfg.MaxQueuedRequests
	for {
		c.mu.Lock()
		if c.isClosed {
			c.mu.Unlock()
			return nil
		}
		if len(c.queue) >= maxQueued {
			c.stalled = true
			c.mu.Unlock()
			break
		}
		c.mu.Unlock()
		size, ok, err := frameSize(in, c.srv.cfg.MaxRequestBytes)
		if err != nil {
			return err
		}
		if !ok || in.InboundBuffered() < 4+size {
			break
		}
		data, err := in.Next(4 + size)
		if err != nil {
			return err
		}
		// gnet's bytes die when OnTraffic returns (STYLE.md item 9): the
		// worker gets a copy. Its owner is the queue, then the worker.
		frame := bufpool.Get(size)[:size]
		copy(frame, data[4:])
		c.srv.stats.BytesIn.Add(int64(4 + size))
		c.enqueue(frame)
	}
	// A client that pipelines without reading answers fills gnet's buffer
	// while the queue is full. gnet cannot pause reading a socket, so past
	// two maximum-size requests the connection is closed instead.
	if limit := 2 * int(c.srv.cfg.MaxRequestBytes); in.InboundBuffered() > limit {
		return errPipelinedTooMuch
	}
	return nil
}

func (c *gnetConn) enqueue(frame []byte) {
	c.mu.Lock()
	c.queue = append(c.queue, frame)
	start := !c.running
	c.running = true
	c.mu.Unlock()
	if start {
		go c.workFn()
	}
}

// work serves queued requests in order until the queue is empty.
func (c *gnetConn) work() {
	for {
		// A muted connection's frames wait (mute.go). The worker waits
		// out the mute even when the queue is empty, so a frame that
		// arrives during the mute waits in the queue for this worker.
		c.waitMuted(c.closedCh)
		c.mu.Lock()
		if len(c.queue) == 0 || c.isClosed {
			c.running = false
			if c.isClosed {
				c.closeWFDLocked()
			}
			c.mu.Unlock()
			return
		}
		frame := c.queue[0]
		n := copy(c.queue, c.queue[1:])
		c.queue[n] = nil
		c.queue = c.queue[:n]
		wake := c.stalled
		c.stalled = false
		c.mu.Unlock()
		if wake {
			// Frames may wait in gnet's buffer with no new bytes coming:
			// ask the event loop to run OnTraffic again.
			_ = c.gc.Wake(nil)
		}
		ok := c.serve(frame)
		bufpool.Put(frame)
		if !ok {
			c.fail()
		}
	}
}

// serve handles one request frame on the connection's goroutine (the gnet
// worker or the TLS connection's goroutine) and writes the response. It
// returns false when the connection must close: a malformed header, a
// handler error or a failed write, already logged.
func (c *Conn) serve(frame []byte) bool {
	srv := c.srv
	hdr, body, err := ParseHeader(frame, srv.handler.Flexible)
	if err != nil {
		srv.stats.FramingErrors.Add(1)
		srv.log.Warn("closing connection", "listener", c.listener, "remote", c.remote, "err", err)
		return false
	}
	c.hdr = hdr
	srv.stats.Requests.Add(1)
	c.splices = c.splices[:0]
	resp := bufpool.Get(responseStartCap)[:responseHeaderRoom]
	out, send, err := srv.handler.Serve(c, &c.hdr, body, resp)
	defer bufpool.Put(out)
	if err != nil {
		srv.log.Warn("closing connection", "listener", c.listener, "remote", c.remote,
			"api_key", hdr.Key, "api_version", hdr.Version, "err", err)
		return false
	}
	if !send {
		return true
	}
	var spliced int64
	for _, s := range c.splices {
		spliced += s.Len
	}
	msg := finishResponse(out, hdr.CorrelationID, hdr.ResponseFlexible(), spliced)
	if err := c.out.writeResponse(msg, len(out)-len(msg)); err != nil {
		srv.log.Debug("writing a response failed; closing", "listener", c.listener, "remote", c.remote, "err", err)
		return false
	}
	return true
}

// fail closes the connection after a bad request. isClosed is set at once,
// not when gnet's OnClose runs later on the event loop, so the requests
// pipelined behind the bad one are never served: a Produce behind a failed
// request must not be written.
func (c *gnetConn) fail() {
	c.mu.Lock()
	c.isClosed = true
	c.mu.Unlock()
	_ = c.gc.Close()
}

// closeWFDLocked closes the worker's socket duplicate once.
// REQUIRES: c.mu held.
func (c *gnetConn) closeWFDLocked() {
	if !c.wfdClosed {
		c.wfdClosed = true
		_ = unix.Close(c.wfd)
	}
}

// closed runs on the event loop when the connection closes: queued frames
// go back to the pool; a running worker stops after its current request.
func (c *gnetConn) closed(err error) {
	c.mu.Lock()
	c.isClosed = true
	close(c.closedCh)
	for i, f := range c.queue {
		bufpool.Put(f)
		c.queue[i] = nil
	}
	c.queue = c.queue[:0]
	if c.running {
		// The worker may be blocked writing: wake it (the write fails),
		// and it closes the descriptor on its way out.
		_ = unix.Shutdown(c.wfd, unix.SHUT_RDWR)
	} else {
		c.closeWFDLocked()
	}
	c.mu.Unlock()
	if err != nil {
		c.srv.log.Debug("connection closed", "listener", c.listener, "remote", c.remote, "err", err)
	}
}
