package mirrorapi

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stubBroker is the smallest Kafka listener kgo will talk to: ApiVersions
// (advertising the mirror keys), Metadata (itself as node 0 and
// controller), and the mirror keys, decoded with RequestForKey and answered
// with a canned response per key. It proves the headers, flexibility and
// routing work with a real franz-go client, not only our own decoder.
type stubBroker struct {
	ln      net.Listener
	answers map[int16]kmsg.Response

	mu   sync.Mutex
	got  map[int16]kmsg.Request
	errs []error
	wg   sync.WaitGroup
}

func newStubBroker(t *testing.T, answers map[int16]kmsg.Response) *stubBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stubBroker{ln: ln, answers: answers, got: map[int16]kmsg.Request{}}
	var conns []net.Conn
	var connsMu sync.Mutex
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connsMu.Lock()
			conns = append(conns, c)
			connsMu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		connsMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connsMu.Unlock()
		s.wg.Wait()
		for _, err := range s.errs {
			t.Error(err)
		}
	})
	return s
}

func (s *stubBroker) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *stubBroker) serve(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > 1<<20 {
			s.fail(fmt.Errorf("frame of %d bytes", n))
			return
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(br, frame); err != nil {
			return
		}
		out, err := s.handle(frame)
		if err != nil {
			s.fail(err)
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// handle parses a request header (v1, or v2 when flexible) and body and
// returns the framed response.
func (s *stubBroker) handle(frame []byte) ([]byte, error) {
	r := kbin.Reader{Src: frame}
	key, version, corr := r.Int16(), r.Int16(), r.Int32()
	_ = r.NullableString() // client id
	req := RequestForKey(key)
	if req == nil {
		req = kmsg.RequestForKey(key)
	}
	if req == nil {
		return nil, fmt.Errorf("unknown key %d", key)
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		for n := r.Uvarint(); n > 0; n-- {
			r.Uvarint()
			r.Span(int(r.Uvarint()))
		}
	}
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("key %d header: %w", key, err)
	}
	if err := req.ReadFrom(r.Src); err != nil {
		return nil, fmt.Errorf("key %d v%d body: %w", key, version, err)
	}

	var resp kmsg.Response
	switch t := req.(type) {
	case *kmsg.ApiVersionsRequest:
		ar := t.ResponseKind().(*kmsg.ApiVersionsResponse)
		ar.ApiKeys = append(ar.ApiKeys,
			kmsg.ApiVersionsResponseApiKey{ApiKey: 3, MinVersion: 0, MaxVersion: 12},
			kmsg.ApiVersionsResponseApiKey{ApiKey: 18, MinVersion: 0, MaxVersion: 4})
		for _, k := range Keys {
			ar.ApiKeys = append(ar.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k.Key, MinVersion: 0, MaxVersion: MaxVersion})
		}
		resp = ar
	case *kmsg.MetadataRequest:
		host, portStr, _ := net.SplitHostPort(s.ln.Addr().String())
		port, _ := strconv.Atoi(portStr)
		mr := t.ResponseKind().(*kmsg.MetadataResponse)
		mr.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(port)}}
		mr.ControllerID = 0
		resp = mr
	default:
		s.mu.Lock()
		s.got[key] = req
		s.mu.Unlock()
		resp = s.answers[key]
		if resp == nil {
			return nil, fmt.Errorf("no answer for key %d", key)
		}
	}

	out := make([]byte, 4, 64)
	out = kbin.AppendInt32(out, corr)
	if req.IsFlexible() && key != 18 { // ApiVersions answers with header v0
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

func TestKgoClient(t *testing.T) {
	t.Parallel()
	requests := map[int16]kmsg.Request{}
	answers := map[int16]kmsg.Response{}
	for _, m := range fullMessages() {
		switch v := m.(type) {
		case kmsg.Request:
			requests[v.Key()] = v
		case kmsg.Response:
			answers[v.Key()] = v
		}
	}
	s := newStubBroker(t, answers)

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.ln.Addr().String()), kgo.MaxVersions(WithMirrorKeys(nil)),
		kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for _, k := range Keys {
		req := requests[k.Key]
		resp, err := cl.Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", k.Name, err)
		}
		want := answers[k.Key]
		if reflect.TypeOf(resp) != reflect.TypeOf(want) ||
			!reflect.DeepEqual(normalized(resp.(message)), normalized(want.(message))) {
			t.Errorf("%s: kgo returned %#v, broker sent %#v", k.Name, resp, want)
		}
		s.mu.Lock()
		got := s.got[k.Key]
		s.mu.Unlock()
		if !reflect.DeepEqual(normalized(got.(message)), normalized(req.(message))) {
			t.Errorf("%s: broker decoded %#v, kgo sent %#v", k.Name, got, req)
		}
	}

	// The typed helper.
	lr, err := (&ListClusterMirrorsRequest{IncludeTopicNames: true}).RequestWith(ctx, cl)
	if err != nil || lr == nil || len(lr.Mirrors) != 2 {
		t.Fatalf("RequestWith: %v, %#v", err, lr)
	}
}

// TestKgoClientNeedsMirrorKeys documents why WithMirrorKeys exists: a kgo
// client with its default versions refuses the mirror keys it does not know.
func TestKgoClientNeedsMirrorKeys(t *testing.T) {
	t.Parallel()
	s := newStubBroker(t, map[int16]kmsg.Response{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.ln.Addr().String()), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cl.Request(ctx, NewPtrListClusterMirrorsRequest())
	t.Logf("default client: %v", err)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("default kgo client sent key 98: err = %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got) != 0 {
		t.Fatalf("broker got %v", s.got)
	}
}
