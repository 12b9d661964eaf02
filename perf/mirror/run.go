package mirror

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sync"
	"time"
)

// Result is what Run measured.
type Result struct {
	// Options are the effective options (defaults filled in).
	Options Options
	Source  SourceInfo
	Modes   []ModeResult
}

// SourceInfo describes the source and the data filled into it.
type SourceInfo struct {
	Kind string // kmirror, kfake or external
	Addr string
	// InProcess: the source shares this process, so its CPU and memory
	// are in every mode's numbers.
	InProcess bool
	// PID is the source child's process id, 0 when there is none.
	PID          int
	Topic        string
	Partitions   int
	Records      int64
	SegmentBytes int64 // whole-batch bytes of the topic, all partitions
	Uncompressed int64 // value bytes produced
	FillTime     time.Duration
}

// Ratio is the compression ratio of the filled data.
func (s SourceInfo) Ratio() float64 {
	if s.SegmentBytes == 0 {
		return 0
	}
	return float64(s.Uncompressed) / float64(s.SegmentBytes)
}

// ModeResult is one mode's measured phase.
type ModeResult struct {
	Mode    Mode
	Elapsed time.Duration
	// Bytes and Records are the source segment bytes and records moved.
	Bytes   int64
	Records int64
	// CaughtUp: every partition reached the source end offsets (false
	// when Duration ended the phase first).
	CaughtUp bool
	// Lag samples, in records, every 100 ms.
	LagP50, LagP99, LagMax int64
	LagSamples             int
	// CPU is this process's user+system CPU over the phase; -1 unknown.
	CPU time.Duration
	// SourceCPU is the source child's CPU over the phase; -1 unknown or
	// no child.
	SourceCPU time.Duration
	// PeakRSS is the largest VmRSS sample of this process during the
	// phase (bytes); BaseRSS the sample just before it started; -1
	// unknown.
	PeakRSS, BaseRSS int64
	// SourcePeakRSS is the child source's largest VmRSS sample, -1 when
	// unknown or no child.
	SourcePeakRSS int64
	// ConsumerRecords is what the optional consumer on the mirror node
	// read (-1 without one).
	ConsumerRecords int64
	// Verified is set when Options.Verify checked the copy.
	Verified bool
}

// MBps is source segment megabytes (10^6) per second.
func (m ModeResult) MBps() float64 { return float64(m.Bytes) / 1e6 / m.Elapsed.Seconds() }

// RecordsPerSec is source records per second.
func (m ModeResult) RecordsPerSec() float64 { return float64(m.Records) / m.Elapsed.Seconds() }

// CPUPerGB is this process's CPU seconds per 10^9 segment bytes, -1 when
// unknown.
func (m ModeResult) CPUPerGB() float64 { return perGB(m.CPU, m.Bytes) }

// SourceCPUPerGB is the source child's CPU seconds per 10^9 segment bytes,
// -1 when unknown.
func (m ModeResult) SourceCPUPerGB() float64 { return perGB(m.SourceCPU, m.Bytes) }

func perGB(d time.Duration, bytes int64) float64 {
	if d < 0 || bytes <= 0 {
		return -1
	}
	return d.Seconds() / (float64(bytes) / 1e9)
}

// Mode returns the result of mode m, if it ran.
func (r Result) Mode(m Mode) (ModeResult, bool) {
	for _, mr := range r.Modes {
		if mr.Mode == m {
			return mr, true
		}
	}
	return ModeResult{}, false
}

// Run fills a source once and measures each mode of opts.Modes on it.
func Run(ctx context.Context, opts Options) (res Result, err error) {
	opts = opts.WithDefaults()
	if err := opts.Validate(); err != nil {
		return Result{}, err
	}
	log := opts.Logger
	src, err := startSource(ctx, opts, log)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if cerr := src.close(); cerr != nil && err == nil {
			err = fmt.Errorf("stopping the source: %w", cerr)
		}
	}()
	ds, err := fill(ctx, opts, src, log)
	if err != nil {
		return Result{}, err
	}
	if src.kind == "external" {
		defer deleteTopic(src, ds.topic, log)
	}
	res = Result{Options: opts, Source: SourceInfo{Kind: src.kind, Addr: src.addrs[0], InProcess: src.inProcess,
		PID: src.pid, Topic: ds.topic, Partitions: ds.partitions, Records: ds.records,
		SegmentBytes: ds.totalBytes, Uncompressed: ds.uncompressed, FillTime: ds.fillTime}}
	for _, m := range opts.Modes {
		var r modeRun
		switch m {
		case ModeMirror:
			r = &mirrorRun{opts: opts, ds: ds, src: src}
		case ModeDrain:
			r = &drainRun{opts: opts, ds: ds}
		case ModePipeline:
			r = &pipelineRun{opts: opts, ds: ds, src: src}
		}
		mr, err := measure(ctx, opts, m, r, src, ds)
		if err != nil {
			return res, fmt.Errorf("mode %s: %w", m, err)
		}
		log.Info("mode done", "mode", m, "mb_per_s", fmt.Sprintf("%.1f", mr.MBps()), "elapsed", mr.Elapsed.Round(time.Millisecond))
		res.Modes = append(res.Modes, mr)
	}
	return res, nil
}

// modeRun is one mode's copy. setup and close are outside the measured
// phase; start begins it.
type modeRun interface {
	setup(ctx context.Context) error
	start(ctx context.Context) error
	// caughtUp reports whether every partition reached its end; it is
	// polled every pollInterval, so it must be cheap.
	caughtUp() bool
	// lag is the backlog in records, summed over partitions.
	lag() int64
	// moved is the source segment bytes and records copied so far.
	moved() (bytes, records int64)
	// err is the mode's first failure, if any (checked at every sample).
	err() error
	// consumed is what the optional consumer read, -1 without one.
	consumed() int64
	// verify checks the copy after the phase (Options.Verify).
	verify(ctx context.Context) error
	close() error
}

const (
	pollInterval   = 2 * time.Millisecond
	sampleInterval = 100 * time.Millisecond
	// stallTimeout fails a phase that moves no byte for this long.
	stallTimeout = 60 * time.Second
)

// measure runs one mode's phase and samples it.
func measure(ctx context.Context, opts Options, m Mode, r modeRun, src *source, ds *dataset) (res ModeResult, err error) {
	defer func() {
		if cerr := r.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := r.setup(ctx); err != nil {
		return ModeResult{}, err
	}
	// Give back what the fill or an earlier mode left, so the RSS
	// samples are this mode's.
	runtime.GC()
	debug.FreeOSMemory()

	res = ModeResult{Mode: m, CPU: -1, SourceCPU: -1, PeakRSS: -1, BaseRSS: -1, SourcePeakRSS: -1}
	if rss, ok := procRSS(0); ok {
		res.BaseRSS, res.PeakRSS = rss, rss
	}
	sampleRSS := func() {
		if rss, ok := procRSS(0); ok {
			res.PeakRSS = max(res.PeakRSS, rss)
		}
		if src.pid != 0 {
			if rss, ok := procRSS(src.pid); ok {
				res.SourcePeakRSS = max(res.SourcePeakRSS, rss)
			}
		}
	}
	stopProfile, err := startProfile(opts, m)
	if err != nil {
		return ModeResult{}, err
	}
	cpu0, cpuOK := procCPU(0)
	src0, srcOK := time.Duration(0), false
	if src.pid != 0 {
		src0, srcOK = procCPU(src.pid)
	}
	phaseCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	t0 := time.Now()
	if err := r.start(phaseCtx); err != nil {
		stopProfile()
		return ModeResult{}, err
	}
	var lags []int64
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	nextSample := t0
	lastMoved, lastProgress := int64(-1), t0
	for {
		if r.caughtUp() {
			res.CaughtUp = true
			break
		}
		now := time.Now()
		if opts.Duration > 0 && now.Sub(t0) >= opts.Duration {
			break
		}
		if !now.Before(nextSample) {
			nextSample = nextSample.Add(sampleInterval)
			lags = append(lags, r.lag())
			sampleRSS()
			if err := r.err(); err != nil {
				stopProfile()
				return ModeResult{}, err
			}
			if b, _ := r.moved(); b != lastMoved {
				lastMoved, lastProgress = b, now
			} else if now.Sub(lastProgress) > stallTimeout {
				stopProfile()
				return ModeResult{}, fmt.Errorf("no progress for %v (lag %d records)", stallTimeout, r.lag())
			}
		}
		select {
		case <-ctx.Done():
			stopProfile()
			return ModeResult{}, ctx.Err()
		case <-tick.C:
		}
	}
	res.Elapsed = time.Since(t0)
	if cpu1, ok := procCPU(0); ok && cpuOK {
		res.CPU = cpu1 - cpu0
	}
	if srcOK {
		if src1, ok := procCPU(src.pid); ok {
			res.SourceCPU = src1 - src0
		}
	}
	sampleRSS()
	stopProfile()
	res.Bytes, res.Records = r.moved()
	res.ConsumerRecords = r.consumed()
	if err := r.err(); err != nil {
		return ModeResult{}, err
	}
	slices.Sort(lags)
	res.LagSamples = len(lags)
	if len(lags) > 0 {
		res.LagP50, res.LagP99, res.LagMax = percentile(lags, 50), percentile(lags, 99), lags[len(lags)-1]
	}
	cancel()
	if opts.Verify && res.CaughtUp {
		if err := r.verify(ctx); err != nil {
			return ModeResult{}, fmt.Errorf("verify: %w", err)
		}
		res.Verified = true
	}
	return res, nil
}

// percentile is the nearest-rank percentile of sorted samples.
func percentile(sorted []int64, p int) int64 {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

// startProfile starts the CPU profile of one mode's phase, if asked.
func startProfile(opts Options, m Mode) (stop func(), err error) {
	if opts.CPUProfile == "" {
		return func() {}, nil
	}
	path := opts.CPUProfile
	if len(opts.Modes) > 1 {
		ext := filepath.Ext(path)
		path = path[:len(path)-len(ext)] + "-" + string(m) + ext
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// errBox keeps a mode's first error.
type errBox struct {
	mu  sync.Mutex
	err error
}

func (e *errBox) set(err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
}

func (e *errBox) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}
