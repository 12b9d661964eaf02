package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/mirrorapi"
)

var stopHeader = []string{"TOPIC", "FINAL-SYNC", "SOURCE-OFFSET", "DESTINATION-OFFSET", "BEHIND"}

func sptr(s string) *string { return &s }

// printStop's report, case by case: the table sums the partitions; a
// final sync not done says why and how old the source offsets are; a
// copy behind the source, or one whose source offsets are unknown, gets
// a WARNING line; topics the stop refused are left to the error line.
func TestPrintStop(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_780_000_100_000)
	part := func(p int32, src, at, dst, lag int64) mirrorapi.StopMirrorTopicsResponsePartition {
		return mirrorapi.StopMirrorTopicsResponsePartition{PartitionIndex: p, SourceOffset: src, SourceOffsetMillis: at,
			DestinationOffset: dst, Lag: lag}
	}
	for _, tc := range []struct {
		name  string
		topic mirrorapi.MirrorTopicsResponseTopic
		want  string
	}{{
		name: "done, in step",
		topic: mirrorapi.MirrorTopicsResponseTopic{Name: "orders", FinalSync: mirrorapi.FinalSyncDone, Partitions: []mirrorapi.StopMirrorTopicsResponsePartition{
			part(0, 100, 1_780_000_099_000, 100, 0), part(1, 200, 1_780_000_099_000, 200, 0)}},
		want: "orders  done        300            300                 0\n",
	}, {
		name: "done, behind (a FAILED partition)",
		topic: mirrorapi.MirrorTopicsResponseTopic{Name: "ledger", FinalSync: mirrorapi.FinalSyncDone, Partitions: []mirrorapi.StopMirrorTopicsResponsePartition{
			part(0, 100, 1_780_000_099_000, 0, 100)}},
		want: "ledger  done        100            0                   100\n" +
			"WARNING: ledger: the copy stopped 100 records behind the source; they are not on this node\n",
	}, {
		name: "skipped, last known offsets",
		topic: mirrorapi.MirrorTopicsResponseTopic{Name: "orders", FinalSync: mirrorapi.FinalSyncSkipped,
			FinalSyncMessage: sptr("source cluster unreachable: dial tcp: connection refused"),
			Partitions: []mirrorapi.StopMirrorTopicsResponsePartition{
				part(0, 100, 1_780_000_088_000, 90, 10), part(1, 50, 1_780_000_095_000, 50, 0)}},
		want: "orders  skipped     150            140                 10\n" +
			"orders: final sync skipped: source cluster unreachable: dial tcp: connection refused; source offsets as last known, read 12s before this report\n" +
			"WARNING: orders: the copy stopped 10 records behind the source; they are not on this node\n",
	}, {
		name: "failed, a source offset unknown",
		topic: mirrorapi.MirrorTopicsResponseTopic{Name: "audits", FinalSync: mirrorapi.FinalSyncFailed, FinalSyncMessage: sptr("group offsets: boom"),
			Partitions: []mirrorapi.StopMirrorTopicsResponsePartition{
				part(0, 7, 1_780_000_100_000, 7, 0), part(1, -1, -1, 3, -1)}},
		want: "audits  failed      unknown        10                  unknown\n" +
			"audits: final sync failed: group offsets: boom; source offsets as last known, read 0s before this report\n" +
			"WARNING: audits: the source offset of 1 of 2 partitions is unknown; the copy may lack records the source held\n",
	}, {
		name:  "an older kmirror",
		topic: mirrorapi.MirrorTopicsResponseTopic{Name: "orders"},
		want: "orders  unknown     unknown        unknown             unknown\n" +
			"orders: the node reports no final sync and no offsets (a kmirror before the report)\n",
	}, {
		name:  "refused",
		topic: mirrorapi.MirrorTopicsResponseTopic{Name: "nope", ErrorCode: mirrorapi.ErrTopicNotInClusterMirror, ErrorMessage: sptr("not in")},
		want:  "",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			printStop(&out, &mirrorapi.StopMirrorTopicsResponse{Topics: []mirrorapi.MirrorTopicsResponseTopic{tc.topic}}, now)
			want := "TOPIC   FINAL-SYNC  SOURCE-OFFSET  DESTINATION-OFFSET  BEHIND\n" + tc.want
			if tc.topic.ErrorCode != 0 {
				want = "TOPIC  FINAL-SYNC  SOURCE-OFFSET  DESTINATION-OFFSET  BEHIND\n"
			}
			if got := out.String(); got != want {
				t.Fatalf("printStop:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestMirrorsStopReport: a paused mirror whose source went on is stopped;
// --stop prints the final sync done, the source's end against the
// copy's, the records left behind and a WARNING, and exits 0; a stop of
// which a topic is refused still reports the others.
func TestMirrorsStopReport(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	a, b := startMirrorsNode(t, "A"), startMirrorsNode(t, "B")
	if _, err := kadm.NewClient(a.cl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := produceDemo(ctx, a.Addr(), 30, "a"); err != nil {
		t.Fatal(err)
	}
	bs := []string{"--bootstrap-server", b.Addr()}
	cmd := func(args ...string) []string { return append(args, bs...) }
	cfg := writeTestFile(t, "dr.properties", "bootstrap.servers="+a.Addr()+"\nmirror.fetch.wait.max.ms=100\n")
	mustMirrors(t, cmd("--create", "--mirror", "dr", "--mirror-config", cfg)...)
	mustMirrors(t, cmd("--start", "--mirror", "dr", "--topics", "orders")...)
	testutil.CheckFor(t, 15*time.Second, func() error {
		rows, err := parseTable(mustMirrors(t, cmd("--describe", "--mirror", "dr")...), describeHeader...)
		if err != nil {
			return err
		}
		if len(rows) != 1 || rows[0][4] != "30" || rows[0][5] != "0" {
			return fmt.Errorf("not caught up: %q", rows)
		}
		return nil
	})
	mustMirrors(t, cmd("--pause", "--mirror", "dr", "--topics", "orders")...)
	if err := produceDemo(ctx, a.Addr(), 12, "b"); err != nil {
		t.Fatal(err)
	}

	out := mustMirrors(t, cmd("--stop", "--mirror", "dr", "--topics", "orders")...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	rows, err := parseTable(strings.Join(lines[:2], "\n")+"\n", stopHeader...)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"orders", "done", "42", "30", "12"}; strings.Join(rows[0], " ") != strings.Join(want, " ") {
		t.Fatalf("--stop row %q, want %q (output:\n%s)", rows[0], want, out)
	}
	if len(lines) != 3 || !strings.HasPrefix(lines[2], "WARNING: orders: the copy stopped 12 records behind") {
		t.Fatalf("--stop output lacks the warning:\n%s", out)
	}

	// With a topic the stop refuses: exit 1 and the error on stderr, and
	// the report of the others still on stdout.
	code, out, errOut := mirrorsCmd(cmd("--stop", "--mirror", "dr", "--topics", "orders,nosuch")...)
	if code != 1 || !strings.Contains(errOut, "nosuch") {
		t.Fatalf("--stop orders,nosuch: exit %d, stderr %q; want 1 naming nosuch", code, errOut)
	}
	if !strings.Contains(out, "orders: final sync skipped: topic orders was stopped already") {
		t.Fatalf("--stop orders,nosuch: stdout lacks the report of orders:\n%s", out)
	}
}
