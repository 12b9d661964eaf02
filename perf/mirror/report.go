package mirror

import (
	"fmt"
	"io"
	"strconv"
	"time"
)

// Goals from the issue behind `kmirror bench`, printed next to the ratios.
const (
	goalMirrorVsDrain    = 0.9
	goalMirrorVsPipeline = 3.0
	goalMirrorRSSMiB     = 256
)

// WriteTable prints the result: a header naming the data and the source,
// one row per mode, the ratios when mirror ran with drain or pipeline, and
// what the columns mean.
func (r Result) WriteTable(w io.Writer) {
	o, s := r.Options, r.Source
	fmt.Fprintf(w, "kmirror bench: %d partitions, %d B records, %s (%.2fx), %s uncompressed = %d records, %.1f MB of source batches\n",
		s.Partitions, o.RecordSize, o.Codec, s.Ratio(), FormatBytes(s.Uncompressed), s.Records, float64(s.SegmentBytes)/1e6)
	throttle := "none"
	if o.Throttle > 0 {
		throttle = FormatBytes(o.Throttle) + "/s"
	}
	fmt.Fprintf(w, "  fetchers=%d fetch-max-bytes=%s partition-max-bytes=%s max-wait=%v throttle=%s consumer=%v\n",
		o.Fetchers, FormatBytes(int64(o.FetchMaxBytes)), FormatBytes(int64(o.PartitionMaxBytes)), o.MaxWait, throttle, o.Consumer)
	switch {
	case s.PID != 0:
		fmt.Fprintf(w, "source: %s in a child process (pid %d) at %s: CPU and RSS columns are the measured side's alone\n",
			s.Kind, s.PID, s.Addr)
	case s.InProcess:
		fmt.Fprintf(w, "source: %s in this process at %s: source and mirror share the process, CPU and RSS include the source\n",
			s.Kind, s.Addr)
	default:
		fmt.Fprintf(w, "source: external cluster at %s (topic %s)\n", s.Addr, s.Topic)
	}
	fmt.Fprintf(w, "\n%-9s %9s %11s %9s %9s %9s %12s %12s %13s %8s %s\n",
		"mode", "MB/s", "records/s", "lag p50", "lag p99", "CPU s/GB", "peak RSS MiB", "src CPU s/GB", "src RSS MiB", "time", "notes")
	for _, m := range r.Modes {
		notes := ""
		if !m.CaughtUp {
			notes += " partial (duration ended the phase)"
		}
		if m.Verified {
			notes += " verified"
		}
		if m.ConsumerRecords >= 0 {
			notes += fmt.Sprintf(" consumer read %d", m.ConsumerRecords)
		}
		fmt.Fprintf(w, "%-9s %9.1f %11.0f %9d %9d %9s %12s %12s %13s %8s%s\n",
			m.Mode, m.MBps(), m.RecordsPerSec(), m.LagP50, m.LagP99, fmtPerGB(m.CPUPerGB()), fmtMiB(m.PeakRSS),
			fmtPerGB(m.SourceCPUPerGB()), fmtMiB(m.SourcePeakRSS), m.Elapsed.Round(time.Millisecond), notes)
	}
	mirror, okM := r.Mode(ModeMirror)
	drain, okD := r.Mode(ModeDrain)
	pipe, okP := r.Mode(ModePipeline)
	if okM && (okD || okP) {
		fmt.Fprintln(w)
	}
	if okM && okD {
		ratio := mirror.MBps() / drain.MBps()
		fmt.Fprintf(w, "mirror/drain     %5.2fx MB/s (goal >= %.1fx: %s)\n", ratio, goalMirrorVsDrain, verdict(ratio >= goalMirrorVsDrain))
	}
	if okM && okP {
		ratio := mirror.MBps() / pipe.MBps()
		fmt.Fprintf(w, "mirror/pipeline  %5.2fx MB/s (goal >= %.1fx: %s)", ratio, goalMirrorVsPipeline, verdict(ratio >= goalMirrorVsPipeline))
		if mc, pc := mirror.CPUPerGB(), pipe.CPUPerGB(); mc > 0 && pc > 0 {
			fmt.Fprintf(w, "; CPU s/GB mirror %s vs pipeline %s (%.1fx less)", fmtPerGB(mc), fmtPerGB(pc), pc/mc)
		}
		fmt.Fprintln(w)
	}
	if okM && mirror.PeakRSS > 0 && (s.PID != 0 || !s.InProcess) {
		mib := float64(mirror.PeakRSS) / (1 << 20)
		fmt.Fprintf(w, "mirror peak RSS  %5.0f MiB (goal < %d MiB: %s)\n", mib, goalMirrorRSSMiB, verdict(mib < goalMirrorRSSMiB))
	}
	fmt.Fprintf(w, "\nMB/s: 10^6 source batch bytes per second (every mode counts the same bytes). lag: records behind\n"+
		"the source end, summed over partitions, sampled every %v (the source is idle during the phase,\n"+
		"so this is the backlog draining). CPU s/GB: user+system CPU seconds of this process per 10^9\n"+
		"source batch bytes. peak RSS: largest VmRSS sample of this process during the phase. src: the\n"+
		"source child process over the same phase.\n", sampleInterval)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func fmtPerGB(v float64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func fmtMiB(b int64) string {
	if b < 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 0, 64)
}
