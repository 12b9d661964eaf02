package netio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"

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
	// leaves bytes in gnet's buffer until the worker catches up.
	MaxQueuedRequests int
	// EventLoops is the number of gnet event loops (default GOMAXPROCS).
	EventLoops int
	// Logger receives connection errors; nil discards them.
	Logger *slog.Logger
}

// Listener is a name (Kafka's listener name) and a host:port to bind.
type Listener struct {
	Name string
	Addr string
}

// BoundListener is a listener with the address it actually bound (port 0
// resolved).
type BoundListener struct {
	Name string
	Addr *net.TCPAddr
}

// Server runs one gnet engine per listener.
type Server struct {
	cfg     Config
	handler Handler
	log     *slog.Logger
	bound   []BoundListener
	engines []*engine
	stats   Stats
}

// Stats are the server's counters, for the metrics adapter.
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
	s := &Server{cfg: cfg, handler: h, log: cfg.Logger}
	for _, l := range cfg.Listeners {
		e, err := s.start(l)
		if err != nil {
			s.Close(context.Background())
			return nil, err
		}
		s.engines = append(s.engines, e)
		s.bound = append(s.bound, BoundListener{Name: l.Name, Addr: e.addr})
	}
	return s, nil
}

// Listeners returns the bound addresses, in Config order.
func (s *Server) Listeners() []BoundListener { return s.bound }

// Close stops every engine: listeners close, connections close, then it
// returns. Requests being served finish on their workers; their responses
// are dropped.
func (s *Server) Close(ctx context.Context) error {
	// gnet's Stop polls every 500 ms for the engine to finish: stop the
	// engines in parallel so shutdown costs one poll, not one per listener.
	errs := make([]error, len(s.engines))
	var wg sync.WaitGroup
	for i, e := range s.engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.stop(ctx)
		}()
	}
	wg.Wait()
	s.engines = nil
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
	c, err := newConn(e.srv, e.listener, gc)
	if err != nil {
		e.srv.log.Warn("refusing connection", "listener", e.listener, "err", err)
		return nil, gnet.Close
	}
	gc.SetContext(c)
	return nil, gnet.None
}

func (e *engine) OnClose(gc gnet.Conn, err error) gnet.Action {
	e.srv.stats.ConnectionsClosed.Add(1)
	if c, ok := gc.Context().(*Conn); ok {
		c.closed(err)
	}
	return gnet.None
}

func (e *engine) OnTraffic(gc gnet.Conn) gnet.Action {
	c, ok := gc.Context().(*Conn)
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
