package tests

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// brokerNode is one in-process kmirror broker without a control plane, for
// the tests of the broker and of bare fetchers (whole nodes, built by
// node.Start, are ctlNode). Its configuration (and so its log
// directories) survives restarts.
type brokerNode struct {
	cfg broker.Config

	mu sync.Mutex
	b  *broker.Broker
}

// startNode starts a node on 127.0.0.1, port 0, in a fresh temp dir. The
// node is closed when the test ends, whichever broker is current then.
func startNode(t testing.TB, mutate ...func(*broker.Config)) *brokerNode {
	t.Helper()
	cfg := nodetest.Config(t)
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := broker.New(cfg)
	if err != nil {
		t.Fatalf("starting broker: %v", err)
	}
	n := &brokerNode{cfg: cfg, b: b}
	t.Cleanup(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.b != nil {
			if err := n.b.Close(); err != nil {
				t.Errorf("closing broker: %v", err)
			}
		}
	})
	return n
}

// addr is the current broker's address; it changes at every restart
// because the listener asks for port 0.
func (n *brokerNode) addr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.b.Addr()
}

// restart closes the broker and opens a new one on the same configuration.
// REQUIRES: clients of the old broker are closed (they would only retry
// against a dead address).
func (n *brokerNode) restart(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.b.Close(); err != nil {
		t.Fatalf("closing broker for a restart: %v", err)
	}
	n.b = nil
	b, err := broker.New(n.cfg)
	if err != nil {
		t.Fatalf("restarting broker: %v", err)
	}
	n.b = b
}

// testCtx bounds a whole test: a hung client fails the test instead of
// hanging the package.
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newClient is a kgo client seeded with addr, closed at test end.
func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return nodetest.Client(t, []string{addr}, opts...)
}

// newAdmin is a kadm client on its own kgo client.
func newAdmin(t testing.TB, addr string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, addr))
}

// createTopic creates a topic with kadm and fails the test on any error,
// including a per-topic one.
func createTopic(t testing.TB, ctx context.Context, adm *kadm.Client, name string, partitions int32, configs map[string]*string) kadm.CreateTopicResponse {
	t.Helper()
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, name)
	if err != nil {
		t.Fatalf("CreateTopics %s: %v (%s)", name, err, resp.ErrMessage)
	}
	return resp
}

// pollN polls until exactly n records arrived, failing on any fetch error
// or when ctx ends first.
func pollN(t testing.TB, ctx context.Context, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	out := make([]*kgo.Record, 0, n)
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("after %d of %d records: %v", len(out), n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s[%d] after %d of %d records: %v", topic, p, len(out), n, err)
		})
		out = append(out, fs.Records()...)
	}
	if len(out) > n {
		t.Fatalf("consumed %d records, want %d", len(out), n)
	}
	return out
}

// byPartition groups records by partition, keeping fetch order.
func byPartition(rs []*kgo.Record) map[int32][]*kgo.Record {
	m := map[int32][]*kgo.Record{}
	for _, r := range rs {
		m[r.Partition] = append(m[r.Partition], r)
	}
	return m
}

// produceAll produces rs asynchronously (many batches in flight), flushes,
// and fails on the first record error.
func produceAll(t testing.TB, ctx context.Context, cl *kgo.Client, rs []*kgo.Record) {
	t.Helper()
	var (
		mu    sync.Mutex
		first error
	)
	for _, r := range rs {
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("record %q to %s[%d]: %w", r.Key, r.Topic, r.Partition, err)
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if first != nil {
		t.Fatalf("produce: %v", first)
	}
}

// sameRecord compares what a client wrote with what it read back.
func sameRecord(want, got *kgo.Record) error {
	switch {
	case !bytes.Equal(want.Key, got.Key):
		return fmt.Errorf("key %q, want %q", got.Key, want.Key)
	case !bytes.Equal(want.Value, got.Value):
		return fmt.Errorf("key %q: value %q, want %q", got.Key, got.Value, want.Value)
	case len(want.Headers) != len(got.Headers):
		return fmt.Errorf("key %q: %d headers, want %d", got.Key, len(got.Headers), len(want.Headers))
	}
	for i, h := range want.Headers {
		g := got.Headers[i]
		if g.Key != h.Key || !bytes.Equal(g.Value, h.Value) {
			return fmt.Errorf("key %q: header %d is %s=%q, want %s=%q", got.Key, i, g.Key, g.Value, h.Key, h.Value)
		}
	}
	return nil
}

// rawRequest sends req (its version set) on a fresh connection, without
// ApiVersions first, and decodes the answer into a response of the same
// version. It is how tests pin a version or send exact bytes.
func rawRequest(t testing.TB, ctx context.Context, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	const corr = 7
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kmirror-tests")).AppendRequest(nil, req, corr)
	body := rawRoundTrip(t, ctx, addr, frame)
	return decodeResponse(t, req.Key(), req.GetVersion(), body)
}

// rawRoundTrip writes one request frame as is and returns the response
// frame after its size, correlation id included.
func rawRoundTrip(t testing.TB, ctx context.Context, addr string, frame []byte) []byte {
	t.Helper()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dialing %s: %v", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write(frame); err != nil {
		t.Fatalf("writing request: %v", err)
	}
	resp, err := readFrame(c)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	if got, want := binary.BigEndian.Uint32(resp), binary.BigEndian.Uint32(frame[8:]); got != want {
		t.Fatalf("response correlation id %d, want %d", got, want)
	}
	return resp
}

// decodeResponse parses a response frame (after its size) of key at version.
func decodeResponse(t testing.TB, key, version int16, frame []byte) kmsg.Response {
	t.Helper()
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	body := frame[4:]
	// Response header v1 (flexible versions except ApiVersions) carries
	// tagged fields after the correlation id.
	if resp.IsFlexible() && key != 18 {
		var err error
		if body, err = skipTags(body); err != nil {
			t.Fatalf("%s v%d response header: %v", kmsg.NameForKey(key), version, err)
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decoding %s v%d response: %v", kmsg.NameForKey(key), version, err)
	}
	return resp
}

// readFrame reads one size-prefixed frame and returns it without the size.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("bad frame size %d", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// skipTags skips a tagged-field section.
func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[l:]
	for range n {
		if _, l = binary.Uvarint(b); l <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil, errors.New("bad tag size")
		}
		b = b[l+int(size):]
	}
	return b, nil
}

// decodeRequest parses a captured request frame (after its size): the
// header (v1, or v2 for flexible versions) and the body.
func decodeRequest(frame []byte) (kmsg.Request, error) {
	if len(frame) < 10 {
		return nil, errors.New("short request")
	}
	key := int16(binary.BigEndian.Uint16(frame[0:]))
	version := int16(binary.BigEndian.Uint16(frame[2:]))
	req := kmsg.RequestForKey(key)
	if req == nil {
		return nil, fmt.Errorf("unknown key %d", key)
	}
	req.SetVersion(version)
	b := frame[8:]
	idLen := int16(binary.BigEndian.Uint16(b))
	b = b[2:]
	if idLen > 0 {
		if int(idLen) > len(b) {
			return nil, errors.New("short client id")
		}
		b = b[idLen:]
	}
	if req.IsFlexible() {
		var err error
		if b, err = skipTags(b); err != nil {
			return nil, err
		}
	}
	if err := req.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("decoding %s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	return req, nil
}

// encodeBatch builds a valid uncompressed record batch v2 of values.
func encodeBatch(values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Value = []byte(v)
		// Record.AppendTo writes Length as given: encode once with a zero
		// (one byte) to learn the body size, then for real.
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		recs = r.AppendTo(recs)
	}
	now := time.Now().UnixMilli()
	bt := kmsg.NewRecordBatch()
	bt.Magic = 2
	bt.LastOffsetDelta = int32(len(values) - 1)
	bt.FirstTimestamp, bt.MaxTimestamp = now, now
	bt.ProducerID, bt.ProducerEpoch, bt.FirstSequence = -1, -1, -1
	bt.NumRecords = int32(len(values))
	bt.Records = recs
	raw := bt.AppendTo(nil)
	// Length covers from the partition leader epoch (offset 12); the CRC
	// (offset 17) covers from the attributes (offset 21).
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// interceptor wraps kgo's connections (kgo.Dialer) to watch Produce
// requests, keep their exact bytes, and turn chosen Produce responses into
// a dropped connection: the broker appended the batch, the client never
// learns it, so it must retry with the same sequence numbers.
type interceptor struct {
	mu sync.Mutex
	// dropAt holds the 1-based indexes (in write order) of the Produce
	// requests whose response is dropped.
	dropAt map[int]bool
	// produced is every Produce request frame written, in order.
	produced [][]byte
	// dropped are the frames whose response was dropped.
	dropped [][]byte
	// lastReq and lastResp are the last Produce answered to the client.
	lastReq, lastResp []byte
}

func (ic *interceptor) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &interceptConn{Conn: c, ic: ic, inflight: map[int32]inflightProduce{}}, nil
}

type inflightProduce struct {
	index int
	frame []byte
}

type interceptConn struct {
	net.Conn
	ic *interceptor

	mu       sync.Mutex
	wbuf     []byte
	inflight map[int32]inflightProduce
	rbuf     []byte // response bytes not yet handed to the client
}

// Write notes every complete Produce frame before passing the bytes on.
func (c *interceptConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.wbuf = append(c.wbuf, p...)
	for len(c.wbuf) >= 4 {
		size := int(binary.BigEndian.Uint32(c.wbuf))
		if len(c.wbuf) < 4+size {
			break
		}
		frame := bytes.Clone(c.wbuf[4 : 4+size])
		c.wbuf = c.wbuf[4+size:]
		if len(frame) >= 8 && binary.BigEndian.Uint16(frame) == 0 {
			c.ic.mu.Lock()
			c.ic.produced = append(c.ic.produced, frame)
			idx := len(c.ic.produced)
			c.ic.mu.Unlock()
			c.inflight[int32(binary.BigEndian.Uint32(frame[4:]))] = inflightProduce{index: idx, frame: frame}
		}
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

var errDropped = errors.New("interceptor: produce response dropped")

// Read hands out whole response frames, dropping the chosen ones by closing
// the connection.
func (c *interceptConn) Read(p []byte) (int, error) {
	if len(c.rbuf) == 0 {
		frame, err := readFrame(c.Conn)
		if err != nil {
			return 0, err
		}
		corr := int32(binary.BigEndian.Uint32(frame))
		c.mu.Lock()
		ip, isProduce := c.inflight[corr]
		delete(c.inflight, corr)
		c.mu.Unlock()
		if isProduce {
			c.ic.mu.Lock()
			drop := c.ic.dropAt[ip.index]
			if drop {
				c.ic.dropped = append(c.ic.dropped, ip.frame)
			} else {
				c.ic.lastReq, c.ic.lastResp = ip.frame, frame
			}
			c.ic.mu.Unlock()
			if drop {
				c.Conn.Close()
				return 0, errDropped
			}
		}
		c.rbuf = binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(frame)), uint32(len(frame)))
		c.rbuf = append(c.rbuf, frame...)
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}
