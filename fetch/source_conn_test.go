package fetch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
)

// Helpers of this file are prefixed with sc (source conn): other files of
// the package have their own.

// scProduce produces the records in one ProduceSync (one batch, unless it
// exceeds the batch size), uncompressed so the test can read them back.
func scProduce(t testing.TB, cl *kfake.Cluster, topic string, recs ...*kgo.Record) {
	t.Helper()
	p, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func scRecords(prefix string, n, valueSize int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := []byte(fmt.Sprintf("%s-v%d-", prefix, i))
		for len(v) < valueSize {
			v = append(v, byte('a'+i%26))
		}
		recs[i] = &kgo.Record{Key: []byte(fmt.Sprintf("%s-k%d", prefix, i)), Value: v}
	}
	return recs
}

func scDial(t testing.TB, addr string, cfg sourceConnConfig) *sourceConn {
	t.Helper()
	c, err := dialSource(context.Background(), addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type scTopic struct {
	id     [16]byte
	leader int32
}

func scMetadata(t testing.TB, c *sourceConn, resp *kmsg.MetadataResponse, topics ...string) map[string]scTopic {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = c.version(int16(kmsg.Metadata), 1, 12)
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	if err := c.roundTrip(context.Background(), req, resp); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]scTopic)
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil || rt.Topic == nil || len(rt.Partitions) == 0 {
			t.Fatalf("metadata for %v: %v", rt.Topic, err)
		}
		out[*rt.Topic] = scTopic{id: rt.TopicID, leader: rt.Partitions[0].Leader}
	}
	return out
}

func scFetchRequest(version int16, topic string, id [16]byte, offset int64, maxWait int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWait
	req.MinBytes = 1
	req.MaxBytes = 50 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = 0
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 10 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// scRecordBatches checks a one-partition Fetch response and returns its
// RecordBatches.
func scRecordBatches(t testing.TB, resp *kmsg.FetchResponse) []byte {
	t.Helper()
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch: %d topics, want 1 topic with 1 partition", len(resp.Topics))
	}
	p := &resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("fetch partition: %v", err)
	}
	return p.RecordBatches
}

// scDecode walks raw uncompressed batches with kmsg.RecordBatch.ReadFrom
// and returns "offset key=value" per record.
func scDecode(t testing.TB, batches []byte) []string {
	t.Helper()
	var out []string
	for len(batches) > 0 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(batches); err != nil {
			t.Fatalf("batch: %v", err)
		}
		if b.Magic != 2 || b.Attributes&7 != 0 {
			t.Fatalf("batch magic %d attributes %#x: want an uncompressed v2 batch", b.Magic, b.Attributes)
		}
		recs := b.Records
		for i := int32(0); i < b.NumRecords; i++ {
			l, n := binary.Varint(recs)
			if n <= 0 || l < 0 || int64(n)+l > int64(len(recs)) {
				t.Fatalf("record %d: bad length", i)
			}
			var r kmsg.Record
			if err := r.ReadFrom(recs[:n+int(l)]); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			out = append(out, fmt.Sprintf("%d %s=%s", b.FirstOffset+int64(r.OffsetDelta), r.Key, r.Value))
			recs = recs[n+int(l):]
		}
		batches = batches[12+int(b.Length):]
	}
	return out
}

func scWant(recs []*kgo.Record, first int64) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%d %s=%s", first+int64(i), r.Key, r.Value)
	}
	return out
}

func scEqual(t testing.TB, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: record %d = %.60q, want %.60q", what, i, got[i], want[i])
		}
	}
}

func TestSourceConnDialVersions(t *testing.T) {
	t.Parallel()
	cl := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	addr := cl.ListenAddrs()[0]
	c := scDial(t, addr, sourceConnConfig{ClientID: "kmirror-mirror-test", ReceiveBuffer: 1 << 20})
	if c.addr() != addr {
		t.Errorf("addr() = %q, want %q", c.addr(), addr)
	}
	fetchMax := c.version(int16(kmsg.Fetch), 0, 100)
	if fetchMax < 12 {
		t.Errorf("Fetch max = %d, want >= 12", fetchMax)
	}
	for _, tc := range []struct {
		name          string
		key, min, max int16
		want          int16
	}{
		{"fetch capped", int16(kmsg.Fetch), 4, 11, 11},
		{"fetch above the broker", int16(kmsg.Fetch), fetchMax + 1, fetchMax + 5, -1},
		{"fetch below the broker", int16(kmsg.Fetch), 0, 3, -1}, // kfake serves Fetch v4+
		{"metadata", int16(kmsg.Metadata), 0, 12, 12},
		{"api versions", int16(kmsg.ApiVersions), 0, 3, 3},
		{"key kfake lacks", int16(kmsg.LeaderAndISR), 0, 10, -1},
		{"negative key", -1, 0, 10, -1},
		{"key beyond kmsg", kmsg.MaxKey + 1, 0, 10, -1},
	} {
		if got := c.version(tc.key, tc.min, tc.max); got != tc.want {
			t.Errorf("%s: version(%d, %d, %d) = %d, want %d", tc.name, tc.key, tc.min, tc.max, got, tc.want)
		}
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	err := c.roundTrip(context.Background(), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrMetadataResponse())
	if !errors.Is(err, ErrSourceConnClosed) {
		t.Errorf("roundTrip after Close: %v, want ErrSourceConnClosed", err)
	}
}

func TestSourceConnDialError(t *testing.T) {
	t.Parallel()
	refused := errors.New("injected dial failure")
	_, err := dialSource(context.Background(), "source-a:9092", sourceConnConfig{
		Dialer: func(context.Context, string, string) (net.Conn, error) { return nil, refused },
	})
	if !errors.Is(err, refused) || !strings.Contains(err.Error(), "source-a:9092") {
		t.Fatalf("dialSource = %v, want the dial error with the address", err)
	}
}

// TestSourceConnRoundTrips runs Metadata, ListOffsets and 100 Fetches on one
// connection, reusing one response object, for header v1 (Fetch v4, v11)
// and v2 (v12 by name, v13+ by topic id).
func TestSourceConnRoundTrips(t *testing.T) {
	t.Parallel()
	cl := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	first, second := scRecords("a", 5, 20), scRecords("b", 7, 100)
	scProduce(t, cl, "t", first...)
	scProduce(t, cl, "t", second...)
	want := scWant(append(first, second...), 0)

	probe := scDial(t, cl.ListenAddrs()[0], sourceConnConfig{})
	versions := []int16{4, 11, 12, probe.version(int16(kmsg.Fetch), 4, 100)}
	for _, v := range versions {
		t.Run(fmt.Sprintf("fetch=v%d", v), func(t *testing.T) {
			t.Parallel()
			c := scDial(t, cl.ListenAddrs()[0], sourceConnConfig{})
			topics := scMetadata(t, c, kmsg.NewPtrMetadataResponse(), "t")
			if topics["t"].leader != 0 {
				t.Fatalf("leader %d, want 0", topics["t"].leader)
			}

			lreq := kmsg.NewPtrListOffsetsRequest()
			lreq.Version = c.version(int16(kmsg.ListOffsets), 1, 10)
			lreq.ReplicaID = -1
			lt := kmsg.NewListOffsetsRequestTopic()
			lt.Topic = "t"
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Timestamp = -1 // latest
			lt.Partitions = append(lt.Partitions, lp)
			lreq.Topics = append(lreq.Topics, lt)
			lresp := kmsg.NewPtrListOffsetsResponse()
			if err := c.roundTrip(context.Background(), lreq, lresp); err != nil {
				t.Fatal(err)
			}
			if got := lresp.Topics[0].Partitions[0].Offset; got != int64(len(want)) {
				t.Fatalf("ListOffsets latest = %d, want %d", got, len(want))
			}

			req := scFetchRequest(v, "t", topics["t"].id, 0, 0)
			resp := kmsg.NewPtrFetchResponse()
			for i := range 100 {
				if err := c.roundTrip(context.Background(), req, resp); err != nil {
					t.Fatalf("fetch %d: %v", i, err)
				}
				if resp.Version != v {
					t.Fatalf("response version %d, want %d", resp.Version, v)
				}
				p := &resp.Topics[0].Partitions[0]
				if p.HighWatermark != int64(len(want)) {
					t.Fatalf("fetch %d: high watermark %d, want %d", i, p.HighWatermark, len(want))
				}
				scEqual(t, fmt.Sprintf("fetch %d", i), scDecode(t, scRecordBatches(t, resp)), want)
			}
			if got := c.corr; got != 103 {
				t.Errorf("correlation id after 103 requests = %d", got)
			}
		})
	}
}

// TestSourceConnLargeThenSmall checks that a response read into the buffer a
// large one grew is not corrupted by the leftovers.
func TestSourceConnLargeThenSmall(t *testing.T) {
	t.Parallel()
	cl := kfaketest.Source(t, kfake.SeedTopics(1, "big", "small"))
	var big []*kgo.Record
	for i := range 3 { // 3 batches of 512 KiB
		recs := scRecords(fmt.Sprintf("big%d", i), 8, 64<<10)
		scProduce(t, cl, "big", recs...)
		big = append(big, recs...)
	}
	small := scRecords("small", 3, 10)
	scProduce(t, cl, "small", small...)

	c := scDial(t, cl.ListenAddrs()[0], sourceConnConfig{})
	topics := scMetadata(t, c, kmsg.NewPtrMetadataResponse(), "big", "small")
	v := c.version(int16(kmsg.Fetch), 4, 100)
	resp := kmsg.NewPtrFetchResponse()

	if err := c.roundTrip(context.Background(), scFetchRequest(v, "big", topics["big"].id, 0, 0), resp); err != nil {
		t.Fatal(err)
	}
	rb := scRecordBatches(t, resp)
	if len(rb) <= 1<<20 {
		t.Fatalf("big fetch returned %d bytes, want > 1 MiB", len(rb))
	}
	scEqual(t, "big", scDecode(t, rb), scWant(big, 0))
	grown := &c.rbuf[:1][0]

	for i := range 3 {
		if err := c.roundTrip(context.Background(), scFetchRequest(v, "small", topics["small"].id, 0, 0), resp); err != nil {
			t.Fatal(err)
		}
		scEqual(t, fmt.Sprintf("small %d", i), scDecode(t, scRecordBatches(t, resp)), scWant(small, 0))
		if &c.rbuf[:1][0] != grown {
			t.Fatal("the read buffer was not reused for the small response")
		}
	}
}

// TestSourceConnReleasesHugeBuffer checks that a buffer grown past
// sourceConnRetainBytes is dropped at the next request.
func TestSourceConnReleasesHugeBuffer(t *testing.T) {
	t.Parallel()
	cl := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	scProduce(t, cl, "t", scRecords("a", 1, 10)...)
	c := scDial(t, cl.ListenAddrs()[0], sourceConnConfig{})
	c.rbuf = make([]byte, 0, sourceConnRetainBytes+1) // as if a huge response came before
	scMetadata(t, c, kmsg.NewPtrMetadataResponse(), "t")
	if cap(c.rbuf) > sourceConnRetainBytes {
		t.Fatalf("read buffer cap %d kept after the next request", cap(c.rbuf))
	}
}

// TestSourceConnCancelLongPoll cancels a Fetch that kfake holds for 10 s.
func TestSourceConnCancelLongPoll(t *testing.T) {
	t.Parallel()
	cl := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	c := scDial(t, cl.ListenAddrs()[0], sourceConnConfig{})
	topics := scMetadata(t, c, kmsg.NewPtrMetadataResponse(), "t")

	arrived := make(chan struct{}, 1)
	cl.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		return nil, nil, false // observe only: kfake long-polls as usual
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelled := make(chan time.Time, 1)
	go func() {
		<-arrived
		cancelled <- time.Now()
		cancel()
	}()
	req := scFetchRequest(c.version(int16(kmsg.Fetch), 4, 100), "t", topics["t"].id, 0, 10000)
	err := c.roundTrip(ctx, req, kmsg.NewPtrFetchResponse())
	returned := time.Now()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("roundTrip = %v, want context.Canceled", err)
	}
	took := returned.Sub(<-cancelled)
	t.Logf("returned %v after cancel", took)
	if took > 500*time.Millisecond {
		t.Fatalf("returned %v after cancel, want ~immediately", took)
	}
	if !c.closed {
		t.Fatal("connection not closed after cancellation")
	}
}

// TestSourceConnContextReuse checks that one registration serves many
// requests and that a replaced context's cancellation does not interrupt
// requests on another.
func TestSourceConnContextReuse(t *testing.T) {
	t.Parallel()
	cl := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	c := scDial(t, cl.ListenAddrs()[0], sourceConnConfig{})
	if c.watchStop != nil {
		t.Fatal("dialSource left a context registration behind")
	}
	resp := kmsg.NewPtrMetadataResponse()

	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	scMetadataCtx(t, c, ctx1, resp)
	gen := c.watchGen
	scMetadataCtx(t, c, ctx1, resp)
	if c.watchGen != gen {
		t.Fatal("the same context was registered again")
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	scMetadataCtx(t, c, ctx2, resp)
	cancel1()
	scMetadataCtx(t, c, ctx2, resp)
	scMetadataCtx(t, c, context.Background(), resp)
	if c.watchStop != nil {
		t.Fatal("a background context kept a registration")
	}

	cancel2()
	err := c.roundTrip(ctx2, kmsg.NewPtrMetadataRequest(), resp)
	if !errors.Is(err, context.Canceled) || !c.closed {
		t.Fatalf("roundTrip with a cancelled context = %v (closed %v), want context.Canceled and closed", err, c.closed)
	}
}

func scMetadataCtx(t *testing.T, c *sourceConn, ctx context.Context, resp *kmsg.MetadataResponse) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = c.version(int16(kmsg.Metadata), 1, 12)
	if err := c.roundTrip(ctx, req, resp); err != nil {
		t.Fatal(err)
	}
}

// A fake source broker: a loopback listener whose handler plays one
// script per accepted connection (n counts connections from 0).

func scFake(t *testing.T, handle func(n int, conn net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				handle(n, conn)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// scReadRequest reads and decodes one request as a broker does.
func scReadRequest(conn net.Conn) (kmsg.Request, int32, string, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return nil, 0, "", err
	}
	frame := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(conn, frame); err != nil {
		return nil, 0, "", err
	}
	if len(frame) < 10 {
		return nil, 0, "", errors.New("short request")
	}
	key := int16(binary.BigEndian.Uint16(frame))
	req := kmsg.RequestForKey(key)
	if req == nil {
		return nil, 0, "", fmt.Errorf("unknown key %d", key)
	}
	req.SetVersion(int16(binary.BigEndian.Uint16(frame[2:])))
	corr := int32(binary.BigEndian.Uint32(frame[4:]))
	idLen := int(int16(binary.BigEndian.Uint16(frame[8:])))
	body := frame[10:]
	if idLen < 0 || idLen > len(body) {
		return nil, 0, "", errors.New("bad client id")
	}
	clientID := string(body[:idLen])
	body = body[idLen:]
	if req.IsFlexible() {
		if len(body) == 0 || body[0] != 0 {
			return nil, 0, "", errors.New("bad header tags")
		}
		body = body[1:]
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, 0, "", err
	}
	return req, corr, clientID, nil
}

func scResponseFrame(corr int32, resp kmsg.Response) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 4), uint32(corr))
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		b = append(b, 0)
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func scWriteResponse(conn net.Conn, corr int32, resp kmsg.Response) error {
	_, err := conn.Write(scResponseFrame(corr, resp))
	return err
}

func scApiVersions(version int16, errCode int16, keys ...[3]int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	resp.ErrorCode = errCode
	for _, k := range keys {
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k[0], k[1], k[2]
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	return resp
}

// scServeApiVersions answers the connection's first request, which must be
// ApiVersions, at the version asked.
func scServeApiVersions(t *testing.T, conn net.Conn) bool {
	req, corr, _, err := scReadRequest(conn)
	if err != nil {
		t.Errorf("fake: reading ApiVersions: %v", err)
		return false
	}
	if req.Key() != int16(kmsg.ApiVersions) {
		t.Errorf("fake: first request key %d, want ApiVersions", req.Key())
		return false
	}
	resp := scApiVersions(req.GetVersion(), 0, [3]int16{18, 0, 3}, [3]int16{3, 0, 12}, [3]int16{1, 4, 12})
	return scWriteResponse(conn, corr, resp) == nil
}

// The other nodes of a kmirror cluster serve the mirror keys (mirrorapi),
// which kmsg does not know: their advertised versions are kept, capped by
// the caller alone; kmsg's keys stay capped at what kmsg encodes.
func TestSourceConnKeepsKeysKmsgDoesNotKnow(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	c := newSourceConn(a, "pipe", sourceConnConfig{})
	fetchMax := kmsg.NewPtrFetchRequest().MaxVersion()
	c.setVersions([]kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 99, MinVersion: 0, MaxVersion: 2},
		{ApiKey: int16(kmsg.Fetch), MinVersion: 4, MaxVersion: fetchMax + 3},
		{ApiKey: maxAPIKey + 1, MinVersion: 0, MaxVersion: 1},
	})
	for _, tc := range []struct {
		name          string
		key, min, max int16
		want          int16
	}{
		{"mirror key", 99, 0, 1, 1},
		{"mirror key, the broker's max", 99, 0, 5, 2},
		{"mirror key above the broker", 99, 3, 5, -1},
		{"kmsg key capped at kmsg", int16(kmsg.Fetch), 0, fetchMax + 3, fetchMax},
		{"key beyond the table", maxAPIKey + 1, 0, 1, -1},
	} {
		if got := c.version(tc.key, tc.min, tc.max); got != tc.want {
			t.Errorf("%s: version(%d, %d, %d) = %d, want %d", tc.name, tc.key, tc.min, tc.max, got, tc.want)
		}
	}
}
