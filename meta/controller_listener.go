package meta

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The CONTROLLER listener (controller.listener.names) carries two
// protocols on one port, as in Kafka: the voters' Raft traffic, and the
// Kafka-protocol requests other nodes send the controller (broker
// registration and heartbeats, forwarded requests, producer-id blocks,
// DescribeQuorum, ApiVersions).
//
// A connection says which it is by its first byte. Our raft StreamLayer
// (Dial) writes raftConnPrefix before raft's own bytes; a Kafka frame
// starts with its size, a positive int32 in big endian, so its first byte
// is below 0x80. Every connection whose first byte is not raftConnPrefix
// is a Kafka connection and is handed out, that byte included, by
// KafkaListener.
//
//	raft conn:  | 0xF1 | raft's net transport bytes ...
//	kafka conn: | size (int32, first byte < 0x80) | request ... |
//
// raftConnPrefix is part of the wire format between voters.
//
// Ownership: the node that calls ListenController owns the
// ControllerListener and closes it (Close), after the metadata log and
// the Kafka server that use it. A MetadataLog opened on it (LogConfig.
// Listener) attaches the raft side and detaches it when the log closes,
// so a log may be reopened on the same listener; the Kafka server that
// serves KafkaListener closes that side (its Accept then fails) when it
// stops. Raft connections that arrive while no log is attached, and
// Kafka connections after the Kafka side closed, are closed at once.

// raftConnPrefix is the first byte of every raft connection.
const raftConnPrefix byte = 0xF1

// defaultPeekTimeout bounds the wait for a connection's first byte, so a
// client that connects and sends nothing holds a goroutine and a socket
// for this long at most.
const defaultPeekTimeout = 10 * time.Second

// ErrListenerClosed is returned by the sides of a closed
// ControllerListener; it wraps net.ErrClosed.
var ErrListenerClosed = fmt.Errorf("meta: controller listener closed: %w", net.ErrClosed)

// ControllerListener is one bound CONTROLLER port, demultiplexed into a
// raft side (for OpenLog) and a Kafka side (KafkaListener).
type ControllerListener struct {
	ln net.Listener
	// peekTimeout bounds the read of a connection's first byte; fixed at
	// construction (tests shorten it).
	peekTimeout time.Duration
	kafka       *kafkaListener
	done        chan struct{} // closed by Close
	// wg counts the accept loop and the goroutines reading first bytes.
	wg sync.WaitGroup

	mu   sync.Mutex
	raft *streamLayer // the attached raft side, nil when none
	// peeking are the connections whose first byte is awaited, which
	// Close closes.
	peeking map[net.Conn]struct{}
	closed  bool
}

// ListenController binds addr (host:port, the host may be a wildcard) and
// starts demultiplexing its connections.
func ListenController(addr string) (*ControllerListener, error) {
	return listenController(addr, defaultPeekTimeout)
}

func listenController(addr string, peekTimeout time.Duration) (*ControllerListener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("meta: controller listener on %s: %w", addr, err)
	}
	cl := &ControllerListener{ln: ln, peekTimeout: peekTimeout, done: make(chan struct{}), peeking: map[net.Conn]struct{}{}}
	cl.kafka = &kafkaListener{cl: cl, conns: make(chan net.Conn), done: make(chan struct{})}
	cl.wg.Add(1)
	go cl.accept()
	return cl, nil
}

// Addr is the bound address (port 0 resolved).
func (cl *ControllerListener) Addr() net.Addr { return cl.ln.Addr() }

// KafkaListener hands out the Kafka-protocol connections. Its Close stops
// only the Kafka side; the port stays bound until the ControllerListener
// closes.
func (cl *ControllerListener) KafkaListener() net.Listener { return cl.kafka }

// Close unbinds the port, closes both sides and the connections not yet
// handed out, and waits for its goroutines. Connections already handed
// out belong to their side. Calling Close again does nothing.
func (cl *ControllerListener) Close() error {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil
	}
	cl.closed = true
	close(cl.done)
	for nc := range cl.peeking {
		_ = nc.Close()
	}
	cl.mu.Unlock()
	err := cl.ln.Close()
	cl.wg.Wait()
	return err
}

// accept runs until the listener closes; each connection's first byte is
// read on its own goroutine, so a silent client never delays the next.
func (cl *ControllerListener) accept() {
	defer cl.wg.Done()
	var backoff time.Duration
	for {
		nc, err := cl.ln.Accept()
		if err != nil {
			select {
			case <-cl.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or memory: wait and retry, as net/http
			// does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-cl.done:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		cl.mu.Lock()
		if cl.closed {
			cl.mu.Unlock()
			_ = nc.Close()
			return
		}
		cl.peeking[nc] = struct{}{}
		cl.mu.Unlock()
		cl.wg.Add(1)
		go cl.route(nc)
	}
}

// route reads nc's first byte within the peek timeout and hands nc to
// its side.
func (cl *ControllerListener) route(nc net.Conn) {
	defer cl.wg.Done()
	var first [1]byte
	err := nc.SetReadDeadline(time.Now().Add(cl.peekTimeout))
	if err == nil {
		_, err = io.ReadFull(nc, first[:])
	}
	if err == nil {
		err = nc.SetReadDeadline(time.Time{})
	}
	cl.mu.Lock()
	delete(cl.peeking, nc)
	cl.mu.Unlock()
	if err != nil {
		_ = nc.Close()
		return
	}
	if first[0] == raftConnPrefix {
		cl.mu.Lock()
		s := cl.raft
		cl.mu.Unlock()
		if s == nil || !handOff(s.conns, nc, s.done, cl.done) {
			_ = nc.Close()
		}
		return
	}
	pc := &peekedConn{Conn: nc, first: first[0], unread: true}
	if !handOff(cl.kafka.conns, net.Conn(pc), cl.kafka.done, cl.done) {
		_ = nc.Close()
	}
}

// handOff sends nc on conns unless a side closes first.
func handOff(conns chan<- net.Conn, nc net.Conn, sideDone, allDone <-chan struct{}) bool {
	select {
	case conns <- nc:
		return true
	case <-sideDone:
	case <-allDone:
	}
	return false
}

// attach makes s the raft side.
func (cl *ControllerListener) attach(s *streamLayer) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	switch {
	case cl.closed:
		return ErrListenerClosed
	case cl.raft != nil:
		return errors.New("meta: the controller listener already serves a metadata log")
	}
	cl.raft = s
	return nil
}

func (cl *ControllerListener) detach(s *streamLayer) {
	cl.mu.Lock()
	if cl.raft == s {
		cl.raft = nil
	}
	cl.mu.Unlock()
}

// peekedConn is a Kafka connection whose first byte the demultiplexer
// read: Read returns that byte first. Only the connection's reader calls
// Read, so unread needs no lock.
type peekedConn struct {
	net.Conn
	first  byte
	unread bool
}

func (c *peekedConn) Read(b []byte) (int, error) {
	if !c.unread || len(b) == 0 {
		return c.Conn.Read(b)
	}
	b[0], c.unread = c.first, false
	return 1, nil
}

// kafkaListener is the Kafka side of a ControllerListener.
type kafkaListener struct {
	cl        *ControllerListener
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func (k *kafkaListener) Accept() (net.Conn, error) {
	select {
	case nc := <-k.conns:
		return nc, nil
	case <-k.done:
	case <-k.cl.done:
	}
	return nil, ErrListenerClosed
}

func (k *kafkaListener) Close() error {
	k.closeOnce.Do(func() { close(k.done) })
	return nil
}

func (k *kafkaListener) Addr() net.Addr { return k.cl.ln.Addr() }

// streamLayer is the raft side of a ControllerListener (raft.StreamLayer),
// from attach until Close.
type streamLayer struct {
	cl *ControllerListener
	// advertise is the address the other voters reach this node on (its
	// controller.quorum.voters address), which a wildcard bind is not.
	advertise net.Addr
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

// newStreamLayer attaches a raft side advertising addr to cl.
func newStreamLayer(cl *ControllerListener, addr string) (*streamLayer, error) {
	s := &streamLayer{cl: cl, advertise: voterAddr(addr), conns: make(chan net.Conn), done: make(chan struct{})}
	if err := cl.attach(s); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case nc := <-s.conns:
		return nc, nil
	case <-s.done:
	case <-s.cl.done:
	}
	return nil, ErrListenerClosed
}

// Close detaches the raft side; the port stays bound.
func (s *streamLayer) Close() error {
	s.closeOnce.Do(func() {
		s.cl.detach(s)
		close(s.done)
	})
	return nil
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }

// Dial connects to a voter's CONTROLLER listener and writes the raft
// prefix, so its demultiplexer hands the connection to its raft side.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	nc, err := (&net.Dialer{Timeout: timeout}).Dial("tcp", string(address))
	if err != nil {
		return nil, err
	}
	err = nc.SetWriteDeadline(time.Now().Add(timeout))
	if err == nil {
		_, err = nc.Write([]byte{raftConnPrefix})
	}
	if err == nil {
		err = nc.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	return nc, nil
}

// voterAddr is a controller.quorum.voters host:port as a net.Addr, kept
// as written (raft compares and dials it as a string).
type voterAddr string

func (voterAddr) Network() string  { return "tcp" }
func (a voterAddr) String() string { return string(a) }
