package broker

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/partition"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn is a bare Kafka connection: requests go out exactly as built
// (version included), so tests control what kgo would negotiate away.
type rawConn struct {
	t    testing.TB
	conn net.Conn
	corr int32
	fmtr *kmsg.RequestFormatter
}

func dialRaw(t testing.TB, b *Broker) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dialing %s: %v", b.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, conn: c, fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))}
}

// send writes req and returns its correlation id.
func (rc *rawConn) send(req kmsg.Request) int32 {
	rc.t.Helper()
	rc.corr++
	rc.writeAll(rc.fmtr.AppendRequest(nil, req, rc.corr))
	return rc.corr
}

// sendFrame writes a hand-made request (size prefix added).
func (rc *rawConn) sendFrame(frame []byte) {
	rc.t.Helper()
	rc.writeAll(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
}

func (rc *rawConn) writeAll(p []byte) {
	rc.t.Helper()
	rc.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.conn.Write(p); err != nil {
		rc.t.Fatalf("writing a request: %v", err)
	}
}

// readFrame reads one response frame (without the size prefix).
func (rc *rawConn) readFrame(timeout time.Duration) ([]byte, error) {
	rc.conn.SetReadDeadline(time.Now().Add(timeout))
	var size [4]byte
	if _, err := io.ReadFull(rc.conn, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(rc.conn, frame); err != nil {
		return nil, err
	}
	return frame, nil
}

// recv reads the response to req, sent with correlation id corr.
func (rc *rawConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	rc.t.Helper()
	frame, err := rc.readFrame(30 * time.Second)
	if err != nil {
		rc.t.Fatalf("reading the %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		rc.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	body := frame[4:]
	if req.IsFlexible() && req.Key() != apiVersionsKey {
		if len(body) == 0 || body[0] != 0 {
			rc.t.Fatalf("response header v1 without an empty tag section: % x", frame[:min(len(frame), 8)])
		}
		body = body[1:]
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("decoding the %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

func (rc *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	return rc.recv(req, rc.send(req))
}

// expectClosed waits for the broker to close the connection.
func (rc *rawConn) expectClosed() {
	rc.t.Helper()
	frame, err := rc.readFrame(10 * time.Second)
	switch {
	case err == nil:
		rc.t.Fatalf("got a %d byte response, want the connection closed", len(frame))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
	default:
		rc.t.Fatalf("want EOF, got %v", err)
	}
}

// Fetch requests and responses over a rawConn.

func newFetchReq(v int16) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = v, 0, 1, 50<<20
	return req
}

// addPart adds a partition to req, under tp's entry if it is the last one.
func addPart(req *kmsg.FetchRequest, tp *partition.Topic, partition int32, offset int64) *kmsg.FetchRequestTopicPartition {
	n := len(req.Topics)
	if n == 0 || req.Topics[n-1].Topic != tp.Name() || req.Topics[n-1].TopicID != tp.ID() {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = tp.Name(), tp.ID()
		req.Topics = append(req.Topics, rt)
		n++
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	ps := &req.Topics[n-1].Partitions
	*ps = append(*ps, rp)
	return &(*ps)[len(*ps)-1]
}

// respPart finds a partition of tp in a response.
func respPart(resp *kmsg.FetchResponse, tp *partition.Topic, partition int32) (kmsg.FetchResponseTopicPartition, bool) {
	for _, rt := range resp.Topics {
		if resp.Version >= 13 && rt.TopicID != tp.ID() || resp.Version < 13 && rt.Topic != tp.Name() {
			continue
		}
		for _, rp := range rt.Partitions {
			if rp.Partition == partition {
				return rp, true
			}
		}
	}
	return kmsg.FetchResponseTopicPartition{}, false
}

// mustPart is respPart that fails the test when the partition is missing.
func mustPart(t testing.TB, resp *kmsg.FetchResponse, tp *partition.Topic, partition int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	rp, ok := respPart(resp, tp, partition)
	if !ok {
		t.Fatalf("partition %s-%d missing from the response %+v", tp.Name(), partition, resp.Topics)
	}
	return rp
}

// listedParts is the number of partitions a response lists.
func listedParts(resp *kmsg.FetchResponse) int {
	n := 0
	for _, rt := range resp.Topics {
		n += len(rt.Partitions)
	}
	return n
}

// expectServing checks the broker still answers a new connection.
func expectServing(t *testing.T, b *Broker) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "raw-test", "1"
	resp := dialRaw(t, b).roundTrip(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions on a new connection: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

// wantApiKeys is the handler table as ApiVersions must list it on a
// broker listener: every registered key with its served range but the
// controller's own (controllerOnlyAPIs), except that Produce advertises v0
// as its floor while refusing v0-2 (Kafka 4.0 does the same, KAFKA-18659:
// librdkafka compresses only when the broker lists Produce v0). The
// inter-node keys are served on the CONTROLLER listener only; the share
// groups' only with "share" in group.coordinator.rebalance.protocols (not
// the default).
func wantApiKeys() []kmsg.ApiVersionsResponseApiKey {
	var want []kmsg.ApiVersionsResponseApiKey
	for key, h := range handlers {
		if h == nil || slices.Contains(controllerOnlyAPIs, int16(key)) ||
			slices.Contains(shareGroupKeys, int16(key)) {
			continue
		}
		k := kmsg.ApiVersionsResponseApiKey{ApiKey: int16(key), MinVersion: h.min, MaxVersion: h.max}
		if key == 0 {
			k.MinVersion = 0
		}
		want = append(want, k)
	}
	return want
}

// shareGroupKeys are the keys listed only with share groups on.
var shareGroupKeys = []int16{shareGroupHeartbeatKey, shareGroupDescribeKey, shareFetchKey, shareAcknowledgeKey,
	readShareGroupStateKey, writeShareGroupStateKey, describeShareGroupOffsetsKey, alterShareGroupOffsetsKey, deleteShareGroupOffsetsKey}

func sameApiKeys(a, b []kmsg.ApiVersionsResponseApiKey) bool {
	return slices.EqualFunc(a, b, func(x, y kmsg.ApiVersionsResponseApiKey) bool {
		return x.ApiKey == y.ApiKey && x.MinVersion == y.MinVersion && x.MaxVersion == y.MaxVersion
	})
}

func TestApiVersionsRanges(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	rc := dialRaw(t, b)
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "raw-test", "1"
		resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		if !sameApiKeys(resp.ApiKeys, wantApiKeys()) {
			t.Fatalf("v%d: keys %+v, want %+v", v, resp.ApiKeys, wantApiKeys())
		}
	}
	// The served ranges match what this file set out to prove.
	for _, k := range []struct{ key, min, max int16 }{{0, 3, 13}, {1, 4, 17}, {18, 0, 4}} {
		h := handlers[k.key]
		if h == nil || h.min != k.min || h.max != k.max {
			t.Errorf("key %d: registered %+v, want v%d-%d", k.key, h, k.min, k.max)
		}
	}
}

func TestApiVersionsUnknownVersion(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	rc := dialRaw(t, b)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 127
	corr := rc.send(req)
	frame, err := rc.readFrame(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		t.Fatalf("correlation id %d, want %d", got, corr)
	}
	// KIP-511: header v0 and a v0 body whatever version was asked.
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(frame[4:]); err != nil {
		t.Fatalf("decoding as v0: %v", err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error %d, want UNSUPPORTED_VERSION (35)", resp.ErrorCode)
	}
	if !sameApiKeys(resp.ApiKeys, wantApiKeys()) {
		t.Fatalf("keys %+v, want %+v", resp.ApiKeys, wantApiKeys())
	}
	// The connection stays usable: the client retries with a version it
	// finds in the list.
	req.Version = 3
	if got := rc.roundTrip(req).(*kmsg.ApiVersionsResponse); got.ErrorCode != 0 {
		t.Fatalf("retry at v3: error %d", got.ErrorCode)
	}
}

// rawHeader is a request header v1 (no tags) with a null client id.
func rawHeader(key, version int16, corr int32) []byte {
	h := binary.BigEndian.AppendUint16(nil, uint16(key))
	h = binary.BigEndian.AppendUint16(h, uint16(version))
	h = binary.BigEndian.AppendUint32(h, uint32(corr))
	return binary.BigEndian.AppendUint16(h, 0xFFFF)
}

func TestDispatchClosesConnection(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	if handlers[127] != nil {
		t.Fatal("key 127 is registered; pick another unknown key")
	}
	tests := []struct {
		name string
		send func(rc *rawConn)
	}{
		{"unknown key 9999", func(rc *rawConn) { rc.sendFrame(rawHeader(9999, 0, 1)) }},
		{"unknown key 127", func(rc *rawConn) { rc.sendFrame(rawHeader(127, 0, 1)) }},
		{"negative key", func(rc *rawConn) { rc.sendFrame(rawHeader(-1, 0, 1)) }},
		{"Produce v2", func(rc *rawConn) {
			req := kmsg.NewPtrProduceRequest()
			req.Version, req.Acks, req.TimeoutMillis = 2, -1, 1000
			rc.send(req)
		}},
		{"Fetch v3", func(rc *rawConn) {
			req := kmsg.NewPtrFetchRequest()
			req.Version = 3
			rc.send(req)
		}},
		{"Fetch v18", func(rc *rawConn) {
			req := kmsg.NewPtrFetchRequest()
			req.Version = 18
			rc.send(req)
		}},
		{"truncated Metadata body", func(rc *rawConn) {
			// v1 starts with an int32 topic count: two bytes cannot decode.
			rc.sendFrame(append(rawHeader(3, 1, 1), 0, 0))
		}},
		{"truncated Produce body", func(rc *rawConn) {
			req := kmsg.NewPtrProduceRequest()
			req.Version, req.Acks, req.TimeoutMillis = 7, -1, 1000
			req.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: []byte("xyz")}}}}
			frame := rc.fmtr.AppendRequest(nil, req, 1)[4:]
			rc.sendFrame(frame[:len(frame)-2])
		}},
		{"array length beyond the body", func(rc *rawConn) {
			// Fetch v4: replica, max wait, min bytes, max bytes, isolation,
			// then a topic count far beyond the bytes that follow.
			body := binary.BigEndian.AppendUint32(nil, 0xFFFFFFFF)
			body = binary.BigEndian.AppendUint32(body, 0)
			body = binary.BigEndian.AppendUint32(body, 1)
			body = binary.BigEndian.AppendUint32(body, 1<<20)
			body = append(body, 0)
			body = binary.BigEndian.AppendUint32(body, 1<<30)
			rc.sendFrame(append(rawHeader(1, 4, 1), body...))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rc := dialRaw(t, b)
			tc.send(rc)
			rc.expectClosed()
			expectServing(t, b)
		})
	}
}

func TestDispatchFlexibleHeaders(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	// Flexible answers by the handler table and kmsg: ApiVersions v3+,
	// Metadata v9+, Produce v9+, Fetch v12+; unknown keys are never
	// flexible (so a bad request still parses far enough to be refused).
	tests := []struct {
		key, version int16
		want         bool
	}{
		{18, 2, false}, {18, 3, true}, {3, 8, false}, {3, 9, true},
		{0, 8, false}, {0, 9, true}, {1, 11, false}, {1, 12, true},
		{1, 18, false}, {0, 2, false}, {9999, 5, false}, {127, 5, false}, {-1, 0, false},
	}
	for _, tc := range tests {
		if got := b.Flexible(tc.key, tc.version); got != tc.want {
			t.Errorf("Flexible(%d, %d) = %v, want %v", tc.key, tc.version, got, tc.want)
		}
	}
}

// A request that ends early is reported as a request, in words about the
// client's bytes, not kbin's "response did not contain enough data".
func TestDecodeRequestTruncated(t *testing.T) {
	t.Parallel()
	body := kmsg.NewPtrMetadataRequest().AppendTo(nil)
	body = binary.BigEndian.AppendUint32(body[:0], 3) // v1: three topics, none follows
	_, err := decodeRequest(3, 1, body)
	if err == nil {
		t.Fatal("a truncated Metadata v1 request decoded")
	}
	if msg := err.Error(); strings.Contains(msg, "response") || !strings.Contains(msg, "Metadata v1 request") ||
		!errors.Is(err, errTruncatedRequest) {
		t.Fatalf("error %q: want it to name the Metadata v1 request and its truncation, not a response", msg)
	}
	if _, err := decodeRequest(3, 1, binary.BigEndian.AppendUint32(nil, 0)); err != nil {
		t.Fatalf("a whole Metadata v1 request: %v", err)
	}
}
