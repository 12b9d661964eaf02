package meta

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsFrame is a client's ApiVersions v3 request, size prefix
// included, as franz-go writes it.
func apiVersionsFrame() []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kmirror-test", "1"
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, 7)
}

// sendKafka dials addr and writes frame, as a Kafka client would.
func sendKafka(t *testing.T, addr string, frame []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	return c
}

// acceptKafka accepts one connection from cl's Kafka side and reads n
// bytes from it.
func acceptKafka(t *testing.T, cl *ControllerListener, n int) (net.Conn, []byte) {
	t.Helper()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := cl.KafkaListener().Accept()
		ch <- accepted{c, err}
	}()
	var a accepted
	select {
	case a = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no Kafka connection accepted")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	t.Cleanup(func() { a.c.Close() })
	got := make([]byte, n)
	if err := a.c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(a.c, got); err != nil {
		t.Fatal(err)
	}
	return a.c, got
}

// Three voters on controller listeners form a quorum over their raft
// sides, and the same ports still carry Kafka connections, byte for
// byte both ways.
func TestControllerListenerQuorumAndKafka(t *testing.T) {
	t.Parallel()
	nodes := startQuorum(t, 3, nil)
	applyTopic(t, nodes, "orders", 1)
	for _, nd := range nodes {
		if got := topicNames(t, nd.store); !slices.Equal(got, []string{"orders"}) {
			t.Fatalf("node %d holds topics %v", nd.cfg.NodeID, got)
		}
	}
	for _, nd := range nodes {
		frame := apiVersionsFrame()
		client := sendKafka(t, nd.cfg.Listener.Addr().String(), frame)
		server, got := acceptKafka(t, nd.cfg.Listener, len(frame))
		if !bytes.Equal(got, frame) {
			t.Fatalf("node %d: the Kafka side read % x, want % x", nd.cfg.NodeID, got, frame)
		}
		if _, err := server.Write([]byte("pong")); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, 4)
		if err := client.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(client, back); err != nil || string(back) != "pong" {
			t.Fatalf("node %d: the client read %q, %v", nd.cfg.NodeID, back, err)
		}
	}
	// The quorum still works after the Kafka connections.
	applyTopic(t, nodes, "payments", 2)
}

// A connection that sends nothing is closed after the peek timeout, and
// meanwhile the others are served; a raft connection is closed while no
// log is attached; closing the Kafka side stops its Accept only.
func TestControllerListenerDemux(t *testing.T) {
	t.Parallel()
	cl, err := listenController("127.0.0.1:0", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	addr := cl.Addr().String()

	start := time.Now()
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	frame := apiVersionsFrame()
	sendKafka(t, addr, frame)
	if _, got := acceptKafka(t, cl, len(frame)); !bytes.Equal(got, frame) {
		t.Fatalf("read % x, want % x", got, frame)
	}
	if err := silent.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := silent.Read(make([]byte, 1)); n != 0 || errors.Is(err, os.ErrDeadlineExceeded) || err == nil {
		t.Fatalf("the silent connection read %d, %v; want it closed", n, err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("the silent connection was closed after %v, before the peek timeout", d)
	}

	rc := sendKafka(t, addr, []byte{raftConnPrefix, 0, 1})
	if err := rc.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := rc.Read(make([]byte, 1)); n != 0 || errors.Is(err, os.ErrDeadlineExceeded) || err == nil {
		t.Fatalf("a raft connection with no log attached read %d, %v; want it closed", n, err)
	}

	if err := cl.KafkaListener().Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.KafkaListener().Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	kc := sendKafka(t, addr, frame)
	if err := kc.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := kc.Read(make([]byte, 1)); n != 0 || errors.Is(err, os.ErrDeadlineExceeded) || err == nil {
		t.Fatalf("a Kafka connection after the Kafka side closed read %d, %v; want it closed", n, err)
	}
}

// Close returns at once with connections whose first byte is awaited;
// one log at a time attaches, and none to a closed listener.
func TestControllerListenerClose(t *testing.T) {
	t.Parallel()
	cl, err := ListenController("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := newStreamLayer(cl, "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newStreamLayer(cl, "127.0.0.1:1"); err == nil {
		t.Fatal("a second raft side attached")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed raft side: %v", err)
	}
	s, err = newStreamLayer(cl, "127.0.0.1:1") // reattaches once detached
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("tcp", cl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The accept loop may not have taken c yet; either way Close must
	// not wait for the 10 s peek timeout.
	start := time.Now()
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v", d)
	}
	if err := cl.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := newStreamLayer(cl, "127.0.0.1:1"); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("attaching to a closed listener: %v", err)
	}
	if _, err := cl.KafkaListener().Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener: %v", err)
	}
}
