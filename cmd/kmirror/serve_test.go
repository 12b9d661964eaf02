package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// freeAddr returns a loopback address nobody listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServe runs `kmirror serve` as a child process and returns it with
// the address it printed.
func startServe(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), "KMIRROR_TEST_MAIN=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "kmirror serving on ") {
				lines <- sc.Text()
			}
		}
		close(lines)
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			cmd.Wait()
			t.Fatalf("serve exited early:\n%s", stderr.String())
		}
		addr := strings.Fields(strings.TrimPrefix(line, "kmirror serving on "))[0]
		return cmd, addr
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start:\n%s", stderr.String())
	}
	return nil, ""
}

func TestServeSignalsRestartAndMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	metricsAddr := freeAddr(t)
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
	stderr := cmd.Stderr.(*strings.Builder).String()
	if n := strings.Count(stderr, "ignored Kafka settings"); n != 1 ||
		!strings.Contains(stderr, `level=INFO msg="ignored Kafka settings: delete.topic.enable, num.network.threads, zookeeper.connect" count=3`) {
		t.Fatalf("want one INFO line naming the ignored settings, got:\n%s", stderr)
	}
}
