package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/perf/internal/benchcluster"
)

// commitKey names one commit cell.
type commitKey struct {
	system  string
	clients int
}

// commitCell is what a commit cell's blocks added up to.
type commitCell struct {
	ok, failed int
	elapsed    time.Duration // sum of the blocks' wall times
	lat        []time.Duration
	errs       map[string]int
	cpu        cpuUse
}

// The rebalance phases of a round.
const (
	phaseForm  = "form"
	phaseLeave = "leave"
	phaseJoin  = "join"
)

var phases = []string{phaseForm, phaseLeave, phaseJoin}

// report is what one run measured, written as it stands when the run
// ends (a failure keeps what was measured before it).
type report struct {
	started  time.Time
	args     []string
	opts     options
	versions map[string]string
	offsets  map[string]topicInfo
	spread   map[commitKey]string // groups per coordinator node
	commits  map[commitKey]*commitCell
	rounds   map[string][]roundResult // by system
	share    *shareReport             // --share
	errs     []string
}

func newReport(args []string, o options) *report {
	return &report{started: time.Now(), args: args, opts: o, versions: map[string]string{}, offsets: map[string]topicInfo{},
		spread: map[commitKey]string{}, commits: map[commitKey]*commitCell{}, rounds: map[string][]roundResult{},
		share: newShareReport()}
}

func (r *report) addCommits(k commitKey, s commitSample, u cpuUse) {
	c := r.commits[k]
	if c == nil {
		c = &commitCell{errs: map[string]int{}}
		r.commits[k] = c
	}
	c.ok, c.failed, c.elapsed = c.ok+s.ok, c.failed+s.failed, c.elapsed+s.elapsed
	c.lat = append(c.lat, s.lat...)
	for e, n := range s.errs {
		c.errs[e] += n
	}
	c.cpu.nodes += u.nodes
	c.cpu.others += u.others
}

func (r *report) addRound(system string, rr roundResult) {
	r.rounds[system] = append(r.rounds[system], rr)
}

// rate is a cell's commits per second of its blocks' wall time.
func (c *commitCell) rate() float64 {
	if c == nil || c.elapsed <= 0 {
		return 0
	}
	return float64(c.ok) / c.elapsed.Seconds()
}

// percentile is the nearest-rank p-th percentile of ds (p90 of 10 is the
// 9th smallest); median is the middle, or the mean of the two middles.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// phaseTimes are one phase's durations over a system's rounds.
func phaseTimes(rs []roundResult, phase string) []time.Duration {
	var out []time.Duration
	for _, r := range rs {
		switch phase {
		case phaseForm:
			out = append(out, r.form)
		case phaseLeave:
			out = append(out, r.leave)
		case phaseJoin:
			out = append(out, r.join)
		default:
			panic("BUG: unknown phase " + phase)
		}
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

func ratio(a, b float64) string {
	if b == 0 || a == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// Fail records an error that ended the run (benchrun.Report).
func (r *report) Fail(msg string) { r.errs = append(r.errs, msg) }

// Write writes the report (benchrun.Report).
func (r *report) Write(w io.Writer) {
	o := r.opts
	fmt.Fprintf(w, "# perf/groups: the group coordinator, kmirror vs Apache Kafka\n\n")
	fmt.Fprintf(w, "started %s, args %q\n", r.started.UTC().Format(time.RFC3339), r.args)
	for _, s := range benchcluster.AllSystems {
		if v, ok := r.versions[s]; ok {
			fmt.Fprintf(w, "%s: %s\n", s, v)
		}
	}
	for _, s := range benchcluster.AllSystems {
		if info, ok := r.offsets[s]; ok {
			fmt.Fprintf(w, "%s: %s has %d partitions, replicas per partition >= %d, ISR >= %d\n",
				s, offsetsTopic, info.partitions, info.minReplicas, info.minISR)
		}
	}
	fmt.Fprintf(w, "topic %s: %d partitions, replication factor 3; commits per cell %d (blocks of %d, the systems alternating), warm-up %d per client\n",
		benchTopic, o.partitions, o.commits, o.block, o.warmup)
	fmt.Fprintf(w, "rebalance: %d members, heartbeat %v, %d rounds per system after %d warm-up\n\n",
		o.members, o.heartbeat, o.rounds, o.warmupRounds)

	if len(r.commits) > 0 {
		r.writeCommits(w)
	}
	if len(r.rounds) > 0 {
		r.writeRounds(w)
	}
	if !r.share.empty() {
		r.share.write(w, o)
	}
	for _, e := range r.errs {
		fmt.Fprintf(w, "ERROR: %s\n", e)
	}
}

func (r *report) writeCommits(w io.Writer) {
	fmt.Fprintln(w, "## OffsetCommit throughput (generation -1, one partition per request, synchronous per client)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| clients | system | commits | failed | commits/s | p50 ms | p99 ms | mean ms | max ms | groups per coordinator | nodes CPU ms per 1000 | other CPU s |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
	for _, n := range r.opts.committers {
		for _, sys := range benchcluster.AllSystems {
			k := commitKey{sys, n}
			c, ok := r.commits[k]
			if !ok {
				continue
			}
			perK := 0.0
			if c.ok > 0 {
				perK = float64(c.cpu.nodes) / float64(time.Millisecond) / float64(c.ok) * 1000
			}
			var sum, top time.Duration
			for _, d := range c.lat {
				sum, top = sum+d, max(top, d)
			}
			mean := time.Duration(0)
			if len(c.lat) > 0 {
				mean = sum / time.Duration(len(c.lat))
			}
			fmt.Fprintf(w, "| %d | %s | %d | %d | %.0f | %s | %s | %s | %s | %s | %.0f | %.1f |\n", n, sys, c.ok, c.failed, c.rate(),
				ms(percentile(c.lat, 50)), ms(percentile(c.lat, 99)), ms(mean), ms(top), r.spread[k], perK, c.cpu.others.Seconds())
		}
	}
	fmt.Fprintln(w)
	for _, n := range r.opts.committers {
		for _, sys := range benchcluster.AllSystems {
			if c, ok := r.commits[commitKey{sys, n}]; ok && len(c.errs) > 0 {
				var errs []string
				for _, e := range slices.Sorted(maps.Keys(c.errs)) {
					errs = append(errs, fmt.Sprintf("%s x%d", e, c.errs[e]))
				}
				fmt.Fprintf(w, "%s, %d clients, failed commits: %s\n", sys, n, strings.Join(errs, "; "))
			}
		}
	}
	header := false
	for _, n := range r.opts.committers {
		a, b := r.commits[commitKey{benchcluster.Kmirror, n}], r.commits[commitKey{benchcluster.Kafka, n}]
		if a == nil || b == nil {
			continue
		}
		if !header {
			header = true
			fmt.Fprintln(w, "kmirror / Kafka (commits/s: above 1 is kmirror faster; latency: below 1 is kmirror faster):")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| clients | commits/s | p50 | p99 |")
			fmt.Fprintln(w, "|---:|---:|---:|---:|")
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s |\n", n, ratio(a.rate(), b.rate()),
			ratio(float64(percentile(a.lat, 50)), float64(percentile(b.lat, 50))),
			ratio(float64(percentile(a.lat, 99)), float64(percentile(b.lat, 99))))
	}
	fmt.Fprintln(w)
}

func (r *report) writeRounds(w io.Writer) {
	fmt.Fprintln(w, "## rebalance time (ms): form = K members started until settled; leave = one Closed until the rest settled;")
	fmt.Fprintln(w, "## join = a new member's client made until all settled")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| system | round | form | leave | join | generation after join |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, sys := range benchcluster.AllSystems {
		for i, rr := range r.rounds[sys] {
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %d |\n", sys, i+1, ms(rr.form), ms(rr.leave), ms(rr.join), rr.generation)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| phase | system | n | median | p90 | min | max |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
	for _, ph := range phases {
		for _, sys := range benchcluster.AllSystems {
			ds := phaseTimes(r.rounds[sys], ph)
			if len(ds) == 0 {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s |\n", ph, sys, len(ds), ms(median(ds)), ms(percentile(ds, 90)),
				ms(slices.Min(ds)), ms(slices.Max(ds)))
		}
	}
	fmt.Fprintln(w)
	a, b := r.rounds[benchcluster.Kmirror], r.rounds[benchcluster.Kafka]
	if len(a) == 0 || len(b) == 0 {
		return
	}
	fmt.Fprintln(w, "kmirror / Kafka (time; below 1 is kmirror faster):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| phase | median | p90 |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for _, ph := range phases {
		da, db := phaseTimes(a, ph), phaseTimes(b, ph)
		fmt.Fprintf(w, "| %s | %s | %s |\n", ph, ratio(float64(median(da)), float64(median(db))),
			ratio(float64(percentile(da, 90)), float64(percentile(db, 90))))
	}
	fmt.Fprintln(w)
}
