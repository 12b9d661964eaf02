package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/internal/procstat"
	"github.com/kmirror/kmirror/internal/realkafka"
)

// snapshot is the CPU of every process that matters at one instant. A
// process that does not exist (yet) counts 0; -1 marks a failed read.
type snapshot struct {
	at      time.Time
	copier  time.Duration
	dest    time.Duration // the destination broker, when it is not the copier
	source  time.Duration
	self    time.Duration // this runner (its polling)
	waited  time.Duration // this runner's children that ended (tool JVMs)
	machine procstat.MachineCPU
	ok      bool // machine read
}

// procs are the processes a phase watches; 0 is "none".
type procs struct {
	copier, dest, source int
}

func takeSnapshot(p procs) snapshot {
	s := snapshot{at: time.Now(), self: procstat.SelfCPU(), waited: procstat.ChildrenCPU()}
	read := func(pid int) time.Duration {
		if pid == 0 {
			return 0
		}
		d, err := procstat.ProcessCPU(pid)
		if err != nil {
			return -1
		}
		return d
	}
	s.copier, s.dest, s.source = read(p.copier), read(p.dest), read(p.source)
	m, err := procstat.ReadMachineCPU()
	s.machine, s.ok = m, err == nil
	return s
}

// span is CPU used between two snapshots.
type span struct {
	Wall                       time.Duration
	Copier, Dest, Source, Self time.Duration // -1 unknown
	// Waited is the CPU of this runner's children that ended in the span
	// (a kafka-consumer-perf-test JVM).
	Waited time.Duration
	// Other is what every other process on the machine used (the
	// machine's busy time minus interrupt work and the processes above):
	// other engineers' JVMs and builds, the kernel's own threads (page
	// writeback). IRQ is irq+softirq time, charged to no process; Steal
	// is time the host took.
	Other, IRQ, Steal time.Duration
}

func spanOf(a, b snapshot) span {
	d := func(x, y time.Duration) time.Duration {
		if x < 0 || y < 0 {
			return -1
		}
		return y - x
	}
	s := span{Wall: b.at.Sub(a.at), Copier: d(a.copier, b.copier), Dest: d(a.dest, b.dest),
		Source: d(a.source, b.source), Self: b.self - a.self, Waited: b.waited - a.waited, Other: -1, IRQ: -1, Steal: -1}
	if a.ok && b.ok && s.Copier >= 0 && s.Dest >= 0 && s.Source >= 0 {
		s.IRQ = b.machine.IRQ - a.machine.IRQ
		s.Other = max(0, b.machine.Busy-a.machine.Busy-s.IRQ-s.Copier-s.Dest-s.Source-s.Self-s.Waited)
		s.Steal = b.machine.Steal - a.machine.Steal
	}
	return s
}

// copyResult is one contender's measured copy.
type copyResult struct {
	Name string
	// FirstAt and DoneAt are measured from the launch: the copier's
	// process start. FirstAt is the first poll that saw a record at the
	// destination, DoneAt the first that saw every end offset reached.
	FirstAt, DoneAt time.Duration
	// Bytes is the source log bytes copied (all of the topic); Window
	// bytes those copied between FirstAt and DoneAt (in proportion to
	// the records still missing at FirstAt).
	Bytes, WindowBytes int64
	// FromLaunch and Window are the CPU spans launch..done and
	// first..done.
	FromLaunch, Window span
	// CopierHWM and DestHWM are VmHWM at the end (-1 unknown or none).
	CopierHWM, DestHWM int64
	// DestRecords and DestLogBytes describe the copy at the end.
	DestRecords, DestLogBytes int64
	// QuietShare is the other processes' CPU share just before the
	// launch (waitQuiet), -1 when not measured.
	QuietShare float64
	// Problems are errors seen during the copy (kmirror partitions not
	// MIRRORING, WARN/ERROR log lines).
	Problems []string
}

// MBps is source log megabytes (10^6) per second over the window (w) or
// from launch.
func (r copyResult) MBps(window bool) float64 {
	if window {
		return float64(r.WindowBytes) / 1e6 / (r.DoneAt - r.FirstAt).Seconds()
	}
	return float64(r.Bytes) / 1e6 / r.DoneAt.Seconds()
}

// perGB is CPU seconds per 10^9 source log bytes, -1 when unknown.
func perGB(cpu time.Duration, bytes int64) float64 {
	if cpu < 0 || bytes <= 0 {
		return -1
	}
	return cpu.Seconds() / (float64(bytes) / 1e9)
}

// copyWatch is what measureCopy needs from a contender.
type copyWatch struct {
	name      string
	destTopic string
	// start launches the copier (its process and, for kmirror, the
	// mirror RPCs) and returns its pid and the address the copy is read
	// back from; it runs inside the measured time.
	start func(ctx context.Context) (pid int, destAddr string, err error)
	// health is polled every second; an error ends the phase. problems
	// are noted and the phase goes on.
	health   func(ctx context.Context) (problems []string, err error)
	destPID  int // 0 when the copier is its own destination
	source   *realkafka.Broker
	ds       *dataset
	timeout  time.Duration
	pollStep time.Duration
	// quietShare and quietWait: see waitQuiet (quietWait 0 skips it).
	quietShare float64
	quietWait  time.Duration
}

// stallTimeout fails a copy that moved nothing for this long (MM2's
// first record included: its JVM and Connect start take 10-30 s).
const stallTimeout = 3 * time.Minute

// measureCopy launches a copier and polls the destination's end offsets
// until every partition reached the source's.
func measureCopy(ctx context.Context, w copyWatch, log *slog.Logger) (copyResult, error) {
	res := copyResult{Name: w.name, Bytes: w.ds.logBytes, CopierHWM: -1, DestHWM: -1, QuietShare: -1}
	ps := procs{dest: w.destPID, source: w.source.PID()}
	if w.quietWait > 0 {
		res.QuietShare = waitQuiet(ctx, ps, w.quietShare, w.quietWait, log)
	}
	launch := takeSnapshot(ps)
	pid, destAddr, err := w.start(ctx)
	if err != nil {
		return res, err
	}
	ps.copier = pid
	adm, cl, err := newAdmin(destAddr)
	if err != nil {
		return res, err
	}
	defer cl.Close()
	var (
		first        snapshot
		seenFirst    bool
		lastRecords  int64
		lastProgress = time.Now()
		nextHealth   = time.Now().Add(time.Second)
		nextLog      = time.Now().Add(5 * time.Second)
		seenProblems = map[string]bool{}
		pollErrs     int
	)
	tick := time.NewTicker(w.pollStep)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-tick.C:
		}
		now := time.Now()
		if now.Sub(launch.at) > w.timeout {
			return res, fmt.Errorf("%s: not caught up after %v (%d of %d records)", w.name, w.timeout, lastRecords, w.ds.records)
		}
		if !now.Before(nextHealth) {
			nextHealth = now.Add(time.Second)
			probs, err := w.health(ctx)
			if err != nil {
				return res, err
			}
			for _, p := range probs {
				if !seenProblems[p] {
					seenProblems[p] = true
					res.Problems = append(res.Problems, fmt.Sprintf("t=%.1fs %s", now.Sub(launch.at).Seconds(), p))
					log.Warn("copier problem", "copier", w.name, "problem", p)
				}
			}
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ends, err := endOffsets(pctx, adm, w.destTopic, w.ds.partitions)
		cancel()
		if err != nil {
			// Before MM2 created the topic, or a slow answer under load.
			if !errors.Is(err, errNoTopic) && !errors.Is(err, kerr.UnknownTopicOrPartition) {
				pollErrs++
			}
			if now.Sub(lastProgress) > stallTimeout {
				return res, fmt.Errorf("%s: no progress for %v (%d of %d records; last poll: %v)", w.name, stallTimeout, lastRecords, w.ds.records, err)
			}
			continue
		}
		var recs int64
		done := true
		for p, e := range ends {
			recs += min(e, w.ds.ends[p])
			if e < w.ds.ends[p] {
				done = false
			}
		}
		if recs != lastRecords {
			lastRecords, lastProgress = recs, now
		} else if now.Sub(lastProgress) > stallTimeout {
			return res, fmt.Errorf("%s: no progress for %v (%d of %d records)", w.name, stallTimeout, recs, w.ds.records)
		}
		if !seenFirst && recs > 0 {
			first, seenFirst = takeSnapshot(ps), true
			res.FirstAt = first.at.Sub(launch.at)
			res.WindowBytes = int64(float64(w.ds.logBytes) * (1 - float64(recs)/float64(w.ds.records)))
			log.Info("first records at the destination", "copier", w.name, "after", res.FirstAt.Round(time.Millisecond), "records", recs)
		}
		if done {
			end := takeSnapshot(ps)
			res.DoneAt = end.at.Sub(launch.at)
			res.FromLaunch, res.Window = spanOf(launch, end), spanOf(first, end)
			for _, e := range ends {
				res.DestRecords += e
			}
			break
		}
		if !now.Before(nextLog) {
			nextLog = now.Add(5 * time.Second)
			log.Info("copying", "copier", w.name, "t", now.Sub(launch.at).Round(time.Second),
				"records", recs, "of", w.ds.records, "pct", fmt.Sprintf("%.1f", 100*float64(recs)/float64(w.ds.records)))
		}
	}
	if hwm, err := procstat.ProcessMem(ps.copier, "VmHWM"); err == nil {
		res.CopierHWM = hwm
	}
	if w.destPID != 0 {
		if hwm, err := procstat.ProcessMem(w.destPID, "VmHWM"); err == nil {
			res.DestHWM = hwm
		}
	}
	if b, err := logBytes(ctx, adm, w.destTopic); err == nil {
		res.DestLogBytes = b
	} else {
		res.Problems = append(res.Problems, "reading the copy's log size: "+err.Error())
	}
	if pollErrs > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d end-offset polls of the destination failed (retried)", pollErrs))
	}
	return res, nil
}

// waitQuiet waits, up to maxWait, for a 2 s stretch in which processes
// other than ps (other users' JVMs and builds, the kernel writing back the
// previous phase's data) and the host (steal) use less than share of the
// machine's CPUs, so a
// copy does not start into someone else's burst. It returns the share of
// the last stretch; after maxWait the phase starts anyway and the table
// shows the noise.
func waitQuiet(ctx context.Context, ps procs, share float64, maxWait time.Duration, log *slog.Logger) float64 {
	deadline := time.Now().Add(maxWait)
	for {
		a := takeSnapshot(ps)
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(2 * time.Second):
		}
		s := spanOf(a, takeSnapshot(ps))
		if s.Other < 0 {
			return -1 // no /proc: nothing to wait for
		}
		got := (s.Other + s.Steal).Seconds() / (s.Wall.Seconds() * float64(runtime.NumCPU()))
		if got < share || time.Now().After(deadline) {
			if got >= share {
				log.Warn("the machine is still busy; starting anyway", "other_cpu_share", fmt.Sprintf("%.2f", got))
			}
			return got
		}
		log.Info("waiting for the machine to calm down", "other_cpu_share", fmt.Sprintf("%.2f", got), "want_below", share)
	}
}
