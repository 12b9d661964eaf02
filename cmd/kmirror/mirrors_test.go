package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/mirrorapi"
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

// checkFor polls fn until it returns nil, failing the test with fn's last
// error after timeout.
func checkFor(t *testing.T, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v: %v", timeout, err)
		}
		<-tick.C
	}
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
	describeHeader = []string{"MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-OFFSET", "LAG", "STATE"}
	failedHeader   = []string{"MIRROR", "TOPIC", "PARTITION", "RETRY", "ERROR"}
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
		{"start without topics", append([]string{"--start", "--mirror", "m"}, bs...), "--start needs --topics"},
		{"pause without topics", append([]string{"--pause", "--mirror", "m"}, bs...), "--pause needs --topics"},
		{"pause without mirror", append([]string{"--pause", "--topics", "a"}, bs...), "--pause needs --mirror"},
		{"create without mirror-config", append([]string{"--create", "--mirror", "m"}, bs...), "--create needs --mirror-config"},
		{"create without mirror", append([]string{"--create", "--mirror-config", cfg}, bs...), "--create needs --mirror"},
		{"exclude without start", append([]string{"--stop", "--mirror", "m", "--topics", "a", "--exclude", "b"}, bs...), "--exclude goes with --start only"},
		{"failed without describe", append([]string{"--list", "--failed"}, bs...), "--failed goes with --describe only"},
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
			for _, want := range []string{"Usage: kmirror mirrors --bootstrap-server HOST:PORT <action>", "--describe",
				"-bootstrap-server host:port", "-mirror-config file", "-command-config file"} {
				if !strings.Contains(errOut, want) {
					t.Errorf("%s: usage lacks %q:\n%s", h, want, errOut)
				}
			}
		}
	})
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
	if err := produceDemo(ctx, a.b.Addr(), records, "a"); err != nil {
		t.Fatal(err)
	}
	bs := []string{"--bootstrap-server", b.b.Addr()}
	cmd := func(args ...string) []string { return append(args, bs...) }
	cfg := writeTestFile(t, "dr.properties", "# the source\nbootstrap.servers="+a.b.Addr()+"\nmirror.fetch.wait.max.ms=100\n")

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
	if want := [][]string{{"dr", "orders", a.b.ClusterID(), a.b.Addr()}}; !slices.EqualFunc(rows, want, slices.Equal) {
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
	checkFor(t, 15*time.Second, func() error {
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

	var d mirrorapi.DescribeClusterMirrorsResponse
	if err := json.Unmarshal([]byte(mustMirrors(t, cmd("--describe", "--json")...)), &d); err != nil {
		t.Fatalf("--describe --json: %v", err)
	}
	if len(d.Mirrors) != 1 || d.Mirrors[0].MirrorName != "dr" || len(d.Mirrors[0].Topics) != 1 ||
		d.Mirrors[0].Topics[0].TopicName != "orders" || len(d.Mirrors[0].Topics[0].Partitions) != 3 {
		t.Fatalf("--describe --json decoded to %+v", d)
	}
	for _, p := range d.Mirrors[0].Topics[0].Partitions {
		if p.StateValue != "MIRRORING" || p.Lag != 0 {
			t.Errorf("--describe --json partition %+v, want MIRRORING with lag 0", p)
		}
	}

	mustMirrors(t, cmd("--pause", "--mirror", "dr", "--topics", "orders")...)
	if err := wantStates(describe(), "PAUSED"); err != nil {
		t.Fatalf("after --pause: %v", err)
	}
	mustMirrors(t, cmd("--resume", "--mirror", "dr", "--topics", "orders")...)
	if err := wantStates(describe(), "MIRRORING"); err != nil {
		t.Fatalf("after --resume: %v", err)
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
	if err := wantStates(describe("--mirror", "dr"), "STOPPED"); err != nil {
		t.Fatalf("after --stop: %v", err)
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
		addr := freeAddr(t)
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
	bs := []string{"--bootstrap-server", b.b.Addr()}
	cmd := func(args ...string) []string { return append(args, bs...) }
	cfg := writeTestFile(t, "re.properties", "bootstrap.servers="+a.b.Addr()+"\n")
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
	onC := func(args ...string) []string { return append(args, "--bootstrap-server", c.b.Addr()) }
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
