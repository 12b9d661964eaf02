package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// quotaBroker is a broker measuring quotas over two one-second windows, so
// a rate settles within a second or two.
func quotaBroker(t *testing.T) *Broker {
	return newTestBroker(t, func(c *Config) { c.QuotaWindowNum, c.QuotaWindowSize = 2, time.Second })
}

// A producer over producer_byte_rate is told throttle_time_ms > 0 and,
// though it ignores it (a raw connection sends at once), is not read
// from until the throttle time has passed: its throughput is bounded by
// the quota. Another client id of the same user is not limited. The quota
// names the user ANONYMOUS, Kafka's name for unauthenticated clients.
func TestProduceThrottled(t *testing.T) {
	t.Parallel()
	b := quotaBroker(t)
	tp := mustTopic(t, b, "q", 1)
	const rate = 20000
	rc := dialRaw(t, b)
	mustSetQuotas(t, rc, quotaEntry(quotaEnt("user", "ANONYMOUS", "client-id", "raw-test"), quotaOp("producer_byte_rate", rate)))

	records := plainBatch(10, 1000) // ~10 KB per request
	const n = 12
	start := time.Now()
	var throttled int
	// The mute starts when the broker serves a request, which is after the
	// client sent it: the next answer cannot come sooner than the throttle
	// time after that send, however late the throttled answer arrived.
	var lastSent time.Time
	var lastThrottle time.Duration
	for i := range n {
		sent := time.Now()
		resp := rc.roundTrip(produceReq(9, 1, tp, 0, records)).(*kmsg.ProduceResponse)
		now := time.Now()
		if p := onlyPartition(t, resp); p.ErrorCode != 0 {
			t.Fatalf("produce %d: %s", i, errName(p.ErrorCode))
		}
		if lastThrottle > 0 && now.Sub(lastSent) < lastThrottle-time.Millisecond {
			t.Fatalf("request %d answered %v after the request throttled %v was sent: the connection was not muted",
				i, now.Sub(lastSent), lastThrottle)
		}
		lastSent, lastThrottle = sent, time.Duration(resp.ThrottleMillis)*time.Millisecond
		if resp.ThrottleMillis > 0 {
			throttled++
		}
	}
	elapsed := time.Since(start)
	if throttled == 0 {
		t.Fatal("no response was throttled")
	}
	// n x 10 KB at 20 KB/s, less what the first window lets through at
	// once: well over 2 s. The upper bound only catches a runaway throttle.
	if total := n * len(records); elapsed < 2*time.Second || elapsed > time.Minute {
		t.Fatalf("%d bytes in %v (%.0f B/s) against a quota of %d B/s", total, elapsed, float64(total)/elapsed.Seconds(), rate)
	}
	if b.stats.Throttled[quotaProduce].Load() == 0 {
		t.Fatal("throttled responses not counted")
	}

	free := dialRaw(t, b)
	free.fmtr = kmsg.NewRequestFormatter(kmsg.FormatterClientID("free"))
	for i := range n {
		if resp := free.roundTrip(produceReq(9, 1, tp, 0, records)).(*kmsg.ProduceResponse); resp.ThrottleMillis != 0 {
			t.Fatalf("client id free, request %d: throttled %d ms by another client id's quota", i, resp.ThrottleMillis)
		}
	}
}

// A consumer over consumer_byte_rate is throttled, and no fetch returns
// more than the quota allows in the whole window.
func TestFetchThrottled(t *testing.T) {
	t.Parallel()
	b := quotaBroker(t)
	tp := mustTopic(t, b, "q", 1)
	rc := dialRaw(t, b)
	for range 10 {
		if p := onlyPartition(t, rc.roundTrip(produceReq(9, 1, tp, 0, plainBatch(10, 1000))).(*kmsg.ProduceResponse)); p.ErrorCode != 0 {
			t.Fatalf("produce: %s", errName(p.ErrorCode))
		}
	}
	const rate = 20000
	mustSetQuotas(t, rc, quotaEntry(quotaEnt("client-id", "raw-test"), quotaOp("consumer_byte_rate", rate)))
	offset, end := int64(0), tp.Partitions()[0].Log().LogEndOffset()
	throttled := false
	for i := 0; offset < end && i < 50; i++ {
		req := newFetchReq(12)
		addPart(req, tp, 0, offset)
		resp := rc.roundTrip(req).(*kmsg.FetchResponse)
		recs := resp.Topics[0].Partitions[0].RecordBatches
		// KIP-74: the first batch may exceed the limit, never more.
		if len(recs) > rate+11000 {
			t.Fatalf("fetch %d returned %d bytes, over the %d a window allows", i, len(recs), rate)
		}
		if resp.ThrottleMillis > 0 {
			throttled = true
		}
		got := offsetsIn(t, recs)
		if len(got) > 0 {
			offset = got[len(got)-1] + 1
		}
	}
	if !throttled || offset < end {
		t.Fatalf("throttled %v, consumed to %d of %d", throttled, offset, end)
	}
}

// request_percentage throttles every request of the client with a
// throttle field, capped at one window as Kafka caps it.
func TestRequestPercentageThrottled(t *testing.T) {
	t.Parallel()
	b := quotaBroker(t)
	rc := dialRaw(t, b)
	mustSetQuotas(t, rc, quotaEntry(quotaEnt("client-id", "raw-test"), quotaOp("request_percentage", 0.0001)))
	var most int32
	for range 3 {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
		most = max(most, resp.ThrottleMillis)
	}
	if most <= 0 || most > 1000 {
		t.Fatalf("metadata throttle %d ms, want (0, 1000]", most)
	}
}

// A consumer's long poll is not request time: fetches that wait on an
// empty partition are not throttled by a request_percentage the waits
// alone would exceed many times over.
func TestRequestPercentageLongPoll(t *testing.T) {
	t.Parallel()
	b := quotaBroker(t)
	tp := mustTopic(t, b, "q", 1)
	rc := dialRaw(t, b)
	mustSetQuotas(t, rc, quotaEntry(quotaEnt("client-id", "raw-test"), quotaOp("request_percentage", 5)))
	for i := range 3 {
		req := newFetchReq(12)
		req.MaxWaitMillis = 300
		addPart(req, tp, 0, 0)
		if resp := rc.roundTrip(req).(*kmsg.FetchResponse); resp.ThrottleMillis != 0 {
			t.Fatalf("long poll %d throttled %d ms", i, resp.ThrottleMillis)
		}
	}
}
