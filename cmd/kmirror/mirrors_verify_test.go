package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/verify"
)

var verifyHeader = []string{"TOPIC", "PARTITION", "STATUS", "COMPARED-BATCHES", "COMPARED-BYTES", "FIRST-DIFF",
	"ONLY-IN-COPY", "MISSING-IN-COPY", "NOT-COPIED"}

// verifySetup is a kfake source of 3 brokers (partition leaders spread:
// every fetch must go to its leader) with topic orders (3 partitions,
// plain and transactional batches, markers included) and a kmirror node
// that mirrors it as mirror dr, caught up.
type verifySetup struct {
	src  *kfake.Cluster
	dst  *demoNode
	dir  string // the node's log dir
	args []string
	seed string // the source's bootstrap
}

func startVerifySetup(t *testing.T, ctx context.Context) *verifySetup {
	t.Helper()
	src, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, demoTopic), kfake.ClusterID("verify-src"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	s := &verifySetup{src: src, seed: src.ListenAddrs()[0], dir: t.TempDir()}
	if err := produceDemo(ctx, s.seed, 300, "a"); err != nil {
		t.Fatal(err)
	}
	if err := produceDemoTxns(ctx, s.seed, 30); err != nil {
		t.Fatal(err)
	}
	s.open(t)
	cfg := writeTestFile(t, "dr.properties", "bootstrap.servers="+s.seed+"\nmirror.fetch.wait.max.ms=100\n")
	mustMirrors(t, s.cmd("--create", "--mirror", "dr", "--mirror-config", cfg)...)
	mustMirrors(t, s.cmd("--start", "--mirror", "dr", "--topics", demoTopic)...)
	s.caughtUp(t, ctx)
	return s
}

// open starts the destination node on s.dir.
func (s *verifySetup) open(t *testing.T) {
	t.Helper()
	n, err := startDemoNode("B", s.dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.close)
	s.dst = n
	s.args = []string{"--bootstrap-server", n.Addr()}
}

func (s *verifySetup) cmd(args ...string) []string { return append(args, s.args...) }

// caughtUp waits until the copy's end offsets are the source's.
func (s *verifySetup) caughtUp(t *testing.T, ctx context.Context) {
	t.Helper()
	srcCl, err := kgo.NewClient(kgo.SeedBrokers(s.seed))
	if err != nil {
		t.Fatal(err)
	}
	defer srcCl.Close()
	testutil.CheckFor(t, 20*time.Second, func() error {
		want, err := kadm.NewClient(srcCl).ListEndOffsets(ctx, demoTopic)
		if err != nil {
			return err
		}
		got, err := kadm.NewClient(s.dst.cl).ListEndOffsets(ctx, demoTopic)
		if err != nil {
			return err
		}
		if w, g := fmt.Sprint(want.Offsets()), fmt.Sprint(got.Offsets()); w != g {
			return fmt.Errorf("copy at %s, source at %s", g, w)
		}
		return nil
	})
}

// verifyCmd runs --verify and parses its table; the summary line is
// returned apart.
func verifyCmd(t *testing.T, wantCode int, args ...string) (rows [][]string, summary, stderr string) {
	t.Helper()
	code, out, errOut := mirrorsCmd(args...)
	if code != wantCode {
		t.Fatalf("kmirror mirrors %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, wantCode, out, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	summary = lines[len(lines)-1]
	rows, err := parseTable(strings.Join(lines[:len(lines)-1], "\n")+"\n", verifyHeader...)
	if err != nil {
		t.Fatal(err)
	}
	return rows, summary, errOut
}

// TestMirrorsVerify: a caught-up copy of plain and transactional batches
// (markers included) is identical; --json has its shape; once the source's
// retention moved past the copy's start the range only the copy holds is
// reported and the copy is still identical; stopped, then written on both
// sides, each side's writes past the stop are reported, not compared.
func TestMirrorsVerify(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := startVerifySetup(t, ctx)

	rows, summary, errOut := verifyCmd(t, 0, s.cmd("--verify", "--mirror", "dr")...)
	if len(rows) != 3 || errOut != "" {
		t.Fatalf("rows %q, stderr %q", rows, errOut)
	}
	for i, r := range rows {
		n, _ := strconv.Atoi(r[3])
		if r[0] != demoTopic || r[1] != strconv.Itoa(i) || r[2] != "IDENTICAL" || n < 2 || r[5] != "-" ||
			r[6] != "-" || r[7] != "-" || r[8] != "-" {
			t.Errorf("row %d: %q, want %s %d IDENTICAL with batches compared and nothing one-sided", i, r, demoTopic, i)
		}
	}
	if !strings.HasPrefix(summary, "mirror dr: 3 partitions: 3 identical, 0 differ, 0 not verified; ") {
		t.Errorf("summary %q", summary)
	}

	code, out, errOut := mirrorsCmd(s.cmd("--verify", "--mirror", "dr", "--topics", demoTopic, "--json")...)
	var js []map[string]any
	if err := json.Unmarshal([]byte(out), &js); code != 0 || err != nil || errOut != "" {
		t.Fatalf("--json: exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	wantKeys := []string{"compacted", "comparedBatches", "comparedBytes", "comparedFrom", "comparedTo", "copyHighWatermark",
		"copyLogStart", "differingBatches", "error", "firstDiff", "missingInCopy", "mirror", "notCopied", "notes",
		"onlyInCopy", "partition", "rangesOmitted", "sourceHighWatermark", "sourceLogStart", "status", "stoppedAt", "topic"}
	slices.Sort(wantKeys)
	if len(js) != 3 {
		t.Fatalf("--json: %d rows", len(js))
	}
	for i, r := range js {
		if keys := slices.Sorted(maps.Keys(r)); !slices.Equal(keys, wantKeys) {
			t.Fatalf("--json keys %q, want %q", keys, wantKeys)
		}
		if r["status"] != "IDENTICAL" || r["partition"] != float64(i) || r["firstDiff"] != nil || r["error"] != nil ||
			r["comparedFrom"] != float64(0) || r["comparedTo"] != r["sourceHighWatermark"] || fmt.Sprint(r["onlyInCopy"]) != "[]" {
			t.Errorf("--json row %d: %v", i, r)
		}
	}

	// Failover, then the source's retention (DeleteRecords) past the
	// copy's start, and a record written on each side.
	stopRows, err := parseTable(mustMirrors(t, s.cmd("--stop", "--mirror", "dr", "--topics", demoTopic)...), stopHeader...)
	if err != nil || len(stopRows) != 1 {
		t.Fatalf("--stop: %q %v", stopRows, err)
	}
	srcCl, err := kgo.NewClient(kgo.SeedBrokers(s.seed))
	if err != nil {
		t.Fatal(err)
	}
	defer srcCl.Close()
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: demoTopic, Partition: 0, At: 5, LeaderEpoch: -1})
	if resp, err := kadm.NewClient(srcCl).DeleteRecords(ctx, del); err != nil || resp.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, resp.Error())
	}
	for _, addr := range []string{s.seed, s.dst.Addr()} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: demoTopic, Partition: 1, Value: []byte("after " + addr)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		cl.Close()
	}
	rows, _, errOut = verifyCmd(t, 0, s.cmd("--verify", "--mirror", "dr")...)
	if errOut != "" {
		t.Errorf("stderr %q", errOut)
	}
	// Partition 0: offsets 0..4 are the copy's only. Partition 1: the
	// stop's markers and the copy's record are the copy's own, the
	// source's record is one the copy never got.
	if r := rows[0]; r[2] != "IDENTICAL" || r[6] != "0..4(source-log-start),"+onlyAfterStop(t, r[6]) {
		t.Errorf("partition 0 after DeleteRecords: %q", r)
	}
	if r := rows[1]; r[2] != "IDENTICAL" || !regexp.MustCompile(`^\d+\.\.\d+\(written-after-stop\)$`).MatchString(r[6]) ||
		!regexp.MustCompile(`^(\d+)\.\.(\d+)\(source-after-stop\)$`).MatchString(r[8]) {
		t.Errorf("partition 1 written on both sides after the stop: %q", r)
	}
}

// onlyAfterStop returns the written-after-stop range in cell, failing if
// there is none (the stop's MIRROR_PID_RESET is past the stop offset of
// every partition).
func onlyAfterStop(t *testing.T, cell string) string {
	t.Helper()
	m := regexp.MustCompile(`\d+\.\.\d+\(written-after-stop\)`).FindString(cell)
	if m == "" {
		t.Errorf("no written-after-stop range in %q", cell)
	}
	return m
}

// A payload byte of one batch changed on the copy's disk (behind a clean
// shutdown, so nothing scans it): the batch fails its CRC32C, the
// partition DIFFERS at its offset, and the command exits 1.
func TestMirrorsVerifyDamagedCopy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := startVerifySetup(t, ctx)
	mustMirrors(t, s.cmd("--pause", "--mirror", "dr", "--topics", demoTopic)...)
	s.dst.close()
	seg, pos, base := secondBatch(t, filepath.Join(s.dir, demoTopic+"-2"))
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x55
	if _, err := f.WriteAt(b[:], pos); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s.open(t)

	rows, summary, errOut := verifyCmd(t, 1, s.cmd("--verify", "--mirror", "dr")...)
	if rows[0][2] != "IDENTICAL" || rows[1][2] != "IDENTICAL" {
		t.Errorf("untouched partitions: %q", rows[:2])
	}
	if r := rows[2]; r[2] != "DIFFERS" || r[5] != strconv.FormatInt(base, 10) {
		t.Errorf("damaged partition: %q, want DIFFERS at %d", r, base)
	}
	if want := fmt.Sprintf("note: %s-2: the copy's batch at offset %d fails its CRC32C", demoTopic, base); !strings.Contains(errOut, want) {
		t.Errorf("stderr %q lacks %q", errOut, want)
	}
	if !strings.Contains(summary, "2 identical, 1 differ") {
		t.Errorf("summary %q", summary)
	}
}

// secondBatch finds the second batch of a partition's first segment and
// returns the file, the position of its last byte and its base offset.
func secondBatch(t *testing.T, dir string) (string, int64, int64) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(segs) == 0 {
		t.Fatalf("no segments in %s", dir)
	}
	slices.Sort(segs)
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	it := batch.NewIterator(data)
	first, ok := it.Next()
	if !ok {
		t.Fatalf("%s: no batch: %v", segs[0], it.Err())
	}
	second, ok := it.Next()
	if !ok {
		t.Fatalf("%s: one batch only: %v", segs[0], it.Err())
	}
	return segs[0], int64(first.Size() + second.Size() - 1), second.BaseOffset()
}

// With producers writing to the source all along, the copy's batches up
// to its high watermark are compared (identical) and the source's newer
// ones are the copy's lag, not a difference.
func TestMirrorsVerifyLiveSource(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := startVerifySetup(t, ctx)
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.seed), kgo.DefaultProduceTopic(demoTopic), kgo.ProducerLinger(0))
		if err != nil {
			return
		}
		defer cl.Close()
		for i := 0; pctx.Err() == nil; i++ {
			cl.ProduceSync(pctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("live")})
		}
	}()
	defer func() { stop(); wg.Wait() }()
	for range 3 {
		rows, _, errOut := verifyCmd(t, 0, s.cmd("--verify", "--mirror", "dr")...)
		for _, r := range rows {
			if r[2] != "IDENTICAL" || r[5] != "-" || r[6] != "-" || r[7] != "-" ||
				r[8] != "-" && !regexp.MustCompile(`^\d+\.\.\d+\(after-copy-end\)$`).MatchString(r[8]) {
				t.Errorf("live: %q (stderr %q)", r, errOut)
			}
		}
	}
}

// --throttle bounds the rate of what is read from both sides (loosely:
// the bucket starts with a second of credit, the machine is shared).
func TestMirrorsVerifyThrottle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := startVerifySetup(t, ctx)
	// About 60 KB more per side, in values lz4 cannot shrink.
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.seed), kgo.DefaultProduceTopic(demoTopic))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 600 {
		v := make([]byte, 100)
		for i := range v {
			v[i] = byte(rng.Uint32())
		}
		cl.Produce(ctx, &kgo.Record{Value: v}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	s.caughtUp(t, ctx)
	const rate = 30_000
	start := time.Now()
	_, summary, _ := verifyCmd(t, 0, s.cmd("--verify", "--mirror", "dr", "--throttle", strconv.Itoa(rate))...)
	took := time.Since(start)
	m := regexp.MustCompile(`; (\d+) bytes read from both sides`).FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("summary %q", summary)
	}
	read, _ := strconv.Atoi(m[1])
	if read < 2*rate {
		t.Fatalf("only %d bytes read: too little to measure a throttle of %d B/s", read, rate)
	}
	if floor := time.Duration(float64(read-rate) / rate * 0.8 * float64(time.Second)); took < floor {
		t.Errorf("read %d bytes in %v at --throttle %d, want at least %v", read, took, rate, floor)
	}
}

func TestMirrorsVerifyErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := startVerifySetup(t, ctx)
	other, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, demoTopic), kfake.ClusterID("other"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tests := []struct {
		name string
		code int
		args []string
		want string
	}{
		{"throttle without verify", 2, []string{"--describe", "--throttle", "5"}, "go with --verify only"},
		{"source flags without verify", 2, []string{"--list", "--source-bootstrap-server", "h:1"}, "go with --verify only"},
		{"no mirror", 2, []string{"--verify"}, "--verify needs --mirror"},
		{"bad source bootstrap", 2, []string{"--verify", "--mirror", "dr", "--source-bootstrap-server", "h"}, `--source-bootstrap-server: "h" is not host:port`},
		{"negative throttle", 2, []string{"--verify", "--mirror", "dr", "--throttle", "-1"}, "--throttle must be positive"},
		{"unknown mirror", 2, []string{"--verify", "--mirror", "nosuch"}, "UNKNOWN_CLUSTER_MIRROR"},
		{"topic not in the mirror", 2, []string{"--verify", "--mirror", "dr", "--topics", "nosuch"}, "topic nosuch is not in mirror dr"},
		{"source unreachable", 2, []string{"--verify", "--mirror", "dr", "--source-bootstrap-server", testutil.FreeAddr(t), "--timeout", "2s"},
			"reaching the source at --source-bootstrap-server"},
		{"another cluster", 2, []string{"--verify", "--mirror", "dr", "--source-bootstrap-server", other.ListenAddrs()[0]},
			`is "other", mirror dr's source is "verify-src"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failMirrors(t, tt.code, []string{tt.want}, s.cmd(tt.args...)...)
		})
	}
}

// A SASL source: the mirror's credentials stay on the node, so --verify
// without --source-command-config says how to pass them, and with it
// verifies.
func TestMirrorsVerifySourceCredentials(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, demoTopic), kfake.ClusterID("sasl-src"),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "src", "src-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	seed := src.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic(demoTopic),
		kgo.SASL(plain.Auth{User: "src", Pass: "src-pw"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 50 {
		cl.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sec := "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n" +
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="src" password="src-pw";` + "\n"
	// The node seals the mirror's credential (password.encoder.secret).
	bcfg := nodetest.Config(t)
	bcfg.PasswordEncoderSecret = "verify-test-secret"
	b := startTestNode(t, bcfg)
	dcl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer dcl.Close()
	bs := []string{"--bootstrap-server", b.Addr()}
	cfg := writeTestFile(t, "dr.properties", "bootstrap.servers="+seed+"\nmirror.fetch.wait.max.ms=100\n"+sec)
	mustMirrors(t, append([]string{"--create", "--mirror", "dr", "--mirror-config", cfg}, bs...)...)
	mustMirrors(t, append([]string{"--start", "--mirror", "dr", "--topics", demoTopic}, bs...)...)
	testutil.CheckFor(t, 20*time.Second, func() error {
		got, err := kadm.NewClient(dcl).ListEndOffsets(ctx, demoTopic)
		if err != nil {
			return err
		}
		var total int64
		got.Each(func(o kadm.ListedOffset) { total += o.Offset })
		if total != 50 {
			return fmt.Errorf("copy holds %d of 50 records", total)
		}
		return nil
	})
	failMirrors(t, 2, []string{"reaching the source at the mirror's bootstrap.servers " + seed, "--source-command-config"},
		append([]string{"--verify", "--mirror", "dr", "--timeout", "3s"}, bs...)...)
	rows, _, _ := verifyCmd(t, 0, append([]string{"--verify", "--mirror", "dr", "--source-command-config",
		writeTestFile(t, "source.properties", sec)}, bs...)...)
	if len(rows) != 2 || rows[0][2] != "IDENTICAL" || rows[1][2] != "IDENTICAL" {
		t.Fatalf("rows %q", rows)
	}
}

// The exit status: a difference wins over a partition not verified, which
// wins over identical; ranges print in offset order with what was left
// out counted.
func TestMirrorsVerifyExitAndCells(t *testing.T) {
	t.Parallel()
	r := func(s verify.Status) verify.Result { return verify.Result{Status: s, FirstDiff: -1} }
	tests := []struct {
		name    string
		results []verify.Result
		want    int
	}{
		{"none", nil, 0},
		{"identical", []verify.Result{r(verify.Identical), r(verify.Identical)}, 0},
		{"not verified", []verify.Result{r(verify.Identical), r(verify.Failed)}, 2},
		{"differs", []verify.Result{r(verify.Failed), r(verify.Differs), r(verify.Identical)}, 1},
	}
	for _, tt := range tests {
		if got := verifyExit(tt.results); got != tt.want {
			t.Errorf("%s: exit %d, want %d", tt.name, got, tt.want)
		}
	}
	rs := verify.Ranges{List: []verify.Range{{First: 0, Last: 9, Reason: verify.ReasonSourceLogStart},
		{First: 20, Last: 20, Reason: verify.ReasonCopyLacks}}, More: 3}
	if got, want := rangesCell(rs), "0..9(source-log-start),20..20(copy-lacks-batch),+3-more"; got != want {
		t.Errorf("cell %q, want %q", got, want)
	}
	if got := rangesCell(verify.Ranges{}); got != "-" {
		t.Errorf("empty cell %q", got)
	}
}
