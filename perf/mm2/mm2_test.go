package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/props"
)

// The rendered mm2.properties reads back, with Java's rules, as the flow
// and settings the benchmark means, and keeps the rules MirrorMaker 2
// 3.9 enforces at connector validation.
func TestMM2Properties(t *testing.T) {
	t.Parallel()
	cfg := mm2Config{SourceBootstrap: "127.0.0.1:9092", TargetBootstrap: "127.0.0.1:9093", Topic: "mm2-bench", TasksMax: 2}
	ps, err := props.Parse(strings.NewReader(render(cfg.properties())))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range ps {
		if _, dup := got[p.Key]; dup {
			t.Errorf("%s set twice", p.Key)
		}
		got[p.Key] = p.Value
	}
	want := map[string]string{
		"clusters":                          "src, dst",
		"src.bootstrap.servers":             "127.0.0.1:9092",
		"dst.bootstrap.servers":             "127.0.0.1:9093",
		"src->dst.enabled":                  "true",
		"dst->src.enabled":                  "false",
		"src->dst.topics":                   "mm2-bench",
		"tasks.max":                         "2",
		"emit.offset-syncs.enabled":         "false",
		"emit.checkpoints.enabled":          "false",
		"emit.heartbeats.enabled":           "false",
		"sync.group.offsets.enabled":        "false",
		"sync.topic.configs.enabled":        "false",
		"dst.producer.compression.type":     "lz4",
		"src.consumer.max.poll.records":     "500",
		"replication.factor":                "1",
		"offset.storage.replication.factor": "1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if strings.HasSuffix(k, "replication.factor") && v != "1" {
			t.Errorf("%s = %s: one broker per cluster needs 1", k, v)
		}
		// MirrorSourceConnector refuses any offset-syncs.* setting when
		// offset syncs are off ("can't setup offset-syncs feature").
		if strings.HasPrefix(k, "offset-syncs.") {
			t.Errorf("%s is set with emit.offset-syncs.enabled=false: MM2 refuses the source connector", k)
		}
	}
	if mm2TargetTopic("mm2-bench") != "src.mm2-bench" {
		t.Errorf("target topic %q", mm2TargetTopic("mm2-bench"))
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	got := render([]prop{{"two\nlines", "a", "1"}, {"", "b", "x y"}, {"c", "c", ""}})
	want := "# two\n# lines\na = 1\nb = x y\n\n# c\nc = \n"
	if got != want {
		t.Fatalf("render:\n%s\nwant:\n%s", got, want)
	}
	// The log4j file parses too and names the log file.
	ps, err := props.Parse(strings.NewReader(mm2Log4j("/tmp/x/mm2.log")))
	if err != nil || !slices.ContainsFunc(ps, func(p props.Property) bool {
		return p.Key == "log4j.appender.file.File" && p.Value == "/tmp/x/mm2.log"
	}) {
		t.Fatalf("log4j properties: %v %v", ps, err)
	}
}

func TestMM2JVMArgs(t *testing.T) {
	t.Parallel()
	args := mm2JVMArgs(2048, "/w/log4j.properties", "/libs", "org.apache.kafka.connect.mirror.MirrorMaker", "/w/mm2.properties")
	n := len(args)
	if args[n-2] != "org.apache.kafka.connect.mirror.MirrorMaker" || args[n-1] != "/w/mm2.properties" ||
		args[n-3] != "/libs/*" || args[n-4] != "-cp" {
		t.Fatalf("main class, config and class path must come last: %q", args)
	}
	for _, a := range []string{"-Xmx2048M", "-Xms256M", "-XX:+UseG1GC", "-Dlog4j.configuration=file:/w/log4j.properties"} {
		if !slices.Contains(args, a) {
			t.Errorf("missing %s in %q", a, args)
		}
	}
}

func TestProblemLines(t *testing.T) {
	t.Parallel()
	log := "[t] INFO fine (x)\n[t] WARN one (x)\n[t] ERROR two (x)\n\tat stack\n[t] WARN three (x)\n"
	got := problemLines([]byte(log), []string{"] WARN ", "] ERROR "}, 2)
	want := []string{"[t] WARN one (x)", "[t] ERROR two (x)", "... and 1 more"}
	if !slices.Equal(got, want) {
		t.Fatalf("problemLines = %q, want %q", got, want)
	}
	if got := problemLines(nil, []string{"x"}, 5); len(got) != 0 {
		t.Fatalf("no log: %q", got)
	}
}

// Output of Kafka 4.4.0's kafka-consumer-perf-test, captured.
const perfOutput = `SLF4J: Failed to load class "org.slf4j.impl.StaticLoggerBinder".
SLF4J: Defaulting to no-operation (NOP) logger implementation
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-29 20:02:30:048, 2026-11-29 20:02:34:038, 665.5354, 166.8008, 2082469, 521922.0551, 1055, 2935, 226.7582, 709529.4719
`

func TestParseConsumerPerf(t *testing.T) {
	t.Parallel()
	got, err := parseConsumerPerf(perfOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := perfResult{MB: 665.5354, MBps: 166.8008, Records: 2082469, RecordsPerSec: 521922.0551,
		RebalanceMs: 1055, FetchMs: 2935, FetchMBps: 226.7582, FetchRecsPerSec: 709529.4719}
	if got != want {
		t.Fatalf("parseConsumerPerf = %+v, want %+v", got, want)
	}
	// Columns are read by name: a reordered header still parses.
	reordered := "MB.sec, start.time, fetch.MB.sec, data.consumed.in.MB, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.nMsg.sec, end.time\n" +
		"1.5, x, 2.5, 3, 4, 5, 6, 7, 8, y\n"
	if _, err := parseConsumerPerf(reordered); err == nil {
		t.Fatal("a header not starting with start.time is no summary")
	}
	reordered = "start.time, MB.sec, fetch.MB.sec, data.consumed.in.MB, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.nMsg.sec, end.time\n" +
		"x, 1.5, 2.5, 3, 4, 5, 6, 7, 8, y\n"
	got, err = parseConsumerPerf(reordered)
	if err != nil || got.MBps != 1.5 || got.FetchMBps != 2.5 || got.Records != 4 {
		t.Fatalf("reordered: %+v, %v", got, err)
	}
	for name, bad := range map[string]string{
		"no summary":      "WARNING: Exiting before consuming the expected number of records\n",
		"missing values":  "start.time, MB.sec\nx\n",
		"missing column":  "start.time, MB.sec\nx, 1\n",
		"not a number":    strings.Replace(perfOutput, "166.8008", "fast", 1),
		"header, no line": "start.time, end.time",
	} {
		if _, err := parseConsumerPerf(bad); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	o, code := parseFlags(nil, io.Discard)
	if code != -1 || o.size != 2<<30 || o.partitions != 8 || o.tasks != 2 || len(o.phases) != 3 {
		t.Fatalf("defaults: %+v, code %d", o, code)
	}
	o, code = parseFlags([]string{"--size", "512MiB", "--partitions", "4", "--phases", "kmirror, consumer-perf", "--out", "x.txt"}, io.Discard)
	if code != -1 || o.size != 512<<20 || o.partitions != 4 || o.phases[phaseMM2] || !o.phases[phasePerf] || o.out != "x.txt" {
		t.Fatalf("parsed: %+v, code %d", o, code)
	}
	for _, args := range [][]string{
		{"--size", "1KiB"},
		{"--size", "lots"},
		{"--partitions", "0"},
		{"--phases", "mm2,nope"},
		{"--topic", "a.b"}, // '.' is a regex metacharacter in MM2's topics list
		{"--poll", "0s"},
		{"extra"},
	} {
		if _, code := parseFlags(args, io.Discard); code != 2 {
			t.Errorf("%q: code %d, want 2", args, code)
		}
	}
}

func TestCopyResultRates(t *testing.T) {
	t.Parallel()
	r := copyResult{Bytes: 2e9, WindowBytes: 1.5e9, FirstAt: 10 * time.Second, DoneAt: 25 * time.Second}
	if got := r.MBps(false); got != 80 {
		t.Errorf("from launch: %v MB/s, want 80", got)
	}
	if got := r.MBps(true); got != 100 {
		t.Errorf("window: %v MB/s, want 100", got)
	}
	if got := ratio(300, 100); got != "3.00x" {
		t.Errorf("ratio = %s", got)
	}
	if got := ratio(-1, 100); got != "-" {
		t.Errorf("unknown ratio = %s", got)
	}
}

func TestPerfOrder(t *testing.T) {
	t.Parallel()
	want := []string{"kafka", "kmirror", "kmirror", "kafka", "kafka", "kmirror"}
	if got := perfOrder(3); !slices.Equal(got, want) {
		t.Fatalf("perfOrder(3) = %q, want %q", got, want)
	}
	runs := []perfResult{{Target: "kafka", MBps: 400}, {Target: "kmirror", MBps: 500}, {Target: "kmirror", MBps: 550}, {Target: "kafka", MBps: 380}}
	if b := bestRun(runs, "kafka"); b == nil || b.MBps != 400 {
		t.Fatalf("best kafka run: %+v", b)
	}
	if b := bestRun(runs, "kmirror"); b == nil || b.MBps != 550 {
		t.Fatalf("best kmirror run: %+v", b)
	}
	if b := bestRun(runs, "redpanda"); b != nil {
		t.Fatalf("no runs: %+v", b)
	}
}
