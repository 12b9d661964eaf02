package storage

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/kmirror/kmirror/batch"
)

// psBatch describes a data batch for the producer-state tests.
type psBatch struct {
	pid   int64
	epoch int16
	seq   int32
	count int32 // records; the last offset delta is count-1
	txn   bool
	ts    int64
}

// bytes builds a header-only v2 data batch at base with a correct CRC32C
// (records are irrelevant to producer state).
func (p psBatch) bytes(t testing.TB, base int64) batch.Batch {
	t.Helper()
	b := make([]byte, batch.HeaderSize)
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(base))
	be.PutUint32(b[8:], uint32(batch.HeaderSize-batch.LogOverhead))
	b[16] = 2 // magic
	var attrs uint16
	if p.txn {
		attrs |= 0x10
	}
	be.PutUint16(b[21:], attrs)
	be.PutUint32(b[23:], uint32(p.count-1))
	be.PutUint64(b[27:], uint64(p.ts))
	be.PutUint64(b[35:], uint64(p.ts))
	be.PutUint64(b[43:], uint64(p.pid))
	be.PutUint16(b[51:], uint16(p.epoch))
	be.PutUint32(b[53:], uint32(p.seq))
	be.PutUint32(b[57:], uint32(p.count))
	be.PutUint32(b[17:], batch.Checksum(b[21:]))
	v, err := batch.Parse(b)
	if err != nil {
		t.Fatalf("BUG: test batch does not parse: %v", err)
	}
	if err := v.Verify(); err != nil {
		t.Fatalf("BUG: test batch CRC: %v", err)
	}
	return v
}

// psLog stands in for a partition log: it assigns offsets and feeds the
// state the way the log does.
type psLog struct {
	t    testing.TB
	s    *ProducerState
	next int64
}

func newPSLog(t testing.TB) *psLog { return &psLog{t: t, s: NewProducerState()} }

// produce runs the produce path: check, then append at the log end.
func (l *psLog) produce(p psBatch) (*DuplicateBatch, error) {
	b := p.bytes(l.t, 0)
	dup, err := l.s.CheckProduce(b)
	if dup != nil || err != nil {
		return dup, err
	}
	binary.BigEndian.PutUint64(b, uint64(l.next))
	l.s.OnAppend(b)
	l.next = b.NextOffset()
	return nil, nil
}

// mustProduce is produce for a batch that must be accepted.
func (l *psLog) mustProduce(p psBatch) int64 {
	l.t.Helper()
	base := l.next
	if dup, err := l.produce(p); dup != nil || err != nil {
		l.t.Fatalf("produce %+v: dup %+v, err %v", p, dup, err)
	}
	return base
}

// mirror appends a batch at a chosen offset without any check.
func (l *psLog) mirror(b []byte, at int64) {
	binary.BigEndian.PutUint64(b, uint64(at))
	l.s.OnAppend(batch.Batch(b))
	l.next = batch.Batch(b).NextOffset()
}

func psMarker(pid int64, epoch int16, coord int32, commit bool) []byte {
	return batch.AppendTxnMarker(nil, batch.TxnMarker{ProducerID: pid, ProducerEpoch: epoch,
		CoordinatorEpoch: coord, Commit: commit, Timestamp: 1000})
}

func psPIDReset() []byte {
	return batch.AppendMirrorPIDReset(nil, batch.PIDReset{SourceClusterID: "src", Timestamp: 1000})
}

// psEnd marks a transaction with a marker at the log end; returns its offset.
func (l *psLog) psEnd(pid int64, epoch int16, coord int32, commit bool) int64 {
	at := l.next
	l.mirror(psMarker(pid, epoch, coord, commit), at)
	return at
}

func TestProducerStateCheckProduce(t *testing.T) {
	t.Parallel()
	type tc struct {
		name    string
		history []psBatch
		probe   psBatch
		wantDup *DuplicateBatch
		wantErr error
	}
	// Six batches of two records (sequences 0-11, offsets 0-11): the first
	// has left the five-batch cache.
	var six []psBatch
	for i := range int32(6) {
		six = append(six, psBatch{pid: 1, seq: 2 * i, count: 2})
	}
	tests := []tc{
		{name: "no producer id", history: six, probe: psBatch{pid: -1, epoch: -1, seq: -1, count: 3}},
		{name: "unknown producer at sequence 0", probe: psBatch{pid: 7, count: 1}},
		{name: "unknown producer at any sequence", probe: psBatch{pid: 7, seq: 42, count: 1}},
		{name: "negative sequence", probe: psBatch{pid: 7, seq: -1, count: 1}, wantErr: ErrOutOfOrderSequence},
		{name: "in order", history: []psBatch{{pid: 1, count: 3}}, probe: psBatch{pid: 1, seq: 3, count: 2}},
		{name: "gap", history: []psBatch{{pid: 1, count: 3}}, probe: psBatch{pid: 1, seq: 4, count: 2},
			wantErr: ErrOutOfOrderSequence},
		{name: "sequence going back", history: []psBatch{{pid: 1, count: 3}, {pid: 1, seq: 3, count: 3}},
			probe: psBatch{pid: 1, seq: 1, count: 1}, wantErr: ErrOutOfOrderSequence},
		{name: "duplicate of the last batch", history: []psBatch{{pid: 1, count: 3}, {pid: 1, seq: 3, count: 2}},
			probe: psBatch{pid: 1, seq: 3, count: 2}, wantDup: &DuplicateBatch{BaseOffset: 3, LastOffset: 4}},
		{name: "same first sequence other length", history: []psBatch{{pid: 1, count: 3}, {pid: 1, seq: 3, count: 2}},
			probe: psBatch{pid: 1, seq: 3, count: 1}, wantErr: ErrOutOfOrderSequence},
		{name: "evicted sixth oldest is out of order", history: six,
			probe: psBatch{pid: 1, seq: 0, count: 2}, wantErr: ErrOutOfOrderSequence},
		{name: "next after six", history: six, probe: psBatch{pid: 1, seq: 12, count: 1}},
		{name: "sequence wraps to 0", history: []psBatch{{pid: 1, seq: math.MaxInt32 - 2, count: 3}},
			probe: psBatch{pid: 1, seq: 0, count: 1}},
		{name: "no wrap to 1", history: []psBatch{{pid: 1, seq: math.MaxInt32 - 2, count: 3}},
			probe: psBatch{pid: 1, seq: 1, count: 1}, wantErr: ErrOutOfOrderSequence},
		{name: "batch spanning the wrap", history: []psBatch{{pid: 1, seq: math.MaxInt32 - 1, count: 3}},
			probe: psBatch{pid: 1, seq: 1, count: 1}},
		{name: "duplicate spanning the wrap", history: []psBatch{{pid: 1, seq: math.MaxInt32 - 1, count: 3}},
			probe: psBatch{pid: 1, seq: math.MaxInt32 - 1, count: 3}, wantDup: &DuplicateBatch{BaseOffset: 0, LastOffset: 2}},
		{name: "epoch bump at sequence 0", history: six, probe: psBatch{pid: 1, epoch: 1, count: 2}},
		{name: "epoch bump at sequence 12", history: six, probe: psBatch{pid: 1, epoch: 1, seq: 12, count: 2},
			wantErr: ErrOutOfOrderSequence},
		{name: "epoch bump is no duplicate", history: []psBatch{{pid: 1, count: 2}},
			probe: psBatch{pid: 1, epoch: 1, count: 2}},
		{name: "fenced by a lower epoch", history: []psBatch{{pid: 1, epoch: 3, count: 2}},
			probe: psBatch{pid: 1, epoch: 2, seq: 2, count: 1}, wantErr: ErrInvalidProducerEpoch},
		{name: "transactional fenced by a lower epoch", history: []psBatch{{pid: 1, epoch: 3, count: 2, txn: true}},
			probe: psBatch{pid: 1, epoch: 2, seq: 2, count: 1, txn: true}, wantErr: ErrInvalidProducerEpoch},
		{name: "new epoch continues its own sequence",
			history: []psBatch{{pid: 1, count: 5}, {pid: 1, epoch: 1, count: 2}},
			probe:   psBatch{pid: 1, epoch: 1, seq: 2, count: 1}},
		{name: "new epoch forgot the old sequence",
			history: []psBatch{{pid: 1, count: 5}, {pid: 1, epoch: 1, count: 2}},
			probe:   psBatch{pid: 1, epoch: 1, seq: 5, count: 1}, wantErr: ErrOutOfOrderSequence},
		{name: "duplicate in the new epoch",
			history: []psBatch{{pid: 1, count: 5}, {pid: 1, epoch: 1, count: 2}},
			probe:   psBatch{pid: 1, epoch: 1, count: 2}, wantDup: &DuplicateBatch{BaseOffset: 5, LastOffset: 6}},
		{name: "other producers do not interfere",
			history: []psBatch{{pid: 1, count: 5}, {pid: 2, count: 1}, {pid: 1, seq: 5, count: 1}},
			probe:   psBatch{pid: 2, seq: 1, count: 1}},
		{name: "transactional inside the transaction", history: []psBatch{{pid: 1, count: 2, txn: true}},
			probe: psBatch{pid: 1, seq: 2, count: 1, txn: true}},
		{name: "non-transactional inside the transaction", history: []psBatch{{pid: 1, count: 2, txn: true}},
			probe: psBatch{pid: 1, seq: 2, count: 1}, wantErr: ErrInvalidTxnState},
	}
	for i := range 5 {
		// Every one of the five cached batches is recognised, with the
		// offsets it was stored at.
		orig := six[1+i]
		tests = append(tests, tc{name: "cached duplicate " + string(rune('1'+i)), history: six, probe: orig,
			wantDup: &DuplicateBatch{BaseOffset: int64(orig.seq), LastOffset: int64(orig.seq) + 1}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newPSLog(t)
			for _, h := range tt.history {
				l.mustProduce(h)
			}
			before := l.s.Entries()
			dup, err := l.s.CheckProduce(tt.probe.bytes(t, -5))
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(dup, tt.wantDup) {
				t.Fatalf("dup = %+v, want %+v", dup, tt.wantDup)
			}
			if after := l.s.Entries(); !reflect.DeepEqual(before, after) {
				t.Fatalf("CheckProduce changed the state: %+v -> %+v", before, after)
			}
		})
	}
}

func TestProducerStateCheckMarker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		marker  []byte
		wantErr error
	}{
		{name: "same epoch and coordinator", marker: psMarker(1, 2, 5, true)},
		{name: "newer coordinator", marker: psMarker(1, 2, 6, false)},
		{name: "bumped epoch", marker: psMarker(1, 3, 5, false)},
		{name: "unknown producer", marker: psMarker(9, 0, 0, false)},
		{name: "lower epoch", marker: psMarker(1, 1, 5, false), wantErr: ErrInvalidProducerEpoch},
		{name: "older coordinator", marker: psMarker(1, 2, 4, true), wantErr: ErrTransactionCoordinatorFenced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newPSLog(t)
			l.mustProduce(psBatch{pid: 1, epoch: 2, count: 2, txn: true})
			l.psEnd(1, 2, 5, true)
			_, err := l.s.CheckProduce(batch.Batch(tt.marker))
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// psWant checks the transaction view of a state.
func psWantFUO(t *testing.T, s *ProducerState, want int64) {
	t.Helper()
	got, ok := s.FirstUnstableOffset()
	if want < 0 {
		if ok {
			t.Fatalf("first unstable offset %d, want none", got)
		}
		return
	}
	if !ok || got != want {
		t.Fatalf("first unstable offset %d (%v), want %d", got, ok, want)
	}
}

func TestProducerStateTransactions(t *testing.T) {
	t.Parallel()
	l := newPSLog(t)
	psWantFUO(t, l.s, -1)
	l.mustProduce(psBatch{pid: 1, epoch: 4, count: 2, txn: true}) // 0-1
	psWantFUO(t, l.s, 0)
	l.mustProduce(psBatch{pid: 2, count: 3, txn: true})                   // 2-4
	l.mustProduce(psBatch{pid: 3, count: 1})                              // 5, idempotent only
	l.mustProduce(psBatch{pid: 1, epoch: 4, seq: 2, count: 1, txn: true}) // 6
	psWantFUO(t, l.s, 0)
	if got, want := l.s.OngoingTxns(), []OngoingTxn{
		{ProducerID: 1, ProducerEpoch: 4, FirstOffset: 0, CoordinatorEpoch: -1},
		{ProducerID: 2, ProducerEpoch: 0, FirstOffset: 2, CoordinatorEpoch: -1},
	}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ongoing %+v, want %+v", got, want)
	}

	if at := l.psEnd(1, 4, 3, false); at != 7 {
		t.Fatalf("marker at %d", at)
	}
	psWantFUO(t, l.s, 2)
	l.mustProduce(psBatch{pid: 1, epoch: 4, seq: 3, count: 2, txn: true}) // 8-9, a new transaction
	psWantFUO(t, l.s, 2)
	l.psEnd(2, 0, 3, true) // 10
	psWantFUO(t, l.s, 8)
	if got, want := l.s.OngoingTxns(), []OngoingTxn{
		{ProducerID: 1, ProducerEpoch: 4, FirstOffset: 8, CoordinatorEpoch: 3},
	}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ongoing %+v, want %+v", got, want)
	}
	l.psEnd(1, 4, 3, false) // 11
	psWantFUO(t, l.s, -1)
	l.psEnd(3, 0, 3, true) // 12: a marker without a transaction
	if got := l.s.OngoingTxns(); len(got) != 0 {
		t.Fatalf("ongoing %+v, want none", got)
	}

	want := []AbortedTxn{
		{ProducerID: 1, FirstOffset: 0, LastOffset: 7, LastStableOffset: 2},
		{ProducerID: 1, FirstOffset: 8, LastOffset: 11, LastStableOffset: 12},
	}
	if got := l.s.AbortedTxns(0, math.MaxInt64); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted %+v, want %+v", got, want)
	}
	e, ok := l.s.Entry(1)
	wantEntry := ProducerEntry{ProducerID: 1, Epoch: 4, LastSequence: 4, LastOffset: 9,
		LastTimestamp: 1000, CoordinatorEpoch: 3, CurrentTxnFirstOffset: -1}
	if !ok || e != wantEntry {
		t.Fatalf("entry %+v, want %+v", e, wantEntry)
	}
	if e, _ := l.s.Entry(3); e.CoordinatorEpoch != 3 || e.LastSequence != 0 {
		t.Fatalf("producer 3 after an empty COMMIT: %+v", e)
	}
	// The producer goes on in the same epoch after its transactions.
	if _, err := l.produce(psBatch{pid: 1, epoch: 4, seq: 5, count: 1}); err != nil {
		t.Fatal(err)
	}
	// A marker with a bumped epoch (transactions v2) restarts the sequence.
	l.mustProduce(psBatch{pid: 1, epoch: 4, seq: 6, count: 1, txn: true})
	l.psEnd(1, 5, 3, true)
	if _, err := l.produce(psBatch{pid: 1, epoch: 5, seq: 7, count: 1}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("sequence 7 after an epoch bump: %v", err)
	}
	l.mustProduce(psBatch{pid: 1, epoch: 5, seq: 0, count: 1})
	if _, ok := l.s.Entry(42); ok {
		t.Fatal("entry for an unknown producer")
	}
}

// psAbortedLog builds, at explicit offsets:
//
//	 0 pid 1 txn    5 pid 2 txn   10 ABORT 1   12 pid 4 txn
//	20 ABORT 2     25 pid 3 txn   30 ABORT 3   40 ABORT 4
func psAbortedLog(t testing.TB) *psLog {
	l := newPSLog(t)
	l.mirror(psBatch{pid: 1, count: 1, txn: true}.bytes(t, 0), 0)
	l.mirror(psBatch{pid: 2, count: 1, txn: true}.bytes(t, 0), 5)
	l.mirror(psMarker(1, 0, 0, false), 10)
	l.mirror(psBatch{pid: 4, count: 1, txn: true}.bytes(t, 0), 12)
	l.mirror(psMarker(2, 0, 0, false), 20)
	l.mirror(psBatch{pid: 3, count: 1, txn: true}.bytes(t, 0), 25)
	l.mirror(psMarker(3, 0, 0, false), 30)
	l.mirror(psMarker(4, 0, 0, false), 40)
	return l
}

var (
	psA = AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 10, LastStableOffset: 5}
	psB = AbortedTxn{ProducerID: 2, FirstOffset: 5, LastOffset: 20, LastStableOffset: 12}
	psC = AbortedTxn{ProducerID: 3, FirstOffset: 25, LastOffset: 30, LastStableOffset: 12}
	psD = AbortedTxn{ProducerID: 4, FirstOffset: 12, LastOffset: 40, LastStableOffset: 41}
)

func TestProducerStateAbortedTxns(t *testing.T) {
	t.Parallel()
	l := psAbortedLog(t)
	tests := []struct {
		name              string
		fetch, upperBound int64
		want              []AbortedTxn
	}{
		{name: "everything", fetch: 0, upperBound: 100, want: []AbortedTxn{psA, psB, psD, psC}},
		{name: "unbounded", fetch: 0, upperBound: math.MaxInt64, want: []AbortedTxn{psA, psB, psD, psC}},
		{name: "past the first marker", fetch: 11, upperBound: 100, want: []AbortedTxn{psB, psD, psC}},
		{name: "upper bound is exclusive", fetch: 0, upperBound: 5, want: []AbortedTxn{psA}},
		{name: "upper bound just past a start", fetch: 0, upperBound: 6, want: []AbortedTxn{psA, psB}},
		{name: "fetch at a marker", fetch: 10, upperBound: 11, want: []AbortedTxn{psA, psB}},
		{name: "long transaction spans the range", fetch: 21, upperBound: 26, want: []AbortedTxn{psD, psC}},
		{name: "only the long one", fetch: 31, upperBound: 50, want: []AbortedTxn{psD}},
		{name: "after all markers", fetch: 41, upperBound: 50},
		{name: "before all data", fetch: 0, upperBound: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := l.s.AbortedTxns(tt.fetch, tt.upperBound)
			if len(got) != 0 || len(tt.want) != 0 {
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("AbortedTxns(%d, %d) = %+v, want %+v", tt.fetch, tt.upperBound, got, tt.want)
				}
			}
		})
	}
}

func TestProducerStateTruncateAborted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		op   func(s *ProducerState)
		want []AbortedTxn
	}{
		{name: "truncate at a marker", op: func(s *ProducerState) { s.TruncateAbortedFrom(30) }, want: []AbortedTxn{psA, psB}},
		{name: "truncate past all", op: func(s *ProducerState) { s.TruncateAbortedFrom(41) }, want: []AbortedTxn{psA, psB, psD, psC}},
		{name: "truncate everything", op: func(s *ProducerState) { s.TruncateAbortedFrom(0) }},
		{name: "log start past a marker", op: func(s *ProducerState) { s.DropAbortedBefore(11) }, want: []AbortedTxn{psB, psD, psC}},
		{name: "log start at a marker", op: func(s *ProducerState) { s.DropAbortedBefore(10) }, want: []AbortedTxn{psA, psB, psD, psC}},
		{name: "log start past all", op: func(s *ProducerState) { s.DropAbortedBefore(41) }},
		{name: "reset", op: func(s *ProducerState) { s.Reset() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := psAbortedLog(t)
			tt.op(l.s)
			got := l.s.AbortedTxns(0, math.MaxInt64)
			if len(got) != 0 || len(tt.want) != 0 {
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("aborted %+v, want %+v", got, tt.want)
				}
			}
		})
	}
}

func TestProducerStateMirrorPIDReset(t *testing.T) {
	t.Parallel()
	l := psAbortedLog(t)
	l.mirror(psBatch{pid: 5, count: 3, txn: true}.bytes(t, 0), 41)
	l.mirror(psBatch{pid: 6, epoch: 2, seq: 9, count: 1}.bytes(t, 0), 44)
	psWantFUO(t, l.s, 41)
	if n := l.s.Len(); n != 6 {
		t.Fatalf("%d producers, want 6", n)
	}
	l.mirror(psPIDReset(), 45)
	psWantFUO(t, l.s, -1)
	if n := l.s.Len(); n != 0 {
		t.Fatalf("%d producers after MIRROR_PID_RESET", n)
	}
	if got := l.s.OngoingTxns(); len(got) != 0 {
		t.Fatalf("ongoing %+v after MIRROR_PID_RESET", got)
	}
	if got, want := l.s.AbortedTxns(0, math.MaxInt64), []AbortedTxn{psA, psB, psD, psC}; !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted %+v, want the history %+v", got, want)
	}
	// The producers are unknown now: any sequence and epoch is accepted.
	for _, p := range []psBatch{{pid: 6, epoch: 1, seq: 3, count: 1}, {pid: 5, seq: 77, count: 1}} {
		if dup, err := l.s.CheckProduce(p.bytes(t, 0)); dup != nil || err != nil {
			t.Fatalf("%+v after reset: %+v %v", p, dup, err)
		}
	}
	// A stray marker of a producer cleared by the reset aborts nothing.
	l.mirror(psMarker(5, 0, 0, false), 46)
	if got := l.s.AbortedTxns(41, math.MaxInt64); len(got) != 0 {
		t.Fatalf("aborted %+v for a cleared transaction", got)
	}
}

func TestProducerStateIgnoresOtherBatches(t *testing.T) {
	t.Parallel()
	l := newPSLog(t)
	l.mirror(psBatch{pid: -1, epoch: -1, seq: -1, count: 4}.bytes(t, 0), 0)
	// A control batch of an unknown type (here: type 3 as a patched COMMIT).
	other := psMarker(1, 0, 0, true)
	recs := batch.Batch(other).Records()
	// key: varint length, attrs, ts delta, offset delta, key length, then version and type
	recs[5+3] = 3
	binary.BigEndian.PutUint32(other[17:], batch.Checksum(other[21:]))
	if typ, err := batch.Batch(other).ControlType(); err != nil || typ != 3 {
		t.Fatalf("BUG: patched control type %d, %v", typ, err)
	}
	l.mirror(other, 4)
	if n := l.s.Len(); n != 0 {
		t.Fatalf("%d producers", n)
	}
}

func TestProducerStateExpire(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		now      int64
		wantLeft []int64
	}{
		{name: "nothing old enough", now: 1099, wantLeft: []int64{1, 2, 3}},
		{name: "boundary is inclusive", now: 1100, wantLeft: []int64{2, 3}},
		{name: "all idle ones", now: 1_000_000, wantLeft: []int64{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newPSLog(t)
			l.mustProduce(psBatch{pid: 1, count: 1, ts: 1000})
			l.mustProduce(psBatch{pid: 2, count: 1, ts: 2000})
			l.mustProduce(psBatch{pid: 3, count: 1, ts: 0, txn: true}) // old, but its transaction is open
			removed := l.s.ExpireProducers(tt.now, 100)
			var left []int64
			for _, e := range l.s.Entries() {
				left = append(left, e.ProducerID)
			}
			if !slices.Equal(left, tt.wantLeft) || removed != 3-len(tt.wantLeft) {
				t.Fatalf("left %v (removed %d), want %v", left, removed, tt.wantLeft)
			}
			psWantFUO(t, l.s, 2)
		})
	}
}

// TestProducerStateHotPathAllocs proves the produce hot path (STYLE rule
// 17): checking and recording an in-order batch of a known producer does
// not allocate.
func TestProducerStateHotPathAllocs(t *testing.T) {
	l := newPSLog(t)
	l.mustProduce(psBatch{pid: 1, epoch: 1, count: 4, ts: 5})
	l.mustProduce(psBatch{pid: 2, epoch: 1, count: 4, ts: 5, txn: true})
	for _, pid := range []int64{1, 2} {
		b := psBatch{pid: pid, epoch: 1, count: 4, ts: 5, txn: pid == 2}.bytes(t, 0)
		seq, next := int32(4), l.next
		allocs := testing.AllocsPerRun(100, func() {
			binary.BigEndian.PutUint32(b[53:], uint32(seq))
			if dup, err := l.s.CheckProduce(b); dup != nil || err != nil {
				panic(err)
			}
			binary.BigEndian.PutUint64(b[0:], uint64(next))
			l.s.OnAppend(b)
			seq += 4
			next += 4
		})
		if allocs > 0 {
			t.Fatalf("producer %d: %.1f allocations per batch, want 0", pid, allocs)
		}
		l.next = next
	}
}

func BenchmarkProducerStateAppend(b *testing.B) {
	for _, producers := range []int{1, 1000} {
		b.Run("producers="+strconv.Itoa(producers), func(b *testing.B) {
			l := newPSLog(b)
			batches := make([]batch.Batch, producers)
			for i := range batches {
				batches[i] = psBatch{pid: int64(i), count: 10}.bytes(b, 0)
				l.mustProduce(psBatch{pid: int64(i), count: 10})
			}
			seqs := make([]int32, producers)
			for i := range seqs {
				seqs[i] = 10
			}
			b.ReportAllocs()
			b.SetBytes(batch.HeaderSize)
			b.ResetTimer()
			for i := range b.N {
				p := i % producers
				bt := batches[p]
				binary.BigEndian.PutUint32(bt[53:], uint32(seqs[p]))
				if _, err := l.s.CheckProduce(bt); err != nil {
					b.Fatal(err)
				}
				binary.BigEndian.PutUint64(bt[0:], uint64(l.next))
				l.s.OnAppend(bt)
				seqs[p] += 10
				l.next += 10
			}
		})
	}
}

// TestProducerStateConcurrentReaders runs Fetch-side readers against the
// appender; it is meant for -race.
func TestProducerStateConcurrentReaders(t *testing.T) {
	t.Parallel()
	l := newPSLog(t)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				l.s.AbortedTxns(0, math.MaxInt64)
				l.s.FirstUnstableOffset()
				l.s.OngoingTxns()
				l.s.Entry(1)
			}
		}()
	}
	for i := range int32(500) {
		l.mustProduce(psBatch{pid: 1, seq: i, count: 1, txn: true})
		l.psEnd(1, 0, 0, i%2 == 0)
	}
	close(done)
	wg.Wait()
	if got := len(l.s.AbortedTxns(0, math.MaxInt64)); got != 250 {
		t.Fatalf("%d aborted transactions, want 250", got)
	}
}

// psRichState is a state with every feature in it: open and aborted
// transactions, a full batch cache, sequences about to wrap.
func psRichState(t testing.TB) *psLog {
	l := psAbortedLog(t)
	for i := range int32(7) {
		l.mustProduce(psBatch{pid: 10, epoch: 3, seq: psWrapSeq(i), count: 2, ts: int64(i)})
	}
	l.mustProduce(psBatch{pid: 11, epoch: 1, count: 2, txn: true, ts: 77})
	l.psEnd(11, 1, 9, true)
	l.mustProduce(psBatch{pid: 12, epoch: 7, count: 2, txn: true, ts: 78})
	l.mustProduce(psBatch{pid: 1 << 62, epoch: 0, count: 1, ts: 79})
	return l
}

// psWrapSeq is the first sequence of psRichState's i-th batch of producer
// 10: two records each, starting 5 below the wrap.
func psWrapSeq(i int32) int32 { return producerSeqAdd(math.MaxInt32-5, 2*i) }

// psSameState fails unless two states hold the same data.
func psSameState(t testing.TB, got, want *ProducerState) {
	t.Helper()
	if g, w := got.Entries(), want.Entries(); !reflect.DeepEqual(g, w) {
		t.Fatalf("entries\n got %+v\nwant %+v", g, w)
	}
	if g, w := got.OngoingTxns(), want.OngoingTxns(); !reflect.DeepEqual(g, w) {
		t.Fatalf("ongoing\n got %+v\nwant %+v", g, w)
	}
	if g, w := got.AbortedTxns(0, math.MaxInt64), want.AbortedTxns(0, math.MaxInt64); !reflect.DeepEqual(g, w) {
		t.Fatalf("aborted\n got %+v\nwant %+v", g, w)
	}
	got.mu.RLock()
	gb := got.appendSnapshotBodyLocked(nil, 0)
	got.mu.RUnlock()
	want.mu.RLock()
	wb := want.appendSnapshotBodyLocked(nil, 0)
	want.mu.RUnlock()
	if !slices.Equal(gb, wb) {
		t.Fatal("snapshot bodies differ")
	}
}

func TestProducerStateReplaceWith(t *testing.T) {
	t.Parallel()
	s := psAbortedLog(t).s
	from := psRichState(t).s
	want := psRichState(t).s
	s.ReplaceWith(from)
	psSameState(t, s, want)
	if from.Len() != 0 {
		t.Fatal("ReplaceWith left state in its source")
	}
}
