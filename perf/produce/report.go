package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/batch"
	"github.com/kmirror/kmirror/internal/procstat"
	"github.com/kmirror/kmirror/perf/mirror"
)

// cell is one target measured with one codec, acks and batch size.
type cell struct {
	target       string
	codec        batch.Codec
	batchSize    int
	acks         int16
	round        int
	batchBytes   int   // the batch as sent
	batchRecords int64 // its records
	batchPlain   int64 // its uncompressed size
	res          result
}

// report is one run.
type report struct {
	started        time.Time
	args           []string
	opts           options
	kmirrorVersion string
	kafkaVersion   string
	cells          []cell
	errs           []string
}

// Fail records an error that ended the run (benchrun.Report).
func (r *report) Fail(msg string) { r.errs = append(r.errs, msg) }

// Write prints the run's header, one row per cell and the ratio table
// (benchrun.Report).
func (r *report) Write(w io.Writer) {
	fmt.Fprintf(w, "# produce throughput per codec: kmirror, kfake, Apache Kafka (perf/produce)\n\n")
	fmt.Fprintf(w, "started:   %s\n", r.started.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "command:   go run ./perf/produce %s\n", strings.Join(r.args, " "))
	fmt.Fprintf(w, "machine:   %s\n", machineInfo())
	fmt.Fprintf(w, "go:        %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "kmirror:   %s\n", orUnknown(r.kmirrorVersion))
	fmt.Fprintf(w, "kafka:     %s (single KRaft node, heap %d MiB)\n", orUnknown(r.kafkaVersion), r.opts.heapMB)
	o := r.opts
	fmt.Fprintf(w, "load:      Produce v%d, %d partitions, one batch per partition per request, %d connections x %d in flight,\n",
		produceVersion, o.partitions, o.conns, o.inFlight)
	fmt.Fprintf(w, "           %v per target first (JIT), then per cell a new topic, warm-up %v, window %v",
		o.targetWarmup, o.warmup, o.duration)
	if o.maxBytes > 0 {
		fmt.Fprintf(w, " or %s", mirror.FormatBytes(o.maxBytes))
	}
	fmt.Fprintf(w, ", %d rounds", o.rounds)
	fmt.Fprintf(w, "\n\nMB = 10^6 B. plain = uncompressed batch bytes; CPU = target process s per 10^9 plain bytes;\n")
	fmt.Fprintf(w, "gen = the load generator (this process); irq = the machine's irq+softirq share (loopback TCP, charged to\n")
	fmt.Fprintf(w, "no process); other = share of the machine's CPUs used by no target and not the generator (noise).\n\n")

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tcodec\tacks\tbatch\trecs/batch\ttarget\tplain MB/s\twire MB/s\trecords/s\tCPU s/GB\tgen CPU s\tirq\tother\t")
	for _, c := range r.cells {
		cpu := "-"
		if c.res.cpuKnown {
			cpu = fmt.Sprintf("%.2f", c.res.CPUPerGB())
		}
		fmt.Fprintf(tw, "%d\t%v\t%d\t%s\t%d\t%s\t%.1f\t%.1f\t%.0f\t%s\t%.1f\t%s\t%s\t\n",
			c.round, c.codec, c.acks, sizeName(c.batchBytes), c.batchRecords, c.target,
			c.res.MBps(false), c.res.MBps(true), c.res.RecordsPerSec(), cpu, c.res.self.Seconds(),
			share(c.res, c.res.irq, false), share(c.res, c.res.others, true))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nBest round of each target (noise only ever slows a run): plain MB/s, and the ratios\n")
	fmt.Fprintf(w, "kmirror / other target of plain MB/s and of CPU s per GB (below 1x: kmirror uses less)\n\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "codec\tacks\tbatch\tkmirror\tkfake\tkafka\tMB/s vs kfake\tMB/s vs Kafka\tCPU/GB vs kfake\tCPU/GB vs Kafka\t")
	for _, k := range r.cells {
		if k.target != targetKmirror || k.round != 1 {
			continue
		}
		km, fake, kafka := r.best(k, targetKmirror), r.best(k, targetKfake), r.best(k, targetKafka)
		fmt.Fprintf(tw, "%v\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", k.codec, k.acks, sizeName(k.batchBytes),
			mbps(km), mbps(fake), mbps(kafka),
			ratio(km, fake, false), ratio(km, kafka, false), ratio(km, fake, true), ratio(km, kafka, true))
	}
	tw.Flush()
	for _, e := range r.errs {
		fmt.Fprintf(w, "\nERROR: %s\n", e)
	}
}

// best is the round of target with k's codec, acks and size that moved
// the most plain bytes per second, nil if none.
func (r *report) best(k cell, target string) *cell {
	var b *cell
	for i := range r.cells {
		c := &r.cells[i]
		if c.target == target && c.codec == k.codec && c.acks == k.acks && c.batchSize == k.batchSize &&
			(b == nil || c.res.MBps(false) > b.res.MBps(false)) {
			b = c
		}
	}
	return b
}

func mbps(c *cell) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", c.res.MBps(false))
}

// ratio is k's throughput (or CPU per GB) over c's, "-" when either is
// missing.
func ratio(k, c *cell, cpu bool) string {
	if k == nil || c == nil {
		return "-"
	}
	if !cpu {
		return fmt.Sprintf("%.2fx", k.res.MBps(false)/c.res.MBps(false))
	}
	if !k.res.cpuKnown || !c.res.cpuKnown {
		return "-"
	}
	return fmt.Sprintf("%.2fx", k.res.CPUPerGB()/c.res.CPUPerGB())
}

// share is d as a share of the machine's CPUs in r's window; flag marks
// it NOISY above a fifth.
func share(r result, d time.Duration, flag bool) string {
	f := d.Seconds() / (r.elapsed.Seconds() * float64(runtime.NumCPU()))
	s := fmt.Sprintf("%.0f%%", 100*f)
	if flag && f > 0.2 {
		s += " NOISY"
	}
	return s
}

func sizeName(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%.0fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// machineInfo names the CPU model, the CPUs and the load average.
func machineInfo() string {
	load := ""
	if l := procstat.LoadAverage(); l != "" {
		load = ", load average at start " + l
	}
	return fmt.Sprintf("%s, %d CPUs%s", procstat.CPUModel(), runtime.NumCPU(), load)
}
