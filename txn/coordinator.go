// Package txn is kmirror's transaction coordinator: it runs new
// transactions on a node that became a writable primary (after a failover,
// applications with transactional.id move here). Kafka's coordinator
// protocol: InitProducerId with a transactional id (epoch bumps, zombie
// fencing, KIP-360 retries), AddPartitionsToTxn, AddOffsetsToTxn (which
// adds the group's partition of __consumer_offsets to the transaction, as
// Kafka does) and EndTxn; transaction markers written to every partition
// of the transaction, wherever it is led (Node.WriteMarkers); the marker
// on __consumer_offsets decides the offsets the group's coordinator holds
// pending from TxnOffsetCommit; transaction.timeout.ms aborts an abandoned
// transaction.
//
// Durability: each transactional id's record (state.Txn) is stored before
// the action it announces (on a node, Store.PutTxn returns once the id's
// partition of __transaction_state holds it in its in-sync replicas;
// broker/txn_log.go). EndTxn persists PrepareCommit or PrepareAbort, then
// writes the markers, then persists CompleteCommit or CompleteAbort. A
// crash anywhere in between leaves a Prepare record that the next
// coordinator of the id finishes when it loads it (Load, or New for a
// store that hands its records over at the start), so no transaction is
// left hanging and none is decided twice. The completion may be stored
// lazily (persistLazy says why that is safe). Records written by an
// older kmirror may hold a transaction's groups and offsets themselves;
// those offsets are committed through Node.CommitOffsets when the
// transaction commits.
//
// Producer ids come from the node's allocator (the same as idempotent
// producers'), which never reaches the ids of mirrored batches (DESIGN.md
// decision 2).
//
// The package knows nothing of the wire protocol: the broker's handlers
// call it with decoded fields and turn its *kerr.Error answers into codes.
package txn

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/state"
)

// State is a transaction's state, with Kafka's TransactionState values
// and the names DescribeTransactions reports.
type State int8

const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
	Dead
	PrepareEpochFence
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
	"CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", s)
}

// ParseState reads a state name (ListTransactions' filter).
func ParseState(name string) (State, bool) {
	i := slices.Index(stateNames[:], name)
	return State(i), i >= 0
}

// Store persists transaction records (state.Store implements it).
// PutTxn returns once the record is on disk; PutTxnLazy once it is written,
// to reach the disk with the next PutTxn (or the store's close).
type Store interface {
	PutTxn(state.Txn) error
	PutTxnLazy(state.Txn) error
	DeleteTxn(id string) error
	Txns() ([]state.Txn, error)
}

// Node is the rest of the broker, as the coordinator sees it.
type Node interface {
	// WriteMarkers appends a COMMIT or ABORT marker of producer pid at
	// epoch to each partition, wherever it is led, and returns once the
	// partitions' in-sync replicas hold them; partitions that no longer
	// exist are skipped (their topic was deleted).
	WriteMarkers(ps []state.TxnPartition, pid int64, epoch int16, commit bool) error
	// OffsetsPartition is the partition of __consumer_offsets that holds
	// group: a transaction that commits offsets of the group writes its
	// marker there too, which decides the offsets (group/txn_offsets.go).
	OffsetsPartition(group string) state.TxnPartition
	// CommitOffsets stores a committed transaction's offsets of one
	// group, for the transactions whose record holds them (written
	// before the group held them pending, by an older kmirror).
	CommitOffsets(group string, offs []state.TxnOffset) error
	// AllocateProducerID hands out a producer id never used before.
	AllocateProducerID() (int64, error)
}

// Config configures a Coordinator. Zero values mean the defaults named.
type Config struct {
	Logger *slog.Logger
	// MaxTimeout is transaction.max.timeout.ms (15 min): a longer
	// transaction.timeout.ms is INVALID_TRANSACTION_TIMEOUT.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms (7 days): an id idle
	// this long is forgotten.
	IDExpiration time.Duration
	// CheckInterval is how often timed-out transactions are aborted and
	// unfinished ones retried (transaction.abort.timed.out.transaction.
	// cleanup.interval.ms, 10 s).
	CheckInterval time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Coordinator runs the transactions of one node. Its methods are safe for
// concurrent use; one mutex orders every transaction change.
type Coordinator struct {
	cfg   Config
	store Store
	node  Node
	log   *slog.Logger

	mu   sync.Mutex
	txns map[string]*state.Txn

	stop chan struct{}
	wg   sync.WaitGroup
}

// New loads the transaction records, finishes the ones a crash left
// between prepare and complete, and starts the timeout checker.
func New(cfg Config, store Store, node Node) (*Coordinator, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = 15 * time.Minute
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = 7 * 24 * time.Hour
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Coordinator{cfg: cfg, store: store, node: node, log: cfg.Logger, txns: map[string]*state.Txn{},
		stop: make(chan struct{})}
	recs, err := store.Txns()
	if err != nil {
		return nil, fmt.Errorf("txn: loading transactions: %w", err)
	}
	c.mu.Lock()
	for i := range recs {
		t := &recs[i]
		c.txns[t.ID] = t
		if s := State(t.State); s == PrepareCommit || s == PrepareAbort {
			c.log.Info("finishing a transaction decided before the restart", "transactional_id", t.ID, "state", s)
			if err := c.complete(t); err != nil {
				c.log.Warn("finishing a transaction; will retry", "transactional_id", t.ID, "err", err)
			}
		}
	}
	c.mu.Unlock()
	// Transactions that timed out while the node was down are aborted
	// now, not a check interval later: a node restarted more often than
	// that would otherwise never abort them.
	c.checkPass(false)
	c.wg.Add(1)
	go c.checkLoop()
	return c, nil
}

// Close stops the timeout checker.
func (c *Coordinator) Close() {
	close(c.stop)
	c.wg.Wait()
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// persist stores t, fsynced; on failure the in-memory record is restored
// from old, so memory never runs ahead of what a restart would see.
func (c *Coordinator) persist(t *state.Txn, old state.Txn) *kerr.Error {
	return c.write(t, old, c.store.PutTxn)
}

// persistLazy stores t without waiting for the disk. Only for records
// whose loss in a power failure is harmless because a restart redoes
// them: the completion of a decided transaction (the Prepare record is
// fsynced, and finishing it again writes markers that are already
// there). The partitions of a transaction are always fsynced: records
// are produced to them as soon as the answer leaves.
func (c *Coordinator) persistLazy(t *state.Txn, old state.Txn) *kerr.Error {
	return c.write(t, old, c.store.PutTxnLazy)
}

func (c *Coordinator) write(t *state.Txn, old state.Txn, put func(state.Txn) error) *kerr.Error {
	t.UpdateMs = c.nowMs()
	if err := put(*t); err != nil {
		*t = old
		if errors.Is(err, kerr.NotCoordinator) {
			// The id's partition moved to another leader meanwhile:
			// the client finds it there.
			return kerr.NotCoordinator
		}
		c.log.Error("persisting a transaction", "transactional_id", t.ID, "err", err)
		return kerr.CoordinatorNotAvailable
	}
	return nil
}

// Load installs the records of the ids belongs selects (one partition of
// __transaction_state, which this node now leads), dropping what it held
// of them first, and finishes the transactions they hold decided but not
// complete: their markers are written now, as a Kafka coordinator does
// when it loads a partition. Open ones go on, or time out.
func (c *Coordinator) Load(belongs func(id string) bool, recs []state.Txn) {
	c.Unload(belongs)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range recs {
		t := recs[i]
		if !belongs(t.ID) {
			continue
		}
		c.txns[t.ID] = &t
		if s := State(t.State); s == PrepareCommit || s == PrepareAbort {
			c.log.Info("finishing a transaction decided by the partition's previous leader", "transactional_id", t.ID,
				"state", s)
			if err := c.complete(&t); err != nil {
				c.log.Warn("finishing a transaction; will retry", "transactional_id", t.ID, "err", err)
			}
		}
	}
}

// Unload drops the ids belongs selects (a partition led elsewhere now).
func (c *Coordinator) Unload(belongs func(id string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.txns {
		if belongs(id) {
			delete(c.txns, id)
		}
	}
}

// snapshot copies t's slices so a rollback is independent of later edits.
func snapshot(t *state.Txn) state.Txn {
	old := *t
	old.Partitions = slices.Clone(t.Partitions)
	old.Groups = slices.Clone(t.Groups)
	old.Offsets = slices.Clone(t.Offsets)
	return old
}

// InitProducerID gives a transactional id its producer id and a new epoch,
// fencing every older producer of the id: an open transaction of theirs is
// aborted first. reqPID/reqEpoch (-1 when absent) are a KIP-360 producer's
// current pair: it must be the id's current or previous pair.
func (c *Coordinator) InitProducerID(id string, timeoutMs int32, reqPID int64, reqEpoch int16) (int64, int16, *kerr.Error) {
	if timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.cfg.MaxTimeout {
		return -1, -1, kerr.InvalidTransactionTimeout
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.txns[id]
	if t == nil || State(t.State) == Dead {
		pid, err := c.node.AllocateProducerID()
		if err != nil {
			c.log.Error("allocating a producer id", "err", err)
			return -1, -1, kerr.CoordinatorNotAvailable
		}
		t = &state.Txn{ID: id, ProducerID: pid, LastProducerID: -1, LastEpoch: -1, TimeoutMs: timeoutMs,
			State: int8(Empty)}
		if err := c.persist(t, state.Txn{}); err != nil {
			return -1, -1, err
		}
		c.txns[id] = t
		return t.ProducerID, t.Epoch, nil
	}
	if reqPID >= 0 {
		switch {
		case reqPID == t.LastProducerID && reqEpoch == t.LastEpoch && State(t.State) == Empty:
			// A retry of an init that already bumped: same answer.
			return t.ProducerID, t.Epoch, nil
		case reqPID != t.ProducerID || reqEpoch != t.Epoch:
			return -1, -1, kerr.ProducerFenced
		}
	}
	switch State(t.State) {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return -1, -1, kerr.ConcurrentTransactions
	case Ongoing:
		// A new producer instance: the old one's transaction is aborted
		// under a bumped epoch, which fences it at every partition.
		if err := c.abort(t, true); err != nil {
			return -1, -1, err
		}
		if State(t.State) != CompleteAbort {
			// The markers did not all go out: the checker retries
			// them, and the client retries this init (Kafka's answer).
			return -1, -1, kerr.ConcurrentTransactions
		}
	}
	old := snapshot(t)
	c.nextEpoch(t, reqPID >= 0)
	t.State, t.TimeoutMs = int8(Empty), timeoutMs
	t.Partitions, t.Groups, t.Offsets = nil, nil, nil
	if err := c.persist(t, old); err != nil {
		return -1, -1, err
	}
	return t.ProducerID, t.Epoch, nil
}

// nextEpoch gives the producer its next epoch at InitProducerId, or a new
// producer id when the epoch is exhausted. A KIP-360 bump (the client gave
// its current pair) keeps that pair as the previous one, so a retry of the
// same init gets the same answer; a new instance's init clears it, so a
// zombie holding the old pair cannot pass for a retry (as Kafka's
// prepareIncrementProducerEpoch does).
func (c *Coordinator) nextEpoch(t *state.Txn, kip360 bool) {
	t.LastProducerID, t.LastEpoch = -1, -1
	if kip360 {
		t.LastProducerID, t.LastEpoch = t.ProducerID, t.Epoch
	}
	if t.Epoch >= math.MaxInt16-1 {
		if pid, err := c.node.AllocateProducerID(); err == nil {
			t.ProducerID, t.Epoch = pid, 0
			return
		}
	}
	t.Epoch++
}

// fenceEpoch bumps the epoch for an abort the coordinator decides (a
// timeout, a new instance). The producer id stays, even at the last epoch
// (32767): the abort markers must carry the transaction's own producer id
// to close it at every partition; a new id comes at the next init.
func fenceEpoch(t *state.Txn) {
	t.LastProducerID, t.LastEpoch = -1, -1
	if t.Epoch < math.MaxInt16 {
		t.Epoch++
	}
}

// check finds id's transaction and checks the producer's pair.
// REQUIRES: c.mu held.
func (c *Coordinator) check(id string, pid int64, epoch int16) (*state.Txn, *kerr.Error) {
	t := c.txns[id]
	switch {
	case t == nil || State(t.State) == Dead || t.ProducerID != pid:
		return nil, kerr.InvalidProducerIDMapping
	case epoch != t.Epoch:
		return nil, kerr.ProducerFenced
	}
	switch State(t.State) {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return nil, kerr.ConcurrentTransactions
	}
	return t, nil
}

// begin moves t to Ongoing if it is not already. REQUIRES: c.mu held.
func (c *Coordinator) begin(t *state.Txn) {
	if State(t.State) != Ongoing {
		t.State, t.StartMs = int8(Ongoing), c.nowMs()
		t.Partitions, t.Groups, t.Offsets = nil, nil, nil
	}
}

// AddPartitions adds partitions to id's transaction, starting it if needed.
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, ps []state.TxnPartition) *kerr.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, err := c.check(id, pid, epoch)
	if err != nil {
		return err
	}
	old := snapshot(t)
	changed := State(t.State) != Ongoing
	c.begin(t)
	for _, p := range ps {
		if !slices.Contains(t.Partitions, p) {
			t.Partitions, changed = append(t.Partitions, p), true
		}
	}
	if !changed {
		return nil
	}
	return c.persist(t, old)
}

// AddOffsets adds a group to id's transaction (AddOffsetsToTxn): its
// partition of __consumer_offsets joins the transaction's partitions, so
// the transaction's marker decides the offsets TxnOffsetCommit leaves
// pending there. Fsynced as AddPartitions: the group's coordinator writes
// the pending offsets as soon as the answer leaves.
func (c *Coordinator) AddOffsets(id string, pid int64, epoch int16, group string) *kerr.Error {
	return c.AddPartitions(id, pid, epoch, []state.TxnPartition{c.node.OffsetsPartition(group)})
}

// CheckOffsetCommit checks a TxnOffsetCommit of group in id's transaction
// on the node that coordinates both: the producer's pair, and the group
// added to the transaction (else INVALID_TXN_STATE). A group that a
// transaction recorded before its partition counted (an older kmirror)
// has the partition added now.
func (c *Coordinator) CheckOffsetCommit(id string, pid int64, epoch int16, group string) *kerr.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, err := c.check(id, pid, epoch)
	if err != nil {
		return err
	}
	if State(t.State) != Ongoing {
		return kerr.InvalidTxnState
	}
	p := c.node.OffsetsPartition(group)
	switch {
	case slices.Contains(t.Partitions, p):
		return nil
	case !slices.Contains(t.Groups, group):
		// TxnOffsetCommit before AddOffsetsToTxn: the marker would
		// never reach the offsets.
		return kerr.InvalidTxnState
	}
	old := snapshot(t)
	t.Partitions = append(t.Partitions, p)
	return c.persist(t, old)
}

// EndTxn commits or aborts id's transaction. Once the decision is
// persisted the answer is success: markers that fail to write are retried
// by the checker (and at a restart).
func (c *Coordinator) EndTxn(id string, pid int64, epoch int16, commit bool) *kerr.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.txns[id]
	if t != nil && t.ProducerID == pid && t.Epoch == epoch {
		// A retried EndTxn whose decision was already carried out.
		switch State(t.State) {
		case CompleteCommit:
			if commit {
				return nil
			}
			return kerr.InvalidTxnState
		case CompleteAbort:
			if !commit {
				return nil
			}
			return kerr.InvalidTxnState
		case Empty:
			return kerr.InvalidTxnState
		}
	}
	t, err := c.check(id, pid, epoch)
	if err != nil {
		return err
	}
	if commit {
		return c.decide(t, PrepareCommit)
	}
	return c.abort(t, false)
}

// abort aborts t's open transaction, first bumping its epoch when fence
// (a timeout, a new producer instance): the markers then carry the new
// epoch and every partition refuses the old producer. REQUIRES: c.mu held.
func (c *Coordinator) abort(t *state.Txn, fence bool) *kerr.Error {
	if fence {
		old := snapshot(t)
		fenceEpoch(t)
		if err := c.persist(t, old); err != nil {
			return err
		}
	}
	return c.decide(t, PrepareAbort)
}

// decide persists the decision, then carries it out. REQUIRES: c.mu held.
func (c *Coordinator) decide(t *state.Txn, prepare State) *kerr.Error {
	old := snapshot(t)
	t.State = int8(prepare)
	if err := c.persist(t, old); err != nil {
		return err
	}
	if err := c.complete(t); err != nil {
		c.log.Warn("writing transaction markers; will retry", "transactional_id", t.ID, "err", err)
	}
	return nil
}

// complete writes the markers of a prepared transaction, applies (commit)
// or drops (abort) its offsets and persists the completion. It is
// idempotent: after a crash it runs again from the Prepare record.
// REQUIRES: c.mu held.
func (c *Coordinator) complete(t *state.Txn) error {
	commit := State(t.State) == PrepareCommit
	if len(t.Partitions) > 0 {
		if err := c.node.WriteMarkers(t.Partitions, t.ProducerID, t.Epoch, commit); err != nil {
			return fmt.Errorf("markers: %w", err)
		}
	}
	if commit {
		// Offsets an older kmirror kept in the record.
		byGroup := map[string][]state.TxnOffset{}
		for _, o := range t.Offsets {
			byGroup[o.Group] = append(byGroup[o.Group], o)
		}
		for g, offs := range byGroup {
			if err := c.node.CommitOffsets(g, offs); err != nil {
				return fmt.Errorf("committing the offsets of group %s: %w", g, err)
			}
		}
	}
	old := snapshot(t)
	t.State = int8(CompleteAbort)
	if commit {
		t.State = int8(CompleteCommit)
	}
	t.Partitions, t.Groups, t.Offsets = nil, nil, nil
	if err := c.persistLazy(t, old); err != nil {
		return errors.New("persisting the completion")
	}
	return nil
}

// checkLoop aborts timed-out transactions, retries unfinished ones and
// forgets expired ids.
func (c *Coordinator) checkLoop() {
	defer c.wg.Done()
	tick := time.NewTicker(c.cfg.CheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
			c.CheckNow()
		}
	}
}

// CheckNow runs one pass of the checker (tests call it with a fake clock).
func (c *Coordinator) CheckNow() { c.checkPass(true) }

// checkPass aborts timed-out transactions, retries unfinished ones and,
// if expire, forgets idle ids.
func (c *Coordinator) checkPass(expire bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.nowMs()
	for id, t := range c.txns {
		switch State(t.State) {
		case Ongoing:
			if now-t.StartMs > int64(t.TimeoutMs) {
				c.log.Info("aborting a timed-out transaction", "transactional_id", id,
					"producer_id", t.ProducerID, "timeout_ms", t.TimeoutMs)
				if err := c.abort(t, true); err != nil {
					c.log.Warn("aborting a timed-out transaction", "transactional_id", id, "err", err)
				}
			}
		case PrepareCommit, PrepareAbort:
			if err := c.complete(t); err != nil {
				c.log.Warn("finishing a transaction; will retry", "transactional_id", id, "err", err)
			}
		case Empty, CompleteCommit, CompleteAbort:
			if expire && now-t.UpdateMs > c.cfg.IDExpiration.Milliseconds() {
				if err := c.store.DeleteTxn(id); err == nil {
					delete(c.txns, id)
				}
			}
		}
	}
}

// Resolution says what should become of a transaction a partition still
// holds open (Resolve).
type Resolution int8

const (
	// Keep: the coordinator is running it and will write its markers.
	Keep Resolution = iota
	// Commit, Abort: the coordinator decided it (or fenced it) but the
	// partition has no marker: one was lost (an OS crash after the
	// decision was fsynced and before the marker reached the disk).
	Commit
	Abort
	// Unknown: no transactional id has this producer id; the transaction
	// is orphaned (its record expired, or it was written without a
	// coordinator).
	Unknown
)

// Resolve answers for a transaction that partition p holds open for
// producer pid at epoch, so that read_committed consumers never wait on a
// transaction the coordinator is not going to end.
func (c *Coordinator) Resolve(p state.TxnPartition, pid int64, epoch int16) Resolution {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.txns {
		switch {
		case t.ProducerID == pid && epoch == t.Epoch:
			switch State(t.State) {
			case Ongoing, PrepareCommit, PrepareAbort:
				if slices.Contains(t.Partitions, p) {
					return Keep
				}
				return Abort
			case CompleteCommit:
				return Commit
			}
			return Abort
		case t.ProducerID == pid && epoch < t.Epoch, t.LastProducerID == pid:
			// An older epoch of the id: every transaction of it was
			// ended before the epoch moved on.
			return Abort
		case t.ProducerID == pid:
			return Unknown
		}
	}
	return Unknown
}

// PendingOffsets lists the partitions of group that an undecided
// transaction has offsets for (OffsetFetch with RequireStable answers them
// UNSTABLE_OFFSET_COMMIT, KIP-447).
func (c *Coordinator) PendingOffsets(group string) map[state.TxnPartition]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out map[state.TxnPartition]bool
	for _, t := range c.txns {
		switch State(t.State) {
		case Ongoing, PrepareCommit, PrepareAbort:
		default:
			continue
		}
		for _, o := range t.Offsets {
			if o.Group == group {
				if out == nil {
					out = map[state.TxnPartition]bool{}
				}
				out[state.TxnPartition{Topic: o.Topic, Partition: o.Partition}] = true
			}
		}
	}
	return out
}

// Describe returns a copy of id's record (ok false for an unknown id).
func (c *Coordinator) Describe(id string) (state.Txn, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.txns[id]
	if t == nil {
		return state.Txn{}, false
	}
	return snapshot(t), true
}

// List returns copies of every record, by transactional id.
func (c *Coordinator) List() []state.Txn {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]state.Txn, 0, len(c.txns))
	for _, t := range c.txns {
		out = append(out, snapshot(t))
	}
	slices.SortFunc(out, func(a, b state.Txn) int { return strings.Compare(a.ID, b.ID) })
	return out
}
