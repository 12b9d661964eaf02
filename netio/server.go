// Package netio serves the Kafka wire protocol to clients: listeners,
// request framing, per-connection in-order dispatch to a Handler, and
// response writing with pooled buffers.
//
// Plaintext listeners run on gnet event loops (conn.go, writer.go): frames
// are cut on the loop, served on a per-connection worker goroutine, and
// responses written by the worker to a dup of the socket, file ranges with
// sendfile(2). TLS listeners, which gnet cannot serve, run on crypto/tls
// with a goroutine per connection (tls.go), as do the connections of a
// listener handed in (Listener.Conns). The Handler sees the same *Conn on
// both.
package netio

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// Handler serves requests. Its methods run on a connection's worker
// goroutine, never on an event loop, so they may block (long-poll Fetch,
// fsync, Badger). Requests of one connection arrive one at a time, in order;
// different connections are served in parallel.
type Handler interface {
	// Flexible reports whether key and version use request header v2. It
	// answers false for keys and versions it does not know.
	Flexible(key, version int16) bool
	// Serve handles one request. body aliases a pooled buffer that dies
	// when Serve returns. Serve appends the response body to resp and
	// returns it; send=false means no response (Produce with acks=0).
	// A non-nil error closes the connection (STYLE.md item 19): Kafka
	// failures are response codes, never errors.
	Serve(c *Conn, h *Header, body []byte, resp []byte) (out []byte, send bool, err error)
}

// Config configures a Server.
type Config struct {
	// Listeners are the addresses to bind, by listener name.
	Listeners []Listener
	// MaxRequestBytes bounds a request frame (socket.request.max.bytes).
	MaxRequestBytes int32
	// MaxQueuedRequests bounds the requests read from one connection and
	// not yet answered (default 64). Past it, OnTraffic stops framing and
	// leaves bytes in gnet's buffer until the worker catches up. TLS
	// connections read one request at a time and do not queue (tls.go).
	MaxQueuedRequests int
	// EventLoops is the number of gnet event loops (default GOMAXPROCS),
	// shared by the plaintext listeners.
	EventLoops int
	// Logger receives connection errors; nil discards them.
	Logger *slog.Logger

	// handshakeTimeout bounds a TLS handshake (default 10 s), and
	// tlsWriteTimeout each write on a TLS connection (default
	// writeTimeoutMs, as the gnet path's constant); tests shorten them.
	handshakeTimeout time.Duration
	tlsWriteTimeout  time.Duration
}

// Listener is a name (Kafka's listener name) and a host:port to bind.
type Listener struct {
	Name string
	Addr string
	// TLS, when set, makes this a TLS listener (Kafka's SSL and SASL_SSL
	// protocols), served by crypto/tls with a goroutine per connection
	// (tls.go) because gnet cannot do TLS. It needs a certificate
	// (Certificates, GetCertificate or GetConfigForClient); set ClientAuth
	// to ask for client certificates (Conn.TLS shows them). It must not be
	// modified after Listen. Nil listeners are plaintext, on gnet.
	TLS *tls.Config
	// Conns, when set, is a listener bound by someone else (the CONTROLLER
	// listener's Kafka side, meta.ControllerListener): Addr is not bound,
	// and the connections Conns accepts are served with a goroutine per
	// connection as on TLS listeners (tls.go), through crypto/tls when TLS
	// is also set, plain otherwise. Listeners reports Conns.Addr; Close
	// closes Conns.
	Conns net.Listener
}

// BoundListener is a listener with the address it actually bound (port 0
// resolved).
type BoundListener struct {
	Name string
	Addr *net.TCPAddr
}

// Server runs one gnet engine per plaintext listener and one accept loop
// per TLS listener or Conns listener.
type Server struct {
	cfg     Config
	handler Handler
	log     *slog.Logger
	bound   []BoundListener
	engines []*engine
	tlsLns  []*tlsListener
	stats   Stats
}

// Stats are the server's counters, for the metrics adapter. Both
// transports count alike: a connection is opened when accepted and closed
// when closed (also after a failed TLS handshake); bytes are those of Kafka
// frames (size prefix included), not of TLS records.
type Stats struct {
	ConnectionsOpened atomic.Int64
	ConnectionsClosed atomic.Int64
	Requests          atomic.Int64
	BytesIn           atomic.Int64
	BytesOut          atomic.Int64
	FramingErrors     atomic.Int64
}

// Stats returns the live counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Listen binds every listener and starts serving. It returns once all
// listeners accept connections.
func Listen(cfg Config, h Handler) (*Server, error) {
	if cfg.MaxRequestBytes <= 0 {
		return nil, errors.New("netio: MaxRequestBytes must be positive")
	}
	if cfg.MaxQueuedRequests <= 0 {
		cfg.MaxQueuedRequests = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.handshakeTimeout <= 0 {
		cfg.handshakeTimeout = defaultHandshakeTimeout
	}
	if cfg.tlsWriteTimeout <= 0 {
		cfg.tlsWriteTimeout = writeTimeoutMs * time.Millisecond
	}
	for _, l := range cfg.Listeners {
		if c := l.TLS; c != nil && len(c.Certificates) == 0 && c.GetCertificate == nil && c.GetConfigForClient == nil {
			return nil, fmt.Errorf("netio: listener %s: TLS config without a certificate", l.Name)
		}
	}
	s := &Server{cfg: cfg, handler: h, log: cfg.Logger}
	for _, l := range cfg.Listeners {
		var addr *net.TCPAddr
		if l.TLS != nil || l.Conns != nil {
			tl, err := s.listenTLS(l)
			if err != nil {
				s.Close(context.Background())
				return nil, err
			}
			s.tlsLns = append(s.tlsLns, tl)
			addr = tl.addr
		} else {
			e, err := s.start(l)
			if err != nil {
				s.Close(context.Background())
				return nil, err
			}
			s.engines = append(s.engines, e)
			addr = e.addr
		}
		s.bound = append(s.bound, BoundListener{Name: l.Name, Addr: addr})
	}
	return s, nil
}

// Listeners returns the bound addresses, in Config order.
func (s *Server) Listeners() []BoundListener { return s.bound }

// Close stops every listener: listeners close, connections close, then it
// returns. On plaintext listeners, requests being served finish on their
// workers after Close returns; their responses are dropped. On TLS
// listeners Close also waits, until ctx is done, for every connection's
// goroutine to return, so for requests inside Serve (the broker wakes its
// long polls before it calls Close). Calling Close again does nothing.
func (s *Server) Close(ctx context.Context) error {
	// gnet's Stop polls every 500 ms for the engine to finish: stop the
	// engines in parallel so shutdown costs one poll, not one per listener.
	errs := make([]error, len(s.engines)+len(s.tlsLns))
	var wg sync.WaitGroup
	for i, e := range s.engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.stop(ctx)
		}()
	}
	for i, l := range s.tlsLns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[len(s.engines)+i] = l.close(ctx)
		}()
	}
	wg.Wait()
	s.engines, s.tlsLns = nil, nil
	return errors.Join(errs...)
}

// engine is one gnet engine serving one listener.
type engine struct {
	gnet.BuiltinEventEngine
	srv      *Server
	listener string
	eng      gnet.Engine
	addr     *net.TCPAddr
	booted   chan struct{}
	done     chan error
}

func (s *Server) start(l Listener) (*engine, error) {
	e := &engine{srv: s, listener: l.Name, booted: make(chan struct{}), done: make(chan error, 1)}
	opts := []gnet.Option{
		gnet.WithMulticore(true),
		gnet.WithReuseAddr(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(gnetLogger{s.log}),
		gnet.WithReadBufferCap(256 << 10),
		gnet.WithWriteBufferCap(256 << 10),
	}
	if s.cfg.EventLoops > 0 {
		opts = append(opts, gnet.WithNumEventLoop(s.cfg.EventLoops))
	}
	go func() { e.done <- gnet.Run(e, "tcp://"+l.Addr, opts...) }()
	select {
	case <-e.booted:
	case err := <-e.done:
		return nil, fmt.Errorf("listener %s on %s: %w", l.Name, l.Addr, err)
	}
	addr, err := e.boundAddr()
	if err != nil {
		e.stop(context.Background())
		return nil, fmt.Errorf("listener %s on %s: %w", l.Name, l.Addr, err)
	}
	e.addr = addr
	s.log.Info("listening", "listener", l.Name, "addr", addr.String())
	return e, nil
}

// boundAddr asks the kernel which address the listener got, for port 0.
func (e *engine) boundAddr() (*net.TCPAddr, error) {
	fd, err := e.eng.Dup()
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, err
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}, nil
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}, nil
	}
	return nil, fmt.Errorf("unexpected socket address %T", sa)
}

func (e *engine) stop(ctx context.Context) error {
	if err := e.eng.Stop(ctx); err != nil && !strings.Contains(err.Error(), "in shutdown") {
		return err
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (e *engine) OnBoot(eng gnet.Engine) gnet.Action {
	e.eng = eng
	close(e.booted)
	return gnet.None
}

func (e *engine) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	e.srv.stats.ConnectionsOpened.Add(1)
	c, err := newGnetConn(e.srv, e.listener, gc)
	if err != nil {
		e.srv.log.Warn("refusing connection", "listener", e.listener, "err", err)
		return nil, gnet.Close
	}
	gc.SetContext(c)
	return nil, gnet.None
}

func (e *engine) OnClose(gc gnet.Conn, err error) gnet.Action {
	e.srv.stats.ConnectionsClosed.Add(1)
	if c, ok := gc.Context().(*gnetConn); ok {
		c.closed(err)
	}
	return gnet.None
}

func (e *engine) OnTraffic(gc gnet.Conn) gnet.Action {
	c, ok := gc.Context().(*gnetConn)
	if !ok {
		return gnet.Close
	}
	if err := c.readFrames(gc); err != nil {
		e.srv.stats.FramingErrors.Add(1)
		e.srv.log.Warn("closing connection", "listener", e.listener,
			"remote", c.remote, "err", err)
		return gnet.Close
	}
	return gnet.None
}

// gnetLogger routes gnet's own logs into slog.
type gnetLogger struct{ log *slog.Logger }

func (g gnetLogger) Debugf(format string, args ...any) {}
func (g gnetLogger) Infof(format string, args ...any)  {}
func (g gnetLogger) Warnf(format string, args ...any) {
	g.log.Warn("gnet: " + fmt.Sprintf(format, args...))
}
func (g gnetLogger) Errorf(format string, args ...any) {
	g.log.Error("gnet: " + fmt.Sprintf(format, args...))
}
func (g gnetLogger) Fatalf(format string, args ...any) {
	g.log.Error("gnet: " + fmt.Sprintf(format, args...))
}
