package state

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// putState stores p and checks it reads back (without Previous and
// RetryAttempt outside FAILED).
func putState(t *testing.T, s *Store, p MirrorPartitionState) {
	t.Helper()
	if err := s.PutMirrorPartitionState(p); err != nil {
		t.Fatalf("PutMirrorPartitionState(%+v): %v", p, err)
	}
	if p.State != StateFailed {
		p.Previous, p.RetryAttempt = StateUnknown, 0
	}
	got, err := s.MirrorPartitionState(p.Mirror, p.Topic, p.Partition)
	if err != nil || got != p {
		t.Fatalf("MirrorPartitionState = %+v, %v; want %+v", got, err, p)
	}
}

// stepTo walks p's partition through states, keeping p's other fields
// (which must suit states other than FAILED).
func stepTo(t *testing.T, s *Store, p MirrorPartitionState, states ...PartitionState) {
	t.Helper()
	for _, st := range states {
		p.State = st
		putState(t, s, p)
	}
}

// allStates lists every state, in numeric order.
var allStates = []PartitionState{
	StateUnknown, StateLogAlignment, StateEpochFencing, StateULERecovery, StateMirroring,
	StatePausing, StatePaused, StateStopping, StateStopped, StateFailed,
}

func TestPartitionStateNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		st   PartitionState
		name string
		v    int8 // the on-disk value (SPEC.md section 4, later numbering)
	}{
		{StateUnknown, "UNKNOWN", -1},
		{StateLogAlignment, "LOG_ALIGNMENT", 0},
		{StateEpochFencing, "EPOCH_FENCING", 1},
		{StateULERecovery, "ULE_RECOVERY", 2},
		{StateMirroring, "MIRRORING", 3},
		{StatePausing, "PAUSING", 4},
		{StatePaused, "PAUSED", 5},
		{StateStopping, "STOPPING", 6},
		{StateStopped, "STOPPED", 7},
		{StateFailed, "FAILED", 8},
	} {
		if int8(tc.st) != tc.v || tc.st.String() != tc.name {
			t.Fatalf("state %d: value %d name %q, want %d %q", tc.st, int8(tc.st), tc.st.String(), tc.v, tc.name)
		}
		if st, ok := ParsePartitionState(tc.name); !ok || st != tc.st {
			t.Fatalf("ParsePartitionState(%q) = %v, %v", tc.name, st, ok)
		}
	}
	for _, v := range []PartitionState{-2, 9, math.MaxInt8, math.MinInt8} {
		if got := v.String(); got != fmt.Sprintf("PartitionState(%d)", int8(v)) {
			t.Fatalf("String of %d: %q", int8(v), got)
		}
	}
	for _, s := range []string{"", "mirroring", "Mirroring", "LOG_TRUNCATION", "PREPARING", " MIRRORING", "PartitionState(9)"} {
		if st, ok := ParsePartitionState(s); ok {
			t.Fatalf("ParsePartitionState(%q) = %v, true", s, st)
		}
	}
}

// transitionTable is SPEC.md section 4 (later numbering) written out: row
// "from", column "to", in allStates order.
var transitionTable = map[PartitionState]string{
	// to:              U LA EF ULE M PG P SG S F
	StateUnknown:      "1 1  0  0   0 0  0 0  0 1",
	StateLogAlignment: "0 1  0  0   1 0  0 1  0 1",
	StateEpochFencing: "0 0  1  0   1 0  0 1  0 1",
	StateULERecovery:  "0 0  0  1   1 0  0 1  0 1",
	StateMirroring:    "0 0  1  1   1 1  0 1  0 1",
	StatePausing:      "0 0  0  0   0 1  1 1  0 1",
	StatePaused:       "0 0  0  0   1 0  1 1  0 1",
	StateStopping:     "0 0  0  0   0 0  0 1  1 1",
	StateStopped:      "0 1  0  0   0 0  0 0  1 1",
	StateFailed:       "0 1  0  0   1 0  0 1  0 1",
}

// wantTransition looks a pair up in transitionTable; any value that is no
// state allows nothing.
func wantTransition(t *testing.T, from, to PartitionState) bool {
	row, ok := transitionTable[from]
	if !ok {
		return false
	}
	cols := strings.Fields(row)
	if len(cols) != len(allStates) {
		t.Fatalf("table row %v has %d columns", from, len(cols))
	}
	for i, st := range allStates {
		if st == to {
			return cols[i] == "1"
		}
	}
	return false
}

// TestCanTransitionExhaustive compares CanTransition with the table for
// every pair of int8 values.
func TestCanTransitionExhaustive(t *testing.T) {
	t.Parallel()
	allowed := 0
	for from := math.MinInt8; from <= math.MaxInt8; from++ {
		for to := math.MinInt8; to <= math.MaxInt8; to++ {
			f, tt := PartitionState(from), PartitionState(to)
			want := wantTransition(t, f, tt)
			if got := CanTransition(f, tt); got != want {
				t.Errorf("CanTransition(%v, %v) = %v, want %v", f, tt, got, want)
			}
			if want {
				allowed++
			}
		}
	}
	// 10 self transitions, 9 into FAILED, 3 into LOG_ALIGNMENT, 1 each
	// into EPOCH_FENCING, ULE_RECOVERY, PAUSING, PAUSED and STOPPED, 5
	// into MIRRORING, 7 into STOPPING.
	if want := 10 + 9 + 3 + 5 + 5 + 7; allowed != want {
		t.Fatalf("%d allowed transitions in the table, want %d", allowed, want)
	}
}

// reachable returns the states reachable from start over CanTransition
// (breadth first), never entering a state in avoid.
func reachable(start PartitionState, avoid ...PartitionState) map[PartitionState]bool {
	seen := map[PartitionState]bool{start: true}
	queue := []PartitionState{start}
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		for _, to := range allStates {
			if seen[to] || !CanTransition(from, to) || containsState(avoid, to) {
				continue
			}
			seen[to] = true
			queue = append(queue, to)
		}
	}
	return seen
}

func containsState(sts []PartitionState, st PartitionState) bool {
	for _, s := range sts {
		if s == st {
			return true
		}
	}
	return false
}

// TestTransitionPaths checks properties of the graph rather than single
// entries: what is reachable, and only through which states.
func TestTransitionPaths(t *testing.T) {
	t.Parallel()
	// Every state is reachable from UNKNOWN (a partition without a state)
	// and UNKNOWN from no other state.
	if got := reachable(StateUnknown); len(got) != len(allStates) {
		t.Fatalf("from UNKNOWN: %v", got)
	}
	for _, st := range allStates[1:] {
		if reachable(st)[StateUnknown] {
			t.Fatalf("UNKNOWN reachable from %v", st)
		}
	}
	// The life of a mirrored partition, failover included.
	path := []PartitionState{StateUnknown, StateLogAlignment, StateMirroring, StateStopping, StateStopped}
	for i := 1; i < len(path); i++ {
		if !CanTransition(path[i-1], path[i]) {
			t.Fatalf("%v -> %v refused", path[i-1], path[i])
		}
	}
	// Only the allowed paths lead in: removing the one gate to a state
	// cuts it off.
	for _, tc := range []struct {
		gates []PartitionState
		cut   []PartitionState
	}{
		{[]PartitionState{StateStopping}, []PartitionState{StateStopped}},
		{[]PartitionState{StatePausing}, []PartitionState{StatePaused}},
		{[]PartitionState{StateMirroring},
			[]PartitionState{StateEpochFencing, StateULERecovery, StatePausing, StatePaused}},
		// A partition must align (or fail) before it mirrors.
		{[]PartitionState{StateLogAlignment, StateFailed},
			[]PartitionState{StateMirroring, StateEpochFencing, StateULERecovery, StatePausing,
				StatePaused, StateStopping, StateStopped}},
	} {
		got := reachable(StateUnknown, tc.gates...)
		for _, st := range tc.cut {
			if got[st] {
				t.Fatalf("%v reachable from UNKNOWN without %v", st, tc.gates)
			}
		}
	}
	// Every state can fail, and every state but UNKNOWN is reachable again
	// from FAILED: a failure is never a dead end.
	for _, st := range allStates {
		if !CanTransition(st, StateFailed) {
			t.Fatalf("%v cannot fail", st)
		}
	}
	if got := reachable(StateFailed); len(got) != len(allStates)-1 {
		t.Fatalf("from FAILED: %v", got)
	}
	// A stopped partition is writable and leaves STOPPED only to align
	// again (failback) or fail.
	for _, to := range allStates {
		if to != StateStopped && CanTransition(StateStopped, to) != (to == StateLogAlignment || to == StateFailed) {
			t.Fatalf("STOPPED -> %v: %v", to, CanTransition(StateStopped, to))
		}
	}
}

// TestPutMirrorPartitionStateTransitions tries every stored state (none
// included) against every state a write may carry: the allowed ones are
// stored, the others refused with ErrInvalidTransition and nothing stored.
func TestPutMirrorPartitionStateTransitions(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	if err := s.PutMirror(Mirror{Name: "m"}); err != nil {
		t.Fatal(err)
	}
	// withState returns a valid partition state in st.
	withState := func(partition int32, st PartitionState) MirrorPartitionState {
		p := MirrorPartitionState{Mirror: "m", Topic: "t", Partition: partition, State: st,
			Previous: StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1}
		if st == StateFailed {
			p.Previous, p.RetryAttempt, p.ErrorMessage = StateMirroring, 1, "boom"
		}
		return p
	}
	partition := int32(0)
	for _, from := range allStates {
		for _, to := range allStates[1:] {
			partition++
			key := appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "t", partition})
			var old MirrorPartitionState
			if from != StateUnknown {
				// Plant the stored state directly, whatever path leads there.
				old = withState(partition, from)
				putRaw(t, s, string(key), appendMirrorPartitionState(nil, old))
			}
			p := withState(partition, to)
			p.LastMirrorEpoch, p.ErrorMessage = 5, p.ErrorMessage+" again"
			err := s.PutMirrorPartitionState(p)
			got, gerr := s.MirrorPartitionState("m", "t", partition)
			switch {
			case CanTransition(from, to):
				if err != nil || gerr != nil || got != p {
					t.Fatalf("%v -> %v: %v; stored %+v, %v", from, to, err, got, gerr)
				}
			case !errors.Is(err, ErrInvalidTransition):
				t.Fatalf("%v -> %v: %v, want ErrInvalidTransition", from, to, err)
			case from == StateUnknown:
				if !errors.Is(gerr, ErrNotFound) {
					t.Fatalf("%v -> %v refused but stored: %+v, %v", from, to, got, gerr)
				}
			default:
				if gerr != nil || got != old {
					t.Fatalf("%v -> %v refused but stored: %+v, %v", from, to, got, gerr)
				}
			}
		}
	}
}

// TestMirrorPartitionStateLifecycle walks a partition through mirroring,
// pause, failure, retry and failover, with the fields each state carries.
func TestMirrorPartitionStateLifecycle(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	if err := s.PutMirror(fullMirror("east")); err != nil {
		t.Fatal(err)
	}
	p := MirrorPartitionState{Mirror: "east", Topic: "orders.eu", Partition: 2,
		Previous: StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1}
	if _, err := s.MirrorPartitionState("east", "orders.eu", 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before the first write: %v", err)
	}
	// A partition without a state cannot start mirroring unaligned.
	p.State = StateMirroring
	if err := s.PutMirrorPartitionState(p); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("UNKNOWN -> MIRRORING: %v", err)
	}
	stepTo(t, s, p, StateLogAlignment, StateMirroring, StateEpochFencing, StateMirroring,
		StatePausing, StatePaused, StateMirroring)

	// A retryable failure remembers where to go back to.
	failed := p
	failed.State, failed.Previous, failed.RetryAttempt = StateFailed, StateMirroring, 1
	failed.ErrorMessage = "fetch from source broker 2: connection reset by peer"
	putState(t, s, failed)
	failed.RetryAttempt = 2
	putState(t, s, failed)
	// The retry goes back to MIRRORING; changing State alone drops the
	// FAILED-only fields.
	back := failed
	back.State = StateMirroring
	if err := s.PutMirrorPartitionState(back); err != nil {
		t.Fatal(err)
	}
	got, err := s.MirrorPartitionState("east", "orders.eu", 2)
	if err != nil || got.Previous != StateUnknown || got.RetryAttempt != 0 || got.ErrorMessage != failed.ErrorMessage {
		t.Fatalf("after the retry: %+v, %v", got, err)
	}
	stepTo(t, s, p, StateMirroring)

	// Failover: STOPPING persists the last mirror position, STOPPED keeps it.
	p.State, p.LastMirrorEpoch, p.LastMirrorOffset = StateStopping, 41, 123456789
	putState(t, s, p)
	stepTo(t, s, p, StateStopped)
	// Failback aligns again, with the position still known.
	stepTo(t, s, p, StateLogAlignment)
	p.State = StateLogAlignment

	// A non-retryable failure from UNKNOWN (previous) with -1 attempts.
	nr := MirrorPartitionState{Mirror: "east", Topic: "payments", Partition: 0, State: StateFailed,
		Previous: StateUnknown, RetryAttempt: -1, ErrorMessage: "source cluster id changed",
		LastMirrorEpoch: -1, LastMirrorOffset: -1}
	putState(t, s, nr)

	ps, err := s.MirrorPartitionStates("east")
	if err != nil || len(ps) != 2 || ps[0] != p || ps[1] != nr {
		t.Fatalf("MirrorPartitionStates = %+v, %v", ps, err)
	}
}

func TestPutMirrorPartitionStateInvalid(t *testing.T) {
	t.Parallel()
	ok := MirrorPartitionState{Mirror: "m", Topic: "t", Partition: 0, State: StateLogAlignment,
		Previous: StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1}
	failed := ok
	failed.State, failed.Previous, failed.RetryAttempt = StateFailed, StateMirroring, 1
	for _, tc := range []struct {
		name   string
		change func(p *MirrorPartitionState)
		base   MirrorPartitionState
	}{
		{"empty mirror", func(p *MirrorPartitionState) { p.Mirror = "" }, ok},
		{"mirror with slash", func(p *MirrorPartitionState) { p.Mirror = "m/t" }, ok},
		{"mirror dot dot", func(p *MirrorPartitionState) { p.Mirror = ".." }, ok},
		{"empty topic", func(p *MirrorPartitionState) { p.Topic = "" }, ok},
		{"bad topic", func(p *MirrorPartitionState) { p.Topic = "a b" }, ok},
		{"long topic", func(p *MirrorPartitionState) { p.Topic = strings.Repeat("t", 250) }, ok},
		{"negative partition", func(p *MirrorPartitionState) { p.Partition = -1 }, ok},
		{"state UNKNOWN", func(p *MirrorPartitionState) { p.State = StateUnknown }, ok},
		{"no state", func(p *MirrorPartitionState) { p.State = 9 }, ok},
		{"negative no state", func(p *MirrorPartitionState) { p.State = -2 }, ok},
		{"FAILED retry 0", func(p *MirrorPartitionState) { p.RetryAttempt = 0 }, failed},
		{"FAILED retry -2", func(p *MirrorPartitionState) { p.RetryAttempt = -2 }, failed},
		{"FAILED previous FAILED", func(p *MirrorPartitionState) { p.Previous = StateFailed }, failed},
		{"FAILED previous no state", func(p *MirrorPartitionState) { p.Previous = 12 }, failed},
		{"last mirror epoch -2", func(p *MirrorPartitionState) { p.LastMirrorEpoch = -2 }, ok},
		{"last mirror offset -2", func(p *MirrorPartitionState) { p.LastMirrorOffset = -2 }, ok},
		{"FAILED with minimal last mirror position", func(p *MirrorPartitionState) {
			p.LastMirrorEpoch, p.LastMirrorOffset = math.MinInt32, math.MinInt64
		}, failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openMem(t)
			if err := s.PutMirror(Mirror{Name: "m"}); err != nil {
				t.Fatal(err)
			}
			if err := s.PutMirrorPartitionState(tc.base); err != nil {
				t.Fatalf("base %+v refused: %v", tc.base, err)
			}
			p := tc.base
			tc.change(&p)
			err := s.PutMirrorPartitionState(p)
			if err == nil || errors.Is(err, ErrInvalidTransition) {
				t.Fatalf("PutMirrorPartitionState(%+v) = %v, want a validation error", p, err)
			}
			ps, err := s.MirrorPartitionStates("m")
			if err != nil || len(ps) != 1 || ps[0] != tc.base {
				t.Fatalf("store changed: %+v, %v", ps, err)
			}
		})
	}
	// A partition of an unknown mirror is refused.
	s := openMem(t)
	if err := s.PutMirrorPartitionState(ok); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown mirror: %v", err)
	}
	// Invalid names are refused by the list and delete, and found by no
	// lookup.
	if _, err := s.MirrorPartitionStates("a/b"); err == nil {
		t.Fatal("MirrorPartitionStates(\"a/b\") accepted")
	}
	if err := s.DeleteMirrorPartitionStates("a/b", "t"); err == nil {
		t.Fatal("DeleteMirrorPartitionStates with a bad mirror accepted")
	}
	if err := s.DeleteMirrorPartitionStates("m", "a/b"); err == nil {
		t.Fatal("DeleteMirrorPartitionStates with a bad topic accepted")
	}
	for _, k := range []mirrorPartitionKey{{"a/b", "t", 0}, {"m", "", 0}, {"m", "t", -1}} {
		if _, err := s.MirrorPartitionState(k.Mirror, k.Topic, k.Partition); !errors.Is(err, ErrNotFound) {
			t.Fatalf("MirrorPartitionState(%+v): %v", k, err)
		}
	}
}

// TestMirrorPartitionStatesOrder: keys order topics by length first; the
// result is sorted by name, then partition, and holds one mirror only.
func TestMirrorPartitionStatesOrder(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	for _, name := range []string{"m", "m2"} {
		if err := s.PutMirror(Mirror{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	var want []MirrorPartitionState
	for _, topic := range []string{"aa", "ab", "b", "a", "a-b"} {
		for _, partition := range []int32{256, 2, 0, 1<<31 - 1} {
			p := MirrorPartitionState{Mirror: "m", Topic: topic, Partition: partition, State: StateLogAlignment,
				LastMirrorEpoch: -1, LastMirrorOffset: -1}
			putState(t, s, p)
			other := p
			other.Mirror = "m2"
			putState(t, s, other)
		}
	}
	for _, topic := range []string{"a", "a-b", "aa", "ab", "b"} {
		for _, partition := range []int32{0, 2, 256, 1<<31 - 1} {
			want = append(want, MirrorPartitionState{Mirror: "m", Topic: topic, Partition: partition,
				State: StateLogAlignment, Previous: StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1})
		}
	}
	got, err := s.MirrorPartitionStates("m")
	if err != nil || len(got) != len(want) {
		t.Fatalf("MirrorPartitionStates = %d states, %v", len(got), err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("state %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if ps, err := s.MirrorPartitionStates("none"); err != nil || len(ps) != 0 {
		t.Fatalf("unknown mirror: %v, %v", ps, err)
	}

	// Deleting topic "a" leaves "aa", "ab" and "a-b", and mirror m2's "a".
	if err := s.DeleteMirrorPartitionStates("m", "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMirrorPartitionStates("m", "never"); err != nil {
		t.Fatal(err)
	}
	got, err = s.MirrorPartitionStates("m")
	if err != nil || len(got) != len(want)-4 || got[0].Topic != "a-b" {
		t.Fatalf("after delete: %+v, %v", got, err)
	}
	if m2, err := s.MirrorPartitionStates("m2"); err != nil || len(m2) != len(want) {
		t.Fatalf("mirror m2: %d states, %v", len(m2), err)
	}
}

// TestPutMirrorPartitionStateRace: of concurrent writers, each is checked
// against the state the others left. From PAUSING, PAUSED then STOPPING is
// allowed but STOPPING then PAUSED is not, so the partition always ends
// STOPPING whichever writer wins.
func TestPutMirrorPartitionStateRace(t *testing.T) {
	t.Parallel()
	s := openMem(t)
	if err := s.PutMirror(Mirror{Name: "m"}); err != nil {
		t.Fatal(err)
	}
	for round := range int32(20) {
		p := MirrorPartitionState{Mirror: "m", Topic: "t", Partition: round, LastMirrorEpoch: -1, LastMirrorOffset: -1}
		stepTo(t, s, p, StateLogAlignment, StateMirroring, StatePausing)
		var pauseErr, stopErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			q := p
			q.State = StatePaused
			pauseErr = s.PutMirrorPartitionState(q)
		})
		wg.Go(func() {
			q := p
			q.State = StateStopping
			stopErr = s.PutMirrorPartitionState(q)
		})
		wg.Wait()
		if stopErr != nil || (pauseErr != nil && !errors.Is(pauseErr, ErrInvalidTransition)) {
			t.Fatalf("round %d: pause %v, stop %v", round, pauseErr, stopErr)
		}
		got, err := s.MirrorPartitionState("m", "t", round)
		if err != nil || got.State != StateStopping {
			t.Fatalf("round %d: ended %v, %v", round, got.State, err)
		}
	}
}

// ReplaceCorruptMirrorPartitionState repairs only a record that does not
// decode: a readable one or none is refused, and an invalid state too.
func TestReplaceCorruptMirrorPartitionState(t *testing.T) {
	t.Parallel()
	s := openWithMirror(t)
	failed := MirrorPartitionState{Mirror: "m", Topic: "t", Partition: 0, State: StateFailed, Previous: StateUnknown,
		RetryAttempt: -1, ErrorMessage: "unreadable", LastMirrorEpoch: -1, LastMirrorOffset: -1}
	if err := s.ReplaceCorruptMirrorPartitionState(failed); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("over no record: %v", err)
	}
	if err := s.PutMirrorPartitionState(aligning("t", 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.ReplaceCorruptMirrorPartitionState(failed); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("over a readable record: %v", err)
	}
	key := appendMirrorPartitionKey(nil, mirrorPartitionKey{"m", "t", 0})
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(key, []byte{0xff}) }); err != nil {
		t.Fatal(err)
	}
	bad := failed
	bad.RetryAttempt = 0
	if err := s.ReplaceCorruptMirrorPartitionState(bad); err == nil {
		t.Fatal("an invalid state replaced a corrupt record")
	}
	if err := s.ReplaceCorruptMirrorPartitionState(failed); err != nil {
		t.Fatalf("over a corrupt record: %v", err)
	}
	if got, err := s.MirrorPartitionState("m", "t", 0); err != nil || got.State != StateFailed || got.ErrorMessage != "unreadable" {
		t.Fatalf("after the repair: %+v %v", got, err)
	}
}

// PutMirrorPartitionStates writes many partitions' states in one
// transaction, each checked as PutMirrorPartitionState checks one: one
// invalid transition or value fails the whole batch, nothing written.
func TestPutMirrorPartitionStates(t *testing.T) {
	t.Parallel()
	s := openWithMirror(t)
	batch := []MirrorPartitionState{aligning("t", 0), aligning("t", 1), aligning("u", 0)}
	if err := s.PutMirrorPartitionStates(batch); err != nil {
		t.Fatal(err)
	}
	if got, err := s.MirrorPartitionStates("m"); err != nil || len(got) != 3 {
		t.Fatalf("after the batch: %+v, %v", got, err)
	}
	mirroring := func(topic string, p int32) MirrorPartitionState {
		ps := aligning(topic, p)
		ps.State = StateMirroring
		return ps
	}
	stopped := aligning("t", 1)
	stopped.State = StateStopped // LOG_ALIGNMENT -> STOPPED is not a transition
	if err := s.PutMirrorPartitionStates([]MirrorPartitionState{mirroring("t", 0), stopped}); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("a batch with an invalid transition: %v", err)
	}
	if ps, _ := s.MirrorPartitionState("m", "t", 0); ps.State != StateLogAlignment {
		t.Fatalf("a failed batch wrote partition 0: %v", ps.State)
	}
	bad := mirroring("t", 1)
	bad.Partition = -1
	if err := s.PutMirrorPartitionStates([]MirrorPartitionState{mirroring("t", 0), bad}); err == nil {
		t.Fatal("a batch with an invalid partition accepted")
	}
	if ps, _ := s.MirrorPartitionState("m", "t", 0); ps.State != StateLogAlignment {
		t.Fatalf("a refused batch wrote partition 0: %v", ps.State)
	}
}
