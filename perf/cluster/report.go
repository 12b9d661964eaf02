package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// summary is a latency series' order statistics.
type summary struct {
	n              int
	p50, p99, mean time.Duration
	min, max       time.Duration
}

// summarize computes ls's summary; the percentiles are nearest-rank (p99
// of 300 samples is the 297th smallest).
func summarize(ls latencies) summary {
	if len(ls) == 0 {
		return summary{}
	}
	s := slices.Clone(ls)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return summary{n: len(s), p50: rank(50), p99: rank(99), mean: sum / time.Duration(len(s)), min: s[0], max: s[len(s)-1]}
}

// report is what one run measured, written as it stands when the run
// ends (a failure keeps what was measured before it).
type report struct {
	started  time.Time
	args     []string
	opts     options
	versions map[string]string
	// cells are in the order measured; lat holds their samples.
	cells    []cellKey
	lat      map[cellKey]latencies
	fails    map[cellKey]int
	others   map[cellKey]time.Duration // other processes' CPU during the cell's blocks
	failover []failover
	errs     []string
}

func newReport(args []string, o options) *report {
	return &report{started: time.Now(), args: args, opts: o, versions: map[string]string{},
		lat: map[cellKey]latencies{}, fails: map[cellKey]int{}, others: map[cellKey]time.Duration{}}
}

func (r *report) add(k cellKey, d time.Duration) {
	if _, ok := r.lat[k]; !ok {
		r.cells = append(r.cells, k)
	}
	r.lat[k] = append(r.lat[k], d)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

func ratio(a, b time.Duration) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}

// Fail records an error that ended the run (benchrun.Report).
func (r *report) Fail(msg string) { r.errs = append(r.errs, msg) }

// Write writes the report (benchrun.Report).
func (r *report) Write(w io.Writer) {
	fmt.Fprintf(w, "# perf/cluster: the metadata quorum, kmirror vs Apache Kafka (issue 20)\n\n")
	fmt.Fprintf(w, "started %s, args %q\n", r.started.UTC().Format(time.RFC3339), r.args)
	for _, s := range allSystems {
		if v, ok := r.versions[s]; ok {
			fmt.Fprintf(w, "%s: %s\n", s, v)
		}
	}
	fmt.Fprintf(w, "writes per cell %d (in blocks of %d, the systems alternating), warm-up %d per op and system\n\n",
		r.opts.ops, r.opts.block, r.opts.warmup)

	if len(r.cells) > 0 {
		fmt.Fprintln(w, "## metadata-write latency, client-timed, sequential (ms)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| op | sent to | system | n | p50 | p99 | mean | min | max | failed | other CPU s |")
		fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, op := range []string{opAlter, opCreate} {
			for _, to := range []string{toFollower, toController} {
				for _, sys := range allSystems {
					k := cellKey{sys, op, to}
					ls, ok := r.lat[k]
					if !ok {
						continue
					}
					s := summarize(ls)
					fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %d | %.1f |\n", op, to, sys, s.n,
						ms(s.p50), ms(s.p99), ms(s.mean), ms(s.min), ms(s.max), r.fails[k], r.others[k].Seconds())
				}
			}
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "kmirror / Kafka (time; below 1 is kmirror faster):")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| op | sent to | p50 | p99 | mean |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|")
		for _, op := range []string{opAlter, opCreate} {
			for _, to := range []string{toFollower, toController} {
				a, okA := r.lat[cellKey{systemKmirror, op, to}]
				b, okB := r.lat[cellKey{systemKafka, op, to}]
				if !okA || !okB {
					continue
				}
				sa, sb := summarize(a), summarize(b)
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", op, to, ratio(sa.p50, sb.p50), ratio(sa.p99, sb.p99), ratio(sa.mean, sb.mean))
			}
		}
		fmt.Fprintln(w)
	}

	if len(r.failover) > 0 {
		fmt.Fprintln(w, "## kill -9 of the controller to the next successful CreateTopics (ms)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| system | round | sender | killed | sent to | next controller | took | successful attempt sent at | attempts | failed attempts |")
		fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---|")
		type key struct {
			system  string
			patient bool
		}
		meds := map[key][]time.Duration{}
		for _, f := range r.failover {
			var errs []string
			for _, k := range slices.Sorted(maps.Keys(f.errs)) {
				errs = append(errs, fmt.Sprintf("%s x%d", k, f.errs[k]))
			}
			fmt.Fprintf(w, "| %s | %d | %s | %d | %d | %d | %s | %s | %d | %s |\n", f.system, f.round, clientName(f.patient),
				f.killed, f.survivor, f.next, ms(f.took), ms(f.sentAt), f.attempts, strings.Join(errs, "; "))
			meds[key{f.system, f.patient}] = append(meds[key{f.system, f.patient}], f.took)
		}
		fmt.Fprintln(w)
		for _, patient := range []bool{true, false} {
			for _, sys := range allSystems {
				if ds, ok := meds[key{sys, patient}]; ok {
					fmt.Fprintf(w, "%s, %s: median %s ms of %d\n", sys, clientName(patient), ms(median(ds)), len(ds))
				}
			}
			if a, b := meds[key{systemKmirror, patient}], meds[key{systemKafka, patient}]; len(a) > 0 && len(b) > 0 {
				fmt.Fprintf(w, "kmirror / Kafka median, %s: %s\n", clientName(patient), ratio(median(a), median(b)))
			}
		}
		fmt.Fprintln(w)
	}
	for _, e := range r.errs {
		fmt.Fprintf(w, "ERROR: %s\n", e)
	}
}

// clientName names a failover's client.
func clientName(patient bool) string {
	if patient {
		return "client"
	}
	return "probe"
}
