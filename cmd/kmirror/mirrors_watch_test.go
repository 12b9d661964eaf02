package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/mirrorapi"
)

var watchHeader = []string{"MIRROR", "PARTITIONS", "STATES", "RECORDS-TO-GO", "RATE", "ETA", "MAX-LAG-SECONDS"}

// watchAnswer is a Describe answer for mirror dr: partition 0 at dst0
// with lag lag0, partition 1 at dst1 with lag lag1 (-1: unknown), and a
// paused partition 2 of another topic, its lag 0 and its lag in seconds
// 3 s; mirror zz has no partitions.
func watchAnswer(dst0, lag0, dst1, lag1 int64) *mirrorapi.DescribeClusterMirrorsResponse {
	part := func(i int32, dst, lag, age int64, state string) mirrorapi.DescribeClusterMirrorsResponsePartition {
		p := mirrorapi.NewDescribeClusterMirrorsResponsePartition()
		p.PartitionIndex, p.DestinationOffset, p.Lag, p.LagMillis, p.StateValue = i, dst, lag, age, state
		if lag >= 0 {
			p.SourceOffset = dst + lag
		}
		return p
	}
	return &mirrorapi.DescribeClusterMirrorsResponse{Mirrors: []mirrorapi.DescribeClusterMirrorsResponseMirror{
		{MirrorName: "zz"},
		{MirrorName: "dr", Topics: []mirrorapi.DescribeClusterMirrorsResponseTopic{
			{TopicName: "orders", Partitions: []mirrorapi.DescribeClusterMirrorsResponsePartition{
				part(0, dst0, lag0, 200, "MIRRORING"), part(1, dst1, lag1, 400, "MIRRORING")}},
			{TopicName: "audit", Partitions: []mirrorapi.DescribeClusterMirrorsResponsePartition{
				part(2, 7, 0, 3000, "PAUSED")}},
		}},
	}}
}

// The rate and ETA arithmetic and the rows, poll after poll: no rate on
// the first poll; the copy rate over the window; the ETA at the rate the
// lag shrinks (the source writing meanwhile slows it); "-" while a lag is
// unknown or grows; 0s at lag 0.
func TestWatchProgress(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_780_000_000, 0)
	w := newWatcher()
	for _, tc := range []struct {
		name                   string
		at                     time.Duration
		dst0, lag0, dst1, lag1 int64
		want                   []string // dr's row
	}{
		{"first poll", 0, 0, 1000, 0, 500, []string{"dr", "3", "MIRRORING=2,PAUSED=1", "1500", "-", "-", "3.0s"}},
		// 300 copied in 1 s, the source wrote 100 more: the lag shrank
		// by 200/s, 1300 to go.
		{"catching up", time.Second, 200, 900, 100, 400, []string{"dr", "3", "MIRRORING=2,PAUSED=1", "1300", "300/s", "6.5s", "3.0s"}},
		// Over the window (2 s): 1000 copied, lag 1500 -> 500.
		{"window", 2 * time.Second, 700, 400, 300, 100, []string{"dr", "3", "MIRRORING=2,PAUSED=1", "500", "500/s", "1.0s", "3.0s"}},
		{"a lag unknown", 3 * time.Second, 800, 300, 300, -1, []string{"dr", "3", "MIRRORING=2,PAUSED=1", "300+?", "367/s", "-", "3.0s"}},
		{"caught up", 4 * time.Second, 1100, 0, 400, 0, []string{"dr", "3", "MIRRORING=2,PAUSED=1", "0", "375/s", "0s", "3.0s"}},
	} {
		rows := w.observe(watchAnswer(tc.dst0, tc.lag0, tc.dst1, tc.lag1), t0.Add(tc.at))
		var out strings.Builder
		renderWatch(&out, rows, nil, t0.Add(tc.at), time.Second, false)
		lines := strings.Split(out.String(), "\n")
		if want := fmt.Sprintf("# %s every 1s", t0.Add(tc.at).UTC().Format(time.RFC3339)); lines[0] != want {
			t.Fatalf("%s: first line %q, want %q", tc.name, lines[0], want)
		}
		if !strings.HasSuffix(out.String(), "\n\n") {
			t.Fatalf("%s: a plain block ends with a blank line:\n%q", tc.name, out.String())
		}
		table, err := parseTable(strings.Join(lines[1:len(lines)-2], "\n")+"\n", watchHeader...)
		if err != nil {
			t.Fatal(err)
		}
		if len(table) != 2 || strings.Join(table[0], " ") != strings.Join(tc.want, " ") {
			t.Fatalf("%s: rows %q, want dr's %q", tc.name, table, tc.want)
		}
		if zz := strings.Join(table[1], " "); !strings.HasPrefix(zz, "zz 0 - 0 ") || !strings.HasSuffix(zz, " 0s -") {
			t.Fatalf("%s: the empty mirror's row %q", tc.name, zz)
		}
	}

	// A growing lag has no ETA; the window drops polls older than
	// watchWindow.
	g := newWatcher()
	for i := range watchWindow + 3 {
		g.observe(watchAnswer(int64(i*10), int64(100+i*5), 0, 0), t0.Add(time.Duration(i)*time.Second))
	}
	if n := len(g.polls["dr"]); n != watchWindow {
		t.Fatalf("%d polls kept, want %d", n, watchWindow)
	}
	rows := g.observe(watchAnswer(130, 165, 0, 0), t0.Add(13*time.Second))
	if r := rows[0]; r.Mirror != "dr" || r.ETAKnown || !r.RateKnown || r.Rate != 10 {
		t.Fatalf("growing lag: %+v, want rate 10/s and no ETA", r)
	}

	// A terminal gets the block redrawn over the last, no blank line;
	// a failed poll prints its error.
	var out strings.Builder
	renderWatch(&out, nil, fmt.Errorf("no answer"), t0, time.Second, true)
	if want := "\x1b[H\x1b[2J# 2026-05-28T20:26:40Z every 1s\nerror: no answer\n"; out.String() != want {
		t.Fatalf("terminal block %q, want %q", out.String(), want)
	}
}

// --describe --watch on a mirror catching up, stdout not a terminal:
// plain blocks, each after its timestamp, the rate above 0 and an ETA
// while records are to go, then lag 0.
func TestMirrorsDescribeWatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	a, b := startMirrorsNode(t, "A"), startMirrorsNode(t, "B")
	if _, err := kadm.NewClient(a.cl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	// 300 KB, uncompressed, in batches of 4 KiB (a source answers a
	// fetch with at least one batch whatever the throttle allows): at
	// 100 KB/s the copy takes some 2 s.
	pr, err := kgo.NewClient(kgo.SeedBrokers(a.Addr()), kgo.DefaultProduceTopic("orders"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(4096))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	val := strings.Repeat("v", 100)
	for i := range 3000 {
		pr.Produce(ctx, kgo.StringRecord(fmt.Sprint(i, val)), nil)
	}
	if err := pr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	onB := func(args ...string) []string { return append(args, "--bootstrap-server", b.Addr()) }
	cfg := writeTestFile(t, "dr.properties", "bootstrap.servers="+a.Addr()+
		"\nmirror.fetch.wait.max.ms=100\nmirror.replication.throttled.rate=100000\nmirror.fetch.max.bytes=20000\n")
	mustMirrors(t, onB("--create", "--mirror", "dr", "--mirror-config", cfg)...)
	mustMirrors(t, onB("--start", "--mirror", "dr", "--topics", "orders")...)
	out := mustMirrors(t, onB("--describe", "--watch", "--interval", "150ms", "--watch-count", "30", "--mirror", "dr")...)

	blocks := strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n")
	if len(blocks) != 30 {
		t.Fatalf("%d blocks, want 30:\n%s", len(blocks), out)
	}
	var moving, done bool
	for i, blk := range blocks {
		lines := strings.SplitN(blk, "\n", 2)
		if !strings.HasPrefix(lines[0], "# ") || !strings.HasSuffix(lines[0], " every 150ms") {
			t.Fatalf("block %d starts with %q", i, lines[0])
		}
		rows, err := parseTable(lines[1]+"\n", watchHeader...)
		if err != nil || len(rows) != 1 {
			t.Fatalf("block %d: %v %q", i, err, rows)
		}
		r := rows[0]
		toGo, err := strconv.ParseInt(r[3], 10, 64)
		if err != nil {
			continue // lag not known yet
		}
		rate, _ := strconv.ParseFloat(strings.TrimSuffix(r[4], "/s"), 64)
		switch {
		case toGo > 0 && rate > 0 && r[5] != "-":
			moving = true
		case toGo == 0 && moving:
			if r[5] != "0s" || r[2] != "MIRRORING=1" {
				t.Fatalf("block %d at lag 0: %q", i, r)
			}
			done = true
		}
	}
	if !moving || !done {
		t.Fatalf("want blocks with a rate and an ETA, then lag 0 (moving %v, done %v):\n%s", moving, done, out)
	}
}
