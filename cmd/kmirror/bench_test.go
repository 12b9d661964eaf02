package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/perf/mirror"
)

func TestBenchFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		code      int
		stderrHas string
		check     func(t *testing.T, c benchConfig)
	}{
		{name: "defaults", code: -1, check: func(t *testing.T, c benchConfig) {
			o := c.opts
			if o.Partitions != 16 || o.RecordSize != 1024 || o.Codec != "lz4" || o.Bytes != 1<<30 ||
				o.Fetchers != 1 || o.FetchMaxBytes != 10<<20 || o.PartitionMaxBytes != 1<<20 ||
				o.MaxWait != time.Second || o.Throttle != 0 || o.Duration != 0 || o.Source != "" ||
				o.SourceKind != "kmirror" || o.Consumer || o.Verify || !c.sourceProcess || c.kfakeSource {
				t.Errorf("defaults: %+v", c)
			}
			if !slices.Equal(o.Modes, mirror.AllModes) {
				t.Errorf("modes %v, want all", o.Modes)
			}
		}},
		{name: "every flag", code: -1, args: []string{
			"--partitions", "4", "--record-size", "2KiB", "--codec", "zstd", "--bytes", "1.5GiB",
			"--fetchers=3", "--fetch-max-bytes", "50MiB", "--partition-max-bytes=4M", "--max-wait", "250ms",
			"--throttle", "100MB", "--duration", "30s", "--source", " a:9092,b:9092 ", "--source-kind", "kfake",
			"--source-process=false", "--mode", "mirror,drain", "--consumer", "--verify", "--topic", "t1",
			"--cpuprofile", "/tmp/x.pprof", "--log-level", "warn",
		}, check: func(t *testing.T, c benchConfig) {
			o := c.opts
			if o.Partitions != 4 || o.RecordSize != 2048 || o.Codec != "zstd" || o.Bytes != 3<<29 ||
				o.Fetchers != 3 || o.FetchMaxBytes != 50<<20 || o.PartitionMaxBytes != 4<<20 ||
				o.MaxWait != 250*time.Millisecond || o.Throttle != 100e6 || o.Duration != 30*time.Second ||
				o.Source != "a:9092,b:9092" || o.SourceKind != "kfake" || !o.Consumer || !o.Verify ||
				o.Topic != "t1" || o.CPUProfile != "/tmp/x.pprof" || c.sourceProcess {
				t.Errorf("parsed: %+v", c)
			}
			if !slices.Equal(o.Modes, []mirror.Mode{mirror.ModeMirror, mirror.ModeDrain}) {
				t.Errorf("modes %v", o.Modes)
			}
		}},
		{name: "help", args: []string{"--help"}, code: 0, stderrHas: "Usage: kmirror bench"},
		{name: "unknown flag", args: []string{"--frobnicate"}, code: 2, stderrHas: "-frobnicate"},
		{name: "extra arg", args: []string{"x"}, code: 2, stderrHas: `unexpected argument "x"`},
		{name: "partitions not a number", args: []string{"--partitions", "many"}, code: 2, stderrHas: "-partitions"},
		{name: "partitions zero", args: []string{"--partitions", "0"}, code: 2, stderrHas: "--partitions:"},
		{name: "record size unit", args: []string{"--record-size", "1XB"}, code: 2, stderrHas: "-record-size"},
		{name: "record size too big", args: []string{"--record-size", "2MiB"}, code: 2, stderrHas: "-record-size"},
		{name: "bytes bad", args: []string{"--bytes", "lots"}, code: 2, stderrHas: "-bytes"},
		{name: "bytes too small", args: []string{"--bytes", "1KiB"}, code: 2, stderrHas: "--bytes:"},
		{name: "codec", args: []string{"--codec", "brotli"}, code: 2, stderrHas: "--codec:"},
		{name: "fetchers", args: []string{"--fetchers", "0"}, code: 2, stderrHas: "--fetchers:"},
		{name: "fetch max bytes", args: []string{"--fetch-max-bytes", "3GiB"}, code: 2, stderrHas: "-fetch-max-bytes"},
		{name: "partition max bytes", args: []string{"--partition-max-bytes", "0"}, code: 2, stderrHas: "--partition-max-bytes:"},
		{name: "max wait", args: []string{"--max-wait", "soon"}, code: 2, stderrHas: "-max-wait"},
		{name: "max wait zero", args: []string{"--max-wait", "0"}, code: 2, stderrHas: "--max-wait:"},
		{name: "throttle", args: []string{"--throttle", "-5"}, code: 2, stderrHas: "-throttle"},
		{name: "duration", args: []string{"--duration", "-1s"}, code: 2, stderrHas: "--duration:"},
		{name: "source kind", args: []string{"--source-kind", "redpanda"}, code: 2, stderrHas: "--source-kind:"},
		{name: "mode", args: []string{"--mode", "copy"}, code: 2, stderrHas: "--mode:"},
		{name: "mode twice", args: []string{"--mode", "mirror,mirror"}, code: 2, stderrHas: "--mode:"},
		{name: "log level", args: []string{"--log-level", "loud"}, code: 2, stderrHas: "--log-level:"},
		{name: "topic", args: []string{"--topic", " "}, code: 2, stderrHas: "--topic:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var errOut bytes.Buffer
			c, code := parseBenchFlags(tt.args, &errOut)
			if code != tt.code {
				t.Fatalf("code %d, want %d (stderr %q)", code, tt.code, errOut.String())
			}
			if !strings.Contains(errOut.String(), tt.stderrHas) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tt.stderrHas)
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

// TestBenchRun runs `kmirror bench` end to end on 2 partitions of 4 MiB,
// every mode, with --verify: the run fails unless the mirror's batches
// equal the source's byte for byte, the drain read every batch, and the
// pipeline's topic holds the same records at the same offsets.
func TestBenchRun(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"kmirror", "kfake"} {
		t.Run("source-kind="+kind, func(t *testing.T) {
			t.Parallel()
			out := runBenchOK(t, "--source-kind", kind, "--source-process=false", "--consumer")
			for _, want := range []string{"\ndrain ", "\nmirror ", "\npipeline ", "mirror/drain", "mirror/pipeline",
				"share the process", "consumer read 4096"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if n := strings.Count(out, " verified"); n != 3 {
				t.Errorf("%d modes verified, want 3:\n%s", n, out)
			}
		})
	}
}

// TestBenchChildSource runs the source as a child process of this test
// binary (TestMain turns it into kmirror when KMIRROR_TEST_MAIN=1), as
// `kmirror bench` does by default. Not parallel: it sets the environment.
func TestBenchChildSource(t *testing.T) {
	t.Setenv("KMIRROR_TEST_MAIN", "1")
	for _, kind := range []string{"kmirror", "kfake"} {
		t.Run("source-kind="+kind, func(t *testing.T) {
			out := runBenchOK(t, "--source-kind", kind, "--mode", "mirror")
			for _, want := range []string{kind + " in a child process", "\nmirror ", " verified", "mirror peak RSS"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// runBenchOK runs a tiny verified bench with extra flags and returns its
// stdout.
func runBenchOK(t *testing.T, extra ...string) string {
	t.Helper()
	args := append([]string{"bench", "--partitions=2", "--bytes=4MiB", "--max-wait=100ms", "--verify",
		"--log-level=warn"}, extra...)
	var out, errOut bytes.Buffer
	if code := run(args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	return out.String()
}
