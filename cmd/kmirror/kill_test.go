package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testutil"
)

// mirrorsCLI runs `kmirror mirrors` in-process and returns its stdout.
func mirrorsCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut strings.Builder
	if code := run(append([]string{"mirrors"}, args...), &out, &errOut); code != 0 {
		return out.String(), fmt.Errorf("exit %d: %s", code, errOut.String())
	}
	return out.String(), nil
}

// kill -9 of the mirror node while it mirrors, several times, then a
// restart: the mirror converges to the source's exact bytes; a failover
// followed by kill -9 keeps the topic writable after the restart.
func TestKill9WhileMirroringAndAfterFailover(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srcDir, dstDir := t.TempDir(), t.TempDir()
	serveArgs := func(dir string) []string {
		return []string{"--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "log.dirs=" + dir,
			"--override", "metrics.listener=", "--log-level", "error"}
	}
	_, srcAddr := startServe(t, serveArgs(srcDir)...)
	p, err := kgo.NewClient(kgo.SeedBrokers(srcAddr), kgo.DefaultProduceTopic("k9"),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := kadm.NewClient(p).CreateTopic(ctx, 2, 1, nil, "k9"); err != nil {
		t.Fatal(err)
	}
	for i := range 20000 {
		p.Produce(ctx, kgo.StringRecord(fmt.Sprint("v", i)), nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	dst, dstAddr := startServe(t, serveArgs(dstDir)...)
	cfgFile := t.TempDir() + "/m.properties"
	if err := os.WriteFile(cfgFile, []byte("bootstrap.servers="+srcAddr+"\nmirror.fetch.max.bytes=65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := mirrorsCLI(t, "--bootstrap-server", dstAddr, "--create", "--mirror", "m", "--mirror-config", cfgFile); err != nil {
		t.Fatal(err)
	}
	if _, err := mirrorsCLI(t, "--bootstrap-server", dstAddr, "--start", "--mirror", "m", "--topics", "k9"); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		// A wait on purpose: the kill lands at a random moment of the
		// mirroring, which is what the test is about.
		<-time.After(time.Duration(20+rand.IntN(150)) * time.Millisecond)
		if err := dst.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		dst.Wait()
		dst, dstAddr = startServe(t, serveArgs(dstDir)...)
		t.Logf("round %d: restarted at %s", round, dstAddr)
	}
	waitLagZero(t, ctx, dstAddr)
	if a, b := topicDigest(t, ctx, srcAddr), topicDigest(t, ctx, dstAddr); a != b {
		t.Fatalf("after kill -9 rounds the mirror differs:\nsource %s\nmirror %s", a, b)
	}

	if _, err := mirrorsCLI(t, "--bootstrap-server", dstAddr, "--stop", "--mirror", "m", "--topics", "k9"); err != nil {
		t.Fatal(err)
	}
	dst.Process.Signal(syscall.SIGKILL)
	dst.Wait()
	_, dstAddr = startServe(t, serveArgs(dstDir)...)
	out, err := mirrorsCLI(t, "--bootstrap-server", dstAddr, "--describe", "--mirror", "m")
	if err != nil || strings.Count(out, "STOPPED") != 2 {
		t.Fatalf("describe after failover and kill -9: %v\n%s", err, out)
	}
	w, err := kgo.NewClient(kgo.SeedBrokers(dstAddr), kgo.DefaultProduceTopic("k9"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.ProduceSync(ctx, kgo.StringRecord("written after failover")).FirstErr(); err != nil {
		t.Fatalf("produce after failover and kill -9: %v", err)
	}
}

// waitLagZero polls `kmirror mirrors --describe` until every LAG is 0,
// for as long as ctx lasts.
func waitLagZero(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	testutil.CheckFor(t, testutil.Left(ctx), func() error {
		out, err := mirrorsCLI(t, "--bootstrap-server", addr, "--describe", "--mirror", "m")
		if err == nil && strings.Count(out, "MIRRORING") == 2 {
			done := true
			for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
				f := strings.Fields(line)
				if len(f) < 7 || f[5] != "0" {
					done = false
				}
			}
			if done {
				return nil
			}
		}
		return fmt.Errorf("lag never reached 0: %v\n%s", err, out)
	})
}

// topicDigest reads both partitions' raw batches and summarises them.
func topicDigest(t *testing.T, ctx context.Context, addr string) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, "k9")
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for p := int32(0); p < 2; p++ {
		h, end, err := partitionHash(ctx, cl, "k9", topics["k9"].ID, p)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "%d:%d:%x ", p, end, h[:8])
	}
	return sb.String()
}
