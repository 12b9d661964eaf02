package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMain lets a test run this binary's main as a child process (to send
// it real signals) by setting KMIRROR_TEST_MAIN.
func TestMain(m *testing.M) {
	if os.Getenv("KMIRROR_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// startServe runs `kmirror serve` as a child process and returns it with
// the address it printed. The child's stderr is a *testutil.SyncBuffer.
func startServe(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	p := launchServe(t, args...)
	return p.cmd, p.waitServing(t, 30*time.Second)
}

// serveProc is a `kmirror serve` child process that may not be serving
// yet: the nodes of a cluster wait for each other (a majority of the
// voters) before they serve, so a test launches them all, then waits.
type serveProc struct {
	cmd    *exec.Cmd
	stderr *testutil.SyncBuffer
	// serving gets the address of the "kmirror serving on" line; it is
	// closed when the child's stdout ends without one.
	serving chan string
}

// launchServe starts `kmirror serve` with args as a child process, killed
// when the test ends, without waiting for it to serve.
func launchServe(t *testing.T, args ...string) *serveProc {
	t.Helper()
	return launchServeWrapped(t, nil, args...)
}

// launchServeWrapped is launchServe with the command line prefixed by
// wrap, a command that executes the rest in place (as `ip netns exec
// NS` does: the child's pid stays the one killed at the end).
func launchServeWrapped(t *testing.T, wrap []string, args ...string) *serveProc {
	t.Helper()
	argv := append(slices.Clone(wrap), os.Args[0], "serve")
	cmd := exec.Command(argv[0], append(argv[1:], args...)...)
	cmd.Env = append(os.Environ(), "KMIRROR_TEST_MAIN=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, stderr: &testutil.SyncBuffer{}, serving: make(chan string, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		defer close(p.serving)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "kmirror serving on "); ok {
				p.serving <- strings.Fields(line)[0]
				io.Copy(io.Discard, stdout) // never block the child's writes
				return
			}
		}
	}()
	return p
}

// checkNoRace fails t if the child (a -race build when the test is one)
// reported a data race: a SIGKILLed child never reaches the race
// detector's exit status.
func (p *serveProc) checkNoRace(t *testing.T) {
	t.Helper()
	if out := p.stderr.String(); strings.Contains(out, "WARNING: DATA RACE") {
		t.Errorf("kmirror serve reported a data race:\n%s", out)
	}
}

// waitServing waits up to d for the child to serve and returns its
// address; a child that exits first, or is still starting after d, fails
// the test with its stderr.
func (p *serveProc) waitServing(t *testing.T, d time.Duration) string {
	t.Helper()
	select {
	case addr, ok := <-p.serving:
		if !ok {
			p.cmd.Wait()
			t.Fatalf("serve exited early:\n%s", p.stderr.String())
		}
		return addr
	case <-time.After(d):
		t.Fatalf("serve did not start within %v:\n%s", d, p.stderr.String())
	}
	return ""
}

func TestServeSignalsRestartAndMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	metricsAddr := testutil.FreeAddr(t)
	args := []string{"--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "log.dirs=" + dir,
		"--override", "metrics.listener=" + metricsAddr, "--override", "num.partitions=2"}
	cmd, addr := startServe(t, args...)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("serve-test"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("one"), kgo.StringRecord("two")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`kmirror_broker_requests_total{api="Produce"}`, "kmirror_broker_partitions 2", "kmirror_net_connections_opened_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	// SIGTERM: a clean exit, every partition closed cleanly.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM", err)
	}
	for _, p := range []string{"serve-test-0", "serve-test-1"} {
		if _, err := os.Stat(filepath.Join(dir, p, ".clean")); err != nil {
			t.Errorf("partition %s not closed cleanly: %v", p, err)
		}
	}

	// A restart brings the topic and its records back.
	_, addr = startServe(t, args...)
	cl, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("serve-test"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	for len(got) < 2 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if strings.Join(got, ",") != "one,two" && strings.Join(got, ",") != "two,one" {
		t.Fatalf("after restart got %q", got)
	}
}

func TestServeRefusesBadSettings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown", []string{"--override", "no.such.setting=1"}, "no.such.setting"},
		{"invalid", []string{"--override", "num.partitions=zero"}, "num.partitions"},
		{"tls listener without a certificate", []string{"--override", "listeners=SSL://127.0.0.1:0"}, "ssl.keystore.location"},
		{"missing file", []string{"--config", "/nonexistent/server.properties"}, "/nonexistent/server.properties"},
		{"bad override", []string{"--override", "novalue"}, "key=value"},
		// A cluster's node (issue 20) that is not one of its voters, and
		// a voter with no CONTROLLER listener for the quorum.
		{"node not a voter", clusterSettings(4, "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:1", unusedVoters),
			"controller.quorum.voters: node 4 is not a voter"},
		{"voter without a controller listener", clusterSettings(1, "PLAINTEXT://127.0.0.1:0", unusedVoters),
			"controller.listener.names: a voter of a quorum of several needs its CONTROLLER listener in listeners"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut strings.Builder
			code := run(append([]string{"serve", "--override", "log.dirs=" + t.TempDir()}, tc.args...), &out, &errOut)
			if code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.want) {
				t.Fatalf("stderr does not name %q:\n%s", tc.want, errOut.String())
			}
		})
	}
}

// A Kafka deployment's server.properties starts a node; the settings it
// does not apply are named in one INFO line.
func TestServeKafkaServerProperties(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "delete.topic.enable=true\nzookeeper.connect=zk:2181\nnum.network.threads=3\n"+
		"listeners=PLAINTEXT://127.0.0.1:0\nlog.dirs="+t.TempDir()+"\nmetrics.listener=\n")
	cmd, _ := startServe(t, "--config", path)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM", err)
	}
	// After Wait the child's stderr is all copied.
	stderr := cmd.Stderr.(*testutil.SyncBuffer).String()
	if n := strings.Count(stderr, "ignored Kafka settings"); n != 1 ||
		!strings.Contains(stderr, `level=INFO msg="ignored Kafka settings: delete.topic.enable, num.network.threads, zookeeper.connect" count=3`) {
		t.Fatalf("want one INFO line naming the ignored settings, got:\n%s", stderr)
	}
}
