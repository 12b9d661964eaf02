package netio

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// On plaintext (gnet) listeners, responses are written by the connection's
// worker goroutine straight to a duplicate of the socket descriptor, not
// with gnet's AsyncWrite. (TLS listeners write through crypto/tls: tls.go.)
//
// Why: a Fetch response is megabytes of segment bytes. AsyncWrite hands the
// buffer to the event loop, which writes what the socket takes and copies
// the rest into its ring buffer to flush later: a second user-space copy
// of most of every large response, on the event loop. Measured (BENCHMARKS.md,
// broker section), that copy and its flush cost about 60% of the broker's
// CPU when serving consumers. Writing from the worker removes it, lets a
// response carry file ranges that go out with sendfile(2) (no user-space
// copy at all), and keeps event loops free: the worker, not the loop,
// waits for a slow client's socket to drain.
//
// Ordering: one worker at a time serves a connection and it writes each
// response completely before taking the next request, so responses leave
// in request order. gnet still owns reading, framing and closing.
//
// Lifetime: the duplicate keeps the socket open until it is closed, so it
// is shut down as soon as gnet closes the connection (waking a blocked
// write) and closed by whoever sees the connection closed last, the worker
// or OnClose, under c.mu.

// Splice is a file range to send in the middle of a response: after byte
// At of the response buffer (as the handler sees it, header room included).
type Splice struct {
	At   int
	File interface{ Fd() uintptr }
	Off  int64
	Len  int64
}

// AddSplice asks for n bytes of f at off to be sent after byte at of the
// response buffer being built. Splices must be added in increasing At
// order. REQUIRES: f stays open until Serve's response is written (storage
// keeps retired segment files open for a minute, far longer).
func (c *Conn) AddSplice(at int, f interface{ Fd() uintptr }, off, n int64) {
	c.splices = append(c.splices, Splice{At: at, File: f, Off: off, Len: n})
}

// errConnClosed: the connection closed while a response was being written.
var errConnClosed = errors.New("netio: connection closed")

// writeTimeoutMs bounds one wait for the socket to drain; a client that
// reads nothing for this long is cut off, as Kafka's request timeout would.
const writeTimeoutMs = 120_000

// writeResponse sends msg (header included) with the splices, whose At
// positions are shifted by shift (the bytes cut off the front of the
// buffer).
func (c *gnetConn) writeResponse(msg []byte, shift int) error {
	pos := 0
	corked := false
	if len(c.splices) > 0 {
		// Cork so the small pieces between splices leave as full segments.
		corked = unix.SetsockoptInt(c.wfd, unix.IPPROTO_TCP, unix.TCP_CORK, 1) == nil
	}
	for _, s := range c.splices {
		at := s.At - shift
		if err := c.writeAll(msg[pos:at]); err != nil {
			return err
		}
		if err := c.sendFile(s); err != nil {
			return err
		}
		pos = at
	}
	if err := c.writeAll(msg[pos:]); err != nil {
		return err
	}
	if corked {
		_ = unix.SetsockoptInt(c.wfd, unix.IPPROTO_TCP, unix.TCP_CORK, 0)
	}
	return nil
}

// writeAll writes b, waiting for the socket to drain when it is full.
func (c *gnetConn) writeAll(b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(c.wfd, b)
		if n > 0 {
			b = b[n:]
			c.srv.stats.BytesOut.Add(int64(n))
		}
		if err := c.afterWrite(err); err != nil {
			return err
		}
	}
	return nil
}

// sendFile sends a file range with sendfile(2): page cache to socket.
func (c *gnetConn) sendFile(s Splice) error {
	in := int(s.File.Fd())
	off, left := s.Off, s.Len
	for left > 0 {
		n, err := unix.Sendfile(c.wfd, in, &off, int(min(left, 1<<30)))
		if n > 0 {
			left -= int64(n)
			c.srv.stats.BytesOut.Add(int64(n))
		}
		if n == 0 && err == nil {
			return fmt.Errorf("netio: sendfile: file ended %d bytes early", left)
		}
		if err := c.afterWrite(err); err != nil {
			return err
		}
	}
	return nil
}

// afterWrite waits for writability after EAGAIN and maps other errors.
func (c *gnetConn) afterWrite(err error) error {
	switch {
	case err == nil, errors.Is(err, unix.EINTR):
		return nil
	case !errors.Is(err, unix.EAGAIN):
		return err
	}
	fds := c.pollFds[:]
	fds[0] = unix.PollFd{Fd: int32(c.wfd), Events: unix.POLLOUT}
	for {
		n, err := unix.Poll(fds, writeTimeoutMs)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return err
		case n == 0:
			return fmt.Errorf("netio: client read nothing for %d ms", writeTimeoutMs)
		case fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0:
			return errConnClosed
		}
		return nil
	}
}
