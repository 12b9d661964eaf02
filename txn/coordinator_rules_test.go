package txn

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// Coordinator tests, continued (the fake store, node and clock are in
// coordinator_test.go): state rules, EndTxn, timeouts, restarts.

// The state rules: what each call answers in each state.
func TestStateRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, _ := e.init("a")
	p := []state.TxnPartition{tp("t", 0)}

	// Empty: no transaction to end or commit offsets in.
	wantErr(t, "EndTxn commit in Empty", e.c.EndTxn("a", pid, 0, true), kerr.InvalidTxnState)
	wantErr(t, "EndTxn abort in Empty", e.c.EndTxn("a", pid, 0, false), kerr.InvalidTxnState)
	wantErr(t, "CommitOffsets in Empty", e.c.CheckOffsetCommit("a", pid, 0, "g"), kerr.InvalidTxnState)
	if s := e.state("a"); s != Empty {
		t.Fatalf("refused calls moved the state to %v", s)
	}

	// AddOffsets begins a transaction; an offset commit needs the group
	// added first.
	wantErr(t, "AddOffsets", e.c.AddOffsets("a", pid, 0, "g"), nil)
	if s := e.state("a"); s != Ongoing {
		t.Fatalf("AddOffsets: state %v, want Ongoing", s)
	}
	wantErr(t, "CommitOffsets of a group not added", e.c.CheckOffsetCommit("a", pid, 0, "other"), kerr.InvalidTxnState)
	wantErr(t, "CommitOffsets", e.c.CheckOffsetCommit("a", pid, 0, "g"), nil)
	wantErr(t, "AddPartitions", e.c.AddPartitions("a", pid, 0, p), nil)
	puts := e.store.puts
	wantErr(t, "AddPartitions again", e.c.AddPartitions("a", pid, 0, p), nil)
	wantErr(t, "AddOffsets again", e.c.AddOffsets("a", pid, 0, "g"), nil)
	if e.store.puts != puts {
		t.Fatalf("adding what the transaction holds wrote %d records", e.store.puts-puts)
	}
	if st := e.stored("a"); !slices.Equal(st.Partitions, []state.TxnPartition{offsetsTP("g"), tp("t", 0)}) || len(st.Groups)+len(st.Offsets) != 0 {
		t.Fatalf("stored transaction: %+v", st)
	}

	// A decided transaction whose markers cannot be written yet: every
	// call is CONCURRENT_TRANSACTIONS until it completes.
	e.node.setFail(true, false)
	wantErr(t, "EndTxn commit", e.c.EndTxn("a", pid, 0, true), nil)
	if s := e.state("a"); s != PrepareCommit {
		t.Fatalf("state %v with the markers unwritten, want PrepareCommit", s)
	}
	for name, err := range map[string]*kerr.Error{
		"AddPartitions":    e.c.AddPartitions("a", pid, 0, p),
		"AddOffsets":       e.c.AddOffsets("a", pid, 0, "g"),
		"CommitOffsets":    e.c.CheckOffsetCommit("a", pid, 0, "g"),
		"EndTxn commit":    e.c.EndTxn("a", pid, 0, true),
		"EndTxn abort":     e.c.EndTxn("a", pid, 0, false),
		"InitProducerID":   func() *kerr.Error { _, _, err := e.c.InitProducerID("a", 10_000, -1, -1); return err }(),
		"KIP-360 InitPID":  func() *kerr.Error { _, _, err := e.c.InitProducerID("a", 10_000, pid, 0); return err }(),
		"fenced AddOffset": e.c.AddOffsets("a", pid, 1, "g"),
	} {
		want := kerr.ConcurrentTransactions
		if name == "fenced AddOffset" {
			want = kerr.ProducerFenced // the pair is checked first
		}
		wantErr(t, name+" during PrepareCommit", err, want)
	}
	if ms := e.node.takeMarkers(); len(ms) != 0 {
		t.Fatalf("markers written while failing: %v", ms)
	}
	e.node.setFail(false, false)
	e.c.CheckNow()
	if s := e.state("a"); s != CompleteCommit {
		t.Fatalf("after CheckNow: %v, want CompleteCommit", s)
	}
	// CompleteCommit: AddPartitions begins the next transaction.
	wantErr(t, "AddPartitions after a commit", e.c.AddPartitions("a", pid, 0, []state.TxnPartition{tp("t", 1)}), nil)
	if st, _ := e.c.Describe("a"); State(st.State) != Ongoing || !slices.Equal(st.Partitions, []state.TxnPartition{tp("t", 1)}) || len(st.Groups) != 0 {
		t.Fatalf("next transaction: %+v", st)
	}
}

// EndTxn commit writes one COMMIT marker per partition, the groups'
// partitions of __consumer_offsets among them (which decides their
// offsets); a retried commit succeeds without writing again; an abort
// after it is refused.
func TestEndTxnCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, _ := e.init("a")
	e.c.AddPartitions("a", pid, 0, []state.TxnPartition{tp("t", 0), tp("t", 1)})
	e.c.AddPartitions("a", pid, 0, []state.TxnPartition{tp("t", 0), tp("u", 0)})
	e.c.AddOffsets("a", pid, 0, "g1")
	e.c.AddOffsets("a", pid, 0, "g2")
	for _, g := range []string{"g1", "g2", "g1"} {
		wantErr(t, "CheckOffsetCommit "+g, e.c.CheckOffsetCommit("a", pid, 0, g), nil)
	}
	wantErr(t, "EndTxn commit", e.c.EndTxn("a", pid, 0, true), nil)
	wantMarkers(t, "commit", e.node.takeMarkers(),
		marker{tp("t", 0), pid, 0, true}, marker{tp("t", 1), pid, 0, true}, marker{tp("u", 0), pid, 0, true},
		marker{offsetsTP("g1"), pid, 0, true}, marker{offsetsTP("g2"), pid, 0, true})
	st := e.stored("a")
	if State(st.State) != CompleteCommit || len(st.Partitions)+len(st.Groups)+len(st.Offsets) != 0 {
		t.Fatalf("stored after the commit: %+v", st)
	}
	wantErr(t, "retried EndTxn commit", e.c.EndTxn("a", pid, 0, true), nil)
	wantErr(t, "EndTxn abort after the commit", e.c.EndTxn("a", pid, 0, false), kerr.InvalidTxnState)
	if ms := e.node.takeMarkers(); len(ms) != 0 || e.node.commitCalls() != 0 {
		t.Fatalf("a retried EndTxn wrote markers %v or committed offsets", ms)
	}
}

// A transaction recorded by an older kmirror holds its group (Groups) and
// offsets (Offsets) itself: an offset commit of the group adds the
// group's partition of __consumer_offsets, and the commit hands the old
// offsets to the group as well as writing every marker.
func TestEndTxnCommitsOffsetsTheRecordHolds(t *testing.T) {
	t.Parallel()
	rec := state.Txn{ID: "a", ProducerID: 5, Epoch: 3, LastProducerID: -1, LastEpoch: -1, TimeoutMs: 60_000,
		State: int8(Ongoing), StartMs: newClock().Now().UnixMilli(), UpdateMs: 1, Partitions: []state.TxnPartition{tp("t", 0)}, Groups: []string{"g"},
		Offsets: []state.TxnOffset{{Group: "g", Topic: "in", Partition: 2, Offset: 11}}}
	e := newEnv(t, rec)
	wantErr(t, "CheckOffsetCommit of the recorded group", e.c.CheckOffsetCommit("a", 5, 3, "g"), nil)
	if st := e.stored("a"); !slices.Contains(st.Partitions, offsetsTP("g")) {
		t.Fatalf("the group's partition was not added: %+v", st)
	}
	wantErr(t, "EndTxn commit", e.c.EndTxn("a", 5, 3, true), nil)
	wantMarkers(t, "commit", e.node.takeMarkers(), marker{tp("t", 0), 5, 3, true}, marker{offsetsTP("g"), 5, 3, true})
	if g := e.node.groupOffsets("g"); len(g) != 1 || g["in-2"].Offset != 11 {
		t.Fatalf("the record's offsets: %+v", g)
	}
}

// EndTxn abort writes ABORT markers (which drop the offsets at the group's
// partition of __consumer_offsets); a retried abort
// succeeds, a commit after it is refused.
func TestEndTxnAbort(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, _ := e.init("a")
	e.c.AddPartitions("a", pid, 0, []state.TxnPartition{tp("t", 0), tp("t", 2)})
	e.c.AddOffsets("a", pid, 0, "g")
	e.c.CheckOffsetCommit("a", pid, 0, "g")
	wantErr(t, "EndTxn abort", e.c.EndTxn("a", pid, 0, false), nil)
	wantMarkers(t, "abort", e.node.takeMarkers(), marker{tp("t", 0), pid, 0, false}, marker{tp("t", 2), pid, 0, false},
		marker{offsetsTP("g"), pid, 0, false})
	if n := e.node.commitCalls(); n != 0 {
		t.Fatalf("an abort committed offsets (%d calls)", n)
	}
	if st := e.stored("a"); State(st.State) != CompleteAbort || len(st.Offsets) != 0 || st.Epoch != 0 {
		t.Fatalf("stored after the abort: %+v", st)
	}
	wantErr(t, "retried EndTxn abort", e.c.EndTxn("a", pid, 0, false), nil)
	wantErr(t, "EndTxn commit after the abort", e.c.EndTxn("a", pid, 0, true), kerr.InvalidTxnState)
	if ms := e.node.takeMarkers(); len(ms) != 0 {
		t.Fatalf("retries wrote markers %v", ms)
	}
	// A partition whose topic was deleted has nothing to mark.
	e.node.mu.Lock()
	e.node.gone[tp("t", 9)] = true
	e.node.mu.Unlock()
	e.c.AddPartitions("a", pid, 0, []state.TxnPartition{tp("t", 9), tp("t", 0)})
	wantErr(t, "EndTxn commit with a deleted partition", e.c.EndTxn("a", pid, 0, true), nil)
	wantMarkers(t, "commit", e.node.takeMarkers(), marker{tp("t", 0), pid, 0, true})
	if s := e.state("a"); s != CompleteCommit {
		t.Fatalf("state %v, want CompleteCommit", s)
	}
}

// transaction.timeout.ms: the checker aborts an open transaction once
// its timeout has passed, under a bumped epoch that fences the stalled
// producer.
func TestTimeoutAborts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, _, err := e.c.InitProducerID("a", 1000, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	e.c.AddPartitions("a", pid, 0, []state.TxnPartition{tp("t", 0)})
	e.c.AddOffsets("a", pid, 0, "g")
	e.c.CheckOffsetCommit("a", pid, 0, "g")
	e.clock.advance(1000 * time.Millisecond)
	e.c.CheckNow()
	if s := e.state("a"); s != Ongoing {
		t.Fatalf("aborted at exactly its timeout: %v", s)
	}
	if ms := e.node.takeMarkers(); len(ms) != 0 {
		t.Fatalf("markers before the timeout: %v", ms)
	}
	e.clock.advance(time.Millisecond)
	e.c.CheckNow()
	wantMarkers(t, "timeout", e.node.takeMarkers(), marker{tp("t", 0), pid, 1, false}, marker{offsetsTP("g"), pid, 1, false})
	st := e.stored("a")
	if State(st.State) != CompleteAbort || st.Epoch != 1 || st.ProducerID != pid {
		t.Fatalf("stored after the timeout: %+v", st)
	}
	if n := e.node.commitCalls(); n != 0 {
		t.Fatalf("a timed-out transaction committed offsets")
	}
	wantErr(t, "stalled producer's EndTxn", e.c.EndTxn("a", pid, 0, true), kerr.ProducerFenced)
	wantErr(t, "stalled producer's AddPartitions", e.c.AddPartitions("a", pid, 0, nil), kerr.ProducerFenced)
	// Nothing more to do on later passes.
	e.clock.advance(time.Minute)
	e.c.CheckNow()
	if ms := e.node.takeMarkers(); len(ms) != 0 {
		t.Fatalf("later passes wrote %v", ms)
	}
	// A new instance goes on from the bumped epoch.
	if _, epoch := e.init("a"); epoch != 2 {
		t.Fatalf("init after the timeout: epoch %d, want 2", epoch)
	}
}

// A crash between the decision and the completion leaves a Prepare record;
// the next New writes the markers, applies or drops the offsets and
// persists the completion.
func TestRestartCompletesPrepared(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			t.Parallel()
			prep := PrepareAbort
			if commit {
				prep = PrepareCommit
			}
			rec := state.Txn{ID: "a", ProducerID: 5, Epoch: 3, LastProducerID: 5, LastEpoch: 2, TimeoutMs: 10_000,
				State: int8(prep), StartMs: 1, UpdateMs: 2,
				Partitions: []state.TxnPartition{tp("t", 0), tp("u", 1)}, Groups: []string{"g"},
				Offsets: []state.TxnOffset{{Group: "g", Topic: "in", Partition: 2, Offset: 11}}}
			e := newEnv(t, rec)
			wantMarkers(t, "at New", e.node.takeMarkers(), marker{tp("t", 0), 5, 3, commit}, marker{tp("u", 1), 5, 3, commit})
			g := e.node.groupOffsets("g")
			if commit && (len(g) != 1 || g["in-2"].Offset != 11) || !commit && len(g) != 0 {
				t.Fatalf("group offsets after completing: %+v", g)
			}
			want := CompleteAbort
			if commit {
				want = CompleteCommit
			}
			st := e.stored("a")
			if State(st.State) != want || st.ProducerID != 5 || st.Epoch != 3 || len(st.Partitions)+len(st.Groups)+len(st.Offsets) != 0 {
				t.Fatalf("stored after New: %+v, want %v", st, want)
			}
			// Retried EndTxn of the same decision, from before the crash.
			wantErr(t, "retried EndTxn", e.c.EndTxn("a", 5, 3, commit), nil)
			e.restart()
			if ms := e.node.takeMarkers(); len(ms) != 0 {
				t.Fatalf("a second restart wrote %v", ms)
			}
		})
	}
}

// Markers that fail to write leave the Prepare state (persisted, so a
// restart finishes it too); CheckNow retries until they are written.
func TestFailedMarkersRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, _ := e.init("a")
	e.c.AddPartitions("a", pid, 0, []state.TxnPartition{tp("t", 0)})
	e.c.AddOffsets("a", pid, 0, "g")
	e.c.CheckOffsetCommit("a", pid, 0, "g")
	e.node.setFail(true, false)
	wantErr(t, "EndTxn commit", e.c.EndTxn("a", pid, 0, true), nil)
	if st := e.stored("a"); State(st.State) != PrepareCommit || len(st.Partitions) != 2 {
		t.Fatalf("stored with the markers failing: %+v", st)
	}
	e.c.CheckNow()
	e.restart() // still failing: New logs and goes on
	if s := e.state("a"); s != PrepareCommit {
		t.Fatalf("state %v, want PrepareCommit", s)
	}
	e.node.setFail(false, false)
	e.c.CheckNow()
	wantMarkers(t, "retry", e.node.takeMarkers(), marker{tp("t", 0), pid, 0, true}, marker{offsetsTP("g"), pid, 0, true})
	if st := e.stored("a"); State(st.State) != CompleteCommit {
		t.Fatalf("stored after the retry: %+v", st)
	}
	wantErr(t, "retried EndTxn", e.c.EndTxn("a", pid, 0, true), nil)

	// A failing store on the completion: memory stays at Prepare too.
	e.c.AddPartitions("a", pid, 0, []state.TxnPartition{tp("t", 1)})
	e.node.setFail(true, false)
	wantErr(t, "EndTxn abort", e.c.EndTxn("a", pid, 0, false), nil)
	e.node.setFail(false, false)
	e.store.setFailPuts(errInjected)
	e.c.CheckNow()
	if s := e.state("a"); s != PrepareAbort {
		t.Fatalf("state %v after a failed completion write, want PrepareAbort", s)
	}
	e.store.setFailPuts(nil)
	e.node.takeMarkers()
	e.c.CheckNow()
	if s := e.state("a"); s != CompleteAbort {
		t.Fatalf("state %v, want CompleteAbort", s)
	}
}

// A timeout abort whose markers fail is retried as any decided
// transaction.
func TestTimeoutAbortRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, _, _ := e.c.InitProducerID("a", 1000, -1, -1)
	e.c.AddPartitions("a", pid, 0, []state.TxnPartition{tp("t", 0)})
	e.node.setFail(true, false)
	e.clock.advance(2 * time.Second)
	e.c.CheckNow()
	if st := e.stored("a"); State(st.State) != PrepareAbort || st.Epoch != 1 {
		t.Fatalf("stored after a failed timeout abort: %+v", st)
	}
	e.node.setFail(false, false)
	e.c.CheckNow()
	wantMarkers(t, "retry", e.node.takeMarkers(), marker{tp("t", 0), pid, 1, false})
	if s := e.state("a"); s != CompleteAbort {
		t.Fatalf("state %v, want CompleteAbort", s)
	}
}

// A new instance fences a producer whose open transaction's markers
// cannot be written right now. The abort is decided (PrepareAbort), so
// its markers must still be written once the partitions take them: the
// fenced producer's data is on the partitions, and without an ABORT
// marker its transaction hangs there, holding every read_committed
// consumer at its first offset. Kafka answers CONCURRENT_TRANSACTIONS
// until the fence completes; either way the markers must come.
func TestInitOverFailedAbortKeepsMarkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, _ := e.init("a")
	e.c.AddPartitions("a", pid, 0, []state.TxnPartition{tp("t", 0)})
	e.node.setFail(true, false)
	_, _, err := e.c.InitProducerID("a", 10_000, -1, -1)
	e.node.setFail(false, false)
	for range 3 {
		e.c.CheckNow()
		if err != nil { // CONCURRENT_TRANSACTIONS: the client retries
			_, _, err = e.c.InitProducerID("a", 10_000, -1, -1)
		}
	}
	if err != nil {
		t.Fatalf("InitProducerID never succeeded: %v", err)
	}
	ms := e.node.takeMarkers()
	if len(ms) != 1 || ms[0].p != tp("t", 0) || ms[0].pid != pid || ms[0].commit {
		st, _ := e.c.Describe("a")
		t.Fatalf("the fenced transaction on t-0 got markers %v, want one ABORT of producer %d (state now %v, partitions %v): "+
			"it hangs on t-0 forever", ms, pid, State(st.State), st.Partitions)
	}
}

// An id idle for transactional.id.expiration.ms is forgotten (memory and
// store); an open transaction is not idle; a forgotten id starts over
// with a new producer id.
func TestIDExpiration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pidA, _ := e.init("a")
	pidB, _ := e.init("b")
	e.c.AddPartitions("b", pidB, 0, []state.TxnPartition{tp("t", 0)})
	pidC, _ := e.init("c")
	e.c.AddPartitions("c", pidC, 0, []state.TxnPartition{tp("t", 1)})
	e.c.EndTxn("c", pidC, 0, true)
	e.node.takeMarkers()

	e.clock.advance(30 * time.Minute)
	e.init("d")
	e.clock.advance(30*time.Minute + time.Millisecond)
	e.c.CheckNow()
	// a and c: idle over an hour, gone. b: open, timed out (10 s) and
	// aborted now, so not idle. d: idle 30 min.
	for id, want := range map[string]bool{"a": false, "b": true, "c": false, "d": true} {
		_, inMem := e.c.Describe(id)
		_, inStore := e.store.get(id)
		if inMem != want || inStore != want {
			t.Errorf("%s: known %v, stored %v, want %v", id, inMem, inStore, want)
		}
	}
	if s := e.state("b"); s != CompleteAbort {
		t.Fatalf("b: %v, want CompleteAbort (timed out)", s)
	}
	if ids := e.c.List(); len(ids) != 2 || ids[0].ID != "b" || ids[1].ID != "d" {
		t.Fatalf("List after the expiration: %+v", ids)
	}
	wantErr(t, "AddPartitions of an expired id", e.c.AddPartitions("a", pidA, 0, nil), kerr.InvalidProducerIDMapping)
	if pid, epoch := e.init("a"); pid == pidA || epoch != 0 {
		t.Fatalf("an expired id re-initialized: pid %d epoch %d, want a new producer id at epoch 0", pid, epoch)
	}
	e.clock.advance(2 * time.Hour)
	e.c.CheckNow()
	if ids := e.c.List(); len(ids) != 0 {
		t.Fatalf("List after everything expired: %+v", ids)
	}
	if _, ok := e.c.Describe("d"); ok {
		t.Fatal("d outlived its expiration")
	}
}

// transaction.timeout.ms must be in (0, transaction.max.timeout.ms].
func TestInvalidTransactionTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // MaxTimeout 1 min
	for _, c := range []struct {
		ms   int32
		want *kerr.Error
	}{
		{-1, kerr.InvalidTransactionTimeout},
		{0, kerr.InvalidTransactionTimeout},
		{60_001, kerr.InvalidTransactionTimeout},
		{math.MaxInt32, kerr.InvalidTransactionTimeout},
		{1, nil},
		{60_000, nil},
	} {
		pid, epoch, err := e.c.InitProducerID(fmt.Sprint("t", c.ms), c.ms, -1, -1)
		if err != c.want || (err != nil) != (pid == -1 && epoch == -1) {
			t.Errorf("timeout %d ms: (%d, %d) %v, want %v", c.ms, pid, epoch, err, c.want)
		}
	}
	if _, ok := e.c.Describe("t60001"); ok {
		t.Error("a refused InitProducerID created its id")
	}
	// The timeout is the latest init's.
	e.c.InitProducerID("t1", 5000, -1, -1)
	if st, _ := e.c.Describe("t1"); st.TimeoutMs != 5000 {
		t.Errorf("timeout after a re-init: %d", st.TimeoutMs)
	}
}

// A store that refuses writes: the call answers COORDINATOR_NOT_AVAILABLE
// and memory does not run ahead of the store.
func TestPersistFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, _ := e.init("a")
	e.c.AddPartitions("a", pid, 0, []state.TxnPartition{tp("t", 0)})
	before, _ := e.c.Describe("a")
	e.store.setFailPuts(errInjected)
	for name, err := range map[string]*kerr.Error{
		"AddPartitions": e.c.AddPartitions("a", pid, 0, []state.TxnPartition{tp("t", 1)}),
		"AddOffsets":    e.c.AddOffsets("a", pid, 0, "g"),
		"EndTxn":        e.c.EndTxn("a", pid, 0, true),
		"InitProducerID": func() *kerr.Error {
			_, _, err := e.c.InitProducerID("a", 10_000, -1, -1)
			return err
		}(),
		"InitProducerID new": func() *kerr.Error {
			_, _, err := e.c.InitProducerID("new", 10_000, -1, -1)
			return err
		}(),
	} {
		wantErr(t, name+" with a failing store", err, kerr.CoordinatorNotAvailable)
	}
	after, _ := e.c.Describe("a")
	if State(after.State) != Ongoing || after.Epoch != before.Epoch || !slices.Equal(after.Partitions, before.Partitions) || len(after.Groups) != 0 {
		t.Fatalf("memory ran ahead of the store: %+v, was %+v", after, before)
	}
	if _, ok := e.c.Describe("new"); ok {
		t.Fatal("an id whose record could not be stored is known")
	}
	if ms := e.node.takeMarkers(); len(ms) != 0 {
		t.Fatalf("markers written for an undecided transaction: %v", ms)
	}
	e.store.setFailPuts(nil)
	wantErr(t, "EndTxn once the store works", e.c.EndTxn("a", pid, 0, true), nil)
}

// Describe and List hand out copies: neither the caller's edits nor the
// coordinator's later changes reach the other side.
func TestDescribeListCopies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, _ := e.init("b")
	e.init("a")
	e.c.AddPartitions("b", pid, 0, []state.TxnPartition{tp("t", 0)})
	d, _ := e.c.Describe("b")
	l := e.c.List()
	if len(l) != 2 || l[0].ID != "a" || l[1].ID != "b" {
		t.Fatalf("List: %+v, want a then b", l)
	}
	// Later changes on the coordinator's side.
	e.c.AddPartitions("b", pid, 0, []state.TxnPartition{tp("t", 1)})
	e.c.AddOffsets("b", pid, 0, "g")
	for name, got := range map[string]state.Txn{"Describe": d, "List": l[1]} {
		if len(got.Partitions) != 1 || State(got.State) != Ongoing {
			t.Fatalf("%s copy changed with the coordinator: %+v", name, got)
		}
	}
	// Edits on the caller's side.
	d.Partitions[0].Topic = "x"
	l[1].Partitions[0].Topic = "y"
	now, _ := e.c.Describe("b")
	if now.Partitions[0].Topic != "t" || len(now.Partitions) != 3 {
		t.Fatalf("a caller's edit reached the coordinator: %+v", now)
	}
	e.c.EndTxn("b", pid, 0, true)
	wantMarkers(t, "commit", e.node.takeMarkers(), marker{tp("t", 0), pid, 0, true}, marker{tp("t", 1), pid, 0, true},
		marker{offsetsTP("g"), pid, 0, true})
	if _, ok := e.c.Describe("nope"); ok {
		t.Fatal("Describe of an unknown id")
	}
}

// Many producers at once, some on their own ids and some fighting over a
// shared one, with the checker and readers running: run with -race. Each
// own-id producer's transactions all end as decided, with one marker per
// partition and transaction.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const (
		producers = 6
		rounds    = 40
	)
	var wg sync.WaitGroup
	errs := make(chan error, producers*rounds)
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprint("own-", i)
			pid, epoch, err := e.c.InitProducerID(id, 60_000, -1, -1)
			if err != nil {
				errs <- err
				return
			}
			for r := range rounds {
				ps := []state.TxnPartition{tp(id, 0), tp(id, 1)}
				if err := e.c.AddPartitions(id, pid, epoch, ps); err != nil {
					errs <- fmt.Errorf("%s round %d: AddPartitions: %v", id, r, err)
					return
				}
				if err := e.c.AddOffsets(id, pid, epoch, id); err != nil {
					errs <- fmt.Errorf("%s round %d: AddOffsets: %v", id, r, err)
					return
				}
				if err := e.c.CheckOffsetCommit(id, pid, epoch, id); err != nil {
					errs <- fmt.Errorf("%s round %d: CommitOffsets: %v", id, r, err)
					return
				}
				if err := e.c.EndTxn(id, pid, epoch, r%2 == 0); err != nil {
					errs <- fmt.Errorf("%s round %d: EndTxn: %v", id, r, err)
					return
				}
			}
		}()
	}
	// Two instances of one id fencing each other: every answer is a
	// success or a fencing error, never anything else.
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				pid, epoch, err := e.c.InitProducerID("shared", 60_000, -1, -1)
				if err != nil && err != kerr.ConcurrentTransactions {
					errs <- fmt.Errorf("shared: InitProducerID: %v", err)
					return
				}
				if err != nil {
					continue
				}
				for _, err := range []*kerr.Error{
					e.c.AddPartitions("shared", pid, epoch, []state.TxnPartition{tp("shared", 0)}),
					e.c.EndTxn("shared", pid, epoch, true),
				} {
					if err != nil && err != kerr.ProducerFenced && err != kerr.InvalidTxnState && err != kerr.ConcurrentTransactions {
						errs <- fmt.Errorf("shared: %v", err)
						return
					}
				}
			}
		}()
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			e.c.CheckNow()
			for _, t := range e.c.List() {
				d, _ := e.c.Describe(t.ID)
				_ = d.Partitions
			}
		}
	}()
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	perPartition := map[state.TxnPartition]int{}
	for _, m := range e.node.takeMarkers() {
		perPartition[m.p]++
	}
	for i := range producers {
		id := fmt.Sprint("own-", i)
		for p := range int32(2) {
			if n := perPartition[tp(id, p)]; n != rounds {
				t.Errorf("%s-%d: %d markers, want %d", id, p, n, rounds)
			}
		}
		if n := perPartition[offsetsTP(id)]; n != rounds {
			t.Errorf("group %s's partition: %d markers, want %d", id, n, rounds)
		}
		if s := e.state(id); s != CompleteAbort {
			t.Errorf("%s: %v, want CompleteAbort", id, s)
		}
	}
}
