package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/topicid"
	"github.com/kmirror/kmirror/mirrorapi"
)

// The DR copy under ordinary source events that once destroyed or
// misreported it (issue 16): a topic deleted and recreated at the source,
// a source that lost records, failures that are retried. In each, the
// local log must keep every byte it holds unless the operator allowed
// otherwise, and the partition must say what happened.

// rawLog reads every batch of topic's partitions from cl (raw bytes, by
// partition), for before/after comparisons.
func rawLog(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, ends map[int32]int64) map[int32][]byte {
	t.Helper()
	out := map[int32][]byte{}
	for p, end := range ends {
		out[p] = readRaw(t, ctx, cl, -1, topic, p, 0, end)
	}
	return out
}

// recreateSourceTopic deletes topic at the source and creates it again
// with the same name and partition count: a new topic id, offsets from 0.
func recreateSourceTopic(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, parts int32) {
	t.Helper()
	if _, err := adm.DeleteTopics(ctx, topic); err != nil {
		t.Fatalf("deleting source topic %s: %v", topic, err)
	}
	createTopic(t, ctx, adm, topic, parts, nil)
}

// waitFailedFor waits until every partition of topic is FAILED, not
// retried, with an error containing each of want.
func (n *ctlNode) waitFailedFor(ctx context.Context, mirror, topic string, parts int, want ...string) {
	n.t.Helper()
	testutil.CheckFor(n.t, mirrorCatchUp, testutil.Named(fmt.Sprintf("%s FAILED naming %q", topic, want), func() error {
		ps := n.describe(ctx, mirror)[topic]
		if len(ps) != parts {
			return fmt.Errorf("%d partitions described: %s", len(ps), describePartitions(ps))
		}
		for _, p := range ps {
			if p.StateValue != "FAILED" || p.RetryAttempt != -1 || p.ErrorMessage == nil {
				return errors.New(describePartitions(ps))
			}
			for _, w := range want {
				if !strings.Contains(*p.ErrorMessage, w) {
					return fmt.Errorf("partition %d: error %q lacks %q", p.PartitionIndex, *p.ErrorMessage, w)
				}
			}
		}
		return nil
	}))
}

// checkLogKept checks that the node still holds exactly the bytes before.
func (n *ctlNode) checkLogKept(ctx context.Context, topic string, ends map[int32]int64, before map[int32][]byte) {
	n.t.Helper()
	if got := endOffsets(n.t, ctx, n.adm, topic); fmt.Sprint(got) != fmt.Sprint(ends) {
		n.t.Fatalf("node %s: %s end offsets %v, want %v: the copy was cut", n.name, topic, got, ends)
	}
	for p, raw := range rawLog(n.t, ctx, n.cl, topic, ends) {
		if !bytes.Equal(raw, before[p]) {
			n.t.Fatalf("node %s: %s-%d bytes changed: %s", n.name, topic, p, diffRaw(before[p], raw))
		}
	}
}

// checkSourceTopicIDs checks what Describe says of topic's source: that
// it has topic ids (the copy has the source's), or that it has none and
// the copy's id was assigned here.
func (n *ctlNode) checkSourceTopicIDs(ctx context.Context, mirror, topic string, want bool) {
	n.t.Helper()
	req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
	req.MirrorNames = []string{mirror}
	resp := n.rpc(ctx, req).(*mirrorapi.DescribeClusterMirrorsResponse)
	for _, m := range resp.Mirrors {
		for _, t := range m.Topics {
			if t.TopicName == topic {
				if t.NoSourceTopicIDs == want || t.TopicID == ([16]byte{}) {
					n.t.Fatalf("node %s: %s described with id %s, source without topic ids %v; want ids at the source %v",
						n.name, topic, topicid.String(t.TopicID), t.NoSourceTopicIDs, want)
				}
				return
			}
		}
	}
	n.t.Fatalf("node %s: %s not described: %+v", n.name, topic, resp)
}

// TestMirrorTrustTopicRecreated deletes and recreates a mirrored topic at
// the source, with fewer records: live (the periodic metadata sync off, so
// the fetchers alone must notice), while the node is down, and from a
// source without topic ids (Kafka before 2.8). The copy keeps every
// record, and every partition is FAILED, not retried, saying why: both
// topic ids, or the batch that differs. A recover runs the checks again
// and cuts nothing.
func TestMirrorTrustTopicRecreated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		down     bool
		srcOpts  []kfake.Opt
		noIDs    bool
		wantMsgs func(oldID, newID string) []string
	}{
		{name: "live", wantMsgs: func(o, n string) []string { return []string{o, n, "recreated"} }},
		{name: "while-down", down: true, wantMsgs: func(o, n string) []string { return []string{o, n, "recreated"} }},
		{name: "no-topic-ids", srcOpts: []kfake.Opt{kfake.MaxVersions(kversion.V2_7_0())}, noIDs: true,
			wantMsgs: func(string, string) []string { return []string{"not the one copied", "no topic ids"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 40*time.Second)
			src, srcCl := startSource(t, tc.srcOpts...)
			srcAdm := kadm.NewClient(srcCl)
			const topic, parts = "ledger", 2
			createTopic(t, ctx, srcAdm, topic, parts, nil)
			pr := manualProducer(t, src.ListenAddrs())
			for p := range int32(parts) {
				produceBatchesTo(t, ctx, pr, topic, p, 30, 10, "old")
			}
			oldID := sourceTopic(t, ctx, srcAdm, topic).id

			n := startCtlNode(t, "rec", control.Config{RefreshInterval: -1})
			n.ok(ctx, createReq("m", src.ListenAddrs()[0]))
			n.ok(ctx, startReq("m", topic))
			ends := listOffsets(t, ctx, srcAdm, topic, false)
			n.waitMirrored(ctx, "m", topic, ends)
			before := rawLog(t, ctx, n.cl, topic, ends)
			n.checkSourceTopicIDs(ctx, "m", topic, !tc.noIDs)

			if tc.down {
				n.close()
			}
			recreateSourceTopic(t, ctx, srcAdm, topic, parts)
			pr = manualProducer(t, src.ListenAddrs()) // the old one knows the old topic id
			for p := range int32(parts) {
				produceBatchesTo(t, ctx, pr, topic, p, 5, 10, "new")
			}
			newID := sourceTopic(t, ctx, srcAdm, topic).id
			if tc.down {
				n.open()
			}
			want := tc.wantMsgs(topicid.String(oldID), topicid.String(newID))
			if tc.noIDs && (oldID != [16]byte{} || newID != [16]byte{}) {
				t.Fatalf("a source capped at Kafka 2.7 gave topic ids %x, %x", oldID, newID)
			}
			first := want
			if tc.noIDs {
				// Seen while the new topic was still empty, the recreation
				// looks like a source that lost every record: nothing to
				// compare yet. The recover below compares.
				first = []string{"copy is kept"}
			}
			n.waitFailedFor(ctx, "m", topic, parts, first...)
			n.checkLogKept(ctx, topic, ends, before)

			n.ok(ctx, recoverReq("m", topic))
			n.waitFailedFor(ctx, "m", topic, parts, want...)
			n.checkLogKept(ctx, topic, ends, before)
			checkReadOnly(t, ctx, n.addr(), topic)
		})
	}
}

// divergingSource answers every mirror fetch of ft/0 with a diverging
// epoch at divergeAt (the source lost what follows, as after an unclean
// leader election) while diverge is set.
func divergingSource(src *kfake.Cluster, ft fetchTopic, end, divergeAt int64, diverge func() bool) {
	src.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		if !isMirrorFetch(r) {
			return nil, nil, false
		}
		src.KeepControl()
		if !diverge() {
			return nil, nil, false
		}
		return craftFetch(r.(*kmsg.FetchRequest), ft, 0, func(sp *kmsg.FetchResponseTopicPartition) {
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = end, end, 0
			sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = 0, divergeAt
		}), nil, true
	})
}

// TestMirrorTrustUncleanElection has the source answer a mirroring
// partition with a divergence below the copy's end. With
// mirror.unclean.leader.election.enable unset the copy is kept and the
// partition FAILED, not retried, telling the operator the options; set,
// the partition goes through ULE_RECOVERY, is cut where the source's log
// ends, and mirrors on to an identical copy.
func TestMirrorTrustUncleanElection(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allowed=%v", allow), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 40*time.Second)
			src, srcCl := startSource(t)
			srcAdm := kadm.NewClient(srcCl)
			const topic = "ule"
			createTopic(t, ctx, srcAdm, topic, 1, nil)
			pr := manualProducer(t, src.ListenAddrs())
			end := produceBatchesTo(t, ctx, pr, topic, 0, 10, 10, "a")

			n := startCtlNode(t, "ule", control.Config{RefreshInterval: -1})
			n.ok(ctx, createReq("m", src.ListenAddrs()[0], "mirror.unclean.leader.election.enable", fmt.Sprint(allow)))
			n.ok(ctx, startReq("m", topic))
			ends := map[int32]int64{0: end}
			n.waitMirrored(ctx, "m", topic, ends)
			before := rawLog(t, ctx, n.cl, topic, ends)
			bs := splitBatches(t, before[0])
			cut := bs[len(bs)/2]
			divergeAt := cut.BaseOffset() + 1

			var diverge atomic.Bool
			diverge.Store(true)
			divergingSource(src, sourceTopic(t, ctx, srcAdm, topic), end, divergeAt, diverge.Load)
			if !allow {
				n.waitFailedFor(ctx, "m", topic, 1, "no longer holds", "mirror.unclean.leader.election.enable", fmt.Sprint(end))
				diverge.Store(false)
				n.checkLogKept(ctx, topic, ends, before)
				return
			}
			testutil.CheckFor(t, mirrorCatchUp, testutil.Named(fmt.Sprintf("the copy cut to %d", cut.BaseOffset()), func() error {
				if got := endOffsets(t, ctx, n.adm, topic)[0]; got != cut.BaseOffset() {
					return fmt.Errorf("end offset %d", got)
				}
				return nil
			}))
			diverge.Store(false)
			n.waitMirrored(ctx, "m", topic, ends)
			checkSameLog(t, ctx, srcCl, n.cl, topic)
		})
	}
}

// TestMirrorTrustRetryBackoff fails a partition with a retriable error on
// every attempt (a corrupt batch): the attempt count rises across retries,
// FAILED is what describe shows between attempts, retries stop at
// mirror.failed.retry.max.attempts, and a recover after the fault is gone
// mirrors again.
func TestMirrorTrustRetryBackoff(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 40*time.Second)
	src, srcCl := startSource(t)
	srcAdm := kadm.NewClient(srcCl)
	const topic, maxAttempts = "flaky", 4
	createTopic(t, ctx, srcAdm, topic, 1, nil)
	pr := manualProducer(t, src.ListenAddrs())
	end := produceBatchesTo(t, ctx, pr, topic, 0, 3, 10, "a")
	raw := readRaw(t, ctx, srcCl, -1, topic, 0, 0, end)
	corrupt := bytes.Clone(raw)
	corrupt[len(splitBatches(t, raw)[0])-3] ^= 0x5a // the first batch: every attempt fetches at 0 again
	ft := sourceTopic(t, ctx, srcAdm, topic)
	var broken atomic.Bool
	broken.Store(true)
	src.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		src.KeepControl()
		if req, ok := r.(*kmsg.FetchRequest); !ok || !isMirrorFetch(r) || !broken.Load() || !fetchesAt(req, ft, 0, 0) {
			return nil, nil, false
		}
		return craftFetch(r.(*kmsg.FetchRequest), ft, 0, func(sp *kmsg.FetchResponseTopicPartition) {
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = end, end, 0
			sp.RecordBatches = corrupt
		}), nil, true
	})

	n := startCtlNode(t, "retry", control.Config{RetryInitial: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		RetryMaxAttempts: maxAttempts, RefreshInterval: -1})
	n.ok(ctx, createReq("m", src.ListenAddrs()[0]))
	n.ok(ctx, startReq("m", topic))
	seen := map[int32]bool{} // attempts seen while FAILED
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named(fmt.Sprintf("FAILED at attempt %d of %d", maxAttempts, maxAttempts), func() error {
		p := n.describe(ctx, "m")[topic][0]
		if p.StateValue == "FAILED" {
			seen[p.RetryAttempt] = true
		}
		if !seen[maxAttempts] {
			return fmt.Errorf("attempts seen while FAILED: %v; now %s", seen, describePartitions([]mirrorapi.DescribeClusterMirrorsResponsePartition{p}))
		}
		return nil
	}))
	if len(seen) < 2 {
		t.Fatalf("attempts seen while FAILED: %v: the count did not rise across retries", seen)
	}
	// No attempt past the limit: over 5 times the longest backoff, the
	// partition stays FAILED at the last attempt.
	for until := time.Now().Add(5 * 200 * time.Millisecond); time.Now().Before(until); {
		p := n.describe(ctx, "m")[topic][0]
		if p.StateValue != "FAILED" || p.RetryAttempt != maxAttempts {
			t.Fatalf("past the last attempt: %s", describePartitions([]mirrorapi.DescribeClusterMirrorsResponsePartition{p}))
		}
	}
	broken.Store(false)
	n.ok(ctx, recoverReq("m", topic))
	n.waitMirrored(ctx, "m", topic, map[int32]int64{0: end})
	checkSameLog(t, ctx, srcCl, n.cl, topic)
}

// deadBrokers dials for a mirror and plays kill -9 of source brokers: a
// killed broker's address refuses connections and the open ones break.
// The test's own clients dial kfake directly, so to them the broker lives.
type deadBrokers struct {
	mu    sync.Mutex
	dead  map[string]bool
	conns map[string][]net.Conn
}

var errBrokerKilled = errors.New("tests: connection refused (source broker killed)")

func (d *deadBrokers) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead[addr] {
		return nil, errBrokerKilled
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err == nil {
		d.conns[addr] = append(d.conns[addr], c)
	}
	return c, err
}

func (d *deadBrokers) kill(addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead[addr] = true
	for _, c := range d.conns[addr] {
		c.Close()
	}
	delete(d.conns, addr)
}

// TestMirrorTrustSourceBrokerKilled kills the source broker that leads one
// partition, leaving it the leader at the source for a while (as Kafka
// does until the broker's session times out): the partition is visibly
// stalled, not shown as current. The mirror is restarted meanwhile, then
// the source elects a new leader: the partition moves to it within the
// fetch backoff and catches up, byte for byte, with no restart needed.
func TestMirrorTrustSourceBrokerKilled(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 40*time.Second)
	dialer := &deadBrokers{dead: map[string]bool{}, conns: map[string][]net.Conn{}}
	env := newMirrorEnv(t, ctx, fetch.MirrorConfig{Dialer: dialer.dial, RequestTimeout: time.Second}, kfake.NumBrokers(3))
	const topic, parts = "killed", 3
	env.createSourceTopic(topic, parts, nil)
	for p := range int32(parts) {
		if err := env.src.MoveTopicPartition(topic, p, p); err != nil {
			t.Fatal(err)
		}
	}
	bm, err := env.srcAdm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[int32]string{}
	for _, b := range bm.Brokers {
		addrs[b.NodeID] = net.JoinHostPort(b.Host, fmt.Sprint(b.Port))
	}
	pr := manualProducer(t, env.seeds())
	for p := range int32(parts) {
		produceBatchesTo(t, ctx, pr, topic, p, 5, 10, "a")
	}
	env.mirrorTopic(topic)
	env.waitCaughtUp(topic)

	dialer.kill(addrs[1]) // leads partition 1
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named("partition 1 reported stalled", func() error {
		if st := env.status(topic, 1); !st.Stalled {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	}))
	if st := env.status(topic, 0); st.Stalled {
		t.Fatalf("partition 0, led by a live broker, reported stalled: %+v", st)
	}
	env.mode = fetch.StartResume // as a node restart resumes them
	for p := range int32(parts) {
		env.stopPartition(topic, p)
		env.startPartition(topic, p)
	}
	for p := range int32(parts) {
		produceBatchesTo(t, ctx, pr, topic, p, 3, 10, "b")
	}
	if err := env.src.MoveTopicPartition(topic, 1, 0); err != nil { // the source's new leader
		t.Fatal(err)
	}
	env.waitCaughtUp(topic)
	env.checkIdentical(topic)
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named("partition 1 no longer stalled", func() error {
		if st := env.status(topic, 1); st.Stalled || st.SourceLeader != 0 {
			return fmt.Errorf("status %+v, want fetching from broker 0", st)
		}
		return nil
	}))
}

// TestMirrorTrustBatchOffsets answers mirror fetches with the source's
// batches whose base offset, a field outside the CRC, changed in transit:
// moved past the source high watermark, or back into the batch before it.
// Nothing from the bad batch on is appended (no hole, no overlap), the
// partition fails naming the offsets, and a restart once the source
// answers truly mirrors an identical copy.
func TestMirrorTrustBatchOffsets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		move func(bs []batch.Batch) // patches bs[1]
		want string
	}{
		{name: "beyond-high-watermark", move: func(bs []batch.Batch) { bs[1].SetBaseOffset(bs[1].BaseOffset() + 1000) },
			want: "beyond the source high watermark"},
		{name: "overlapping", move: func(bs []batch.Batch) { bs[1].SetBaseOffset(bs[0].BaseOffset() + 1) },
			want: "does not follow the batch before it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 30*time.Second)
			env := newMirrorEnv(t, ctx, fetch.MirrorConfig{})
			const topic = "offsets"
			env.createSourceTopic(topic, 1, nil)
			pr := manualProducer(t, env.seeds())
			end := produceBatchesTo(t, ctx, pr, topic, 0, 4, 10, "a")
			raw := readRaw(t, ctx, env.srcCl, env.src.LeaderFor(topic, 0), topic, 0, 0, end)
			bad := bytes.Clone(raw)
			bs := splitBatches(t, bad)
			tc.move(bs)
			if err := bs[1].Verify(); err != nil {
				t.Fatalf("the patched batch fails its CRC (%v): the test would not show what it means to", err)
			}
			ft := sourceTopic(t, ctx, env.srcAdm, topic)
			served := serveFirstFetch(env.src, ft, end, bad)
			env.mirrorTopic(topic)
			testutil.CheckFor(t, mirrorCatchUp, testutil.Named("the partition failing on the moved batch", func() error {
				st := env.status(topic, 0)
				if st.State != fetch.StateFailed || st.Err == nil || !strings.Contains(st.Err.Error(), tc.want) ||
					!strings.Contains(st.Err.Error(), fmt.Sprint(bs[1].BaseOffset())) {
					return fmt.Errorf("status %+v", st)
				}
				return nil
			}))
			if !served.Load() {
				t.Fatal("failed without the crafted response")
			}
			if leo := env.localLogEnd(topic, 0); leo != bs[0].NextOffset() {
				t.Fatalf("local log end %d, want %d: only the batch before the moved one may be appended", leo, bs[0].NextOffset())
			}
			env.startPartition(topic, 0)
			env.waitCaughtUp(topic)
			env.checkIdentical(topic)
		})
	}
}
