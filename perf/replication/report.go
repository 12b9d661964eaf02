package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// result is one run of one system.
type result struct {
	system                    string
	run                       int
	produce                   producerResult
	consume                   consumerResult
	produceCPU, consumeCPU    cpuSpan
	catchUp                   time.Duration // from the producer's exit to all replicas in step
	leadersBefore, leadersAft map[int32]int32
	ends                      map[int32]int64
	sizes                     map[int32]map[int32]int64
	produceOut, consumeOut    string
}

// report is what one benchmark measured, written as it stands when the
// run ends (a failure keeps what was measured before it).
type report struct {
	started  time.Time
	args     []string
	opts     options
	versions map[string]string
	runs     []result
	catchups []catchupResult
	errs     []string
}

func newReport(args []string, o options) *report {
	return &report{started: time.Now(), args: args, opts: o, versions: map[string]string{}}
}

// Fail records an error that ended the run (benchrun.Report).
func (r *report) Fail(msg string) { r.errs = append(r.errs, msg) }

// median is the middle value of vs (the mean of the two middle ones for
// an even count), 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// medians are one system's medians over its runs.
type medians struct {
	n                                           int
	recsPerSec, mbPerSec, p50, p99, p999, avg   float64
	consMBPerSec, consRecsPerSec, fetchMBPerSec float64
	prodCPU, consCPU, catchUp                   float64
}

func (r *report) medians(system string) medians {
	var v struct{ a, b, c, d, e, f, g, h, i, j, k, l []float64 }
	m := medians{}
	for _, x := range r.runs {
		if x.system != system {
			continue
		}
		m.n++
		v.a = append(v.a, x.produce.recordsPerSec)
		v.b = append(v.b, x.produce.mbPerSec)
		v.c = append(v.c, x.produce.p50)
		v.d = append(v.d, x.produce.p99)
		v.e = append(v.e, x.produce.p999)
		v.f = append(v.f, x.produce.avgMs)
		v.g = append(v.g, x.consume.mbPerSec)
		v.h = append(v.h, x.consume.recordsPerSec)
		v.i = append(v.i, x.consume.fetchMBPerSec)
		// CPU seconds per GB of record values.
		gb := float64(x.produce.records) * float64(r.opts.recordSize) / 1e9
		v.j = append(v.j, x.produceCPU.nodes.Seconds()/gb)
		v.k = append(v.k, x.consumeCPU.nodes.Seconds()/gb)
		v.l = append(v.l, x.catchUp.Seconds()*1000)
	}
	m.recsPerSec, m.mbPerSec, m.p50, m.p99, m.p999, m.avg = median(v.a), median(v.b), median(v.c), median(v.d), median(v.e), median(v.f)
	m.consMBPerSec, m.consRecsPerSec, m.fetchMBPerSec = median(v.g), median(v.h), median(v.i)
	m.prodCPU, m.consCPU, m.catchUp = median(v.j), median(v.k), median(v.l)
	return m
}

// Write writes the report (benchrun.Report).
func (r *report) Write(w io.Writer) {
	fmt.Fprintf(w, "# perf/replication: RF 3, acks=all, kmirror vs Apache Kafka (issue 21)\n\n")
	fmt.Fprintf(w, "started %s, args %q\n", r.started.UTC().Format(time.RFC3339), r.args)
	for _, s := range allSystems {
		if v, ok := r.versions[s]; ok {
			fmt.Fprintf(w, "%s: %s\n", s, v)
		}
	}
	fmt.Fprintf(w, "records per run %d of %d bytes, %d partitions, RF 3, min.insync.replicas=2, %d runs per system (alternating), warm-up %d records\n\n",
		r.opts.records, r.opts.recordSize, r.opts.partitions, r.opts.runs, r.opts.warmupRecords)

	if len(r.runs) > 0 {
		fmt.Fprintln(w, "## every run")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "kafka-producer-perf-test acks=all (MB = MiB of values), then kafka-consumer-perf-test from the moved leaders; CPU s is the 3 nodes' during the tool")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| system | run | records/s | MB/s | avg ms | p50 ms | p95 ms | p99 ms | p99.9 ms | max ms | nodes CPU s | other CPU s | catch-up ms | consume MB/s | records/s | fetch MB/s | nodes CPU s | other CPU s |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, x := range r.runs {
			p, c := x.produce, x.consume
			fmt.Fprintf(w, "| %s | %d | %.0f | %.2f | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f | %.1f | %d | %.2f | %.0f | %.2f | %.1f | %.1f |\n",
				x.system, x.run, p.recordsPerSec, p.mbPerSec, p.avgMs, p.p50, p.p95, p.p99, p.p999, p.maxMs,
				x.produceCPU.nodes.Seconds(), x.produceCPU.others.Seconds(), x.catchUp.Milliseconds(),
				c.mbPerSec, c.recordsPerSec, c.fetchMBPerSec, x.consumeCPU.nodes.Seconds(), x.consumeCPU.others.Seconds())
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "## medians")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| system | runs | records/s | MB/s | avg ms | p50 ms | p99 ms | p99.9 ms | produce CPU s/GB | catch-up ms | consume MB/s | consume records/s | fetch MB/s | consume CPU s/GB |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, s := range allSystems {
			m := r.medians(s)
			if m.n == 0 {
				continue
			}
			fmt.Fprintf(w, "| %s | %d | %.0f | %.2f | %.1f | %.0f | %.0f | %.0f | %.1f | %.0f | %.2f | %.0f | %.2f | %.1f |\n", s, m.n,
				m.recsPerSec, m.mbPerSec, m.avg, m.p50, m.p99, m.p999, m.prodCPU, m.catchUp, m.consMBPerSec, m.consRecsPerSec, m.fetchMBPerSec, m.consCPU)
		}
		a, b := r.medians(systemKmirror), r.medians(systemKafka)
		if a.n > 0 && b.n > 0 {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "kmirror / Kafka, medians (throughput: above 1 is kmirror faster; latency and CPU: below 1 is kmirror better):")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| produce records/s | p50 | p99 | p99.9 | produce CPU/GB | consume MB/s | consume CPU/GB |")
			fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|")
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", ratio(a.recsPerSec, b.recsPerSec), ratio(a.p50, b.p50), ratio(a.p99, b.p99),
				ratio(a.p999, b.p999), ratio(a.prodCPU, b.prodCPU), ratio(a.consMBPerSec, b.consMBPerSec), ratio(a.consCPU, b.consCPU))
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "## replicas at the end of each run (checked: ISR = replicas, equal log sizes, end offsets sum to the records)")
		fmt.Fprintln(w)
		for _, x := range r.runs {
			var b strings.Builder
			for p := range int32(r.opts.partitions) {
				fmt.Fprintf(&b, " p%d:%d->%d end %d size %d;", p, x.leadersBefore[p], x.leadersAft[p], x.ends[p], x.sizes[p][x.leadersAft[p]])
			}
			fmt.Fprintf(w, "- %s run %d: leader before->after, end offset, bytes per replica:%s\n", x.system, x.run, b.String())
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "## tool output, first run of each system")
		seen := map[string]bool{}
		for _, x := range r.runs {
			if seen[x.system] {
				continue
			}
			seen[x.system] = true
			fmt.Fprintf(w, "\n### %s run %d: kafka-producer-perf-test\n\n%s\n### kafka-consumer-perf-test\n\n%s\n", x.system, x.run,
				strings.TrimSpace(x.produceOut), strings.TrimSpace(x.consumeOut))
		}
		fmt.Fprintln(w)
	}
	writeCatchups(w, r.catchups)
	for _, e := range r.errs {
		fmt.Fprintf(w, "ERROR: %s\n", e)
	}
}

// catchupGoal is issue 21's: kmirror's follower catch-up at 0.9x or more
// of a plain Fetch drain of the same partitions.
const catchupGoal = 0.9

// writeCatchups writes the catch-up measurements, if any.
func writeCatchups(w io.Writer, cs []catchupResult) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintln(w, "## follower catch-up (catchup.go)")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "a topic on two nodes filled (acks=all), then a third node added to every partition (AlterPartitionReassignments); catch-up is from that request "+
		"to the poll (every %v) that saw the new replica's DescribeLogDirs size equal the leader's on every partition and it in every ISR; "+
		"drain is plain Fetch requests from the same leaders at the follower's default sizes (%d KiB a partition, %d MiB a response, %v wait), "+
		"one connection per leader, in this process. Just before the reassignment, 1.25x the log's bytes are written to a scratch file "+
		"and deleted (pagecache.WarmFreePages: the new replica then writes into freshly freed pages, not ones the VM's balloon took back). "+
		"MB = MiB of log bytes.\n\n",
		catchupPoll, followerFetchMaxBytes>>10, followerFetchResponseBytes>>20, followerFetchWait)
	fmt.Fprintln(w, "| system | partitions | new replica | leaders | records | log MB | fill records/s | first byte s | all bytes s | catch-up s | resolution ms | polls | catch-up MB/s | drain s | drain requests | drain MB/s | catch-up/drain |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	by := map[string]catchupResult{}
	for _, c := range cs {
		by[c.system] = c
		var ls []string
		for p := range int32(c.partitions) {
			ls = append(ls, fmt.Sprintf("p%d:%d", p, c.leaders[p]))
		}
		up, dr := mibPerSec(c.bytes, c.took), mibPerSec(c.drain.bytes, c.drain.took)
		fmt.Fprintf(w, "| %s | %d | %d | %s | %d | %.1f | %.0f | %.3f | %.3f | %.3f | %d | %d | %.1f | %.3f | %d | %.1f | %s |\n", c.system, c.partitions, c.newReplica,
			strings.Join(ls, " "), c.records, float64(c.bytes)/(1<<20), c.fill.recordsPerSec, c.firstBytes.Seconds(), c.bytesAt.Seconds(), c.took.Seconds(), c.resolution.Milliseconds(), c.polls,
			up, c.drain.took.Seconds(), c.drain.requests, dr, ratio(up, dr))
	}
	fmt.Fprintln(w)
	a, okA := by[systemKmirror]
	b, okB := by[systemKafka]
	if okA {
		up, dr := mibPerSec(a.bytes, a.took), mibPerSec(a.drain.bytes, a.drain.took)
		fmt.Fprintf(w, "kmirror catch-up / kmirror drain: %s (goal >= %.1fx: %s)\n", ratio(up, dr), catchupGoal, metOrMissed(dr > 0 && up/dr >= catchupGoal))
	}
	if okA && okB {
		fmt.Fprintf(w, "catch-up MB/s kmirror / Kafka: %s\n", ratio(mibPerSec(a.bytes, a.took), mibPerSec(b.bytes, b.took)))
	}
	fmt.Fprintln(w)
}

func metOrMissed(met bool) string {
	if met {
		return "met"
	}
	return "missed"
}
