package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/topicid"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/node"
)

// mirrorsCmd runs `kmirror mirrors args...` in-process, through run like
// the binary's main.
func mirrorsCmd(args ...string) (code int, stdout, stderr string) {
	var out, errOut strings.Builder
	code = run(append([]string{"mirrors"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// mustMirrors runs the command and fails the test unless it exits 0.
func mustMirrors(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := mirrorsCmd(args...)
	if code != 0 {
		t.Fatalf("kmirror mirrors %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	if errOut != "" {
		t.Errorf("kmirror mirrors %s: stderr not empty on success:\n%s", strings.Join(args, " "), errOut)
	}
	return out
}

// failMirrors runs the command, wants exit code want and a one-line
// stderr containing every one of has, and returns the stderr.
func failMirrors(t *testing.T, want int, has []string, args ...string) string {
	t.Helper()
	code, out, errOut := mirrorsCmd(args...)
	if code != want {
		t.Fatalf("kmirror mirrors %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s",
			strings.Join(args, " "), code, want, out, errOut)
	}
	if strings.Count(errOut, "\n") != 1 || !strings.HasSuffix(errOut, "\n") {
		t.Errorf("kmirror mirrors %s: stderr is not one line:\n%s", strings.Join(args, " "), errOut)
	}
	for _, h := range has {
		if !strings.Contains(errOut, h) {
			t.Errorf("kmirror mirrors %s: stderr %q lacks %q", strings.Join(args, " "), errOut, h)
		}
	}
	return errOut
}

// parseTable splits a tabwriter table into its rows' fields after checking
// the header. REQUIRES: no cell is empty or holds a space (the ERROR column
// of --describe --failed may; tests read it only when it has no rows).
func parseTable(out string, header ...string) ([][]string, error) {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if got := strings.Fields(lines[0]); !slices.Equal(got, header) {
		return nil, fmt.Errorf("header %q, want %q (output:\n%s)", got, header, out)
	}
	var rows [][]string
	for _, l := range lines[1:] {
		row := strings.Fields(l)
		if len(row) != len(header) {
			return nil, fmt.Errorf("row %q has %d columns, want %d (output:\n%s)", l, len(row), len(header), out)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

var (
	listHeader     = []string{"MIRROR", "TOPICS", "SOURCE-CLUSTER-ID", "SOURCE-BOOTSTRAP-SERVER"}
	describeHeader = []string{"MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-OFFSET", "LAG", "STATE",
		"SOURCE-OFFSET-AGE", "STALLED", "GROUPS-SYNCED", "LAG-SECONDS"}
	failedHeader = []string{"MIRROR", "TOPIC", "PARTITION", "RETRY", "ERROR"}
)

// startMirrorsNode starts an in-process node in a temporary dir, closed at
// the end of the test.
func startMirrorsNode(t *testing.T, name string) *demoNode {
	t.Helper()
	n, err := startDemoNode(name, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("starting node %s: %v", name, err)
	}
	t.Cleanup(n.close)
	return n
}

// startTestNode starts a node on cfg with the control plane's defaults,
// closed at the end of the test.
func startTestNode(t *testing.T, cfg broker.Config) *node.Node {
	t.Helper()
	n, err := node.Start(cfg, control.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("closing the node: %v", err)
		}
	})
	return n
}

func writeTestFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMirrorsFlags(t *testing.T) {
	t.Parallel()
	cfg := writeTestFile(t, "mirror.properties", "bootstrap.servers=127.0.0.1:1\n")
	bs := []string{"--bootstrap-server", "127.0.0.1:1"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no action", bs, "exactly one of --create"},
		{"two actions", append([]string{"--list", "--describe"}, bs...), "exactly one of --create"},
		{"missing bootstrap", []string{"--list"}, "--bootstrap-server is required"},
		{"bootstrap without a port", []string{"--list", "--bootstrap-server", "127.0.0.1:1,h1"}, `--bootstrap-server: "h1" is not host:port`},
		{"start without topics", append([]string{"--start", "--mirror", "m"}, bs...), "--start needs --topics"},
		{"pause without topics", append([]string{"--pause", "--mirror", "m"}, bs...), "--pause needs --topics"},
		{"pause without mirror", append([]string{"--pause", "--topics", "a"}, bs...), "--pause needs --mirror"},
		{"create without mirror-config", append([]string{"--create", "--mirror", "m"}, bs...), "--create needs --mirror-config"},
		{"create without mirror", append([]string{"--create", "--mirror-config", cfg}, bs...), "--create needs --mirror"},
		{"exclude without start", append([]string{"--stop", "--mirror", "m", "--topics", "a", "--exclude", "b"}, bs...), "--exclude goes with --start only"},
		{"failed without describe", append([]string{"--list", "--failed"}, bs...), "--failed goes with --describe only"},
		{"dry run without start", append([]string{"--stop", "--mirror", "m", "--topics", "a", "--dry-run"}, bs...), "--dry-run goes with --start only"},
		{"watch without describe", append([]string{"--list", "--watch"}, bs...), "--watch goes with --describe only"},
		{"watch with json", append([]string{"--describe", "--watch", "--json"}, bs...), "--watch goes with --describe only, without --json"},
		{"watch interval", append([]string{"--describe", "--watch", "--interval", "0s"}, bs...), "--watch needs a positive --interval"},
		{"extra args", append([]string{"--start", "--mirror", "m", "--topics", "a", "b"}, bs...), `unexpected argument "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errOut := failMirrors(t, 2, []string{tt.want}, tt.args...)
			if !strings.HasPrefix(errOut, "kmirror mirrors: ") {
				t.Errorf("stderr %q does not start with the command name", errOut)
			}
		})
	}

	t.Run("unknown flag", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := mirrorsCmd(append([]string{"--list", "--nosuch"}, bs...)...)
		if code != 2 || out != "" {
			t.Fatalf("exit %d, want 2; stdout %q", code, out)
		}
		// The flag package names the flag on the first line, then prints
		// the usage.
		if first, _, _ := strings.Cut(errOut, "\n"); !strings.Contains(first, "flag provided but not defined: -nosuch") {
			t.Errorf("first stderr line %q does not name the flag", first)
		}
	})
	t.Run("help", func(t *testing.T) {
		t.Parallel()
		for _, h := range []string{"--help", "-h"} {
			code, out, errOut := mirrorsCmd(h)
			if code != 0 || out != "" {
				t.Fatalf("%s: exit %d, want 0; stdout %q", h, code, out)
			}
			for _, want := range []string{"Usage: kmirror mirrors --bootstrap-server HOST:PORT[,HOST:PORT...] <action>", "--describe",
				"-bootstrap-server host:port[,host:port...]", "-mirror-config file", "-command-config file"} {
				if !strings.Contains(errOut, want) {
					t.Errorf("%s: usage lacks %q:\n%s", h, want, errOut)
				}
			}
		}
	})
}

// describeJSON decodes --describe --json output, checking each row has
// exactly kafka-cluster-mirrors.sh's keys plus kmirror's.
func describeJSON(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("--describe --json: %v\n%s", err, out)
	}
	want := []string{"destinationOffset", "errorMessage", "groupOffsetsSyncedAt", "lag", "lagMs", "mirror", "partition", "reportedBy", "retryAttempt",
		"sourceHasNoTopicIds", "sourceOffset", "sourceOffsetAgeMs", "stalled", "state", "topic", "topicId"}
	for _, r := range rows {
		keys := slices.Sorted(maps.Keys(r))
		if !slices.Equal(keys, want) {
			t.Fatalf("--describe --json row keys %q, want %q", keys, want)
		}
	}
	return rows
}

// TestMirrorsLifecycle walks one mirror through every action against two
// nodes: A the source, B the destination the command manages.
func TestMirrorsLifecycle(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	a, b := startMirrorsNode(t, "A"), startMirrorsNode(t, "B")
	if _, err := kadm.NewClient(a.cl).CreateTopic(ctx, 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	const records = 300
	if err := produceDemo(ctx, a.Addr(), records, "a"); err != nil {
		t.Fatal(err)
	}
	bs := []string{"--bootstrap-server", b.Addr()}
	cmd := func(args ...string) []string { return append(args, bs...) }
	cfg := writeTestFile(t, "dr.properties", "# the source\nbootstrap.servers="+a.Addr()+"\nmirror.fetch.wait.max.ms=100\n")

	if out := mustMirrors(t, cmd("--create", "--mirror", "dr", "--mirror-config", cfg)...); out != "create: done\n" {
		t.Errorf("--create printed %q", out)
	}
	failMirrors(t, 1, []string{"CLUSTER_MIRROR_ALREADY_EXISTS", "dr"}, cmd("--create", "--mirror", "dr", "--mirror-config", cfg)...)
	failMirrors(t, 1, []string{"UNKNOWN_CLUSTER_MIRROR", "nosuch"}, cmd("--start", "--mirror", "nosuch", "--topics", "orders")...)
	mustMirrors(t, cmd("--start", "--mirror", "dr", "--topics", "orders")...)

	rows, err := parseTable(mustMirrors(t, cmd("--list")...), listHeader...)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{"dr", "orders", a.Broker.ClusterID(), a.Addr()}}; !slices.EqualFunc(rows, want, slices.Equal) {
		t.Fatalf("--list rows %q, want %q", rows, want)
	}

	// describe returns the rows of --describe [args], checked against the
	// header.
	describe := func(args ...string) [][]string {
		t.Helper()
		rows, err := parseTable(mustMirrors(t, cmd(append([]string{"--describe"}, args...)...)...), describeHeader...)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	wantStates := func(rows [][]string, state string) error {
		if len(rows) != 3 {
			return fmt.Errorf("%d rows, want 3: %q", len(rows), rows)
		}
		for i, r := range rows {
			if r[0] != "dr" || r[1] != "orders" || r[2] != strconv.Itoa(i) || r[6] != state {
				return fmt.Errorf("row %d is %q, want dr orders %d ... %s", i, r, i, state)
			}
		}
		return nil
	}

	// Caught up: every partition MIRRORING with lag 0 and, summed, every
	// record produced to A.
	testutil.CheckFor(t, 15*time.Second, func() error {
		rows, err := parseTable(mustMirrors(t, cmd("--describe", "--mirror", "dr")...), describeHeader...)
		if err != nil {
			return err
		}
		if err := wantStates(rows, "MIRRORING"); err != nil {
			return err
		}
		total := 0
		for _, r := range rows {
			if r[5] != "0" {
				return fmt.Errorf("lag not 0 yet: %q", rows)
			}
			if r[3] != r[4] {
				return fmt.Errorf("source and destination offsets differ with lag 0: %q", r)
			}
			// Caught up, the lag in time is about one fetch round.
			if secs, err := strconv.ParseFloat(r[10], 64); err != nil || secs > 5 {
				return fmt.Errorf("LAG-SECONDS %q of a caught-up partition: %v", r[10], err)
			}
			n, err := strconv.Atoi(r[4])
			if err != nil {
				return fmt.Errorf("DESTINATION-OFFSET %q: %v", r[4], err)
			}
			total += n
		}
		if total != records {
			return fmt.Errorf("destination offsets sum to %d, want %d: %q", total, records, rows)
		}
		return nil
	})

	// --json: kafka-cluster-mirrors.sh's array, the topic id as Kafka
	// prints it (the source's: a mirror topic keeps its id).
	srcTopics, err := kadm.NewClient(a.cl).ListTopics(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	wantID := topicid.String(srcTopics["orders"].ID)
	js := describeJSON(t, mustMirrors(t, cmd("--describe", "--json")...))
	if len(js) != 3 {
		t.Fatalf("--describe --json: %d rows, want 3: %v", len(js), js)
	}
	for i, r := range js {
		if r["mirror"] != "dr" || r["topic"] != "orders" || r["partition"] != float64(i) || r["state"] != "MIRRORING" ||
			r["lag"] != float64(0) || r["topicId"] != wantID || r["errorMessage"] != nil || r["stalled"] != false {
			t.Errorf("--describe --json row %d: %v, want dr orders %d MIRRORING lag 0 topicId %s", i, r, i, wantID)
		}
	}
	if out := mustMirrors(t, cmd("--describe", "--failed", "--json")...); out != "[]\n" {
		t.Errorf("--describe --failed --json with nothing failed printed %q, want []", out)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(mustMirrors(t, cmd("--list", "--json")...)), &list); err != nil {
		t.Fatalf("--list --json: %v", err)
	}
	if len(list) != 1 || list[0]["mirror"] != "dr" || list[0]["topicCount"] != float64(1) ||
		list[0]["sourceClusterId"] != a.Broker.ClusterID() || list[0]["sourceBootstrapServer"] != a.Addr() ||
		fmt.Sprint(list[0]["topics"]) != "[orders]" {
		t.Errorf("--list --json: %v", list)
	}

	mustMirrors(t, cmd("--pause", "--mirror", "dr", "--topics", "orders")...)
	if err := wantStates(describe(), "PAUSED"); err != nil {
		t.Fatalf("after --pause: %v", err)
	}
	// --json of a topic action: the request and each topic's answer, by
	// error name; an error is in the JSON and, as without --json, on
	// stderr with exit 1.
	var res map[string]any
	if err := json.Unmarshal([]byte(mustMirrors(t, cmd("--resume", "--mirror", "dr", "--topics", "orders", "--json")...)), &res); err != nil {
		t.Fatal(err)
	}
	if res["action"] != "resume" || res["mirror"] != "dr" || res["error"] != nil ||
		fmt.Sprint(res["topics"]) != "[map[error:<nil> errorMessage:<nil> topic:orders]]" {
		t.Errorf("--resume --json: %v", res)
	}
	if err := wantStates(describe(), "MIRRORING"); err != nil {
		t.Fatalf("after --resume: %v", err)
	}
	code, out, errOut := mirrorsCmd(cmd("--pause", "--mirror", "dr", "--topics", "nosuch", "--json")...)
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 || !strings.Contains(errOut, "TOPIC_NOT_IN_CLUSTER_MIRROR") {
		t.Fatalf("--pause --json of a topic not mirrored: exit %d, %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	if topics, _ := res["topics"].([]any); len(topics) != 1 || topics[0].(map[string]any)["error"] != "TOPIC_NOT_IN_CLUSTER_MIRROR" {
		t.Errorf("--pause --json of a topic not mirrored: %v", res)
	}

	rows, err = parseTable(mustMirrors(t, cmd("--describe", "--failed")...), failedHeader...)
	if err != nil || len(rows) != 0 {
		t.Fatalf("--describe --failed: rows %q, err %v", rows, err)
	}

	failMirrors(t, 1, []string{"nosuch", "UNKNOWN_TOPIC_OR_PARTITION"}, cmd("--stop", "--mirror", "dr", "--topics", "nosuch")...)
	failMirrors(t, 1, []string{"UNKNOWN_CLUSTER_MIRROR"}, cmd("--describe", "--mirror", "nosuch")...)
	failMirrors(t, 1, []string{"CLUSTER_MIRROR_NOT_EMPTY"}, cmd("--delete", "--mirror", "dr")...)

	stopRows, err := parseTable(mustMirrors(t, cmd("--stop", "--mirror", "dr", "--topics", "orders")...), stopHeader...)
	if want := fmt.Sprintf("orders done %d %d 0", records, records); err != nil || len(stopRows) != 1 || strings.Join(stopRows[0], " ") != want {
		t.Fatalf("--stop: rows %q, err %v; want %q", stopRows, err, want)
	}
	rows = describe("--mirror", "dr")
	if err := wantStates(rows, "STOPPED"); err != nil {
		t.Fatalf("after --stop: %v", err)
	}
	// The final offsets stay readable after the failover.
	total := 0
	for _, r := range rows {
		n, err := strconv.Atoi(r[4])
		if err != nil || r[3] != r[4] || r[5] != "0" || r[7] == "-" || r[10] != "-" {
			t.Fatalf("after --stop: row %q, want the final source and destination offsets, lag 0, an age, no lag in time", r)
		}
		total += n
	}
	if total != records {
		t.Fatalf("after --stop: destination offsets sum to %d, want %d: %q", total, records, rows)
	}
	mustMirrors(t, cmd("--delete", "--mirror", "dr")...)
	if rows, err := parseTable(mustMirrors(t, cmd("--list")...), listHeader...); err != nil || len(rows) != 0 {
		t.Fatalf("--list after --delete: rows %q, err %v", rows, err)
	}
	failMirrors(t, 1, []string{"UNKNOWN_CLUSTER_MIRROR"}, cmd("--delete", "--mirror", "dr")...)
}

// TestMirrorsConnectionErrors: failures before any mirror RPC is answered
// exit 1 with one line, and do so within --timeout.
func TestMirrorsConnectionErrors(t *testing.T) {
	t.Parallel()
	t.Run("command-config bad protocol", func(t *testing.T) {
		t.Parallel()
		cc := writeTestFile(t, "client.properties", "security.protocol=KERBEROS\n")
		failMirrors(t, 1, []string{cc, "security.protocol", "SASL_SSL"},
			"--list", "--bootstrap-server", "127.0.0.1:1", "--command-config", cc)
	})
	t.Run("command-config missing", func(t *testing.T) {
		t.Parallel()
		failMirrors(t, 1, []string{"/nonexistent/client.properties"},
			"--list", "--bootstrap-server", "127.0.0.1:1", "--command-config", "/nonexistent/client.properties")
	})
	t.Run("mirror-config missing", func(t *testing.T) {
		t.Parallel()
		failMirrors(t, 1, []string{"/nonexistent/mirror.properties"},
			"--create", "--mirror", "m", "--bootstrap-server", "127.0.0.1:1", "--mirror-config", "/nonexistent/mirror.properties")
	})
	t.Run("closed port", func(t *testing.T) {
		t.Parallel()
		addr := testutil.FreeAddr(t)
		start := time.Now()
		failMirrors(t, 1, []string{"ListClusterMirrors", addr}, "--list", "--bootstrap-server", addr, "--timeout", "2s")
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("took %v with --timeout 2s", took)
		}
	})
	t.Run("silent node", func(t *testing.T) {
		// A listener that accepts and never answers (a wrong port, a hung
		// node): only --timeout ends the wait.
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var conns []net.Conn
		accepted := make(chan struct{})
		go func() {
			defer close(accepted)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				conns = append(conns, c)
			}
		}()
		t.Cleanup(func() {
			ln.Close()
			<-accepted
			for _, c := range conns {
				c.Close()
			}
		})
		start := time.Now()
		failMirrors(t, 1, []string{"DescribeClusterMirrors", "no answer from " + ln.Addr().String() + " within --timeout 1s"},
			"--describe", "--bootstrap-server", ln.Addr().String(), "--timeout", "1s")
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("took %v with --timeout 1s", took)
		}
	})
	t.Run("bad timeout", func(t *testing.T) {
		t.Parallel()
		failMirrors(t, 2, []string{"--timeout"}, "--list", "--bootstrap-server", "127.0.0.1:1", "--timeout", "0s")
	})
}

// TestMirrorsStartRegex: --topics entries that are not plain names are
// regexes matched against the source's topics.
func TestMirrorsStartRegex(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	a, b := startMirrorsNode(t, "A"), startMirrorsNode(t, "B")
	if _, err := kadm.NewClient(a.cl).CreateTopics(ctx, 1, 1, nil, "t.a", "t.b", "x"); err != nil {
		t.Fatal(err)
	}
	bs := []string{"--bootstrap-server", b.Addr()}
	cmd := func(args ...string) []string { return append(args, bs...) }
	cfg := writeTestFile(t, "re.properties", "bootstrap.servers="+a.Addr()+"\n")
	mustMirrors(t, cmd("--create", "--mirror", "re", "--mirror-config", cfg)...)
	mustMirrors(t, cmd("--start", "--mirror", "re", "--topics", `t\..*`)...)

	rows, err := parseTable(mustMirrors(t, cmd("--list")...), listHeader...)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0][0] != "re" || rows[0][1] != "t.a,t.b" {
		t.Fatalf("--list rows %q, want mirror re with topics t.a,t.b", rows)
	}
	rows, err = parseTable(mustMirrors(t, cmd("--describe")...), describeHeader...)
	if err != nil {
		t.Fatal(err)
	}
	var topics []string
	for _, r := range rows {
		topics = append(topics, r[1])
	}
	if !slices.Equal(topics, []string{"t.a", "t.b"}) {
		t.Fatalf("--describe topics %q, want t.a and t.b", topics)
	}

	// --exclude drops matches; a third node, since B's t.a and t.b
	// already belong to mirror re.
	c := startMirrorsNode(t, "C")
	onC := func(args ...string) []string { return append(args, "--bootstrap-server", c.Addr()) }
	mustMirrors(t, onC("--create", "--mirror", "ex", "--mirror-config", cfg)...)
	mustMirrors(t, onC("--start", "--mirror", "ex", "--topics", `t\..*`, "--exclude", `t\.b`)...)
	rows, err = parseTable(mustMirrors(t, onC("--list")...), listHeader...)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0][0] != "ex" || rows[0][1] != "t.a" {
		t.Fatalf("--list rows %q, want mirror ex with topic t.a", rows)
	}
}

// describeAnswer is a Describe answer with one partition of each kind:
// live, stalled with an old source offset, paused with nothing read, and
// two failures, one with an error longer than three lines. Mirrors and
// topics come out of order: the output sorts them.
func describeAnswer() *mirrorapi.DescribeClusterMirrorsResponse {
	long := "fetching from source broker 3 (127.0.0.1:9092): source answered TOPIC_AUTHORIZATION_FAILED: " +
		"the mirror's principal User:mirror lacks READ on topic orders; grant it with kafka-acls.sh --add " +
		"--allow-principal User:mirror --operation READ --topic orders, then run kmirror mirrors --recover " +
		"--mirror dr --topics orders; a_token_longer_than_the_wrap_width_" + strings.Repeat("x", 90)
	part := func(i int32, src, dst, lag, age int64, state string, stalled bool, lagMs int64) mirrorapi.DescribeClusterMirrorsResponsePartition {
		p := mirrorapi.NewDescribeClusterMirrorsResponsePartition()
		p.PartitionIndex, p.SourceOffset, p.DestinationOffset, p.Lag = i, src, dst, lag
		p.SourceOffsetAgeMillis, p.StateValue, p.Stalled, p.LagMillis = age, state, stalled, lagMs
		p.ReportedBy = 1
		return p
	}
	unreported := part(2, -1, 40, -1, -1, "PAUSED", false, -1)
	unreported.ReportedBy = -1
	failed := part(1, 90, 90, 0, 133_000, "FAILED", false, 140_000)
	failed.RetryAttempt, failed.ErrorMessage = 2, &long
	nr := part(0, 5, 5, 0, 400, "FAILED", false, -1)
	nr.RetryAttempt, nr.ErrorMessage = -1, kmsg.StringPtr("source cluster id changed")
	return &mirrorapi.DescribeClusterMirrorsResponse{Mirrors: []mirrorapi.DescribeClusterMirrorsResponseMirror{
		{MirrorName: "west", Topics: []mirrorapi.DescribeClusterMirrorsResponseTopic{{TopicName: "audit", Partitions: []mirrorapi.DescribeClusterMirrorsResponsePartition{nr}}}},
		{MirrorName: "dr", Topics: []mirrorapi.DescribeClusterMirrorsResponseTopic{
			{TopicName: "orders", TopicID: [16]byte{0xfb, 0xef, 0xbe, 0xff, 0xff, 0xff, 0xfb, 0xef, 0xbe, 0xff, 0xff, 0xff, 0xfb, 0xef, 0xbe, 0xff},
				Partitions: []mirrorapi.DescribeClusterMirrorsResponsePartition{
					unreported, failed, part(0, 120, 100, 20, 400, "MIRRORING", false, 2_310)}},
			{TopicName: "billing", Partitions: []mirrorapi.DescribeClusterMirrorsResponsePartition{
				part(0, 7, 7, 0, 95_400, "MIRRORING", true, 95_401)}},
		}},
	}}
}

// --describe: kafka-cluster-mirrors.sh's seven columns first, "-" for
// what is unknown, then how old the source offset is, whether the
// partition is stalled, when groups were synced and, last, the lag in
// seconds (rounded up: a stalled partition unanswered for 95.401 s shows
// 95.5, though its LAG is 0).
func TestMirrorsDescribeTable(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	f := &mirrorsFlags{}
	resp := describeAnswer()
	for i := range resp.Mirrors {
		if resp.Mirrors[i].MirrorName == "west" {
			resp.Mirrors[i].LastGroupSyncMillis = time.Now().Add(-2 * time.Hour).UnixMilli()
		}
	}
	if err := f.print("describe", resp, &out); err != nil {
		t.Fatal(err)
	}
	rows, err := parseTable(out.String(), describeHeader...)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"dr", "billing", "0", "7", "7", "0", "MIRRORING", "1m35s", "yes", "never", "95.5"},
		{"dr", "orders", "0", "120", "100", "20", "MIRRORING", "0.4s", "no", "never", "2.4"},
		{"dr", "orders", "1", "90", "90", "0", "FAILED", "2m13s", "no", "never", "140.0"},
		{"dr", "orders", "2", "-", "40", "-", "PAUSED", "-", "no", "never", "-"},
		{"west", "audit", "0", "5", "5", "0", "FAILED", "0.4s", "no", "2h0m0s-ago", "-"},
	}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Fatalf("rows\n%q\nwant\n%q", rows, want)
	}
}

// A topic whose source has no topic ids gets one note line after the
// table, naming the id kmirror assigned, in Kafka's form.
func TestMirrorsDescribeNoSourceTopicIDs(t *testing.T) {
	t.Parallel()
	resp := describeAnswer()
	id := [16]byte{0xfb, 0xff, 1}
	resp.Mirrors[0].Topics[0].TopicID, resp.Mirrors[0].Topics[0].NoSourceTopicIDs = id, true
	var table, out strings.Builder
	if err := (&mirrorsFlags{notes: &out}).print("describe", resp, &table); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(table.String(), "note:") {
		t.Fatalf("notes in the table:\n%s", table.String())
	}
	topic := resp.Mirrors[0].Topics[0].TopicName
	note := fmt.Sprintf("note: mirror %s topic %s: the source has no topic ids (Kafka before 2.8); kmirror assigned topic id %s",
		resp.Mirrors[0].MirrorName, topic, topicid.String(id))
	if strings.Count(out.String(), "topic ids") != 1 || !strings.Contains(out.String(), note+"\n") {
		t.Fatalf("want exactly the note %q in\n%s", note, out.String())
	}
	// The partition no leader reported is named once, in a note of its
	// own.
	if want := "note: no leader reported dr/orders-2 (down"; strings.Count(out.String(), "no leader reported") != 1 ||
		!strings.Contains(out.String(), want) {
		t.Fatalf("want the note %q... in\n%s", want, out.String())
	}
}

// --describe --failed prints the whole error, wrapped under the ERROR
// column, never cut.
func TestMirrorsDescribeFailedWraps(t *testing.T) {
	t.Parallel()
	resp := describeAnswer()
	var out strings.Builder
	f := &mirrorsFlags{failed: true}
	if err := f.print("describe", resp, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	col := strings.Index(lines[0], "ERROR")
	if got := strings.Fields(lines[0]); !slices.Equal(got, failedHeader) || col < 0 {
		t.Fatalf("header %q", lines[0])
	}
	// Rows start with a mirror name; continuation lines with blanks up
	// to the ERROR column.
	errs := map[string]string{}
	key := ""
	for _, l := range lines[1:] {
		if len(l) > col+errorWidth {
			t.Errorf("line of %d characters, ERROR wraps at %d: %q", len(l), errorWidth, l)
		}
		if strings.TrimSpace(l[:col]) != "" {
			fs := strings.Fields(l[:col])
			key = strings.Join(fs, " ")
			errs[key] = l[col:]
			continue
		}
		if key == "" {
			t.Fatalf("continuation line before any row: %q", l)
		}
		errs[key] += "\n" + l[col:]
	}
	long := *resp.Mirrors[1].Topics[0].Partitions[1].ErrorMessage
	want := map[string]string{"dr orders 1 2": long, "west audit 0 NonRetryable": "source cluster id changed"}
	if len(errs) != len(want) {
		t.Fatalf("rows %q, want the two FAILED partitions\n%s", slices.Sorted(maps.Keys(errs)), out.String())
	}
	for k, w := range want {
		got := errs[k]
		if strings.Count(got, "\n") < 3 && w == long {
			t.Errorf("%s: error on %d lines, want it wrapped on at least 4:\n%s", k, strings.Count(got, "\n")+1, out.String())
		}
		// Rejoined (a wrap at a space is a space, a cut word is not), the
		// lines give the whole message back.
		joined := strings.NewReplacer("\n", " ").Replace(got)
		if strings.ReplaceAll(joined, " ", "") != strings.ReplaceAll(w, " ", "") || !strings.Contains(joined, "--recover") && w == long {
			t.Errorf("%s: error printed as\n%s\nwant all of %q", k, got, w)
		}
	}
}

// --json prints kafka-cluster-mirrors.sh's array of partitions, sorted,
// with kmirror's keys added and the topic id as Kafka prints it; with
// --failed, the FAILED partitions only.
func TestMirrorsDescribeJSON(t *testing.T) {
	t.Parallel()
	for _, failed := range []bool{false, true} {
		var out strings.Builder
		f := &mirrorsFlags{failed: failed}
		if err := f.printJSON("describe", describeAnswer(), &out); err != nil {
			t.Fatal(err)
		}
		rows := describeJSON(t, out.String())
		var got []string
		for _, r := range rows {
			got = append(got, fmt.Sprint(r["mirror"], " ", r["topic"], " ", r["partition"], " ", r["state"], " ",
				r["sourceOffset"], " ", r["destinationOffset"], " ", r["lag"], " ", r["retryAttempt"], " ",
				r["sourceOffsetAgeMs"], " ", r["lagMs"], " ", r["stalled"], " ", r["topicId"], " ", r["errorMessage"] != nil, " ", r["reportedBy"]))
		}
		want := []string{
			"dr billing 0 MIRRORING 7 7 0 0 95400 95401 true <nil> false 1",
			"dr orders 0 MIRRORING 120 100 20 0 400 2310 false ----____----____----_w false 1",
			"dr orders 1 FAILED 90 90 0 2 133000 140000 false ----____----____----_w true 1",
			"dr orders 2 PAUSED -1 40 -1 0 -1 -1 false ----____----____----_w false -1",
			"west audit 0 FAILED 5 5 0 -1 400 -1 false <nil> true 1",
		}
		if failed {
			want = []string{want[2], want[4]}
		}
		if !slices.Equal(got, want) {
			t.Errorf("--failed=%v: rows\n%s\nwant\n%s", failed, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
