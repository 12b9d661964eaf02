package txn

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// memStore is an in-memory Store. It keeps deep copies, as a real store
// keeps bytes: nothing the coordinator does to its records after a Put
// reaches the store.
type memStore struct {
	mu   sync.Mutex
	txns map[string]state.Txn
	puts int
	// failPuts makes PutTxn fail.
	failPuts error
}

var _ Store = (*memStore)(nil)

func newMemStore(recs ...state.Txn) *memStore {
	s := &memStore{txns: map[string]state.Txn{}}
	for _, r := range recs {
		s.txns[r.ID] = clone(r)
	}
	return s
}

func clone(t state.Txn) state.Txn {
	t.Partitions = slices.Clone(t.Partitions)
	t.Groups = slices.Clone(t.Groups)
	t.Offsets = slices.Clone(t.Offsets)
	return t
}

func (s *memStore) PutTxn(t state.Txn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failPuts != nil {
		return s.failPuts
	}
	s.puts++
	s.txns[t.ID] = clone(t)
	return nil
}

// PutTxnLazy is PutTxn: the in-memory store has no disk to wait for.
func (s *memStore) PutTxnLazy(t state.Txn) error { return s.PutTxn(t) }

func (s *memStore) DeleteTxn(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.txns, id)
	return nil
}

func (s *memStore) Txns() ([]state.Txn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]state.Txn, 0, len(s.txns))
	for _, t := range s.txns {
		out = append(out, clone(t))
	}
	return out, nil
}

func (s *memStore) get(id string) (state.Txn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.txns[id]
	return clone(t), ok
}

func (s *memStore) setFailPuts(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failPuts = err
}

// marker is one WriteMarker call that succeeded.
type marker struct {
	p      state.TxnPartition
	pid    int64
	epoch  int16
	commit bool
}

func (m marker) String() string {
	kind := "ABORT"
	if m.commit {
		kind = "COMMIT"
	}
	return fmt.Sprintf("%s %s-%d pid %d epoch %d", kind, m.p.Topic, m.p.Partition, m.pid, m.epoch)
}

// fakeNode records the markers written and the offsets committed, and
// hands out producer ids counting up from 1000.
type fakeNode struct {
	mu      sync.Mutex
	markers []marker
	// offsets holds the offsets committed per group, by "topic-partition".
	offsets map[string]map[string]state.TxnOffset
	commits int // CommitOffsets calls that succeeded
	nextPID int64
	// failMarkers and failCommits make WriteMarkers and CommitOffsets fail.
	failMarkers, failCommits bool
	// gone partitions no longer exist: WriteMarkers skips them.
	gone map[state.TxnPartition]bool
}

var _ Node = (*fakeNode)(nil)

var errInjected = errors.New("injected failure")

func newFakeNode() *fakeNode {
	return &fakeNode{offsets: map[string]map[string]state.TxnOffset{}, nextPID: 1000, gone: map[state.TxnPartition]bool{}}
}

func (n *fakeNode) WriteMarkers(ps []state.TxnPartition, pid int64, epoch int16, commit bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failMarkers {
		return errInjected
	}
	for _, p := range ps {
		if !n.gone[p] {
			n.markers = append(n.markers, marker{p, pid, epoch, commit})
		}
	}
	return nil
}

// OffsetsPartition names a partition of its own for each group.
func (n *fakeNode) OffsetsPartition(group string) state.TxnPartition { return offsetsTP(group) }

func offsetsTP(group string) state.TxnPartition {
	return state.TxnPartition{Topic: "__consumer_offsets/" + group}
}

func (n *fakeNode) CommitOffsets(group string, offs []state.TxnOffset) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failCommits {
		return errInjected
	}
	n.commits++
	if n.offsets[group] == nil {
		n.offsets[group] = map[string]state.TxnOffset{}
	}
	for _, o := range offs {
		if o.Group != group {
			return fmt.Errorf("BUG: offset of group %q committed to group %q", o.Group, group)
		}
		n.offsets[group][fmt.Sprintf("%s-%d", o.Topic, o.Partition)] = o
	}
	return nil
}

func (n *fakeNode) AllocateProducerID() (int64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nextPID++
	return n.nextPID - 1, nil
}

func (n *fakeNode) setFail(markers, commits bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failMarkers, n.failCommits = markers, commits
}

// takeMarkers returns the markers written since the last call.
func (n *fakeNode) takeMarkers() []marker {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.markers
	n.markers = nil
	return out
}

func (n *fakeNode) groupOffsets(group string) map[string]state.TxnOffset {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]state.TxnOffset{}
	for k, v := range n.offsets[group] {
		out[k] = v
	}
	return out
}

func (n *fakeNode) commitCalls() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.commits
}

// clock is a fake Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// env is a coordinator on a memStore, a fakeNode and a fake clock. Its
// checker never ticks on its own: tests call CheckNow.
type env struct {
	t     *testing.T
	c     *Coordinator
	store *memStore
	node  *fakeNode
	clock *clock
	cfg   Config
}

func newEnv(t *testing.T, recs ...state.Txn) *env {
	t.Helper()
	e := &env{t: t, store: newMemStore(recs...), node: newFakeNode(), clock: newClock()}
	e.cfg = Config{Now: e.clock.Now, CheckInterval: time.Hour, MaxTimeout: time.Minute, IDExpiration: time.Hour}
	e.open()
	t.Cleanup(func() { e.c.Close() })
	return e
}

// open starts the coordinator on the env's store and node.
func (e *env) open() {
	e.t.Helper()
	c, err := New(e.cfg, e.store, e.node)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	e.c = c
}

// restart closes the coordinator and opens a new one on the same store:
// what a crash leaves is exactly what the store holds.
func (e *env) restart() {
	e.t.Helper()
	e.c.Close()
	e.open()
}

// init is InitProducerID without a KIP-360 pair; it fails the test on an
// error.
func (e *env) init(id string) (int64, int16) {
	e.t.Helper()
	pid, epoch, err := e.c.InitProducerID(id, 10_000, -1, -1)
	if err != nil {
		e.t.Fatalf("InitProducerID(%s): %v", id, err)
	}
	return pid, epoch
}

// state is id's state as Describe shows it.
func (e *env) state(id string) State {
	e.t.Helper()
	t, ok := e.c.Describe(id)
	if !ok {
		e.t.Fatalf("Describe(%s): unknown", id)
	}
	return State(t.State)
}

// stored is id's record in the store.
func (e *env) stored(id string) state.Txn {
	e.t.Helper()
	t, ok := e.store.get(id)
	if !ok {
		e.t.Fatalf("no stored record of %s", id)
	}
	return t
}

func tp(topic string, p int32) state.TxnPartition {
	return state.TxnPartition{Topic: topic, Partition: p}
}

func wantErr(t *testing.T, what string, got, want *kerr.Error) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

func wantMarkers(t *testing.T, what string, got []marker, want ...marker) {
	t.Helper()
	sortMarkers(got)
	sortMarkers(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: markers %v, want %v", what, got, want)
	}
}

func sortMarkers(ms []marker) {
	slices.SortFunc(ms, func(a, b marker) int {
		if a.p.Topic != b.p.Topic {
			if a.p.Topic < b.p.Topic {
				return -1
			}
			return 1
		}
		return int(a.p.Partition - b.p.Partition)
	})
}

func TestStateNames(t *testing.T) {
	t.Parallel()
	for s := Empty; s <= PrepareEpochFence; s++ {
		got, ok := ParseState(s.String())
		if !ok || got != s {
			t.Errorf("ParseState(%q) = %v, %v", s.String(), got, ok)
		}
	}
	if _, ok := ParseState("Stable"); ok {
		t.Error("ParseState accepted a group state")
	}
	if s := State(42).String(); s != "State(42)" {
		t.Errorf("State(42) is %q", s)
	}
}

// A new transactional id gets a fresh producer id at epoch 0, persisted
// before the answer.
func TestInitNewID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, epoch := e.init("a")
	if pid != 1000 || epoch != 0 {
		t.Fatalf("new id: pid %d epoch %d, want 1000 0", pid, epoch)
	}
	st := e.stored("a")
	if st.ProducerID != pid || st.Epoch != 0 || st.LastProducerID != -1 || st.LastEpoch != -1 ||
		State(st.State) != Empty || st.TimeoutMs != 10_000 || st.UpdateMs != e.clock.Now().UnixMilli() {
		t.Fatalf("stored record %+v", st)
	}
	pid2, _ := e.init("b")
	if pid2 == pid {
		t.Fatalf("two ids share producer id %d", pid)
	}
}

// A second InitProducerID bumps the epoch; the older instance is fenced
// everywhere, and a producer id the id does not hold is not its mapping.
func TestInitBumpFences(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, _ := e.init("a")
	if _, epoch := e.init("a"); epoch != 1 {
		t.Fatalf("re-init: epoch %d, want 1", epoch)
	}
	if st := e.stored("a"); st.Epoch != 1 || st.ProducerID != pid {
		t.Fatalf("stored after the bump: %+v", st)
	}
	for _, c := range []struct {
		name      string
		pid       int64
		epoch     int16
		want      *kerr.Error
		wantEnded *kerr.Error // EndTxn's answer (no transaction is open)
	}{
		{"old epoch", pid, 0, kerr.ProducerFenced, kerr.ProducerFenced},
		{"future epoch", pid, 2, kerr.ProducerFenced, kerr.ProducerFenced},
		{"other producer id", pid + 1, 1, kerr.InvalidProducerIDMapping, kerr.InvalidProducerIDMapping},
		{"current pair", pid, 1, nil, kerr.InvalidTxnState},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Not parallel: the cases share the coordinator, and the
			// current pair's case starts a transaction.
			wantErr(t, "EndTxn", e.c.EndTxn("a", c.pid, c.epoch, true), c.wantEnded)
			wantErr(t, "AddPartitions", e.c.AddPartitions("a", c.pid, c.epoch, []state.TxnPartition{tp("t", 0)}), c.want)
			wantErr(t, "AddOffsets", e.c.AddOffsets("a", c.pid, c.epoch, "g"), c.want)
			wantErr(t, "CommitOffsets", e.c.CheckOffsetCommit("a", c.pid, c.epoch, "g"), c.want)
		})
	}
	wantErr(t, "AddPartitions of an unknown id", e.c.AddPartitions("nope", pid, 1, nil), kerr.InvalidProducerIDMapping)
	wantErr(t, "EndTxn of an unknown id", e.c.EndTxn("nope", pid, 1, true), kerr.InvalidProducerIDMapping)
	wantErr(t, "EndTxn commit", e.c.EndTxn("a", pid, 1, true), nil)
	wantMarkers(t, "commit", e.node.takeMarkers(), marker{tp("t", 0), pid, 1, true}, marker{offsetsTP("g"), pid, 1, true})
}

// A new instance of a producer whose transaction is open aborts it first,
// under a bumped epoch (the markers fence the old instance at the
// partitions, the group's partition of __consumer_offsets among them,
// which drops the offsets committed in it).
func TestInitAbortsOngoing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, _ := e.init("a")
	wantErr(t, "AddPartitions", e.c.AddPartitions("a", pid, 0, []state.TxnPartition{tp("t", 0), tp("u", 2)}), nil)
	wantErr(t, "AddOffsets", e.c.AddOffsets("a", pid, 0, "g"), nil)
	wantErr(t, "CommitOffsets", e.c.CheckOffsetCommit("a", pid, 0, "g"), nil)
	if s := e.state("a"); s != Ongoing {
		t.Fatalf("state %v, want Ongoing", s)
	}
	pid2, epoch := e.init("a")
	if pid2 != pid || epoch != 2 {
		t.Fatalf("re-init over an open transaction: pid %d epoch %d, want %d 2", pid2, epoch, pid)
	}
	wantMarkers(t, "the fenced transaction", e.node.takeMarkers(),
		marker{tp("t", 0), pid, 1, false}, marker{tp("u", 2), pid, 1, false}, marker{offsetsTP("g"), pid, 1, false})
	if n := e.node.commitCalls(); n != 0 {
		t.Fatalf("an aborted transaction committed offsets %d times", n)
	}
	if st := e.stored("a"); State(st.State) != Empty || st.Epoch != 2 || len(st.Partitions)+len(st.Groups)+len(st.Offsets) != 0 {
		t.Fatalf("stored after the re-init: %+v", st)
	}
	wantErr(t, "EndTxn of the old instance", e.c.EndTxn("a", pid, 0, true), kerr.ProducerFenced)
	wantErr(t, "AddPartitions of the old instance", e.c.AddPartitions("a", pid, 0, nil), kerr.ProducerFenced)
}

// KIP-360: a producer that passes its own pair bumps its epoch; a retry
// of that call (its previous pair) gets the same answer; any other pair
// is fenced.
func TestInitKIP360(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, _ := e.init("a")
	steps := []struct {
		name      string
		pid       int64
		epoch     int16
		wantPID   int64
		wantEpoch int16
		want      *kerr.Error
	}{
		{"current pair bumps", pid, 0, pid, 1, nil},
		{"retry with the previous pair", pid, 0, pid, 1, nil},
		{"retry again", pid, 0, pid, 1, nil},
		{"current pair bumps again", pid, 1, pid, 2, nil},
		{"older pair", pid, 0, -1, -1, kerr.ProducerFenced},
		{"future epoch", pid, 5, -1, -1, kerr.ProducerFenced},
		{"other producer id", pid + 7, 2, -1, -1, kerr.ProducerFenced},
		{"previous pair once more", pid, 1, pid, 2, nil},
	}
	for _, s := range steps {
		gotPID, gotEpoch, err := e.c.InitProducerID("a", 10_000, s.pid, s.epoch)
		if err != s.want || gotPID != s.wantPID || gotEpoch != s.wantEpoch {
			t.Fatalf("%s: (%d, %d) %v, want (%d, %d) %v", s.name, gotPID, gotEpoch, err, s.wantPID, s.wantEpoch, s.want)
		}
	}
	// Once the bumped producer starts a transaction, its previous pair is
	// no retry any more.
	wantErr(t, "AddPartitions", e.c.AddPartitions("a", pid, 2, []state.TxnPartition{tp("t", 0)}), nil)
	if _, _, err := e.c.InitProducerID("a", 10_000, pid, 1); err != kerr.ProducerFenced {
		t.Fatalf("previous pair while a transaction is open: %v, want PRODUCER_FENCED", err)
	}
}

// A zombie is the producer instance an InitProducerID without a pair (a
// new instance) fenced. If the zombie later asks for a KIP-360 bump with
// its old pair, it must be PRODUCER_FENCED: answering with the new
// instance's pair, as if the zombie's own earlier bump were being
// retried, would hand the zombie the new instance's epoch and un-fence
// it. Kafka guards this by clearing the previous epoch when a producer
// without a pair initializes (TransactionMetadata.prepareIncrementProducerEpoch:
// "a new producer calling InitProducerId would have caused the last epoch
// to be set to -1").
func TestInitZombieRetryFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pid, zombieEpoch := e.init("a") // instance A
	_, newEpoch := e.init("a")      // instance B fences A
	gotPID, gotEpoch, err := e.c.InitProducerID("a", 10_000, pid, zombieEpoch)
	if err != kerr.ProducerFenced {
		t.Fatalf("zombie A's KIP-360 InitProducerID with its fenced pair (%d, %d) answered (%d, %d) %v, "+
			"want PRODUCER_FENCED: A now shares instance B's epoch %d", pid, zombieEpoch, gotPID, gotEpoch, err, newEpoch)
	}
}

// At an exhausted epoch a KIP-360 bump moves to a new producer id; the
// old pair is then an unknown mapping, and a retry with it gets the new
// pair again.
func TestInitEpochExhaustion(t *testing.T) {
	t.Parallel()
	const oldPID = 77
	e := newEnv(t, state.Txn{ID: "a", ProducerID: oldPID, Epoch: math.MaxInt16 - 1, LastProducerID: -1, LastEpoch: -1,
		TimeoutMs: 10_000, State: int8(CompleteCommit)})
	pid, epoch, ierr := e.c.InitProducerID("a", 10_000, oldPID, math.MaxInt16-1)
	if ierr != nil || pid == oldPID || epoch != 0 {
		t.Fatalf("bump at epoch %d: pid %d epoch %d, want a new producer id at epoch 0", math.MaxInt16-1, pid, epoch)
	}
	if st := e.stored("a"); st.ProducerID != pid || st.LastProducerID != oldPID || st.LastEpoch != math.MaxInt16-1 {
		t.Fatalf("stored after the exhaustion: %+v", st)
	}
	wantErr(t, "AddPartitions with the exhausted pair", e.c.AddPartitions("a", oldPID, math.MaxInt16-1, nil), kerr.InvalidProducerIDMapping)
	gotPID, gotEpoch, err := e.c.InitProducerID("a", 10_000, oldPID, math.MaxInt16-1)
	if err != nil || gotPID != pid || gotEpoch != 0 {
		t.Fatalf("KIP-360 retry with the exhausted pair: (%d, %d) %v, want (%d, 0)", gotPID, gotEpoch, err, pid)
	}
	// The one below exhaustion still bumps in place.
	e2 := newEnv(t, state.Txn{ID: "b", ProducerID: oldPID, Epoch: math.MaxInt16 - 2, LastProducerID: -1, LastEpoch: -1,
		TimeoutMs: 10_000, State: int8(Empty)})
	if pid, epoch := e2.init("b"); pid != oldPID || epoch != math.MaxInt16-1 {
		t.Fatalf("bump at epoch %d: pid %d epoch %d", math.MaxInt16-2, pid, epoch)
	}
}

// A transaction open at an exhausted epoch, fenced by a new instance (or
// a timeout): the ABORT markers must carry the producer id that wrote the
// transaction's data. A marker of another producer id closes nothing at
// the partition, so the old producer's transaction would hang there and
// hold the last stable offset forever.
func TestFenceAtExhaustedEpochMarksTheTransactionsProducer(t *testing.T) {
	t.Parallel()
	const oldPID = 77
	ongoing := state.Txn{ID: "a", ProducerID: oldPID, Epoch: math.MaxInt16 - 1, LastProducerID: -1, LastEpoch: -1,
		TimeoutMs: 10_000, State: int8(Ongoing), Partitions: []state.TxnPartition{tp("t", 0)}}
	for _, c := range []struct {
		name  string
		fence func(e *env)
	}{
		{"new instance", func(e *env) { e.init("a") }},
		{"timeout", func(e *env) { e.clock.advance(time.Minute); e.c.CheckNow() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := clone(ongoing)
			rec.StartMs = newClock().Now().UnixMilli() // every env's clock starts there
			e := newEnv(t, rec)
			c.fence(e)
			ms := e.node.takeMarkers()
			if len(ms) != 1 || ms[0].pid != oldPID || ms[0].commit || ms[0].epoch < math.MaxInt16-1 {
				t.Fatalf("fencing a transaction of producer %d at epoch %d wrote %v, want one ABORT of producer %d "+
					"at an epoch >= %d", oldPID, math.MaxInt16-1, ms, oldPID, math.MaxInt16-1)
			}
		})
	}
}
