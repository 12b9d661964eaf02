package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/mirrorapi"
)

var dryRunHeader = []string{"TOPIC", "PARTITION", "LOCAL-END", "TRUNCATE-FROM", "TRUNCATE-RECORDS", "TRUNCATE-BYTES", "THEN-COPY", "WHY"}

// logBytes reads partition 0 of orders on n from offset from to upTo as
// raw batch bytes.
func logBytes(t *testing.T, n *demoNode, from, upTo int64) []byte {
	t.Helper()
	l, err := n.Broker.Partitions().View("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for off := from; off < upTo; {
		buf, info, err := l.Read(off, 1<<20, upTo, nil)
		if err != nil {
			t.Fatal(err)
		}
		if info.FirstOffset < 0 || len(buf) == 0 {
			break
		}
		out = append(out, buf...)
		it := batch.NewIterator(buf)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			off = b.NextOffset()
		}
	}
	return out
}

// The failback preview: B mirrors A, stops following it while A writes 12
// more records, fails over and writes its own; A's --start --dry-run of
// the failback says the 12 go (from offset 30, where B's own epoch
// begins) and B's 6 offsets come, and changes nothing: A's log end, bytes
// and mirror state are as before. The real --start then cuts exactly
// that: A's log keeps its first TRUNCATE-BYTES-less bytes and ends
// byte-identical to B's.
func TestMirrorsStartDryRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	a, b := startMirrorsNode(t, "A"), startMirrorsNode(t, "B")
	if _, err := kadm.NewClient(a.cl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := produceDemo(ctx, a.Addr(), 30, "a"); err != nil {
		t.Fatal(err)
	}
	onB := func(args ...string) []string { return append(args, "--bootstrap-server", b.Addr()) }
	onA := func(args ...string) []string { return append(args, "--bootstrap-server", a.Addr()) }
	cfg := writeTestFile(t, "dr.properties", "bootstrap.servers="+a.Addr()+"\nmirror.fetch.wait.max.ms=100\n")
	mustMirrors(t, onB("--create", "--mirror", "dr", "--mirror-config", cfg)...)
	mustMirrors(t, onB("--start", "--mirror", "dr", "--topics", "orders")...)
	waitDescribed(t, onB, "30")
	mustMirrors(t, onB("--pause", "--mirror", "dr", "--topics", "orders")...)
	if err := produceDemo(ctx, a.Addr(), 12, "a-divergent"); err != nil {
		t.Fatal(err)
	}
	mustMirrors(t, onB("--stop", "--mirror", "dr", "--topics", "orders")...)
	if err := produceDemo(ctx, b.Addr(), 5, "b-own"); err != nil {
		t.Fatal(err)
	}
	bLog, err := b.Broker.Partitions().View("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	bEnd := bLog.LogEndOffset() // 30 mirrored, MIRROR_PID_RESET, 5 own
	if bEnd != 36 {
		t.Fatalf("B ends at %d, want 36", bEnd)
	}

	back := writeTestFile(t, "back.properties", "bootstrap.servers="+b.Addr()+"\nmirror.fetch.wait.max.ms=100\n")
	mustMirrors(t, onA("--create", "--mirror", "back", "--mirror-config", back)...)
	aLog, err := a.Broker.Partitions().View("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	endBefore, sizeBefore := aLog.LogEndOffset(), aLog.Size()
	bytesBefore := logBytes(t, a, 0, endBefore)
	listBefore := mustMirrors(t, onA("--list")...)
	describeBefore := mustMirrors(t, onA("--describe", "--mirror", "back")...)

	out := mustMirrors(t, onA("--start", "--dry-run", "--mirror", "back", "--topics", "orders")...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	rows, err := parseTable(strings.Join(lines[:2], "\n")+"\n", dryRunHeader...)
	if err != nil {
		t.Fatal(err)
	}
	row := rows[0]
	truncBytes, err := strconv.ParseInt(row[5], 10, 64)
	if err != nil || truncBytes <= 0 || truncBytes >= sizeBefore {
		t.Fatalf("TRUNCATE-BYTES %q of a %d-byte log", row[5], sizeBefore)
	}
	want := []string{"orders", "0", "42", "30", "12", row[5], "6", "diverged"}
	if strings.Join(row, " ") != strings.Join(want, " ") {
		t.Fatalf("dry run row %q, want %q (output:\n%s)", row, want, out)
	}
	if summary := fmt.Sprintf("dry run, nothing changed: --start would cut 12 records (%d bytes) from 1 of 1 partitions in 1 topics, then copy 6 offsets from the source", truncBytes); len(lines) != 3 || lines[2] != summary {
		t.Fatalf("dry run summary:\n%s\nwant the line %q", out, summary)
	}

	var js dryRunResult
	if err := json.Unmarshal([]byte(mustMirrors(t, onA("--start", "--dry-run", "--json", "--mirror", "back", "--topics", "orders")...)), &js); err != nil {
		t.Fatal(err)
	}
	wantJS := dryRunPartition{Partition: 0, LocalEnd: 42, TruncateFrom: 30, TruncateRecords: 12, TruncateBytes: truncBytes,
		Cause: "diverged", CopyFrom: 30, SourceEnd: 36, ThenCopy: 6}
	if !js.DryRun || len(js.Topics) != 1 || len(js.Topics[0].Partitions) != 1 || js.Topics[0].Partitions[0] != wantJS ||
		js.Summary.TruncateRecords != 12 || js.Summary.ThenCopy != 6 {
		t.Fatalf("--json: %+v, want partition %+v", js, wantJS)
	}

	// Nothing changed: the log, the topic (still writable), the mirror.
	if aLog.LogEndOffset() != endBefore || aLog.Size() != sizeBefore || !bytes.Equal(logBytes(t, a, 0, endBefore), bytesBefore) {
		t.Fatalf("the dry run changed the log: end %d->%d, size %d->%d", endBefore, aLog.LogEndOffset(), sizeBefore, aLog.Size())
	}
	if info, _ := a.Broker.Partitions().Info("orders"); info.Mirror != "" {
		t.Fatalf("the dry run gave the topic to mirror %q", info.Mirror)
	}
	if got := mustMirrors(t, onA("--list")...); got != listBefore {
		t.Fatalf("--list after the dry run:\n%s\nbefore:\n%s", got, listBefore)
	}
	if got := mustMirrors(t, onA("--describe", "--mirror", "back")...); got != describeBefore {
		t.Fatalf("--describe after the dry run:\n%s\nbefore:\n%s", got, describeBefore)
	}

	// The real failback cuts what the dry run said, then copies B's tail.
	mustMirrors(t, onA("--start", "--mirror", "back", "--topics", "orders")...)
	waitDescribed(t, onA, "36")
	kept := sizeBefore - truncBytes
	after := logBytes(t, a, 0, 36)
	if !bytes.Equal(after[:kept], bytesBefore[:kept]) {
		t.Fatal("the failback changed the bytes below TRUNCATE-FROM")
	}
	if want := logBytes(t, b, 0, 36); !bytes.Equal(after, want) {
		t.Fatalf("A after the failback (%d bytes) differs from B (%d bytes)", len(after), len(want))
	}
	if fromB := logBytes(t, b, 30, 36); int64(len(after)) != kept+int64(len(fromB)) {
		t.Fatalf("A holds %d bytes: want the %d kept plus B's %d from offset 30", len(after), kept, len(fromB))
	}

	// Started now: a dry run says so and changes nothing.
	out = mustMirrors(t, onA("--start", "--dry-run", "--mirror", "back", "--topics", "orders")...)
	if !strings.Contains(out, "orders: mirroring already; --start changes nothing") {
		t.Fatalf("dry run of a mirroring topic:\n%s", out)
	}
}

// waitDescribed waits until the one described partition of on's mirror
// has destination offset dst and lag 0.
func waitDescribed(t *testing.T, on func(...string) []string, dst string) {
	t.Helper()
	testutil.CheckFor(t, 20*time.Second, func() error {
		rows, err := parseTable(mustMirrors(t, on("--describe")...), describeHeader...)
		if err != nil {
			return err
		}
		if len(rows) != 1 || rows[0][4] != dst || rows[0][5] != "0" || rows[0][6] != "MIRRORING" {
			return fmt.Errorf("not caught up at %s: %q", dst, rows)
		}
		return nil
	})
}

// fakeRequestor answers every request with resp and counts the requests.
type fakeRequestor struct {
	resp kmsg.Response
	reqs []kmsg.Request
}

func (f *fakeRequestor) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	f.reqs = append(f.reqs, req)
	return f.resp, nil
}

// A node from before the dry run answers the probe without DryRun: the
// CLI stops there and never sends the start that node would carry out.
func TestMirrorsDryRunOldNode(t *testing.T) {
	t.Parallel()
	fake := &fakeRequestor{resp: &mirrorapi.StartMirrorTopicsResponse{}}
	f := &mirrorsFlags{mirror: "back", topics: "orders"}
	var out strings.Builder
	err := f.runDryRun(context.Background(), fake, &out)
	if err != errNoDryRun {
		t.Fatalf("err %v, want errNoDryRun", err)
	}
	if len(fake.reqs) != 1 {
		t.Fatalf("%d requests sent, want the probe only", len(fake.reqs))
	}
	probe := fake.reqs[0].(*mirrorapi.StartMirrorTopicsRequest)
	if !probe.ValidateOnly || len(probe.Topics) != 0 || len(probe.IncludePatterns) != 0 {
		t.Fatalf("probe %+v: want a dry run naming nothing", probe)
	}
}
