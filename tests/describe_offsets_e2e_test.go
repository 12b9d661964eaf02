package tests

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/metrics"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// What DescribeClusterMirrors shows of each partition's offsets (issue 16
// items 2 and 7): the last known ones in every state, how old the source
// offset is, and whether the partition has stalled.

// describedPartition returns partition p of topic as Describe shows it.
func (n *ctlNode) describedPartition(ctx context.Context, mirror, topic string, p int32) mirrorapi.DescribeClusterMirrorsResponsePartition {
	n.t.Helper()
	ps := n.describe(ctx, mirror)[topic]
	for _, dp := range ps {
		if dp.PartitionIndex == p {
			return dp
		}
	}
	n.t.Fatalf("node %s: %s-%d not described: %s", n.name, topic, p, describePartitions(ps))
	return mirrorapi.DescribeClusterMirrorsResponsePartition{}
}

// checkOffsets checks that partition p of topic is described in state
// (any state when "") at source and destination offset end, lag 0.
func (n *ctlNode) checkOffsets(ctx context.Context, mirror, topic string, p int32, state string, end int64) mirrorapi.DescribeClusterMirrorsResponsePartition {
	n.t.Helper()
	dp := n.describedPartition(ctx, mirror, topic, p)
	if err := checkDescribed(dp); err != nil {
		n.t.Fatalf("node %s: %s: %v", n.name, topic, err)
	}
	if state != "" && dp.StateValue != state || dp.SourceOffset != end || dp.DestinationOffset != end || dp.Lag != 0 {
		n.t.Fatalf("node %s: %s: %s; want %s at source and destination offset %d, lag 0", n.name, topic,
			describePartitions([]mirrorapi.DescribeClusterMirrorsResponsePartition{dp}), state, end)
	}
	return dp
}

// TestDescribeOffsetsEveryState: paused, stopped and failed partitions
// keep showing the offsets they had, and so does a stopped topic that has
// since taken writes of its own (its destination offset is where the stop
// left it); after a restart they still do, and the idle partitions show
// lag 0 at the source's end. Then the source goes away: the idle
// partitions are shown stalled, with a source offset age that grows, and
// the metrics say so; after a restart with the source still away their
// last known offsets are shown (not -1), as old as they are.
func TestDescribeOffsetsEveryState(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 90*time.Second)
	src, srcCl := startSource(t)
	srcAdm := kadm.NewClient(srcCl)
	parts := map[string]int32{"idle": 2, "paused": 1, "stopped": 1, "failed": 1}
	pr := manualProducer(t, src.ListenAddrs())
	ends := map[string]map[int32]int64{}
	for topic, np := range parts {
		createTopic(t, ctx, srcAdm, topic, np, nil)
		produceTo(t, ctx, pr, topic, np, 5, topic)
		ends[topic] = listOffsets(t, ctx, srcAdm, topic, false)
	}
	end := func(topic string) int64 { return ends[topic][0] }

	// "failed" mirrors in a mirror of its own, whose fetch after catching
	// up is refused with an error that is not retried.
	failed := sourceTopic(t, ctx, srcAdm, "failed")
	src.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req, _ := r.(*kmsg.FetchRequest)
		if !isMirrorFetch(r) || !fetchesAt(req, failed, 0, end("failed")) {
			return nil, nil, false
		}
		return craftFetch(req, failed, 0, func(sp *kmsg.FetchResponseTopicPartition) {
			sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
		}), nil, true
	})
	// A short request.timeout.ms: a partition without answers is stalled
	// within a second. Retries wait past the test: FAILED stays FAILED.
	n := startCtlNode(t, "offs", control.Config{RetryInitial: time.Hour, RetryMax: time.Hour})
	n.ok(ctx, createReq("m", src.ListenAddrs()[0], "request.timeout.ms", "1000"))
	n.ok(ctx, createReq("f", src.ListenAddrs()[0], "request.timeout.ms", "1000"))
	n.ok(ctx, startReq("m", "idle", "paused", "stopped"))
	n.ok(ctx, startReq("f", "failed"))
	for _, topic := range []string{"idle", "paused", "stopped"} {
		n.waitMirrored(ctx, "m", topic, ends[topic])
	}
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named("failed FAILED", func() error {
		if dp := n.describedPartition(ctx, "f", "failed", 0); dp.StateValue != "FAILED" {
			return errors.New(describePartitions([]mirrorapi.DescribeClusterMirrorsResponsePartition{dp}))
		}
		return nil
	}))
	n.ok(ctx, pauseReq("m", "paused"))
	n.ok(ctx, stopReq("m", "stopped"))
	produceTo(t, ctx, manualProducer(t, []string{n.addr()}), "stopped", 1, 3, "own")

	checkHeld := func(when string) {
		t.Helper()
		t.Logf("%s", when)
		n.checkOffsets(ctx, "m", "paused", 0, "PAUSED", end("paused"))
		n.checkOffsets(ctx, "m", "stopped", 0, "STOPPED", end("stopped"))
	}
	checkHeld("after pause, stop and failure")
	n.checkOffsets(ctx, "f", "failed", 0, "FAILED", end("failed"))
	// The partition-state counts behind kmirror_mirror_partition_states:
	// every state of every mirror, the partitions without a fetcher too;
	// and behind kmirror_mirror_partitions, the partitions the fetchers
	// hold, by the same KIP-1279 names.
	countStates := func(all []control.PartitionStates) map[string]map[string]int {
		counts := map[string]map[string]int{}
		for _, ps := range all {
			counts[ps.Mirror] = map[string]int{}
			for st, c := range ps.Counts {
				if c > 0 {
					counts[ps.Mirror][state.PartitionState(st).String()] = c
				}
			}
		}
		return counts
	}
	if counts, want := countStates(n.ctl.PartitionStateCounts()), map[string]map[string]int{"m": {"MIRRORING": 2, "PAUSED": 1,
		"STOPPED": 1}, "f": {"FAILED": 1}}; !reflect.DeepEqual(counts, want) {
		t.Fatalf("partition state counts %v, want %v", counts, want)
	}
	if counts, want := countStates(n.ctl.FetcherStateCounts()), map[string]map[string]int{"m": {"MIRRORING": 2},
		"f": {"FAILED": 1}}; !reflect.DeepEqual(counts, want) {
		t.Fatalf("fetcher partition state counts %v, want %v", counts, want)
	}

	// A restart: the held partitions read their offsets from the store;
	// the failed one is retried at start (any state, same offsets).
	n.restart()
	checkHeld("after a restart")
	n.checkOffsets(ctx, "f", "failed", 0, "", end("failed"))
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named("idle partitions answered after the restart", func() error {
		for p := range parts["idle"] {
			dp := n.describedPartition(ctx, "m", "idle", p)
			if err := checkDescribed(dp); err != nil {
				t.Fatal(err)
			}
			if dp.SourceOffset != ends["idle"][p] {
				t.Fatalf("idle-%d after the restart: %s (a source offset is known all along)", p,
					describePartitions([]mirrorapi.DescribeClusterMirrorsResponsePartition{dp}))
			}
			if dp.StateValue != "MIRRORING" || dp.Lag != 0 || dp.Stalled || dp.SourceOffsetAgeMillis > 1000 ||
				dp.LagMillis < 0 || dp.LagMillis > 1000 {
				return errors.New(describePartitions([]mirrorapi.DescribeClusterMirrorsResponsePartition{dp}))
			}
		}
		return nil
	}))

	// The source goes away.
	// Idle, but answered: never stalled, and fresh (as old as one fetch
	// wait, mirror.fetch.wait.max.ms, 1 s), for longer than
	// request.timeout.ms; the lag in time, caught up, is as small.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for p := range parts["idle"] {
			dp := n.checkOffsets(ctx, "m", "idle", p, "MIRRORING", ends["idle"][p])
			if dp.Stalled || dp.SourceOffsetAgeMillis > 1500 || dp.LagMillis < 0 || dp.LagMillis > 1500 {
				t.Fatalf("idle-%d while the source answers: %s", p, describePartitions([]mirrorapi.DescribeClusterMirrorsResponsePartition{dp}))
			}
		}
		<-time.After(50 * time.Millisecond)
	}

	// A stalled partition's lag in time grows with the clock, though its
	// lag in records stays 0: the source may be taking records it lacks.
	src.Close()
	var ages, lags [2]int64
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named("idle partitions stalled", func() error {
		for p := range parts["idle"] {
			dp := n.checkOffsets(ctx, "m", "idle", p, "MIRRORING", ends["idle"][p])
			if !dp.Stalled || dp.SourceOffsetAgeMillis < 1000 || dp.LagMillis < 1000 {
				return errors.New(describePartitions([]mirrorapi.DescribeClusterMirrorsResponsePartition{dp}))
			}
			ages[p], lags[p] = dp.SourceOffsetAgeMillis, dp.LagMillis
		}
		return nil
	}))
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named("the source offset age and the lag in time growing", func() error {
		dp := n.describedPartition(ctx, "m", "idle", 0)
		if !dp.Stalled || dp.SourceOffsetAgeMillis < ages[0]+300 || dp.LagMillis < lags[0]+300 {
			return errors.New(describePartitions([]mirrorapi.DescribeClusterMirrorsResponsePartition{dp}))
		}
		return nil
	}))
	checkStalledMetrics(t, n, "m", "idle", 2, 1)

	// A restart while the source is away: nothing answers, and the last
	// known offsets are shown at once, with their age.
	n.restart()
	checkHeld("after a restart without the source")
	for p := range parts["idle"] {
		dp := n.checkOffsets(ctx, "m", "idle", p, "MIRRORING", ends["idle"][p])
		if dp.SourceOffsetAgeMillis < ages[p] {
			t.Fatalf("idle-%d: source offset %d ms old after the restart, %d ms before it", p, dp.SourceOffsetAgeMillis, ages[p])
		}
		// Nothing answered since the restart bounds the lag in time: it
		// is unknown, never a value lower than it was.
		if dp.LagMillis != -1 {
			t.Fatalf("idle-%d: lag in time %d ms after a restart without the source, want unknown (-1)", p, dp.LagMillis)
		}
	}
	testutil.CheckFor(t, mirrorCatchUp, testutil.Named("idle partitions stalled after the restart", func() error {
		for p := range parts["idle"] {
			if dp := n.checkOffsets(ctx, "m", "idle", p, "MIRRORING", ends["idle"][p]); !dp.Stalled {
				return errors.New(describePartitions([]mirrorapi.DescribeClusterMirrorsResponsePartition{dp}))
			}
		}
		return nil
	}))
}

// checkStalledMetrics checks the fetch metrics of topic in mirror: stalled
// partitions counted, and a source offset age and a lag in time of at
// least minAge seconds.
func checkStalledMetrics(t *testing.T, n *ctlNode, mirror, topic string, stalled int, minAge float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewFetchCollector(n.ctl.Fetchers(), false))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["mirror"] == mirror && labels["topic"] == topic {
				got[mf.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	if got["kmirror_mirror_stalled_partitions"] != float64(stalled) || got["kmirror_mirror_source_offset_age_seconds"] < minAge ||
		got["kmirror_mirror_lag_seconds"] < minAge {
		var sb strings.Builder
		for k, v := range got {
			fmt.Fprintf(&sb, "%s=%v ", k, v)
		}
		t.Fatalf("metrics of %s/%s: %s; want %d stalled partitions, source offset age and lag >= %vs", mirror, topic, sb.String(), stalled, minAge)
	}
}
