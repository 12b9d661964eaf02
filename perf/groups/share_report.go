package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/perf/internal/benchcluster"
)

// joinTimes are one phase's durations over a system's join rounds.
func joinTimes(js []shareJoin, phase string) []time.Duration {
	var out []time.Duration
	for _, j := range js {
		switch phase {
		case "first":
			out = append(out, j.first)
		case "assigned":
			out = append(out, j.assigned)
		case "record":
			out = append(out, j.record)
		default:
			panic("BUG: unknown join phase " + phase)
		}
	}
	return out
}

var joinPhases = []string{"first", "assigned", "record"}

// ratio3 is a/b to three significant digits ("0.00223x"), "-" without
// both.
func ratio3(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3gx", a/b)
}

// medianFloat is the middle of xs, or the mean of the two middles.
func medianFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cellRates are a cell's complete reads' records/s, whole and after the
// first record.
func cellRates(rs []shareRead, records int) (whole, after []float64) {
	for _, r := range rs {
		if w, a := r.rate(records); w > 0 {
			whole, after = append(whole, w), append(after, a)
		}
	}
	return whole, after
}

func (sr *shareReport) empty() bool {
	return len(sr.setup) == 0 && len(sr.reads) == 0 && len(sr.joins) == 0
}

// write writes the share part of the report.
func (sr *shareReport) write(w io.Writer, o options) {
	fmt.Fprintln(w, "## share consumers (KIP-932)")
	fmt.Fprintln(w)
	hb := "5000 (the default)"
	if o.shareHeartbeatMS > 0 {
		hb = strconv.Itoa(o.shareHeartbeatMS)
	}
	fmt.Fprintf(w, "both: group.coordinator.rebalance.protocols=%s, group.share.heartbeat.interval.ms %s; topic %s: %d partitions, replication factor 3, %d records of %d bytes\n",
		shareProtocols, hb, shareTopic, o.sharePartitions, o.shareRecords, o.shareRecordBytes)
	for _, sys := range benchcluster.AllSystems {
		s, ok := sr.setup[sys]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "%s: %s; %s; produced in %.2f s (acks=all), end offsets %v; start offsets: %s\n",
			sys, s.apis, s.feature, s.produceTook.Seconds(), s.ends, s.start)
	}
	fmt.Fprintln(w)
	if len(sr.reads) > 0 {
		mb := float64(o.shareRecords*o.shareRecordBytes) / 1e6
		fmt.Fprintf(w, "### throughput: every record read once by a fresh share group (%d warm-up 1-consumer reads per system first)\n\n", o.shareWarmup)
		fmt.Fprintln(w, "| consumers | system | round | order | read | dups | late dups | corrupt | max delivery | to first ms | total s | records/s | MB/s | records/s after first | per member | nodes CPU s | other CPU s | errors |")
		fmt.Fprintln(w, "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|")
		for _, c := range o.shareConsumers {
			for _, sys := range benchcluster.AllSystems {
				for i, r := range sr.reads[shareKey{sys, c}] {
					whole, after := r.rate(o.shareRecords)
					var errs []string
					for _, e := range slices.Sorted(maps.Keys(r.errs)) {
						errs = append(errs, fmt.Sprintf("%s x%d", e, r.errs[e]))
					}
					fmt.Fprintf(w, "| %d | %s | %d | %s | %d | %d | %d | %d | %d | %s | %.2f | %.0f | %.2f | %.0f | %v | %.1f | %.1f | %s |\n",
						c, sys, i+1, r.order, r.distinct, r.dups, r.late, r.corrupt, r.maxDelivery, ms(r.toFirst), r.total.Seconds(),
						whole, whole*float64(o.shareRecordBytes)/1e6, after, r.perMember, r.cpu.nodes.Seconds(), r.cpu.others.Seconds(),
						strings.Join(errs, "; "))
				}
			}
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "median over the rounds (%.1f MB of values per read):\n\n", mb)
		fmt.Fprintln(w, "| consumers | system | reads complete | records/s | MB/s | records/s after first | nodes CPU ms per 10k records |")
		fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|")
		for _, c := range o.shareConsumers {
			for _, sys := range benchcluster.AllSystems {
				rs, ok := sr.reads[shareKey{sys, c}]
				if !ok {
					continue
				}
				whole, after := cellRates(rs, o.shareRecords)
				var cpu []float64
				for _, r := range rs {
					if r.complete {
						cpu = append(cpu, float64(r.cpu.nodes)/float64(time.Millisecond)/float64(o.shareRecords)*1e4)
					}
				}
				mw := medianFloat(whole)
				fmt.Fprintf(w, "| %d | %s | %d of %d | %.0f | %.2f | %.0f | %.0f |\n", c, sys, len(whole), len(rs), mw,
					mw*float64(o.shareRecordBytes)/1e6, medianFloat(after), medianFloat(cpu))
			}
		}
		fmt.Fprintln(w)
		header := false
		for _, c := range o.shareConsumers {
			aw, aa := cellRates(sr.reads[shareKey{benchcluster.Kmirror, c}], o.shareRecords)
			bw, ba := cellRates(sr.reads[shareKey{benchcluster.Kafka, c}], o.shareRecords)
			if len(aw) == 0 || len(bw) == 0 {
				continue
			}
			if !header {
				header = true
				fmt.Fprintln(w, "kmirror / Kafka (records/s, medians; above 1 is kmirror faster):")
				fmt.Fprintln(w)
				fmt.Fprintln(w, "| consumers | records/s | records/s after first |")
				fmt.Fprintln(w, "|---:|---:|---:|")
			}
			fmt.Fprintf(w, "| %d | %s | %s |\n", c, ratio3(medianFloat(aw), medianFloat(bw)), ratio3(medianFloat(aa), medianFloat(ba)))
		}
		fmt.Fprintln(w)
	}
	if len(sr.joins) > 0 {
		fmt.Fprintln(w, "### join (ms): first = a fresh group's member A made until its first record; assigned = member B made until")
		fmt.Fprintln(w, "### ShareGroupDescribe shows both with partitions; record = B made until B's first record")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| system | round | first | assigned | record | partitions held when assigned |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|")
		for _, sys := range benchcluster.AllSystems {
			for i, j := range sr.joins[sys] {
				fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %d+%d |\n", sys, i+1, ms(j.first), ms(j.assigned), ms(j.record), j.aParts, j.bParts)
			}
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| phase | system | n | median | p90 | min | max |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
		for _, ph := range joinPhases {
			for _, sys := range benchcluster.AllSystems {
				ds := joinTimes(sr.joins[sys], ph)
				if len(ds) == 0 {
					continue
				}
				fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s |\n", ph, sys, len(ds), ms(median(ds)), ms(percentile(ds, 90)),
					ms(slices.Min(ds)), ms(slices.Max(ds)))
			}
		}
		fmt.Fprintln(w)
		a, b := sr.joins[benchcluster.Kmirror], sr.joins[benchcluster.Kafka]
		if len(a) > 0 && len(b) > 0 {
			fmt.Fprintln(w, "kmirror / Kafka (time; below 1 is kmirror faster):")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| phase | median | p90 |")
			fmt.Fprintln(w, "|---|---:|---:|")
			for _, ph := range joinPhases {
				da, db := joinTimes(a, ph), joinTimes(b, ph)
				fmt.Fprintf(w, "| %s | %s | %s |\n", ph, ratio3(float64(median(da)), float64(median(db))),
					ratio3(float64(percentile(da, 90)), float64(percentile(db, 90))))
			}
			fmt.Fprintln(w)
		}
	}
}
