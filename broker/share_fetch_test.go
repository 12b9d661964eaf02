package broker

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/partition"
)

// shareGroupsOn serves share groups (KIP-932).
func shareGroupsOn(c *Config) { c.GroupRebalanceProtocols = []string{"classic", "consumer", "share"} }

// shareJobs is a broker with share groups on (and mutate), a topic "jobs"
// of one partition holding records, share group "g" starting at offset
// 0, and the producer; the test's ctx bounds its requests.
func shareJobs(t *testing.T, ctx context.Context, records int, mutate ...func(*Config)) (*Broker, *partition.Topic, *kgo.Client) {
	t.Helper()
	b := newTestBroker(t, append([]func(*Config){shareGroupsOn}, mutate...)...)
	tp := cfgTopic(t, b, "jobs", 1, nil)
	pr := newTestClient(t, b, kgo.DefaultProduceTopic("jobs"))
	for i := range records {
		if err := pr.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	at0 := kadm.Offsets{}
	at0.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 0})
	if resp, err := kadm.NewClient(pr).AlterShareGroupOffsets(ctx, "g", at0); err != nil || resp.Error() != nil {
		t.Fatalf("AlterShareGroupOffsets: %v %v", err, resp.Error())
	}
	return b, tp, pr
}

// shareFetchOf is member's ShareFetch of group "g" opening its session on
// topic's partition 0: up to 10 records, waiting up to wait ms.
func shareFetchOf(topic [16]byte, member string, wait int32) *kmsg.ShareFetchRequest {
	req := kmsg.NewPtrShareFetchRequest()
	req.Version, req.GroupID, req.MemberID, req.MaxRecords, req.MaxWaitMillis = 2, kmsg.StringPtr("g"), kmsg.StringPtr(member), 10, wait
	req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: topic, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}}}}
	return req
}

// franz-go's share consumer (KIP-932) against the broker: two consumers
// of one share group read every record of a topic, each record delivered
// to one of them, acknowledged (accepted) as they poll on; once they
// closed, the group's start offsets are the partitions' ends, where a
// new consumer starts.
func TestShareConsumersReadEveryRecordOnce(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, shareGroupsOn)
	cfgTopic(t, b, "jobs", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pr := newTestClient(t, b, kgo.DefaultProduceTopic("jobs"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 40
	for i := range n {
		if err := pr.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "job-%d", i), Partition: int32(i % 2)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(pr)
	start := kadm.Offsets{}
	start.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 0})
	start.Add(kadm.Offset{Topic: "jobs", Partition: 1, At: 0})
	if resp, err := adm.AlterShareGroupOffsets(ctx, "workers", start); err != nil || resp.Error() != nil {
		t.Fatalf("AlterShareGroupOffsets: %v %v", err, resp.Error())
	}
	seen := map[string]int{}
	consumers := make([]*kgo.Client, 2)
	for i := range consumers {
		consumers[i] = newTestClient(t, b, kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"), kgo.FetchMaxWait(200*time.Millisecond))
	}
	for len(seen) < n && ctx.Err() == nil {
		for _, cl := range consumers {
			pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			for _, e := range fs.Errors() {
				if e.Err != context.DeadlineExceeded {
					t.Fatalf("poll: %v", e.Err)
				}
			}
			fs.EachRecord(func(r *kgo.Record) {
				seen[string(r.Value)]++
				r.Ack(kgo.AckAccept)
			})
		}
	}
	if len(seen) != n {
		t.Fatalf("read %d distinct records, want %d", len(seen), n)
	}
	for v, k := range seen {
		if k != 1 {
			t.Errorf("%s delivered %d times", v, k)
		}
	}
	for _, cl := range consumers {
		cl.Close() // sends the acknowledgements of the last poll
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		d, err := adm.DescribeShareGroupOffsets(ctx, "workers")
		if err != nil {
			return err
		}
		got := map[int32]int64{}
		for p, o := range d["workers"].Offsets["jobs"] {
			got[p] = o.StartOffset
		}
		if want := map[int32]int64{0: n / 2, 1: n / 2}; !maps.Equal(got, want) {
			return fmt.Errorf("start offsets %v, want %v", got, want)
		}
		return nil
	})
}

// The share protocol's rules over raw requests: sessions and their
// epochs, acquisition limits, acknowledgements of records another member
// holds, release and redelivery with delivery counts, and lock expiry.
func TestShareFetchSessionsLocksAndRedelivery(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, tp, pr := shareJobs(t, ctx, 10, func(c *Config) {
		c.GroupShareRecordLockDuration = time.Second
		c.GroupShareDeliveryCountLimit = 2
	})
	adm := kadm.NewClient(pr)
	at0 := kadm.Offsets{}
	at0.Add(kadm.Offset{Topic: "jobs", Partition: 0, At: 0})
	id := tp.ID()
	raw := dialRaw(t, b)
	fetch := func(member string, epoch, maxRecords int32, acks ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
		req := kmsg.NewPtrShareFetchRequest()
		req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch = 2, kmsg.StringPtr("g"), kmsg.StringPtr(member), epoch
		req.MaxRecords, req.BatchSize, req.MaxWaitMillis = maxRecords, maxRecords, 0
		req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: id, Partitions: []kmsg.ShareFetchRequestTopicPartition{
			{Partition: 0, PartitionMaxBytes: 1 << 20, AcknowledgementBatches: acks}}}}
		return raw.roundTrip(req).(*kmsg.ShareFetchResponse)
	}
	acquired := func(resp *kmsg.ShareFetchResponse) string {
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 {
			return fmt.Sprintf("error %d, %d topics", resp.ErrorCode, len(resp.Topics))
		}
		p := resp.Topics[0].Partitions[0]
		out := fmt.Sprintf("code %d ack %d:", p.ErrorCode, p.AcknowledgeErrorCode)
		for _, a := range p.AcquiredRecords {
			out += fmt.Sprintf(" %d-%d#%d", a.FirstOffset, a.LastOffset, a.DeliveryCount)
		}
		return out
	}
	if got := acquired(fetch("a", 0, 4)); got != "code 0 ack 0: 0-3#1" {
		t.Fatalf("a's first fetch: %s", got)
	}
	if got := acquired(fetch("b", 0, 4)); got != "code 0 ack 0: 4-7#1" {
		t.Fatalf("b's first fetch: %s", got)
	}
	if resp := fetch("a", 5, 4); resp.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("a fetch at the wrong epoch: %d", resp.ErrorCode)
	}
	if resp := fetch("c", 3, 4); resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("a fetch without a session: %d", resp.ErrorCode)
	}
	// b acknowledges a's records: refused, nothing settled.
	steal := kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: 0, LastOffset: 1, AcknowledgeTypes: []int8{1}}
	if got := acquired(fetch("b", 1, 0, steal)); got != "code 0 ack "+fmt.Sprint(kerr.InvalidRecordState.Code)+": 8-9#1" {
		t.Fatalf("b acknowledging a's records: %s", got)
	}
	// a accepts 0-1 and releases 2-3: they go to the next fetch, at their
	// second delivery.
	settle := kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: 0, LastOffset: 3, AcknowledgeTypes: []int8{1, 1, 2, 2}}
	if got := acquired(fetch("a", 1, 10, settle)); got != "code 0 ack 0: 2-3#2" {
		t.Fatalf("a's fetch after its acknowledgement: %s", got)
	}
	if d, err := adm.DescribeShareGroupOffsets(ctx, "g"); err != nil || d["g"].Offsets["jobs"][0].StartOffset != 2 {
		t.Fatalf("the start offset after 0-1 were accepted: %+v %v", d["g"].Offsets["jobs"][0], err)
	}
	// a's locks end: 2-3 have had their two deliveries and are archived;
	// b's 4-9 go to a at their second delivery.
	time.Sleep(1100 * time.Millisecond)
	if got := acquired(fetch("a", 2, 10)); got != "code 0 ack 0: 4-9#2" {
		t.Fatalf("a's fetch after every lock ended: %s", got)
	}
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.Version, ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = 2, kmsg.StringPtr("g"), kmsg.StringPtr("a"), -1
	ack.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: id, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{
		{Partition: 0, AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
			{FirstOffset: 4, LastOffset: 9, AcknowledgeTypes: []int8{1}}}}}}}
	if resp := raw.roundTrip(ack).(*kmsg.ShareAcknowledgeResponse); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ShareAcknowledge closing a's session: %+v", resp)
	}
	if d, err := adm.DescribeShareGroupOffsets(ctx, "g"); err != nil || d["g"].Offsets["jobs"][0].StartOffset != 10 {
		t.Fatalf("the start offset once everything settled: %+v %v", d["g"].Offsets["jobs"][0], err)
	}
	// An admin resets the group to 0 while it has no members: the next
	// member's session starts there (found in review: the leader kept
	// its own start offset and wrote it back over the reset).
	b2 := kmsg.NewPtrShareAcknowledgeRequest()
	b2.Version, b2.GroupID, b2.MemberID, b2.ShareSessionEpoch = 2, kmsg.StringPtr("g"), kmsg.StringPtr("b"), -1
	raw.roundTrip(b2)
	if resp, err := adm.AlterShareGroupOffsets(ctx, "g", at0); err != nil || resp.Error() != nil {
		t.Fatalf("resetting to 0: %v %v", err, resp.Error())
	}
	if got := acquired(fetch("c", 0, 10)); got != "code 0 ack 0: 0-9#1" {
		t.Fatalf("a new member's fetch after the reset: %s, want 0-9 delivered anew", got)
	}
}

// The node's share sessions are bounded: opening one past the bound
// evicts the least recently used, whose next request is
// SHARE_SESSION_NOT_FOUND.
func TestShareSessionsAreBounded(t *testing.T) {
	t.Parallel()
	s := newShares()
	open := func(member string) {
		t.Helper()
		if _, err := s.openSession("g", member, 0); err != nil { // now at epoch 1
			t.Fatal(err)
		}
	}
	for i := range maxShareSessions {
		open(fmt.Sprint("m", i))
	}
	open("m1") // m0 is now the least recently used
	open("newcomer")
	if len(s.sessions) != maxShareSessions {
		t.Fatalf("%d sessions, want the bound %d", len(s.sessions), maxShareSessions)
	}
	if _, err := s.openSession("g", "m0", 1); err != kerr.ShareSessionNotFound {
		t.Fatalf("the evicted session's next request: %v, want SHARE_SESSION_NOT_FOUND", err)
	}
	if _, err := s.openSession("g", "m1", 1); err != nil {
		t.Fatalf("a session used since: %v", err)
	}
}

// A share fetch with nothing to acquire waits for an append (up to
// MaxWaitMillis) and answers it at once.
func TestShareFetchLongPoll(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, tp, pr := shareJobs(t, ctx, 0)
	req := shareFetchOf(tp.ID(), "m", 10000)
	go func() {
		time.Sleep(300 * time.Millisecond)
		pr.ProduceSync(ctx, kgo.StringRecord("late"))
	}()
	began := time.Now()
	resp := dialRaw(t, b).roundTrip(req).(*kmsg.ShareFetchResponse)
	took := time.Since(began)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions[0].AcquiredRecords) != 1 {
		t.Fatalf("the long poll answered %+v", resp)
	}
	if took > 5*time.Second {
		t.Fatalf("the long poll answered after %v: the append did not wake it", took)
	}
	// Acknowledgements in a request that opens a session are refused
	// whole: the session holds nothing.
	req.ShareSessionEpoch, req.MaxWaitMillis = 0, 0
	req.Topics[0].Partitions[0].AcknowledgementBatches = []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{
		{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}
	if resp := dialRaw(t, b).roundTrip(req).(*kmsg.ShareFetchResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("acknowledgements at epoch 0: %d, want INVALID_REQUEST", resp.ErrorCode)
	}
}

// A member's release wakes another member's long poll: the released
// records are there to acquire at once, not at the poll's end.
func TestShareReleaseWakesALongPoll(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, tp, _ := shareJobs(t, ctx, 1)
	fetch := func(member string, wait int32) *kmsg.ShareFetchRequest { return shareFetchOf(tp.ID(), member, wait) }
	if resp := dialRaw(t, b).roundTrip(fetch("a", 0)).(*kmsg.ShareFetchResponse); len(resp.Topics) != 1 ||
		len(resp.Topics[0].Partitions[0].AcquiredRecords) != 1 {
		t.Fatalf("a's fetch: %+v", resp)
	}
	answered := make(chan *kmsg.ShareFetchResponse, 1)
	began := time.Now()
	rawB := dialRaw(t, b)
	go func() { answered <- rawB.roundTrip(fetch("b", 10000)).(*kmsg.ShareFetchResponse) }()
	time.Sleep(300 * time.Millisecond) // b is parked
	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.Version, ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = 2, kmsg.StringPtr("g"), kmsg.StringPtr("a"), 1
	ack.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: tp.ID(), Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{
		{Partition: 0, AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
			{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{2}}}}}}}
	if resp := dialRaw(t, b).roundTrip(ack).(*kmsg.ShareAcknowledgeResponse); resp.ErrorCode != 0 {
		t.Fatalf("a's release: %+v", resp)
	}
	resp := <-answered
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions[0].AcquiredRecords) != 1 ||
		resp.Topics[0].Partitions[0].AcquiredRecords[0].DeliveryCount != 2 {
		t.Fatalf("b's long poll: %+v", resp)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("b's long poll answered after %v: the release did not wake it", took)
	}
}

// A lock's end wakes another member's long poll: the records are there
// to acquire again at once, not at the poll's end.
func TestShareLockExpiryWakesALongPoll(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, tp, _ := shareJobs(t, ctx, 1, func(c *Config) { c.GroupShareRecordLockDuration = time.Second })
	fetch := func(member string, wait int32) *kmsg.ShareFetchRequest { return shareFetchOf(tp.ID(), member, wait) }
	if resp := dialRaw(t, b).roundTrip(fetch("a", 0)).(*kmsg.ShareFetchResponse); len(resp.Topics) != 1 ||
		len(resp.Topics[0].Partitions[0].AcquiredRecords) != 1 {
		t.Fatalf("a's fetch: %+v", resp)
	}
	began := time.Now()
	resp := dialRaw(t, b).roundTrip(fetch("b", 10000)).(*kmsg.ShareFetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions[0].AcquiredRecords) != 1 ||
		resp.Topics[0].Partitions[0].AcquiredRecords[0].DeliveryCount != 2 {
		t.Fatalf("b's long poll: %+v", resp)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("b's long poll answered after %v: a's lock ending (1 s) did not wake it", took)
	}
}
