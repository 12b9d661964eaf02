package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// The stop's final sync (issue 16 item 5): StopMirrorTopics makes the
// copy final, syncs the stopped topics' group offsets and configs one
// last time when the source answers (within a bounded time), and reports
// per topic whether it did and where the copy ended against the source.
// The periodic sync is pushed out of the way (an hour), so only the final
// sync can have moved anything.

// stopWithReport stops topics and returns the answer's topics by name,
// failing the test on any error code.
func stopWithReport(t *testing.T, ctx context.Context, n *ctlNode, mirror string, topics ...string) map[string]mirrorapi.MirrorTopicsResponseTopic {
	t.Helper()
	resp := n.rpc(ctx, stopReq(mirror, topics...)).(*mirrorapi.StopMirrorTopicsResponse)
	out := map[string]mirrorapi.MirrorTopicsResponseTopic{}
	for _, rt := range resp.Topics {
		out[rt.Name] = rt
	}
	if resp.ErrorCode != 0 || len(out) != len(topics) {
		t.Fatalf("StopMirrorTopics: %v", answerOf(resp))
	}
	for _, rt := range out {
		if rt.ErrorCode != 0 {
			t.Fatalf("StopMirrorTopics: %v", answerOf(resp))
		}
	}
	return out
}

func showReport(rt mirrorapi.MirrorTopicsResponseTopic) string {
	msg := ""
	if rt.FinalSyncMessage != nil {
		msg = *rt.FinalSyncMessage
	}
	s := fmt.Sprintf("%s: final sync %d %q;", rt.Name, rt.FinalSync, msg)
	for _, p := range rt.Partitions {
		s += fmt.Sprintf(" [%d src %d at %d dst %d lag %d]", p.PartitionIndex, p.SourceOffset, p.SourceOffsetMillis,
			p.DestinationOffset, p.Lag)
	}
	return s
}

// checkCopyEnd checks the report's partitions: the source end offsets
// src, read no earlier than since, and the destination ends dst.
func checkCopyEnd(t *testing.T, rt mirrorapi.MirrorTopicsResponseTopic, src, dst map[int32]int64, since time.Time) {
	t.Helper()
	if len(rt.Partitions) != len(dst) {
		t.Fatalf("stop report %s: want %d partitions", showReport(rt), len(dst))
	}
	for _, p := range rt.Partitions {
		s, d := src[p.PartitionIndex], dst[p.PartitionIndex]
		if p.SourceOffset != s || p.DestinationOffset != d || p.Lag != s-d || p.SourceOffsetMillis < since.UnixMilli() ||
			p.SourceOffsetMillis > time.Now().UnixMilli() {
			t.Fatalf("stop report %s: want partition %d at source %d (read after %d), destination %d, lag %d",
				showReport(rt), p.PartitionIndex, s, since.UnixMilli(), d, s-d)
		}
	}
}

// TestStopFinalSync is the reproduction: a consumer group
// commits 3,000 more records at the source right before the stop; after
// the stop its offsets here are the new ones, and so is a topic config
// changed at the source just before. Describe shows when the last
// periodic group sync ran, which the final sync does not change.
func TestStopFinalSync(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	src, srcCl := startSource(t)
	srcAdm := kadm.NewClient(srcCl)
	const (
		topic = "promote"
		group = "promote-app"
		parts = 3
	)
	createTopic(t, ctx, srcAdm, topic, parts, nil)
	pr := manualProducer(t, src.ListenAddrs())
	for p := range int32(parts) {
		produceBatchesTo(t, ctx, pr, topic, p, 20, 100, "a") // 2,000 records a partition
	}
	ends := listOffsets(t, ctx, srcAdm, topic, false)
	cfg := nodetest.Config(t)
	cfg.GroupRebalanceProtocols = []string{"classic", "consumer", "share"}
	n := newCtlNode(t, "fs", cfg, control.Config{RefreshInterval: time.Hour})
	n.open()
	t.Cleanup(n.close)
	n.ok(ctx, createReq("fs", src.ListenAddrs()[0]))
	n.ok(ctx, startReq("fs", topic))
	n.waitMirrored(ctx, "fs", topic, ends)
	for p := range int32(parts) {
		commitAt(t, ctx, srcAdm, group, topic, p, 1000)
	}
	beforeSync := time.Now()
	syncNow(t, n, "fs")
	lastSync := n.ctl.LastGroupSync("fs")
	if lastSync.Before(beforeSync.Truncate(time.Millisecond)) || lastSync.After(time.Now()) {
		t.Fatalf("LastGroupSync %v, want the cycle just run (after %v)", lastSync, beforeSync)
	}
	for p := range int32(parts) {
		wantCommitted(t, ctx, n.adm, group, topic, p, 1000)
	}

	// Just before the failover: 3,000 more records consumed and committed
	// at the source, a share group's start offsets set there (KIP-932),
	// and a config changed there.
	shareOffs := kadm.Offsets{}
	for p := range int32(parts) {
		commitAt(t, ctx, srcAdm, group, topic, p, 2000)
		shareOffs.Add(kadm.Offset{Topic: topic, Partition: p, At: 1500})
	}
	if resp, err := srcAdm.AlterShareGroupOffsets(ctx, "promote-queue", shareOffs); err != nil || resp.Error() != nil {
		t.Fatalf("setting the share group's start offsets at the source: %v %v", err, resp.Error())
	}
	setTopicConfig(t, ctx, srcAdm, topic, "retention.ms", "123456789")
	began := time.Now()
	rt := stopWithReport(t, ctx, n, "fs", topic)[topic]
	n.checkStates(ctx, "fs", topic, parts, "STOPPED")
	for p := range int32(parts) {
		wantCommitted(t, ctx, n.adm, group, topic, p, 2000)
	}
	wantTopicConfig(t, ctx, n.adm, topic, "retention.ms", "123456789")
	shared, err := n.adm.DescribeShareGroupOffsets(ctx, "promote-queue")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(parts) {
		if o := shared["promote-queue"].Offsets[topic][p]; o.StartOffset != 1500 {
			t.Fatalf("the share group's start offset of %s-%d after the stop: %+v (%v), want 1500", topic, p, o,
				shared["promote-queue"].Err)
		}
	}
	// The share group's consumers resume here where they stopped there:
	// each record from 1500 on, once.
	sc := nodetest.Client(t, []string{n.addr()}, kgo.ShareGroup("promote-queue"), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(200*time.Millisecond))
	got := map[int32]map[int64]bool{}
	for total := 0; total < parts*500 && ctx.Err() == nil; {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := sc.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < 1500 || got[r.Partition][r.Offset] {
				t.Fatalf("the share consumer read %s-%d at %d: before the synced start offset 1500, or again",
					topic, r.Partition, r.Offset)
			}
			if got[r.Partition] == nil {
				got[r.Partition] = map[int64]bool{}
			}
			got[r.Partition][r.Offset] = true
			total++
		})
	}
	for p := range int32(parts) {
		if len(got[p]) != 500 {
			t.Fatalf("the share consumer read %d records of %s-%d, want the 500 from the synced start offset", len(got[p]), topic, p)
		}
	}
	if rt.FinalSync != mirrorapi.FinalSyncDone || rt.FinalSyncMessage != nil {
		t.Fatalf("stop report %s: want the final sync done", showReport(rt))
	}
	checkCopyEnd(t, rt, ends, ends, began)

	req := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
	req.MirrorNames = []string{"fs"}
	d := n.rpc(ctx, req).(*mirrorapi.DescribeClusterMirrorsResponse)
	if len(d.Mirrors) != 1 || d.Mirrors[0].LastGroupSyncMillis != lastSync.UnixMilli() {
		t.Fatalf("Describe: mirrors %+v, want LastGroupSyncMillis %d", d.Mirrors, lastSync.UnixMilli())
	}
}

// TestStopReportsRecordsBehind is the FAILED partition: a
// corrupt source batch fails partition 0 of a topic (retries pushed past
// the test) while the source holds 100 records there. The stop still
// syncs, and reports how far behind the copy was: the source's end, the
// copy's, and the difference.
func TestStopReportsRecordsBehind(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	src, srcCl := startSource(t)
	const topic = "behind"
	createTopic(t, ctx, kadm.NewClient(srcCl), topic, 1, nil)
	pr := manualProducer(t, src.ListenAddrs())
	end := produceBatchesTo(t, ctx, pr, topic, 0, 10, 10, "a")
	badAt, _ := corruptFirstFetch(t, ctx, src, srcCl, topic, end)
	n := startCtlNode(t, "bh", control.Config{RefreshInterval: time.Hour, RetryInitial: time.Hour, RetryMax: time.Hour})
	n.ok(ctx, createReq("bh", src.ListenAddrs()[0]))
	n.ok(ctx, startReq("bh", topic))
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named("partition 0 FAILED", func() error {
		if ps := n.describe(ctx, "bh")[topic]; len(ps) != 1 || ps[0].StateValue != "FAILED" {
			return errors.New(describePartitions(ps))
		}
		return nil
	}))
	began := time.Now()
	rt := stopWithReport(t, ctx, n, "bh", topic)[topic]
	if rt.FinalSync != mirrorapi.FinalSyncDone {
		t.Fatalf("stop report %s: want the final sync done", showReport(rt))
	}
	checkCopyEnd(t, rt, map[int32]int64{0: end}, map[int32]int64{0: badAt}, began)
	n.checkStates(ctx, "bh", topic, 1, "STOPPED")
}

// TestStopSourceUnreachable: a source that stopped answering holds the
// stop up for the bounded time at most (min(source timeout, 10 s), here
// 2 s), one that refuses connections not at all; either way the stop
// goes on, reports the final sync skipped with the reason, and the last
// source offsets the fetcher saw. Only the fetches already flowing are
// still answered: every other request has its connection closed
// (refused) or is never answered (silent).
func TestStopSourceUnreachable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		cutOff func(t *testing.T, src *kfake.Cluster)
	}{
		{"refused", func(t *testing.T, src *kfake.Cluster) {
			src.Control(func(r kmsg.Request) (kmsg.Response, error, bool) {
				src.KeepControl()
				if r.Key() == int16(kmsg.Fetch) {
					return nil, nil, false
				}
				return nil, errors.New("the source is unreachable"), true
			})
		}},
		{"silent", func(t *testing.T, src *kfake.Cluster) {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) }) // before the source closes
			src.Control(func(r kmsg.Request) (kmsg.Response, error, bool) {
				src.KeepControl()
				if r.Key() == int16(kmsg.Fetch) {
					return nil, nil, false
				}
				src.SleepControl(func() { <-release })
				return nil, errors.New("the source is unreachable"), true
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 30*time.Second)
			src, srcCl := startSource(t)
			srcAdm := kadm.NewClient(srcCl)
			const topic = "cut-off"
			createTopic(t, ctx, srcAdm, topic, 2, nil)
			produceTo(t, ctx, manualProducer(t, src.ListenAddrs()), topic, 2, 7, "a")
			ends := listOffsets(t, ctx, srcAdm, topic, false)
			const sourceTimeout = 2 * time.Second
			n := startCtlNode(t, "unr", control.Config{RefreshInterval: time.Hour, SourceTimeout: sourceTimeout})
			n.ok(ctx, createReq("unr", src.ListenAddrs()[0]))
			mirroring := time.Now()
			n.ok(ctx, startReq("unr", topic))
			n.waitMirrored(ctx, "unr", topic, ends)

			tc.cutOff(t, src)
			began := time.Now()
			rt := stopWithReport(t, ctx, n, "unr", topic)[topic]
			if took := time.Since(began); took > sourceTimeout+3*time.Second {
				t.Fatalf("the stop took %v with the source unreachable; the final sync is bounded by %v", took, sourceTimeout)
			}
			if rt.FinalSync != mirrorapi.FinalSyncSkipped || rt.FinalSyncMessage == nil || !strings.Contains(*rt.FinalSyncMessage, "unreachable") {
				t.Fatalf("stop report %s: want the final sync skipped, the source unreachable", showReport(rt))
			}
			// The source offsets are the last the fetcher saw: the ends,
			// read at some time since the mirror started.
			checkCopyEnd(t, rt, ends, ends, mirroring)
			n.checkStates(ctx, "unr", topic, 2, "STOPPED")
			produceTo(t, ctx, manualProducer(t, []string{n.addr()}), topic, 2, 1, "after")
		})
	}
}
