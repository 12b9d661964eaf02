//go:build unix

package storage

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/batch"
)

// Crash safety under SIGKILL. TestCrashRecoverySIGKILL re-executes the test
// binary as a writer process (TestCrashWriterProcess), kills it at a random
// moment, and checks that the log it left behind recovers: everything the
// writer reported as flushed is there, byte for byte, and the recovered log
// is consistent (offsets, high watermark, epochs, producer state, last
// stable offset) and accepts appends. The next round runs on the same
// directory, so later rounds recover logs that earlier recoveries wrote.
//
// SIGKILL loses no page cache, so data written but not flushed normally
// survives too; the test accepts any recovered tail that is a prefix of what
// the writer appended and covers the last reported flushed offset. Power
// loss is not simulated here.
//
// The writer's batches are a function of (seed, round, start offset, start
// epoch): the parent regenerates them with the same crashGen to compare.

const (
	crashWriterEnv    = "KMIRROR_CRASH_WRITER" // partition dir; set only in the child
	crashParamsEnv    = "KMIRROR_CRASH_PARAMS" // "seed round start epoch flushEvery"
	crashSegmentBytes = 64 << 10
	crashRounds       = 25
	crashSeed         = 0x6b6d6972726f72 // any constant; the rounds are reproducible
	crashTsBase       = 1_700_000_000_000
)

// TestCrashWriterProcess is the writer half of TestCrashRecoverySIGKILL. Run
// directly (no KMIRROR_CRASH_WRITER in the environment) it does nothing and
// passes.
func TestCrashWriterProcess(t *testing.T) {
	dir := os.Getenv(crashWriterEnv)
	if dir == "" {
		return
	}
	err := runCrashWriter(dir, os.Getenv(crashParamsEnv))
	// The writer only returns on failure: the parent kills it.
	fmt.Fprintf(os.Stderr, "crash writer: %v\n", err)
	os.Exit(3)
}

// crashParams is what the parent hands a writer round.
type crashParams struct {
	seed       uint64
	round      int
	start      int64 // log end offset at which the writer resumes
	epoch      int32 // leader epoch of the log's last batch (0 when empty)
	flushEvery int   // Flush after every flushEvery chunks
}

func (p crashParams) String() string {
	return fmt.Sprintf("%d %d %d %d %d", p.seed, p.round, p.start, p.epoch, p.flushEvery)
}

// runCrashWriter appends generated chunks until killed. After each Flush
// returns it prints "flushed <log end offset>": from then on the parent may
// rely on everything below that offset.
func runCrashWriter(dir, params string) error {
	var p crashParams
	if _, err := fmt.Sscan(params, &p.seed, &p.round, &p.start, &p.epoch, &p.flushEvery); err != nil {
		return fmt.Errorf("bad %s %q: %w", crashParamsEnv, params, err)
	}
	l, err := Open(dir, Config{SegmentBytes: crashSegmentBytes})
	if err != nil {
		return err
	}
	if leo := l.LogEndOffset(); leo != p.start {
		return fmt.Errorf("log end offset %d, the parent expected %d", leo, p.start)
	}
	fmt.Fprintf(os.Stdout, "ready %d\n", p.start)
	g := newCrashGen(p)
	deadline := time.Now().Add(30 * time.Second)
	for n := 1; time.Now().Before(deadline); n++ {
		if _, err := l.AppendMirror(g.chunk()); err != nil {
			return err
		}
		if n%p.flushEvery == 0 {
			if err := l.Flush(); err != nil {
				return err
			}
			// One write(2) per line, so the parent never sees half of it.
			fmt.Fprintf(os.Stdout, "flushed %d\n", l.LogEndOffset())
		}
	}
	return errors.New("not killed within 30s")
}

// crashGen generates a writer round's mirror chunks deterministically: data
// batches of mixed sizes, some idempotent, some transactional with COMMIT
// and ABORT markers, offset gaps, and a leader epoch that grows now and then.
type crashGen struct {
	rng   *rand.Rand
	round int
	next  int64
	epoch int32
	ts    int64
	seq   [4]int32 // producers 0-1 idempotent, 2-3 transactional
	inTxn [4]bool
}

var crashValueSizes = []int{0, 16, 200, 1500, 6000}

func newCrashGen(p crashParams) *crashGen {
	return &crashGen{
		rng:   rand.New(rand.NewPCG(p.seed, uint64(p.round))),
		round: p.round,
		next:  p.start,
		epoch: p.epoch,
		ts:    crashTsBase + int64(p.round)*10_000_000,
	}
}

// crashPID gives every round its own producer ids, so that a transaction
// left open by a killed writer never mixes with the next round's.
func crashPID(round, j int) int64 { return int64(100 + 4*round + j) }

// chunk returns the next AppendMirror chunk: one to four batches.
func (g *crashGen) chunk() []byte {
	var out []byte
	for range 1 + g.rng.IntN(4) {
		out = append(out, g.batch()...)
	}
	return out
}

func (g *crashGen) batch() []byte {
	if g.rng.IntN(8) == 0 {
		g.next += 1 + int64(g.rng.IntN(50)) // a gap, as compaction leaves them
	}
	if g.rng.IntN(30) == 0 {
		g.epoch++
	}
	n := 1 + g.rng.IntN(6)
	size := crashValueSizes[g.rng.IntN(len(crashValueSizes))]
	if g.rng.IntN(100) == 0 {
		n, size = 1, crashSegmentBytes+5000 // a batch larger than a segment
	}
	var b []byte
	switch k := g.rng.IntN(10); {
	case k < 4:
		b = dataBatch(g.next, n, size, g.epoch, -1, -1, g.ts)
	case k < 7:
		j := g.rng.IntN(2)
		b = dataBatch(g.next, n, size, g.epoch, crashPID(g.round, j), g.seq[j], g.ts)
		g.seq[j] += int32(n)
	case k < 9:
		j := 2 + g.rng.IntN(2)
		b = crashTxnBatch(dataBatch(g.next, n, size, g.epoch, crashPID(g.round, j), g.seq[j], g.ts))
		g.seq[j] += int32(n)
		g.inTxn[j] = true
	default:
		j := 2 + g.rng.IntN(2)
		commit := g.rng.IntN(2) == 0
		if !g.inTxn[j] {
			b = dataBatch(g.next, n, size, g.epoch, -1, -1, g.ts)
			break
		}
		b = batch.AppendTxnMarker(nil, batch.TxnMarker{BaseOffset: g.next, PartitionLeaderEpoch: g.epoch,
			Timestamp: g.ts, ProducerID: crashPID(g.round, j), Commit: commit})
		g.inTxn[j] = false
	}
	g.next = batch.Batch(b).NextOffset()
	g.ts += int64(n)
	return b
}

// crashTxnBatch sets the transactional attribute and fixes the CRC.
func crashTxnBatch(b []byte) []byte {
	binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|0x10)
	binary.BigEndian.PutUint32(b[17:], batch.Checksum(b[21:]))
	return b
}

// crashModel is what the log must hold: every batch that survived so far,
// and the epochs and producer state they imply.
type crashModel struct {
	batches   [][]byte
	next      int64
	epochs    []EpochEntry
	open      map[int64]int64 // producer id -> first offset of its open transaction
	aborted   []AbortedTxn    // LastStableOffset left zero
	producers map[int64]crashProducer
}

type crashProducer struct {
	lastSeq    int32
	lastOffset int64
}

func newCrashModel() *crashModel {
	return &crashModel{open: map[int64]int64{}, producers: map[int64]crashProducer{}}
}

func (m *crashModel) epoch() int32 {
	if len(m.epochs) == 0 {
		return 0
	}
	return m.epochs[len(m.epochs)-1].Epoch
}

func (m *crashModel) apply(b batch.Batch) {
	m.batches = append(m.batches, bytes.Clone(b))
	m.next = b.NextOffset()
	if ple := b.PartitionLeaderEpoch(); ple >= 0 && (len(m.epochs) == 0 || ple > m.epoch()) {
		m.epochs = append(m.epochs, EpochEntry{Epoch: ple, StartOffset: b.BaseOffset()})
	}
	pid := b.ProducerID()
	switch {
	case b.IsControl():
		first, ok := m.open[pid]
		if !ok {
			return
		}
		delete(m.open, pid)
		if typ, _ := b.ControlType(); typ == batch.ControlAbort {
			m.aborted = append(m.aborted, AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: b.BaseOffset()})
		}
	case b.HasProducerID():
		m.producers[pid] = crashProducer{lastSeq: b.BaseSequence() + b.LastOffsetDelta(), lastOffset: b.LastOffset()}
		if _, ok := m.open[pid]; b.IsTransactional() && !ok {
			m.open[pid] = b.BaseOffset()
		}
	}
}

// lso is the last stable offset for high watermark hw.
func (m *crashModel) lso(hw int64) int64 {
	for _, first := range m.open {
		hw = min(hw, first)
	}
	return hw
}

// check compares the log with the model: batches (bytes and order),
// offsets, epochs and producer state.
func (m *crashModel) check(t *testing.T, l *Log, what string) {
	t.Helper()
	got := readAll(t, l, l.LogStartOffset())
	if len(got) != len(m.batches) {
		t.Fatalf("%s: log holds %d batches, want %d", what, len(got), len(m.batches))
	}
	for i, b := range got {
		if !bytes.Equal(b, m.batches[i]) {
			t.Fatalf("%s: batch %d (offset %d) differs", what, i, batch.Batch(m.batches[i]).BaseOffset())
		}
		if err := b.Verify(); err != nil {
			t.Fatalf("%s: batch %d: %v", what, i, err)
		}
		if i > 0 && b.BaseOffset() < got[i-1].NextOffset() {
			t.Fatalf("%s: batch %d at offset %d overlaps its predecessor ending at %d", what, i, b.BaseOffset(), got[i-1].NextOffset())
		}
	}
	leo, hw := l.LogEndOffset(), l.HighWatermark()
	if leo != m.next || hw != leo {
		t.Fatalf("%s: log end %d, high watermark %d, want both %d", what, leo, hw, m.next)
	}
	if last, ok := l.Epochs().Latest(); len(got) > 0 && (!ok || last.Epoch != got[len(got)-1].PartitionLeaderEpoch()) {
		t.Errorf("%s: epoch cache latest %+v (%v), last batch has epoch %d", what, last, ok, got[len(got)-1].PartitionLeaderEpoch())
	}
	if es := l.Epochs().Entries(); !slices.Equal(es, m.epochs) {
		t.Errorf("%s: epoch cache %v, want %v", what, es, m.epochs)
	}
	if lso, want := l.LastStableOffset(), m.lso(hw); lso != want {
		t.Errorf("%s: last stable offset %d, want %d (high watermark %d, open transactions %v)", what, lso, want, hw, m.open)
	}
	aborted := l.Producers().AbortedTxns(0, leo)
	for i := range aborted {
		aborted[i].LastStableOffset = 0
	}
	wantAborted := slices.SortedFunc(slices.Values(m.aborted), func(a, b AbortedTxn) int {
		return cmp.Or(cmp.Compare(a.FirstOffset, b.FirstOffset), cmp.Compare(a.LastOffset, b.LastOffset))
	})
	if !slices.Equal(aborted, wantAborted) {
		t.Errorf("%s: aborted transactions %v, want %v", what, aborted, wantAborted)
	}
	for pid, want := range m.producers {
		e, ok := l.Producers().Entry(pid)
		first, open := m.open[pid]
		if !open {
			first = -1
		}
		if !ok || e.LastSequence != want.lastSeq || e.LastOffset != want.lastOffset || e.CurrentTxnFirstOffset != first {
			t.Errorf("%s: producer %d: %+v (%v), want last sequence %d, last offset %d, open transaction at %d",
				what, pid, e, ok, want.lastSeq, want.lastOffset, first)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// crashWriterResult is what one killed writer reported.
type crashWriterResult struct {
	ready   bool
	flushed int64 // last reported flushed offset; the start offset if none
	flushes int
}

func TestCrashRecoverySIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(crashSeed, 0))
	m := newCrashModel()
	var beforeReady, beyondFlushed int
	for round := range crashRounds {
		p := crashParams{seed: crashSeed, round: round, start: m.next, epoch: m.epoch(), flushEvery: 1 + rng.IntN(4)}
		delay := time.Duration(5+rng.IntN(76)) * time.Millisecond
		// Mostly the delay counts from the writer's first append, so that
		// it lands among appends and flushes; sometimes from the start of
		// the process, so that it may also land inside Open's recovery.
		fromStart := rng.IntN(5) == 0
		res := runCrashRound(t, dir, p, delay, fromStart)
		if !res.ready {
			beforeReady++
		}

		l, err := Open(dir, Config{SegmentBytes: crashSegmentBytes})
		if err != nil {
			t.Fatalf("round %d: open after SIGKILL: %v", round, err)
		}
		what := fmt.Sprintf("round %d (killed after %v, flushed %d)", round, delay, res.flushed)
		// The recovered tail must be a prefix of what the writer appended,
		// and must cover every batch below the last flushed offset.
		got := readAll(t, l, l.LogStartOffset())
		if len(got) < len(m.batches) {
			t.Fatalf("%s: %d batches recovered, %d were there before the round", what, len(got), len(m.batches))
		}
		tail := got[len(m.batches):]
		g := newCrashGen(p)
		var gen []batch.Batch
		genChunk := func() {
			it := batch.NewIterator(g.chunk())
			for b, ok := it.Next(); ok; b, ok = it.Next() {
				gen = append(gen, b)
			}
		}
		for len(gen) < len(tail) || g.next < res.flushed {
			genChunk()
		}
		for i, b := range tail {
			if !bytes.Equal(b, gen[i]) {
				t.Fatalf("%s: recovered batch %d of the round (offset %d) differs from the one written (offset %d)",
					what, i, b.BaseOffset(), gen[i].BaseOffset())
			}
		}
		for i, b := range gen {
			if b.NextOffset() <= res.flushed && i >= len(tail) {
				t.Fatalf("%s: batch at offset %d was flushed but only %d of the round's batches were recovered (log end %d)",
					what, b.BaseOffset(), len(tail), l.LogEndOffset())
			}
		}
		for _, b := range tail {
			m.apply(b)
		}
		if m.next > res.flushed {
			beyondFlushed++
		}
		if leo := l.LogEndOffset(); leo > m.next {
			// A kill right after a roll created the next segment leaves it
			// empty: the log end is then that segment's base, which must be
			// the base offset of the next batch the writer was appending.
			for len(gen) <= len(tail) {
				genChunk()
			}
			if next := gen[len(tail)].BaseOffset(); next != leo {
				t.Fatalf("%s: log end %d beyond the last recovered batch (ending at %d) and not the next batch's offset %d",
					what, leo, m.next, next)
			}
			t.Logf("%s: recovered an empty segment at %d", what, leo)
			m.next = leo
		}
		if leo := l.LogEndOffset(); leo < res.flushed {
			t.Fatalf("%s: log end %d below the flushed offset", what, leo)
		}
		m.check(t, l, what)

		// Appending works after recovery. As a failover would, abort the
		// transactions the writer left open, in a new leader epoch.
		epoch := m.epoch() + 1
		ts := crashTsBase + int64(round)*10_000_000 + 9_000_000
		var chunk []byte
		next := l.LogEndOffset()
		for _, pid := range slices.Sorted(maps.Keys(m.open)) {
			chunk = batch.AppendTxnMarker(chunk, batch.TxnMarker{BaseOffset: next, PartitionLeaderEpoch: epoch,
				Timestamp: ts, ProducerID: pid, CoordinatorEpoch: 1})
			next++
		}
		chunk = append(chunk, dataBatch(next+int64(round%3), 3, 100, epoch, -1, -1, ts)...)
		ar, err := l.AppendMirror(chunk)
		if err != nil {
			t.Fatalf("%s: append after recovery: %v", what, err)
		}
		it := batch.NewIterator(chunk)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			m.apply(b)
		}
		if ar.NextOffset != m.next || len(m.open) != 0 {
			t.Fatalf("%s: append after recovery: %+v, want next offset %d", what, ar, m.next)
		}
		m.check(t, l, what+" after the append")
		if err := l.Close(); err != nil {
			t.Fatalf("%s: close: %v", what, err)
		}
	}
	t.Logf("%d rounds: %d batches, %d bytes; %d kills before the writer's first append, %d rounds recovered unflushed data",
		crashRounds, len(m.batches), sumLen(m.batches), beforeReady, beyondFlushed)
}

// runCrashRound starts a writer, kills it with SIGKILL after delay and
// returns what it reported. With fromStart the delay counts from the start
// of the process, otherwise from the writer's "ready" line.
func runCrashRound(t *testing.T, dir string, p crashParams, delay time.Duration, fromStart bool) crashWriterResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWriterProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashWriterEnv+"="+dir, crashParamsEnv+"="+p.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	res := crashWriterResult{flushed: p.start}
	ready := make(chan struct{})
	eof := make(chan struct{})
	var parseErr error
	go func() {
		defer close(eof)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return // EOF: a partial last line is ignored
			}
			switch f := strings.Fields(line); {
			case len(f) == 2 && f[0] == "ready":
				res.ready = true
				close(ready)
			case len(f) == 2 && f[0] == "flushed":
				off, err := strconv.ParseInt(f[1], 10, 64)
				if err != nil || off < res.flushed {
					parseErr = fmt.Errorf("bad or decreasing flushed offset %q after %d", line, res.flushed)
					return
				}
				res.flushed = off
				res.flushes++
			}
		}
	}()
	if !fromStart {
		select {
		case <-ready:
		case <-eof:
		case <-time.After(20 * time.Second):
			t.Errorf("round %d: the writer did not start within 20s", p.round)
		}
	}
	select {
	case <-time.After(delay):
	case <-eof:
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	<-eof
	io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("round %d: the writer ended by itself (%v) instead of being killed; stderr:\n%s", p.round, err, stderr.String())
	}
	if parseErr != nil {
		t.Fatalf("round %d: %v", p.round, parseErr)
	}
	if t.Failed() {
		t.FailNow()
	}
	return res
}

func sumLen(bs [][]byte) int {
	n := 0
	for _, b := range bs {
		n += len(b)
	}
	return n
}
