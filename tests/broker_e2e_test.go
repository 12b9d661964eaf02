package tests

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
)

// codecs are the record batch compressions Kafka defines, with the
// attribute bits each one sets.
var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
	attr  uint8
}{
	{"none", kgo.NoCompression(), 0},
	{"gzip", kgo.GzipCompression(), 1},
	{"snappy", kgo.SnappyCompression(), 2},
	{"lz4", kgo.Lz4Compression(), 3},
	{"zstd", kgo.ZstdCompression(), 4},
}

// testRecords builds n records for topic, record i on partition i%parts,
// with compressible values (so every codec really compresses) and headers.
func testRecords(topic string, n int, parts int32, tag string) []*kgo.Record {
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{
			Topic:     topic,
			Partition: int32(i) % parts,
			Key:       fmt.Appendf(nil, "key-%05d", i),
			Value:     []byte(strings.Repeat(fmt.Sprintf("value-%05d;", i), 8)),
			Headers: []kgo.RecordHeader{
				{Key: "i", Value: []byte(strconv.Itoa(i))},
				{Key: "tag", Value: []byte(tag)},
			},
		}
	}
	return rs
}

// checkPartitions checks that got holds exactly want, partition by
// partition, in order, at offsets contiguous from 0.
func checkPartitions(t *testing.T, want, got []*kgo.Record) {
	t.Helper()
	wp, gp := byPartition(want), byPartition(got)
	if len(wp) != len(gp) {
		t.Fatalf("records on %d partitions, want %d", len(gp), len(wp))
	}
	for p, ws := range wp {
		gs := gp[p]
		if len(gs) != len(ws) {
			t.Fatalf("partition %d: %d records, want %d", p, len(gs), len(ws))
		}
		for j, g := range gs {
			if g.Offset != int64(j) {
				t.Fatalf("partition %d: record %d at offset %d, want %d", p, j, g.Offset, j)
			}
			if err := sameRecord(ws[j], g); err != nil {
				t.Fatalf("partition %d offset %d: %v", p, j, err)
			}
		}
	}
}

// checkEndOffsets checks every partition's high watermark.
func checkEndOffsets(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, want map[int32]int64) {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListEndOffsets: %v", err)
	}
	for p, w := range want {
		o, ok := ends.Lookup(topic, p)
		if !ok || o.Err != nil || o.Offset != w {
			t.Fatalf("%s[%d] end offset %+v, want %d", topic, p, o, w)
		}
	}
}

func countsOf(rs []*kgo.Record) map[int32]int64 {
	m := map[int32]int64{}
	for _, r := range rs {
		m[r.Partition]++
	}
	return m
}

// TestCodecsRoundTrip produces 10,000 records with each codec through an
// idempotent producer (many batches in flight) and reads them back.
func TestCodecsRoundTrip(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	adm := newAdmin(t, n.addr())
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 45*time.Second) // its own: it may wait for a parallel slot
			topic := "codec-" + c.name
			createTopic(t, ctx, adm, topic, 3, nil)
			want := testRecords(topic, 10000, 3, c.name)
			p := newClient(t, n.addr(),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerBatchCompression(c.codec),
				kgo.ProducerBatchMaxBytes(16<<10))
			produceAll(t, ctx, p, want)

			cons := newClient(t, n.addr(), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			got := pollN(t, ctx, cons, len(want))
			checkPartitions(t, want, got)
			for _, r := range got {
				if ct := r.Attrs.CompressionType(); ct != c.attr {
					t.Fatalf("%s[%d]@%d: compression %d, want %d", r.Topic, r.Partition, r.Offset, ct, c.attr)
				}
			}
			checkEndOffsets(t, ctx, adm, topic, countsOf(want))
		})
	}
}

// TestIdempotentRetryDedup drops the responses of Produce requests the
// broker did append, so kgo retries the same batches (same producer id,
// epoch and sequences) on a new connection; then it replays the exact bytes
// of an answered Produce request. The broker must answer every duplicate
// with the original offsets and append nothing.
func TestIdempotentRetryDedup(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := testCtx(t, 45*time.Second)
	adm := newAdmin(t, n.addr())
	const topic = "idempotent"
	createTopic(t, ctx, adm, topic, 3, nil)

	ic := &interceptor{dropAt: map[int]bool{3: true, 12: true}}
	p := newClient(t, n.addr(),
		kgo.Dialer(ic.dial),
		// kgo waits for a metadata refresh after a failed produce; keep
		// that short so the retries come at once.
		kgo.MetadataMinAge(10*time.Millisecond),
		kgo.RequestRetries(20),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(4<<10))
	want := testRecords(topic, 10000, 3, "idempotent")
	produceAll(t, ctx, p, want)

	ic.mu.Lock()
	dropped, produced := slices.Clone(ic.dropped), slices.Clone(ic.produced)
	lastReq, lastResp := ic.lastReq, ic.lastResp
	ic.mu.Unlock()
	if len(dropped) != 2 {
		t.Fatalf("dropped %d produce responses out of %d requests, want 2", len(dropped), len(produced))
	}
	// The dropped batches must have been sent again: that is the retry.
	sent := map[batchID]int{}
	for _, f := range produced {
		for _, b := range produceBatches(t, f) {
			sent[b]++
		}
	}
	for _, d := range dropped {
		for _, b := range produceBatches(t, d) {
			if sent[b] < 2 {
				t.Fatalf("batch %+v of a dropped request was sent %d times, want a retry", b, sent[b])
			}
		}
	}

	// The promises got offsets contiguous per partition: no batch twice.
	next := map[int32]int64{}
	for _, r := range want {
		if r.Offset != next[r.Partition] {
			t.Fatalf("record %q got %s[%d]@%d, want offset %d", r.Key, r.Topic, r.Partition, r.Offset, next[r.Partition])
		}
		next[r.Partition]++
	}
	checkEndOffsets(t, ctx, adm, topic, countsOf(want))
	cons := newClient(t, n.addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	checkPartitions(t, want, pollN(t, ctx, cons, len(want)))

	// Replay the last answered Produce request, byte for byte, on a fresh
	// connection, then through kgo's raw request path.
	if lastReq == nil {
		t.Fatal("no produce request was answered")
	}
	req, err := decodeRequest(lastReq)
	if err != nil {
		t.Fatal(err)
	}
	orig := decodeResponse(t, 0, req.GetVersion(), lastResp).(*kmsg.ProduceResponse)
	for part, o := range produceOffsets(orig) {
		if o[1] != 0 || o[0] < 0 {
			t.Fatalf("the replayed request's original answer for partition %d: [base offset, error] %v", part, o)
		}
	}
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(lastReq))), lastReq...)
	replays := []struct {
		name string
		send func() *kmsg.ProduceResponse
	}{
		{"exact bytes", func() *kmsg.ProduceResponse {
			return decodeResponse(t, 0, req.GetVersion(), rawRoundTrip(t, ctx, n.addr(), frame)).(*kmsg.ProduceResponse)
		}},
		{"kgo Request", func() *kmsg.ProduceResponse {
			resp, err := p.Request(ctx, req)
			if err != nil {
				t.Fatalf("replaying with kgo: %v", err)
			}
			return resp.(*kmsg.ProduceResponse)
		}},
	}
	for _, rp := range replays {
		// Sequential: each replay must leave the log ends unchanged.
		resp := rp.send()
		if got, first := produceOffsets(resp), produceOffsets(orig); !maps.Equal(got, first) {
			t.Fatalf("%s: replay answered %v (partition: [base offset, error]), the original %v", rp.name, got, first)
		}
		checkEndOffsets(t, ctx, adm, topic, countsOf(want))
	}
}

// batchID names a produced batch by its producer and sequence.
type batchID struct {
	partition  int32
	producerID int64
	epoch      int16
	sequence   int32
}

// produceBatches lists the batches of a Produce request frame (without
// its size).
func produceBatches(t *testing.T, frame []byte) []batchID {
	t.Helper()
	req, err := decodeRequest(frame)
	if err != nil {
		t.Fatal(err)
	}
	var out []batchID
	for _, tp := range req.(*kmsg.ProduceRequest).Topics {
		for _, pp := range tp.Partitions {
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(pp.Records); err != nil {
				t.Fatalf("decoding a produced batch: %v", err)
			}
			out = append(out, batchID{pp.Partition, rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence})
		}
	}
	return out
}

// produceOffsets maps partition to (base offset, error code).
func produceOffsets(resp *kmsg.ProduceResponse) map[int32][2]int64 {
	m := map[int32][2]int64{}
	for _, tp := range resp.Topics {
		for _, pp := range tp.Partitions {
			m[pp.Partition] = [2]int64{pp.BaseOffset, int64(pp.ErrorCode)}
		}
	}
	return m
}

// TestConsumeFromOffsetAfterRestart restarts a node and consumes each
// partition from a given offset with a plain (groupless) kgo consumer.
func TestConsumeFromOffsetAfterRestart(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := testCtx(t, 45*time.Second)
	const (
		topic = "from-offset"
		per   = 2000
	)
	cases := []struct {
		name  string
		at    kgo.Offset
		first int64 // first offset expected
		extra int   // records produced after the restart
	}{
		{"start", kgo.NewOffset().At(0), 0, 0},
		{"middle", kgo.NewOffset().At(1234), 1234, 0},
		{"last", kgo.NewOffset().At(per - 1), per - 1, 0},
		{"end minus 10", kgo.NewOffset().AtEnd().Relative(-10), per - 10, 0},
		{"log end, then new records", kgo.NewOffset().At(per), per, 25},
	}
	func() {
		adm := newAdmin(t, n.addr())
		createTopic(t, ctx, adm, topic, int32(len(cases)), nil)
		p := newClient(t, n.addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		produceAll(t, ctx, p, testRecords(topic, per*len(cases), int32(len(cases)), "before"))
		p.Close()
		adm.Close()
	}()
	n.restart(t)

	for i, c := range cases {
		part := int32(i) // one partition per case, so cases run in parallel
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 45*time.Second) // its own: it may wait for a parallel slot
			cons := newClient(t, n.addr(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: c.at}}))
			if c.extra > 0 {
				// The consumer sits at the log end (a valid position, in a
				// long poll) until these appends after the restart.
				p := newClient(t, n.addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
				extra := make([]*kgo.Record, c.extra)
				for j := range extra {
					extra[j] = &kgo.Record{Topic: topic, Partition: part, Value: fmt.Appendf(nil, "after-%d", j)}
				}
				produceAll(t, ctx, p, extra)
			}
			want := per - int(c.first) + c.extra
			got := pollN(t, ctx, cons, want)
			for j, r := range got {
				if r.Partition != part || r.Offset != c.first+int64(j) {
					t.Fatalf("record %d: %s[%d]@%d, want [%d]@%d", j, r.Topic, r.Partition, r.Offset, part, c.first+int64(j))
				}
				if r.Offset < per {
					wantKey := fmt.Sprintf("key-%05d", int(r.Offset)*len(cases)+int(part))
					if string(r.Key) != wantKey {
						t.Fatalf("offset %d: key %q, want %q", r.Offset, r.Key, wantKey)
					}
				} else if wantVal := fmt.Sprintf("after-%d", r.Offset-per); string(r.Value) != wantVal {
					t.Fatalf("offset %d: value %q, want %q", r.Offset, r.Value, wantVal)
				}
			}
		})
	}
}

// TestRestartPersistence checks that topics, their IDs, partition counts,
// configs, offsets and data survive a clean restart.
func TestRestartPersistence(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := testCtx(t, 45*time.Second)
	topics := []struct {
		name    string
		parts   int32
		configs map[string]string
	}{
		{"persist-delete", 3, map[string]string{"retention.ms": "3600000", "cleanup.policy": "delete"}},
		{"persist-compact", 2, map[string]string{"retention.ms": "-1", "cleanup.policy": "compact"}},
	}
	names := make([]string, len(topics))
	for i, tp := range topics {
		names[i] = tp.name
	}

	type snapshot struct {
		details kadm.TopicDetails
		configs map[string]map[string]string
		starts  kadm.ListedOffsets
		ends    kadm.ListedOffsets
		data    map[string][]*kgo.Record
	}
	take := func(addr string) snapshot {
		t.Helper()
		adm := newAdmin(t, addr)
		defer adm.Close()
		var s snapshot
		var err error
		if s.details, err = adm.ListTopics(ctx, names...); err != nil {
			t.Fatalf("ListTopics: %v", err)
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, names...)
		if err != nil {
			t.Fatalf("DescribeTopicConfigs: %v", err)
		}
		s.configs = map[string]map[string]string{}
		for _, tp := range topics {
			rc, err := rcs.On(tp.name, nil)
			if err != nil || rc.Err != nil {
				t.Fatalf("DescribeTopicConfigs %s: %v %v %s", tp.name, err, rc.Err, rc.ErrMessage)
			}
			got := map[string]string{}
			for _, c := range rc.Configs {
				if _, set := tp.configs[c.Key]; set {
					if c.Source != kmsg.ConfigSourceDynamicTopicConfig {
						t.Errorf("%s: config %s has source %v, want DYNAMIC_TOPIC_CONFIG", tp.name, c.Key, c.Source)
					}
					got[c.Key] = c.MaybeValue()
				}
			}
			if !maps.Equal(got, tp.configs) {
				t.Fatalf("%s: described configs %v, want %v", tp.name, got, tp.configs)
			}
			s.configs[tp.name] = got
		}
		if s.starts, err = adm.ListStartOffsets(ctx, names...); err != nil {
			t.Fatalf("ListStartOffsets: %v", err)
		}
		if s.ends, err = adm.ListEndOffsets(ctx, names...); err != nil {
			t.Fatalf("ListEndOffsets: %v", err)
		}
		s.data = map[string][]*kgo.Record{}
		for _, tp := range topics {
			var total int
			s.ends.Each(func(o kadm.ListedOffset) {
				if o.Topic == tp.name {
					total += int(o.Offset)
				}
			})
			cons := newClient(t, addr, kgo.ConsumeTopics(tp.name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			s.data[tp.name] = pollN(t, ctx, cons, total)
			cons.Close()
		}
		return s
	}

	adm := newAdmin(t, n.addr())
	p := newClient(t, n.addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, tp := range topics {
		cfg := map[string]*string{}
		for k, v := range tp.configs {
			cfg[k] = kmsg.StringPtr(v)
		}
		createTopic(t, ctx, adm, tp.name, tp.parts, cfg)
		produceAll(t, ctx, p, testRecords(tp.name, 3000, tp.parts, "persist"))
	}
	p.Close()
	adm.Close()

	before := take(n.addr())
	n.restart(t)
	after := take(n.addr())

	for _, tp := range topics {
		b, a := before.details[tp.name], after.details[tp.name]
		if a.Err != nil || a.ID != b.ID || len(a.Partitions) != int(tp.parts) || len(b.Partitions) != int(tp.parts) {
			t.Errorf("%s: before restart id %s, %d partitions; after id %s, %d partitions (err %v)",
				tp.name, b.ID, len(b.Partitions), a.ID, len(a.Partitions), a.Err)
		}
		if b.ID == (kadm.TopicID{}) {
			t.Errorf("%s: zero topic ID", tp.name)
		}
		for p := range tp.parts {
			for _, l := range []struct {
				what   string
				b, a   kadm.ListedOffsets
				expect int64
			}{{"start", before.starts, after.starts, 0}, {"end", before.ends, after.ends, -1}} {
				bo, _ := l.b.Lookup(tp.name, p)
				ao, _ := l.a.Lookup(tp.name, p)
				if bo.Offset != ao.Offset || ao.Err != nil || (l.expect >= 0 && ao.Offset != l.expect) {
					t.Errorf("%s[%d] %s offset %d before restart, %d after (err %v)", tp.name, p, l.what, bo.Offset, ao.Offset, ao.Err)
				}
			}
		}
		bd, ad := byPartition(before.data[tp.name]), byPartition(after.data[tp.name])
		for p, bs := range bd {
			as := ad[p]
			if len(as) != len(bs) {
				t.Fatalf("%s[%d]: %d records after restart, %d before", tp.name, p, len(as), len(bs))
			}
			for j := range bs {
				if err := sameRecord(bs[j], as[j]); err != nil || bs[j].Offset != as[j].Offset || !bs[j].Timestamp.Equal(as[j].Timestamp) {
					t.Fatalf("%s[%d] record %d differs after restart: %v (offsets %d/%d)", tp.name, p, j, err, bs[j].Offset, as[j].Offset)
				}
			}
		}
	}
}

// TestReadCommittedNonTransactional: with no transactions, read_committed
// sees everything (the last stable offset is the high watermark), also
// records appended while the consumer waits in a long poll.
func TestReadCommittedNonTransactional(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := testCtx(t, 30*time.Second)
	const topic = "read-committed"
	adm := newAdmin(t, n.addr())
	createTopic(t, ctx, adm, topic, 2, nil)

	cons := newClient(t, n.addr(), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	p := newClient(t, n.addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := testRecords(topic, 4000, 2, "rc")
	produceAll(t, ctx, p, want)
	checkPartitions(t, want, pollN(t, ctx, cons, len(want)))

	committed, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("ListCommittedOffsets: %v", err)
	}
	for part, c := range countsOf(want) {
		o, ok := committed.Lookup(topic, part)
		if !ok || o.Err != nil || o.Offset != c {
			t.Errorf("%s[%d] last stable offset %+v, want %d", topic, part, o, c)
		}
	}
}

// TestListOffsetsAfterMilli looks offsets up by timestamp. Kafka answers
// the first record (not batch) whose timestamp is at or after the target,
// with that record's timestamp; kadm falls back to the end offset when no
// record is that late.
func TestListOffsetsAfterMilli(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := testCtx(t, 30*time.Second)
	const (
		topic = "by-time"
		count = 200
		step  = 10 // ms between records
	)
	adm := newAdmin(t, n.addr())
	createTopic(t, ctx, adm, topic, 1, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	rs := make([]*kgo.Record, count)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%d", i), Timestamp: base.Add(time.Duration(i*step) * time.Millisecond)}
	}
	// A linger puts many records in each batch, so lookups land inside
	// batches, not only on their first records.
	p := newClient(t, n.addr(), kgo.ProducerLinger(50*time.Millisecond))
	if err := p.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	ms := base.UnixMilli()
	cases := []struct {
		name   string
		at     int64 // -3 is ListOffsets' max timestamp (v7+)
		offset int64
		ts     int64 // -1: not checked (end-offset fallback)
	}{
		{"before all", ms - 60000, 0, ms},
		{"first record", ms, 0, ms},
		{"exact record", ms + 57*step, 57, ms + 57*step},
		{"between records", ms + 57*step + 3, 58, ms + 58*step},
		{"late in the log", ms + 181*step - 1, 181, ms + 181*step},
		{"last record", ms + (count-1)*step, count - 1, ms + (count-1)*step},
		{"after all", ms + count*step, count, -1},
		// KIP-734; Kafka 3.7+ (KAFKA-16310) answers the record's offset.
		{"max timestamp", -3, count - 1, ms + (count-1)*step},
	}
	// One after the other in the parent's slot: each is one lookup, and a
	// parallel subtest could wait behind other tests until ctx is spent.
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var o kadm.ListedOffset
			if c.at >= 0 {
				l, err := adm.ListOffsetsAfterMilli(ctx, c.at, topic)
				if err != nil {
					t.Fatalf("ListOffsetsAfterMilli: %v", err)
				}
				var ok bool
				if o, ok = l.Lookup(topic, 0); !ok || o.Err != nil {
					t.Fatalf("no offset for %s[0]: %+v", topic, o)
				}
			} else {
				o = listOffsetRaw(t, ctx, p, topic, 0, c.at)
			}
			if o.Offset != c.offset || (c.ts >= 0 && o.Timestamp != c.ts) {
				t.Fatalf("timestamp %d: offset %d (timestamp %d), want offset %d (timestamp %d)",
					c.at, o.Offset, o.Timestamp, c.offset, c.ts)
			}
		})
	}
}

// listOffsetRaw sends one ListOffsets for a special timestamp through kgo
// (newest version both sides know).
func listOffsetRaw(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, part int32, ts int64) kadm.ListedOffset {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = part, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kr, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatalf("ListOffsets %d: %v", ts, err)
	}
	resp := kr.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("ListOffsets %d: malformed response %+v", ts, resp)
	}
	sp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
		t.Fatalf("ListOffsets %d: %v", ts, err)
	}
	return kadm.ListedOffset{Topic: topic, Partition: part, Offset: sp.Offset, Timestamp: sp.Timestamp, LeaderEpoch: sp.LeaderEpoch}
}

// TestAutoCreateDisabled: with auto.create.topics.enable=false, no request
// creates a topic, whatever the client asks.
func TestAutoCreateDisabled(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *broker.Config) { c.AutoCreateTopics = false })
	// Each case bounds its own requests: parallel cases may wait for a
	// slot (go test -parallel) longer than one bound for all would last.
	metadata := func(version int16) func(t *testing.T, topic string) {
		return func(t *testing.T, topic string) {
			ctx := testCtx(t, 30*time.Second)
			req := kmsg.NewPtrMetadataRequest()
			req.SetVersion(version)
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			req.AllowAutoTopicCreation = true
			resp := rawRequest(t, ctx, n.addr(), req).(*kmsg.MetadataResponse)
			if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("Metadata v%d for %s: %+v, want UNKNOWN_TOPIC_OR_PARTITION", version, topic, resp.Topics)
			}
		}
	}
	cases := []struct {
		name string
		run  func(t *testing.T, topic string)
	}{
		{"kgo producer", func(t *testing.T, topic string) {
			ctx := testCtx(t, 30*time.Second)
			p := newClient(t, n.addr(), kgo.AllowAutoTopicCreation(),
				kgo.UnknownTopicRetries(1), kgo.MetadataMinAge(10*time.Millisecond),
				kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
			err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
			if !errors.Is(err, kerr.UnknownTopicOrPartition) {
				t.Fatalf("produce to %s: %v, want UNKNOWN_TOPIC_OR_PARTITION", topic, err)
			}
		}},
		{"metadata v1", metadata(1)},
		{"metadata v4", metadata(4)},
		{"metadata v9", metadata(9)},
		{"metadata v12", metadata(12)},
		{"produce v9", func(t *testing.T, topic string) {
			ctx := testCtx(t, 30*time.Second)
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(9)
			req.Acks, req.TimeoutMillis = -1, 5000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = encodeBatch("v")
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp := rawRequest(t, ctx, n.addr(), req).(*kmsg.ProduceResponse)
			if got := produceOffsets(resp); got[0][1] != int64(kerr.UnknownTopicOrPartition.Code) {
				t.Fatalf("produce to %s: %v, want error %d", topic, got, kerr.UnknownTopicOrPartition.Code)
			}
		}},
	}
	t.Run("requests", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, "no-auto-"+strings.ReplaceAll(c.name, " ", "-"))
			})
		}
	})
	// After every case: no topic exists at all.
	tds, err := newAdmin(t, n.addr()).ListTopics(testCtx(t, 30*time.Second))
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	if names := tds.Names(); len(names) != 0 {
		t.Fatalf("topics exist with auto-creation off: %v", names)
	}
}
