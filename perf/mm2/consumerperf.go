package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/internal/realkafka"
)

// perfResult is kafka-consumer-perf-test's summary line.
type perfResult struct {
	Target string
	// MB is what the tool counts: key and value bytes of the records
	// read (uncompressed), in MiB (the tool divides by 1024*1024).
	MB, MBps         float64
	Records          int64
	RecordsPerSec    float64
	RebalanceMs      int64
	FetchMs          int64
	FetchMBps        float64
	FetchRecsPerSec  float64
	Wall             time.Duration // the whole tool run, JVM start included
	Raw              string
	ExpectedRecords  int64
	ConsumedAllNotes string
	// Span is the CPU over the tool run: Copier is the server read from
	// (kmirror, or the source broker), Waited the tool's JVM.
	Span span
}

// runConsumerPerf runs Kafka 4.4.0's kafka-consumer-perf-test against addr
// for every record of topic, in a fresh consumer group. ps names the
// processes to account for: the server read from as the copier, and the
// other running brokers.
func runConsumerPerf(ctx context.Context, target, addr, topic string, records int64, ps procs) (perfResult, error) {
	libs, err := realkafka.Install(realkafka.Newest)
	if err != nil {
		return perfResult{}, err
	}
	before := takeSnapshot(ps)
	start := time.Now()
	out, err := realkafka.Tool(ctx, libs, "kafka-consumer-perf-test",
		"--bootstrap-server", addr, "--topic", topic,
		"--num-records", strconv.FormatInt(records, 10),
		"--group", fmt.Sprintf("perf-%s-%d", target, time.Now().UnixNano()),
		"--timeout", "60000")
	wall := time.Since(start)
	span := spanOf(before, takeSnapshot(ps))
	if err != nil {
		return perfResult{Target: target, Raw: out}, err
	}
	r, err := parseConsumerPerf(out)
	r.Target, r.Wall, r.Raw, r.ExpectedRecords, r.Span = target, wall, out, records, span
	if err != nil {
		return r, fmt.Errorf("kafka-consumer-perf-test against %s: %w\n%s", target, err, out)
	}
	if r.Records < records {
		r.ConsumedAllNotes = fmt.Sprintf("read %d of %d records before the tool's timeout", r.Records, records)
	}
	return r, nil
}

// parseConsumerPerf finds the header line of kafka-consumer-perf-test's
// summary ("start.time, end.time, data.consumed.in.MB, MB.sec, ...") and
// reads the line after it by column name, so a reordering or a new column
// in another Kafka version does not shift the numbers.
func parseConsumerPerf(out string) (perfResult, error) {
	lines := strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n")
	for i, line := range lines {
		if !strings.HasPrefix(strings.TrimSpace(line), "start.time,") || i+1 >= len(lines) {
			continue
		}
		cols := splitCSV(line)
		vals := splitCSV(lines[i+1])
		if len(vals) != len(cols) {
			return perfResult{}, fmt.Errorf("summary has %d values for %d columns: %q", len(vals), len(cols), lines[i+1])
		}
		byName := map[string]string{}
		for j, c := range cols {
			byName[c] = vals[j]
		}
		var r perfResult
		var err error
		num := func(name string) float64 {
			v, ok := byName[name]
			if !ok {
				if err == nil {
					err = fmt.Errorf("no %s column", name)
				}
				return 0
			}
			f, perr := strconv.ParseFloat(v, 64)
			if perr != nil && err == nil {
				err = fmt.Errorf("column %s: %q is not a number", name, v)
			}
			return f
		}
		r.MB = num("data.consumed.in.MB")
		r.MBps = num("MB.sec")
		r.Records = int64(num("data.consumed.in.nMsg"))
		r.RecordsPerSec = num("nMsg.sec")
		r.RebalanceMs = int64(num("rebalance.time.ms"))
		r.FetchMs = int64(num("fetch.time.ms"))
		r.FetchMBps = num("fetch.MB.sec")
		r.FetchRecsPerSec = num("fetch.nMsg.sec")
		return r, err
	}
	return perfResult{}, fmt.Errorf("no summary line (start.time, ...) in the output")
}

func splitCSV(line string) []string {
	f := strings.Split(line, ",")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

// bestRun is target's run with the highest MB.sec, nil when none: noise
// on a shared machine only ever slows a run, so the best run is the least
// disturbed one.
func bestRun(runs []perfResult, target string) *perfResult {
	var best *perfResult
	for i := range runs {
		if r := &runs[i]; r.Target == target && (best == nil || r.MBps > best.MBps) {
			best = r
		}
	}
	return best
}
