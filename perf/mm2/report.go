package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/internal/procstat"
)

// Goals stated in issue 9.
const (
	goalThroughput   = 3.0 // kmirror MB/s >= 3x MM2's
	goalCPU          = 5.0 // kmirror CPU per GB <= 1/5 of MM2's
	goalConsumerPerf = 1.0 // consumer-perf MB/s from kmirror >= 1.0x Kafka's
	// noisyShare flags a window in which other processes (kernel threads
	// included: page writeback) used more than this share of the
	// machine's CPUs, or the host stole it.
	noisyShare = 0.20
)

// report is one run: what was asked, what was measured.
type report struct {
	started time.Time
	args    []string
	opts    options
	machine string
	// kmirrorVersion is what `kmirror version` of the binary run says.
	kmirrorVersion string
	ds             *dataset
	mm2Props       string
	mm2, km        *copyResult
	perfRuns       []perfResult // in the order run
	kmLogAfter     []string
	log            string
	errs           []string
}

// machineInfo names the CPU, cores, memory and kernel.
func machineInfo() string {
	mem := "?"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if b, err := procstat.ParseStatusKB(data, "MemTotal"); err == nil {
			mem = fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
		}
	}
	load := ""
	if l := procstat.LoadAverage(); l != "" {
		load = ", load average at start " + l
	}
	return fmt.Sprintf("%s, %d CPUs, %s RAM, %s %s/%s%s", procstat.CPUModel(), runtime.NumCPU(), mem, runtime.Version(), runtime.GOOS, runtime.GOARCH, load)
}

func f1(v float64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func f2(v float64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func mib(b int64) string {
	if b < 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 0, 64)
}

func secs(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64)
}

// ratio is a/b as "N.NNx", "-" when either is unknown.
func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "-"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "x"
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func sum(ds ...time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		if d < 0 {
			return -1
		}
		t += d
	}
	return t
}

// noise describes the other processes' CPU and the steal over a span.
func noise(s span) (string, bool) {
	if s.Other < 0 || s.Wall <= 0 {
		return "-", false
	}
	capacity := s.Wall.Seconds() * float64(runtime.NumCPU())
	share := s.Other.Seconds() / capacity
	steal := s.Steal.Seconds() / capacity
	return fmt.Sprintf("%.1f s (%.0f%%); irq %.1f s, steal %.1f s", s.Other.Seconds(), 100*share, s.IRQ.Seconds(), s.Steal.Seconds()),
		share > noisyShare || steal > noisyShare
}

// writeTable prints the result tables and the goals.
func (r *report) writeTable(w io.Writer) {
	o := r.opts
	fmt.Fprintf(w, "\n## MirrorMaker 2 vs kmirror against real Kafka (%s)\n\n", r.started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "machine: %s\n", r.machine)
	if ds := r.ds; ds != nil {
		fmt.Fprintf(w, "source: Kafka %s, topic %s, %d partitions, %d records, %.1f MB of log (lz4 batches), %.1f MB uncompressed (%.2fx), filled in %.0f s\n",
			"4.4.0", ds.topic, ds.partitions, ds.records, float64(ds.logBytes)/1e6, float64(ds.uncompressed)/1e6,
			float64(ds.uncompressed)/float64(ds.logBytes), ds.fillTime.Seconds())
	}
	fmt.Fprintf(w, "MirrorMaker 2: 3.9.2 jars, dedicated mode, tasks.max=%d, -Xmx%dM, into a Kafka 4.4.0 broker (-Xmx%dM); kmirror: `kmirror serve`, one cluster mirror, default settings\n",
		o.tasks, o.mm2HeapMB, o.brokerHeapMB)
	if r.kmirrorVersion != "" {
		fmt.Fprintf(w, "kmirror binary: %s\n", r.kmirrorVersion)
	}

	if r.mm2 != nil || r.km != nil {
		mm, km := r.mm2, r.km
		if mm == nil {
			mm = &copyResult{Name: "MirrorMaker 2", CopierHWM: -1, DestHWM: -1, QuietShare: -1}
		}
		if km == nil {
			km = &copyResult{Name: "kmirror", CopierHWM: -1, DestHWM: -1, QuietShare: -1}
		}
		has := func(c *copyResult) bool { return c.DoneAt > 0 }
		tp := func(c *copyResult, window bool) float64 {
			if !has(c) {
				return -1
			}
			return c.MBps(window)
		}
		cpu := func(c *copyResult, window, withDest bool) float64 {
			if !has(c) {
				return -1
			}
			s, b := c.FromLaunch, c.Bytes
			if window {
				s, b = c.Window, c.WindowBytes
			}
			d := s.Copier
			if withDest {
				d = sum(s.Copier, s.Dest)
			}
			return perGB(d, b)
		}
		srcCPU := func(c *copyResult) float64 {
			if !has(c) {
				return -1
			}
			return perGB(c.Window.Source, c.WindowBytes)
		}
		fmt.Fprintf(w, "\n| | MirrorMaker 2 | kmirror | kmirror vs MM2 |\n|---|---:|---:|---:|\n")
		row := func(name, a, b, rt string) { fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, a, b, rt) }
		row("first record at the destination after launch (s)", secs(mm.FirstAt), secs(km.FirstAt), "")
		row("caught up after launch (s)", secs(mm.DoneAt), secs(km.DoneAt), "")
		row("**throughput, copy window (MB/s)**", f1(tp(mm, true)), f1(tp(km, true)), "**"+ratio(tp(km, true), tp(mm, true))+"**")
		row("throughput from launch (MB/s)", f1(tp(mm, false)), f1(tp(km, false)), ratio(tp(km, false), tp(mm, false)))
		row("**CPU s/GB, copier + destination broker, window**", f2(cpu(mm, true, true)), f2(cpu(km, true, true)), "**"+ratio(cpu(mm, true, true), cpu(km, true, true))+" less**")
		row("CPU s/GB, copier only, window", f2(cpu(mm, true, false)), f2(cpu(km, true, false)), ratio(cpu(mm, true, false), cpu(km, true, false))+" less")
		row("CPU s/GB, copier + destination, from launch", f2(cpu(mm, false, true)), f2(cpu(km, false, true)), ratio(cpu(mm, false, true), cpu(km, false, true))+" less")
		row("CPU s/GB, copier only, from launch", f2(cpu(mm, false, false)), f2(cpu(km, false, false)), ratio(cpu(mm, false, false), cpu(km, false, false))+" less")
		row("source broker CPU s/GB, window (not counted above)", f2(srcCPU(mm)), f2(srcCPU(km)), "")
		row("**peak RSS of the copier, VmHWM (MiB)**", mib(mm.CopierHWM), mib(km.CopierHWM), ratio(float64(mm.CopierHWM), float64(km.CopierHWM))+" less")
		row("peak RSS of the destination broker, VmHWM (MiB)", mib(mm.DestHWM), "(the copier)", "")
		nm, noisyM := noise(mm.Window)
		nk, noisyK := noise(km.Window)
		quiet := func(c *copyResult) string {
			if c.QuietShare < 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f%%", 100*c.QuietShare)
		}
		row("other processes' CPU just before launch (share of all CPUs)", quiet(mm), quiet(km), "")
		row("other processes' CPU in the window (share of all CPUs)", nm, nk, "")
		row("destination log after the copy (MB)", f1(float64(mm.DestLogBytes)/1e6), f1(float64(km.DestLogBytes)/1e6), "")
		row("destination records", strconv.FormatInt(mm.DestRecords, 10), strconv.FormatInt(km.DestRecords, 10), "")
		fmt.Fprintln(w)
		if has(mm) && has(km) {
			t := tp(km, true) / tp(mm, true)
			fmt.Fprintf(w, "goal throughput >= %.0fx MM2 (copy window): %.2fx, %s (from launch: %.2fx)\n", goalThroughput, t,
				verdict(t >= goalThroughput), tp(km, false)/tp(mm, false))
			if a, b := cpu(mm, true, true), cpu(km, true, true); a > 0 && b > 0 {
				fmt.Fprintf(w, "goal CPU per GB <= 1/%.0f of MM2 (MM2 + destination broker vs kmirror, window): 1/%.2f, %s (copier only: 1/%.2f)\n",
					goalCPU, a/b, verdict(a/b >= goalCPU), cpu(mm, true, false)/cpu(km, true, false))
			}
			if r.ds != nil {
				if mm.DestRecords != r.ds.records {
					fmt.Fprintf(w, "MirrorMaker 2 wrote %d records, the source holds %d (duplicates after a retry or rebalance)\n",
						mm.DestRecords, r.ds.records)
				}
				if km.DestLogBytes == r.ds.logBytes && km.DestRecords == r.ds.records {
					fmt.Fprintf(w, "kmirror's copy: same end offsets and same log size as the source (%d bytes)\n", km.DestLogBytes)
				} else {
					fmt.Fprintf(w, "kmirror's copy DIFFERS: %d records / %d log bytes, the source %d / %d\n",
						km.DestRecords, km.DestLogBytes, r.ds.records, r.ds.logBytes)
				}
			}
		}
		if noisyM || noisyK {
			fmt.Fprintf(w, "NOISY: other processes or the host took more than %.0f%% of the CPUs during a copy window; run again if the ratios matter\n", 100*noisyShare)
		}
		for _, c := range []*copyResult{r.mm2, r.km} {
			if c != nil && len(c.Problems) > 0 {
				fmt.Fprintf(w, "\n%s: problems seen during the copy:\n", c.Name)
				for _, p := range c.Problems {
					fmt.Fprintf(w, "  %s\n", p)
				}
			}
		}
	}

	if len(r.perfRuns) > 0 {
		k, m := bestRun(r.perfRuns, "kafka"), bestRun(r.perfRuns, "kmirror")
		if k == nil {
			k = &perfResult{MBps: -1, FetchMBps: -1, Wall: -1, Span: span{Copier: -1, Waited: -1, Other: -1}}
		}
		if m == nil {
			m = &perfResult{MBps: -1, FetchMBps: -1, Wall: -1, Span: span{Copier: -1, Waited: -1, Other: -1}}
		}
		var order []string
		for _, p := range r.perfRuns {
			order = append(order, fmt.Sprintf("%s %.1f", p.Target, p.MBps))
		}
		fmt.Fprintf(w, "\nkafka-consumer-perf-test (Kafka 4.4.0 tool, one consumer, fresh group, every record of the topic);\n"+
			"%d runs, MB.sec in the order run: %s. Each column is the target's best run.\n", len(r.perfRuns), strings.Join(order, ", "))
		fmt.Fprintf(w, "\n| | Kafka 4.4.0 (source) | kmirror (its copy) | kmirror / Kafka |\n|---|---:|---:|---:|\n")
		row := func(name, a, b, rt string) { fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, a, b, rt) }
		row("**MB.sec** (MiB of keys+values per s, group join included)", f1(k.MBps), f1(m.MBps), "**"+ratio(m.MBps, k.MBps)+"**")
		row("fetch.MB.sec (group join excluded)", f1(k.FetchMBps), f1(m.FetchMBps), ratio(m.FetchMBps, k.FetchMBps))
		row("records/s", f1(k.RecordsPerSec), f1(m.RecordsPerSec), ratio(m.RecordsPerSec, k.RecordsPerSec))
		row("rebalance.time.ms", strconv.FormatInt(k.RebalanceMs, 10), strconv.FormatInt(m.RebalanceMs, 10), "")
		row("records read", strconv.FormatInt(k.Records, 10), strconv.FormatInt(m.Records, 10), "")
		row("tool wall time incl. JVM start (s)", secs(k.Wall), secs(m.Wall), "")
		row("server CPU during the tool run (s): the broker read from", secs(k.Span.Copier), secs(m.Span.Copier), "")
		row("consumer JVM CPU (s)", secs(k.Span.Waited), secs(m.Span.Waited), "")
		nk, noisyK := noise(k.Span)
		nm, noisyM := noise(m.Span)
		row("other processes' CPU during the tool run (share of all CPUs)", nk, nm, "")
		if k.MBps > 0 && m.MBps > 0 {
			fmt.Fprintf(w, "\ngoal consumer-perf MB/s from kmirror >= %.1fx Kafka's: %.2fx, %s (fetch.MB.sec: %.2fx)\n",
				goalConsumerPerf, m.MBps/k.MBps, verdict(m.MBps/k.MBps >= goalConsumerPerf), m.FetchMBps/k.FetchMBps)
		}
		if noisyK || noisyM {
			fmt.Fprintf(w, "NOISY: other processes or the host took more than %.0f%% of the CPUs during a consumer-perf run; run again if the ratio matters\n", 100*noisyShare)
		}
		for _, p := range []*perfResult{k, m} {
			if p.ConsumedAllNotes != "" {
				fmt.Fprintf(w, "%s: %s\n", p.Target, p.ConsumedAllNotes)
			}
		}
		if len(r.kmLogAfter) > 0 {
			fmt.Fprintf(w, "\nkmirror's WARN/ERROR log lines by the end of the run:\n")
			for _, l := range r.kmLogAfter {
				fmt.Fprintf(w, "  %s\n", l)
			}
		}
	}
	for _, e := range r.errs {
		fmt.Fprintf(w, "\nFAILED: %s\n", e)
	}
}

// writeRaw writes the table, then everything behind it: the command, the
// MM2 config, every CPU span, the tool outputs and the progress log.
func (r *report) writeRaw(path string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# go run ./perf/mm2 %s\n", strings.Join(r.args, " "))
	r.writeTable(&b)
	fmt.Fprintf(&b, "\n### CPU spans (seconds of CPU; wall in seconds)\n\n")
	fmt.Fprintf(&b, "%-14s %-12s %8s %8s %8s %8s %8s %8s %8s %8s %14s\n", "copier", "span", "wall", "copier", "dest", "source", "runner", "other", "irq", "steal", "bytes")
	for _, c := range []*copyResult{r.mm2, r.km} {
		if c == nil {
			continue
		}
		for _, s := range []struct {
			name  string
			sp    span
			bytes int64
		}{{"from launch", c.FromLaunch, c.Bytes}, {"copy window", c.Window, c.WindowBytes}} {
			fmt.Fprintf(&b, "%-14s %-12s %8s %8s %8s %8s %8s %8s %8s %8s %14d\n", c.Name, s.name, secs(s.sp.Wall), secs(s.sp.Copier), secs(s.sp.Dest),
				secs(s.sp.Source), secs(s.sp.Self), secs(s.sp.Other), secs(s.sp.IRQ), secs(s.sp.Steal), s.bytes)
		}
	}
	if r.mm2Props != "" {
		fmt.Fprintf(&b, "\n### mm2.properties (bootstrap addresses are this run's free ports)\n\n%s", r.mm2Props)
	}
	for i, p := range r.perfRuns {
		fmt.Fprintf(&b, "\n### kafka-consumer-perf-test run %d, against %s (server CPU %s s, consumer JVM CPU %s s, other %s)\n\n%s",
			i+1, p.Target, secs(p.Span.Copier), secs(p.Span.Waited), func() string { n, _ := noise(p.Span); return n }(), p.Raw)
	}
	fmt.Fprintf(&b, "\n### progress log\n\n%s", r.log)
	return os.WriteFile(path, b.Bytes(), 0o644)
}
