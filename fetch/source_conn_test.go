package fetch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Helpers of this file are prefixed with sc (source conn): other files of
// the package have their own.

func scCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

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
	cl := scCluster(t, kfake.SeedTopics(1, "t"))
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
	cl := scCluster(t, kfake.SeedTopics(1, "t"))
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
	cl := scCluster(t, kfake.SeedTopics(1, "big", "small"))
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
	cl := scCluster(t, kfake.SeedTopics(1, "t"))
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
	cl := scCluster(t, kfake.SeedTopics(1, "t"))
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
	cl := scCluster(t, kfake.SeedTopics(1, "t"))
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

func TestSourceConnRequestTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 150 * time.Millisecond
	for _, tc := range []struct {
		name   string
		during string // dial: the ApiVersions request hangs; request: a later one
		ctxTO  time.Duration
		want   error
	}{
		{name: "dial", during: "dial", want: os.ErrDeadlineExceeded},
		{name: "request", during: "request", want: os.ErrDeadlineExceeded},
		{name: "ctx deadline first", during: "request", ctxTO: timeout, want: context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := scFake(t, func(_ int, conn net.Conn) {
				if tc.during == "request" && !scServeApiVersions(t, conn) {
					return
				}
				io.Copy(io.Discard, conn) // read, never answer
			})
			cfg := sourceConnConfig{RequestTimeout: timeout}
			if tc.ctxTO > 0 {
				cfg.RequestTimeout = time.Minute
			}
			start := time.Now()
			var err error
			if tc.during == "dial" {
				_, err = dialSource(context.Background(), addr, cfg)
			} else {
				c := scDial(t, addr, cfg)
				ctx := context.Background()
				if tc.ctxTO > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.ctxTO)
					defer cancel()
				}
				start = time.Now()
				req := kmsg.NewPtrMetadataRequest()
				req.Version = 9
				err = c.roundTrip(ctx, req, kmsg.NewPtrMetadataResponse())
				if !c.closed {
					t.Error("connection not closed after a timeout")
				}
			}
			took := time.Since(start)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), addr) {
				t.Errorf("error %q does not name the broker %s", err, addr)
			}
			if took < timeout || took > 5*time.Second {
				t.Errorf("failed after %v, want about %v", took, timeout)
			}
		})
	}
}

// TestSourceConnBadResponses: every broken answer is an error that closes the
// connection, never a panic.
func TestSourceConnBadResponses(t *testing.T) {
	t.Parallel()
	const maxBytes = 1 << 20
	frame := func(size int32, rest ...byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(size)), rest...)
	}
	corrOf := func(corr int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(corr)) }
	for _, tc := range []struct {
		name    string
		version int16 // of the Metadata request; 9+ is flexible
		reply   func(corr int32, resp *kmsg.MetadataResponse) []byte
		want    error
	}{
		{"wrong correlation id", 1, func(corr int32, resp *kmsg.MetadataResponse) []byte {
			return scResponseFrame(corr+1, resp)
		}, ErrSourceCorrelationID},
		{"negative size", 1, func(int32, *kmsg.MetadataResponse) []byte {
			return frame(-1, 0, 0, 0, 1)
		}, ErrSourceFrameSize},
		{"oversized size", 1, func(corr int32, _ *kmsg.MetadataResponse) []byte {
			return frame(maxBytes+1, corrOf(corr)...)
		}, ErrSourceFrameSize},
		{"size without correlation id", 1, func(int32, *kmsg.MetadataResponse) []byte {
			return frame(3, 0, 0, 0)
		}, ErrSourceFrameSize},
		{"garbage body", 1, func(corr int32, _ *kmsg.MetadataResponse) []byte {
			return frame(8, append(corrOf(corr), 0x7f, 0xff, 0xff, 0xff)...) // 2 Gi brokers
		}, ErrSourceResponse},
		{"garbage flexible body", 9, func(corr int32, _ *kmsg.MetadataResponse) []byte {
			return frame(11, append(corrOf(corr), 0, 0, 0, 0, 0, 0xff, 0xff)...)
		}, ErrSourceResponse},
		{"bad header tags", 9, func(corr int32, _ *kmsg.MetadataResponse) []byte {
			return frame(6, append(corrOf(corr), 1, 0x80)...)
		}, ErrSourceResponse},
		{"header tag past the end", 9, func(corr int32, _ *kmsg.MetadataResponse) []byte {
			return frame(8, append(corrOf(corr), 1, 0, 5, 0)...)
		}, ErrSourceResponse},
		{"truncated frame", 1, func(corr int32, resp *kmsg.MetadataResponse) []byte {
			b := scResponseFrame(corr, resp)
			return b[:len(b)-3]
		}, io.ErrUnexpectedEOF},
		{"huge size then close", 1, func(corr int32, _ *kmsg.MetadataResponse) []byte {
			return frame(maxBytes, corrOf(corr)...)
		}, io.ErrUnexpectedEOF},
		{"no answer, closed", 1, func(int32, *kmsg.MetadataResponse) []byte { return nil }, io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := scFake(t, func(_ int, conn net.Conn) {
				if !scServeApiVersions(t, conn) {
					return
				}
				req, corr, _, err := scReadRequest(conn)
				if err != nil {
					t.Errorf("fake: %v", err)
					return
				}
				resp := req.ResponseKind().(*kmsg.MetadataResponse)
				b := kmsg.NewMetadataResponseBroker()
				b.Host, b.Port = "127.0.0.1", 9092
				resp.Brokers = append(resp.Brokers, b)
				conn.Write(tc.reply(corr, resp))
				// Closing now ends a frame the client still waits for.
			})
			c := scDial(t, addr, sourceConnConfig{MaxResponseBytes: maxBytes})
			req := kmsg.NewPtrMetadataRequest()
			req.Version = tc.version
			err := c.roundTrip(context.Background(), req, kmsg.NewPtrMetadataResponse())
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), addr) {
				t.Errorf("error %q does not name the broker %s", err, addr)
			}
			if !c.closed {
				t.Fatal("connection not closed")
			}
			if err := c.roundTrip(context.Background(), req, kmsg.NewPtrMetadataResponse()); !errors.Is(err, ErrSourceConnClosed) {
				t.Fatalf("second roundTrip = %v, want ErrSourceConnClosed", err)
			}
		})
	}
}

func TestSourceConnMismatchedResponse(t *testing.T) {
	t.Parallel()
	cl := scCluster(t, kfake.SeedTopics(1, "t"))
	c := scDial(t, cl.ListenAddrs()[0], sourceConnConfig{})
	err := c.roundTrip(context.Background(), kmsg.NewPtrMetadataRequest(), kmsg.NewPtrFetchResponse())
	if !errors.Is(err, ErrSourceResponse) || c.closed {
		t.Fatalf("roundTrip = %v (closed %v), want ErrSourceResponse with the connection open", err, c.closed)
	}
	scMetadata(t, c, kmsg.NewPtrMetadataResponse(), "t")
}

// TestSourceConnApiVersionsFallback covers the ways an older broker answers
// ApiVersions v3.
func TestSourceConnApiVersionsFallback(t *testing.T) {
	t.Parallel()
	type step struct {
		version int16                     // the ApiVersions version expected
		answer  *kmsg.ApiVersionsResponse // nil: close the connection
		check   func(*kmsg.ApiVersionsRequest) error
	}
	softwareName := func(r *kmsg.ApiVersionsRequest) error {
		if r.ClientSoftwareName != "kmirror" || r.ClientSoftwareVersion == "" {
			return fmt.Errorf("software %q %q", r.ClientSoftwareName, r.ClientSoftwareVersion)
		}
		return nil
	}
	full := [][3]int16{{18, 0, 2}, {3, 0, 8}, {1, 4, 11}}
	for _, tc := range []struct {
		name  string
		conns [][]step // per connection, its requests
		want  error
		fetch int16 // version(Fetch, 0, 100) after the dial
		meta  int16
	}{
		{
			name: "unsupported, all ranges in v0 form",
			conns: [][]step{{
				{3, scApiVersions(0, kerr.UnsupportedVersion.Code, full...), softwareName},
			}},
			fetch: 11, meta: 8,
		},
		{
			name: "unsupported, KIP-511 ApiVersions range only",
			conns: [][]step{{
				{3, scApiVersions(0, kerr.UnsupportedVersion.Code, [3]int16{18, 0, 2}), softwareName},
				{2, scApiVersions(2, 0, full...), nil},
			}},
			fetch: 11, meta: 8,
		},
		{
			name: "unsupported, no ranges",
			conns: [][]step{{
				{3, scApiVersions(0, kerr.UnsupportedVersion.Code), nil},
				{0, scApiVersions(0, 0, [3]int16{18, 0, 0}, [3]int16{1, 4, 6}), nil},
			}},
			fetch: 6, meta: -1,
		},
		{
			name: "closes on v3, v0 on a new connection",
			conns: [][]step{
				{{3, nil, softwareName}},
				{{0, scApiVersions(0, 0, [3]int16{18, 0, 1}, [3]int16{3, 0, 5}, [3]int16{1, 4, 8}), nil}},
			},
			fetch: 8, meta: 5,
		},
		{
			name: "closes on v3 and v0",
			conns: [][]step{
				{{3, nil, nil}},
				{{0, nil, nil}},
			},
			want: io.EOF,
		},
		{
			name: "no downgrade offered",
			conns: [][]step{{
				{3, scApiVersions(0, kerr.UnsupportedVersion.Code, [3]int16{18, 0, 3}), nil},
			}},
			want: ErrSourceVersions,
		},
		{
			name: "unsupported at v0",
			conns: [][]step{{
				{3, scApiVersions(0, kerr.UnsupportedVersion.Code), nil},
				{0, scApiVersions(0, kerr.UnsupportedVersion.Code), nil},
			}},
			want: kerr.UnsupportedVersion,
		},
		{
			name: "other error",
			conns: [][]step{{
				{3, scApiVersions(3, kerr.InvalidRequest.Code), nil},
			}},
			want: kerr.InvalidRequest,
		},
		{
			name: "empty key list",
			conns: [][]step{{
				{3, scApiVersions(3, 0), nil},
			}},
			want: ErrSourceVersions,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := scFake(t, func(n int, conn net.Conn) {
				if n >= len(tc.conns) {
					t.Errorf("fake: unexpected connection %d", n)
					return
				}
				for _, s := range tc.conns[n] {
					req, corr, clientID, err := scReadRequest(conn)
					if err != nil {
						t.Errorf("fake: %v", err)
						return
					}
					av, ok := req.(*kmsg.ApiVersionsRequest)
					if !ok || av.Version != s.version {
						t.Errorf("fake: got key %d v%d, want ApiVersions v%d", req.Key(), req.GetVersion(), s.version)
						return
					}
					if clientID != "kmirror-mirror-m1" {
						t.Errorf("fake: client id %q", clientID)
					}
					if s.check != nil {
						if err := s.check(av); err != nil {
							t.Errorf("fake: %v", err)
						}
					}
					if s.answer == nil {
						return // close
					}
					if err := scWriteResponse(conn, corr, s.answer); err != nil {
						t.Errorf("fake: %v", err)
						return
					}
				}
				io.Copy(io.Discard, conn)
			})
			c, err := dialSource(context.Background(), addr, sourceConnConfig{ClientID: "kmirror-mirror-m1"})
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("dialSource = %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := c.version(int16(kmsg.Fetch), 0, 100); got != tc.fetch {
				t.Errorf("Fetch version %d, want %d", got, tc.fetch)
			}
			if got := c.version(int16(kmsg.Metadata), 0, 100); got != tc.meta {
				t.Errorf("Metadata version %d, want %d", got, tc.meta)
			}
		})
	}
}

// TestSourceConnOldKfake: kfake capped at Kafka 2.3 answers ApiVersions v3
// the KIP-511 way; the connection then works at 2.3's versions.
func TestSourceConnOldKfake(t *testing.T) {
	t.Parallel()
	cl := scCluster(t, kfake.SeedTopics(1, "t"), kfake.MaxVersions(kversion.V2_3_0()))
	recs := scRecords("old", 4, 10)
	scProduce(t, cl, "t", recs...)
	c := scDial(t, cl.ListenAddrs()[0], sourceConnConfig{})
	if got := c.version(int16(kmsg.ApiVersions), 0, 100); got != 2 {
		t.Errorf("ApiVersions version %d, want 2", got)
	}
	v := c.version(int16(kmsg.Fetch), 4, 100)
	if v != 11 {
		t.Fatalf("Fetch version %d, want 11 (Kafka 2.3)", v)
	}
	resp := kmsg.NewPtrFetchResponse()
	if err := c.roundTrip(context.Background(), scFetchRequest(v, "t", [16]byte{}, 0, 0), resp); err != nil {
		t.Fatal(err)
	}
	scEqual(t, "fetch", scDecode(t, scRecordBatches(t, resp)), scWant(recs, 0))
}

// scReplay serves one connection: it answers every request with frame
// (a captured response), its correlation id patched in. The loop
// allocates nothing, so allocation counts of the client are its own.
func scReplay(tb testing.TB, frame []byte) net.Conn {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer conn.Close()
		out := bytes.Clone(frame)
		in := make([]byte, 64<<10)
		hdr := make([]byte, 4)
		for {
			if _, err := io.ReadFull(conn, hdr); err != nil {
				return
			}
			n := int(binary.BigEndian.Uint32(hdr))
			if n > len(in) || n < 8 {
				return
			}
			if _, err := io.ReadFull(conn, in[:n]); err != nil {
				return
			}
			copy(out[4:8], in[4:8]) // after key and version
			if _, err := conn.Write(out); err != nil {
				return
			}
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		conn.Close()
		<-done
	})
	return conn
}

// scCaptureFetch produces a few small records to kfake and captures one
// whole Fetch response frame for them, then shuts kfake down so that
// nothing else allocates in the process.
func scCaptureFetch(tb testing.TB) (*kmsg.FetchRequest, []byte) {
	cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	scProduce(tb, cl, "t", scRecords("alloc", 10, 50)...)
	c, err := dialSource(context.Background(), cl.ListenAddrs()[0], sourceConnConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	topics := scMetadata(tb, c, kmsg.NewPtrMetadataResponse(), "t")
	req := scFetchRequest(c.version(int16(kmsg.Fetch), 4, 100), "t", topics["t"].id, 0, 0)
	if _, err := c.exchange(context.Background(), req); err != nil {
		tb.Fatal(err)
	}
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(c.rbuf)))
	return req, append(frame, c.rbuf...)
}

// TestSourceConnAllocs proves the hot path allocates nothing: the framing
// (encode, write, read, header) of a steady Fetch stream, and roundTrip
// as a whole beyond what kmsg's decoding allocates by itself. The server
// replays a Fetch response captured from kfake, because kfake allocates per
// request and AllocsPerRun counts the whole process.
//
// Not parallel: allocations of concurrent tests would count here.
func TestSourceConnAllocs(t *testing.T) {
	req, frame := scCaptureFetch(t)
	c := newSourceConn(scReplay(t, frame), "replay", sourceConnConfig{})
	defer c.Close()
	resp := kmsg.NewPtrFetchResponse()
	cancelCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 3 { // warm: buffers sized, resp slices grown
		if err := c.roundTrip(cancelCtx, req, resp); err != nil {
			t.Fatal(err)
		}
	}
	if len(scRecordBatches(t, resp)) == 0 {
		t.Fatal("captured fetch has no records")
	}
	if !req.IsFlexible() {
		t.Fatalf("Fetch v%d: the body offset below assumes a flexible version", req.Version)
	}
	rbuf, wbuf := &c.rbuf[:1][0], &c.wbuf[:1][0]

	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"background", context.Background()},
		{"cancelable", cancelCtx},
	} {
		framing := testing.AllocsPerRun(200, func() {
			if _, err := c.exchange(tc.ctx, req); err != nil {
				t.Fatal(err)
			}
		})
		whole := testing.AllocsPerRun(200, func() {
			if err := c.roundTrip(tc.ctx, req, resp); err != nil {
				t.Fatal(err)
			}
		})
		body := bytes.Clone(frame[4+4+1:]) // size, correlation id, header tags
		decodeOnly := testing.AllocsPerRun(200, func() {
			if err := resp.ReadFrom(body); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("ctx=%s: framing %v allocs, roundTrip %v, kmsg ReadFrom alone %v", tc.name, framing, whole, decodeOnly)
		if framing != 0 {
			t.Errorf("ctx=%s: framing allocates %v per request, want 0", tc.name, framing)
		}
		if whole > decodeOnly {
			t.Errorf("ctx=%s: roundTrip allocates %v, kmsg decoding alone %v", tc.name, whole, decodeOnly)
		}
	}
	if &c.rbuf[:1][0] != rbuf || &c.wbuf[:1][0] != wbuf {
		t.Error("read or write buffer was reallocated in steady state")
	}
}

func BenchmarkSourceConnFetch(b *testing.B) {
	req, frame := scCaptureFetch(b)
	for _, path := range []string{"exchange", "roundTrip"} {
		b.Run("path="+path, func(b *testing.B) {
			c := newSourceConn(scReplay(b, frame), "replay", sourceConnConfig{})
			defer c.Close()
			resp := kmsg.NewPtrFetchResponse()
			ctx := context.Background()
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if path == "exchange" {
					_, err = c.exchange(ctx, req)
				} else {
					err = c.roundTrip(ctx, req, resp)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestSoftwareVersion(t *testing.T) {
	t.Parallel()
	v := softwareVersion()
	if v == "" || !isAlnum(v[0]) || !isAlnum(v[len(v)-1]) {
		t.Fatalf("softwareVersion() = %q, not a valid Kafka ClientSoftwareVersion", v)
	}
	for i := range len(v) {
		if ch := v[i]; !isAlnum(ch) && ch != '-' && ch != '.' {
			t.Fatalf("softwareVersion() = %q has %q", v, ch)
		}
	}
}
