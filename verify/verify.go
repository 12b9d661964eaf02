package verify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/fetch"
)

// Partition names one partition to verify.
type Partition struct {
	Topic     string
	Partition int32
	// StoppedAt is, for a partition the copy's mirror has STOPPED, the
	// offset mirroring stopped at (DescribeClusterMirrors' destination
	// offset); -1 otherwise. Offsets from it on are each side's own.
	StoppedAt int64
	// Compacted: the topic's cleanup.policy includes compact.
	Compacted bool
}

// Config is one audit.
type Config struct {
	// Source and Copy reach the two clusters for metadata and offsets;
	// SourceConn and CopyConn are the same security for the fetches'
	// raw connections (fetch.Conn).
	Source, Copy         *kgo.Client
	SourceConn, CopyConn fetch.ConnConfig
	Partitions           []Partition
	// Parallel is how many partitions are read at once (default 8),
	// each on connections of its own, and PartitionMaxBytes bounds every
	// Fetch answer (default 1 MiB, the mirror fetchers' size): a run holds
	// about 2 sides x Parallel responses (16 MiB by default; the response
	// read ahead is kept as batch headers only). Measured on a kmirror
	// source (BENCHMARKS.md): 1 MiB read fastest and with the least CPU;
	// 512 KiB, 2 MiB and 4 MiB were slower.
	Parallel          int
	PartitionMaxBytes int32
	// Throttle caps the bytes read per second, both sides together; 0 is
	// unlimited.
	Throttle int64
	// RequestTimeout bounds every request (default 30s). The run itself
	// has no deadline but ctx's.
	RequestTimeout time.Duration
}

// Defaults of Config.
const (
	DefaultParallel          = 8
	DefaultPartitionMaxBytes = 1 << 20
	DefaultRequestTimeout    = 30 * time.Second
)

func (c Config) withDefaults() Config {
	if c.Parallel <= 0 {
		c.Parallel = DefaultParallel
	}
	if c.PartitionMaxBytes <= 0 {
		c.PartitionMaxBytes = DefaultPartitionMaxBytes
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	return c
}

// Validate reports a Config that cannot run.
func (c Config) Validate() error {
	switch {
	case c.Source == nil || c.Copy == nil:
		return errors.New("verify: both a source and a copy client are needed")
	case c.Throttle < 0:
		return fmt.Errorf("verify: throttle %d bytes/s is negative", c.Throttle)
	}
	return nil
}

// Status is a partition's verdict.
type Status string

// Statuses.
const (
	// Identical: every batch both sides hold in the window is the same.
	Identical Status = "IDENTICAL"
	// Differs: at least one difference (see Result.FirstDiff).
	Differs Status = "DIFFERS"
	// Failed: the partition could not be verified (Result.Err).
	Failed Status = "ERROR"
)

// Result is one partition's audit.
type Result struct {
	Topic     string
	Partition int32
	Status    Status
	// ComparedBatches and ComparedBytes count the identical pairs (bytes
	// of one side); DifferingBatches the differences.
	ComparedBatches, ComparedBytes, DifferingBatches int64
	// FirstDiff is the offset of the first difference, -1 when none.
	FirstDiff int64
	// OnlyInCopy: offsets the copy holds and the source does not;
	// MissingInCopy: batches the source holds in the window and the copy
	// lacks (differences); NotCopied: source offsets outside the window.
	OnlyInCopy, MissingInCopy, NotCopied Ranges
	// Each side's log start and high watermark as read at the start; -1
	// when unknown.
	SourceLogStart, SourceHighWatermark, CopyLogStart, CopyHighWatermark int64
	// From and To are the compared window [From, To); From >= To when the
	// sides hold no offsets in common.
	From, To  int64
	StoppedAt int64
	Compacted bool
	// ReadBytes is what was fetched from both sides.
	ReadBytes int64
	// Notes say more, in words (damaged batches, compaction).
	Notes []string
	Err   error
}

// maxNotes bounds Result.Notes.
const maxNotes = 4

func (r *Result) note(s string) {
	if len(r.Notes) < maxNotes {
		r.Notes = append(r.Notes, s)
	}
}

// partOffsets is one partition's log start and high watermark on one side.
type partOffsets struct {
	start, end int64
	err        error
}

// listOffsets reads a side's log starts and high watermarks; the error is
// for the whole side, each partition's is in its entry.
func listOffsets(ctx context.Context, s *side, topics []string) (map[string]map[int32]partOffsets, error) {
	adm := kadm.NewClient(s.cl)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing the %s's log start offsets: %w", s.name, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing the %s's high watermarks: %w", s.name, err)
	}
	out := map[string]map[int32]partOffsets{}
	ends.Each(func(e kadm.ListedOffset) {
		st, ok := starts.Lookup(e.Topic, e.Partition)
		po := partOffsets{start: st.Offset, end: e.Offset, err: errors.Join(e.Err, st.Err)}
		if !ok && po.err == nil {
			po.err = errors.New("no log start offset")
		}
		if po.err != nil {
			po.err = fmt.Errorf("the %s's offsets of %s-%d: %w", s.name, e.Topic, e.Partition, po.err)
		}
		if out[e.Topic] == nil {
			out[e.Topic] = map[int32]partOffsets{}
		}
		out[e.Topic][e.Partition] = po
	})
	return out, nil
}

// lookup is p's offsets on side s from offs (listed with err).
func lookup(s *side, offs map[string]map[int32]partOffsets, err error, topic string, p int32) partOffsets {
	if err != nil {
		return partOffsets{err: err}
	}
	po, ok := offs[topic][p]
	if !ok {
		return partOffsets{err: fmt.Errorf("the %s has no partition %s-%d: %w", s.name, topic, p, ErrUnknownPartition)}
	}
	return po
}

// Run verifies every partition of cfg and returns their results in the
// order given. Errors of one partition are in its Result; the error
// returned is for a run that could not start (a Config that does not
// validate).
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.SourceConn.RequestTimeout = cmp.Or(cfg.SourceConn.RequestTimeout, cfg.RequestTimeout)
	cfg.CopyConn.RequestTimeout = cmp.Or(cfg.CopyConn.RequestTimeout, cfg.RequestTimeout)
	src := &side{name: "source", cl: cfg.Source, conn: cfg.SourceConn, timeout: cfg.RequestTimeout, maxIdle: cfg.Parallel}
	cp := &side{name: "copy", cl: cfg.Copy, conn: cfg.CopyConn, timeout: cfg.RequestTimeout, maxIdle: cfg.Parallel}
	defer src.closeIdle()
	defer cp.closeIdle()
	var topics []string
	seen := map[string]bool{}
	for _, p := range cfg.Partitions {
		if !seen[p.Topic] {
			seen[p.Topic] = true
			topics = append(topics, p.Topic)
		}
	}
	results := make([]Result, len(cfg.Partitions))
	for i, p := range cfg.Partitions {
		results[i] = Result{Topic: p.Topic, Partition: p.Partition, FirstDiff: -1, StoppedAt: p.StoppedAt,
			Compacted: p.Compacted, SourceLogStart: -1, SourceHighWatermark: -1, CopyLogStart: -1, CopyHighWatermark: -1}
	}
	if len(topics) == 0 {
		return results, nil
	}
	// The copy first: it only grows while it mirrors, and every offset
	// below its high watermark read now is below the source's read next.
	cpOffs, cpErr := listOffsets(ctx, cp, topics)
	srcOffs, srcErr := listOffsets(ctx, src, topics)
	sc := streamConfig{maxBytes: cfg.PartitionMaxBytes, throttle: newThrottle(cfg.Throttle), read: new(atomic.Int64)}

	sem := make(chan struct{}, cfg.Parallel)
	var wg sync.WaitGroup
	for i := range results {
		r := &results[i]
		so := lookup(src, srcOffs, srcErr, r.Topic, r.Partition)
		co := lookup(cp, cpOffs, cpErr, r.Topic, r.Partition)
		if so.err != nil || co.err != nil {
			r.Status, r.Err = Failed, cmp.Or(co.err, so.err)
			continue
		}
		r.SourceLogStart, r.SourceHighWatermark, r.CopyLogStart, r.CopyHighWatermark = so.start, so.end, co.start, co.end
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var read atomic.Int64
			psc := sc
			psc.read = &read
			verifyPartition(ctx, src, cp, psc, r)
			r.ReadBytes = read.Load()
		}()
	}
	wg.Wait()
	return results, nil
}

// verifyPartition fills r, whose offsets are set.
func verifyPartition(ctx context.Context, src, cp *side, sc streamConfig, r *Result) {
	window(r)
	if r.From < r.To {
		ctx, cancel := context.WithCancel(ctx)
		a := src.openStream(ctx, sc, r.Topic, r.Partition, r.From, r.To)
		b := cp.openStream(ctx, sc, r.Topic, r.Partition, r.From, r.To)
		// Whatever the merge ended on, both readers stop and give their
		// connections back before the run can close them.
		defer func() { cancel(); <-a.done; <-b.done }()
		m := merger{res: r}
		if err := m.run(a, b); err != nil {
			var de *DamagedError
			if !errors.As(err, &de) {
				r.Status, r.Err = Failed, err
				return
			}
			m.differ(de.Offset)
			r.note(de.Error() + "; nothing after it was compared")
		}
	} else if r.SourceLogStart < r.SourceHighWatermark || r.CopyLogStart < r.CopyHighWatermark {
		r.note("the two sides hold no offsets in common: nothing compared")
	}
	// The window's ranges came first, the merge's after: offset order.
	for _, rs := range []*Ranges{&r.OnlyInCopy, &r.MissingInCopy, &r.NotCopied} {
		slices.SortFunc(rs.List, func(a, b Range) int { return cmp.Compare(a.First, b.First) })
	}
	r.Status = Identical
	if r.DifferingBatches > 0 {
		r.Status = Differs
		if r.Compacted {
			r.note("compacted topic: a batch cleaned on one side after it was mirrored (by the source's cleaner; on a " +
				"stopped topic, by the copy's too) differs from the other side's")
		}
	}
}

// window sets r's compared window and the ranges outside it (package doc).
// REQUIRES: r's offsets are set.
func window(r *Result) {
	s0, sh, c0, ch := r.SourceLogStart, r.SourceHighWatermark, r.CopyLogStart, r.CopyHighWatermark
	ce := ch // where the copy's mirrored offsets end
	stopped := r.StoppedAt >= 0
	if stopped {
		ce = min(ch, r.StoppedAt)
	}
	r.From, r.To = max(s0, c0), min(sh, ce)
	// span adds [from, to) intersected with the holder's [hs, he).
	span := func(rs *Ranges, from, to, hs, he int64, reason string) {
		from, to = max(from, hs), min(to, he)
		if from < to {
			rs.add(Range{First: from, Last: to - 1, Reason: reason}, false)
		}
	}
	span(&r.NotCopied, s0, c0, s0, sh, ReasonBeforeCopyStart)
	span(&r.OnlyInCopy, c0, s0, c0, ce, ReasonSourceLogStart)
	// The copy's mirrored offsets past the source's end, and past that
	// a stopped copy's own writes.
	span(&r.OnlyInCopy, max(sh, s0), ce, c0, ce, ReasonAfterSourceEnd)
	if stopped {
		span(&r.OnlyInCopy, ce, ch, c0, ch, ReasonWrittenAfterStop)
		span(&r.NotCopied, max(ce, c0), sh, s0, sh, ReasonSourceAfterStop)
	} else {
		span(&r.NotCopied, max(ce, c0), sh, s0, sh, ReasonAfterCopyEnd)
	}
}
