package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/kmirror/kmirror/state"
)

// The metadata log is the cluster's replicated log of metadata changes, on
// hashicorp/raft (DESIGN.md "The cluster"): the voters are the nodes with
// the controller role (controller.quorum.voters), the Raft leader is the
// controller, and every entry is one atomic change to state/'s replicated
// records (EncodeEntry). Each node's state machine applies the committed
// entries to its own Badger store, which is the materialized image; a Raft
// snapshot is that store's replicated records with the index they hold
// (state.WriteMetadataSnapshot).
//
// The store is durable on its own, so a restarted node does not restore
// its latest snapshot into it (raft's NoSnapshotRestoreOnStart): the store
// records the index of the last entry it applied, in the same transaction
// as the entry's changes, and skips what it already holds when raft
// replays the log. Only a store behind the latest snapshot (the log
// before it is compacted away) is restored from it first.

// Voter is one member of controller.quorum.voters: a node id and the
// host:port of its CONTROLLER listener.
type Voter struct {
	ID   int32
	Addr string
}

// ParseVoters parses controller.quorum.voters: comma-separated
// id@host:port entries, as Kafka writes them.
func ParseVoters(s string) ([]Voter, error) {
	var vs []Voter
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		idStr, addr, ok := strings.Cut(part, "@")
		id, err := strconv.ParseInt(idStr, 10, 32)
		if !ok || err != nil || id < 0 {
			return nil, fmt.Errorf("controller.quorum.voters: want id@host:port, got %q", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("controller.quorum.voters: %q: %v", part, err)
		}
		if slices.ContainsFunc(vs, func(v Voter) bool { return v.ID == int32(id) }) {
			return nil, fmt.Errorf("controller.quorum.voters: node %d listed twice", id)
		}
		vs = append(vs, Voter{ID: int32(id), Addr: addr})
	}
	return vs, nil
}

// LogConfig configures a node's metadata log.
type LogConfig struct {
	// NodeID is node.id; Listener its CONTROLLER listener, whose raft
	// side the log uses (it advertises the node's controller.quorum.voters
	// address, whatever the listener binds). The log does not own the
	// listener: closing the log detaches its raft side, and the caller
	// closes the listener after the log. A node alone in Voters may leave
	// Listener nil: its log then needs no network (a single node is a
	// one-voter cluster without any setting).
	NodeID   int32
	Listener *ControllerListener
	// Dir holds the Raft log and stable store (raft.db) and the snapshots.
	Dir    string
	Voters []Voter
	Store  *state.Store
	Logger *slog.Logger

	// OnChange is called after each entry or snapshot this node applies,
	// with what it changed and the index applied, and at each change of
	// controller (ChangedCluster: the image names the controller), from
	// raft's goroutines: it must not block (the node wakes its
	// reconciler). Nil: nobody is told.
	OnChange func(changes state.Changes, applied uint64)

	// HeartbeatTimeout and ElectionTimeout are raft's (1 s each when
	// zero); tests shorten them. SnapshotThreshold is the number of
	// entries between snapshots (8192 when zero), checked every
	// SnapshotInterval (2 min when zero), TrailingLogs the entries a
	// snapshot leaves in the log for followers a little behind (10240
	// when zero): one further behind is sent the snapshot.
	HeartbeatTimeout  time.Duration
	ElectionTimeout   time.Duration
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
}

// ErrNotController is returned by Apply on a node that is not the
// controller (the Raft leader); the error names the controller when one is
// known.
var ErrNotController = errors.New("meta: this node is not the controller")

// MetadataLog is a node's member of the metadata log: a voter, on raft,
// or on a broker-only node an observer, which fetches the committed
// entries from the controller (obs, with raft and what serves it nil;
// observer.go).
type MetadataLog struct {
	cfg   LogConfig
	raft  *raft.Raft
	trans transport
	db    *raftboltdb.BoltStore
	snaps raft.SnapshotStore
	fsm   *storeFSM
	obs   *observer
	// obsMu guards what the controller keeps for its observers
	// (metadata_fetch.go): the index the latest snapshot holds, by
	// snapshot id, and each observer's position as its last fetch said.
	obsMu         sync.Mutex
	snapshotHolds map[string]uint64
	observers     map[int32]QuorumReplica
	// observer, observed and watching are watchLeader's, nil without
	// OnChange.
	observer *raft.Observer
	observed chan raft.Observation
	watching chan struct{}
}

// transport is raft's transport: the CONTROLLER listener's raft side
// between voters, in memory for a node alone.
type transport interface {
	raft.Transport
	Close() error
}

// OpenLog opens (or creates) the node's metadata log and joins the
// quorum. Voters started with empty dirs and the same voter list form the
// cluster by themselves: each bootstraps with that list, which raft allows
// when the lists are identical. A node that is not among the voters is an
// observer (a broker-only node): it keeps no raft state, and fetches the
// log from the controller into its store.
func OpenLog(cfg LogConfig) (*MetadataLog, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if !slices.ContainsFunc(cfg.Voters, func(v Voter) bool { return v.ID == cfg.NodeID }) {
		fsm := &storeFSM{store: cfg.Store, log: cfg.Logger, changed: cfg.OnChange}
		applied, err := cfg.Store.MetadataApplied()
		if err != nil {
			return nil, fmt.Errorf("metadata log: %w", err)
		}
		fsm.last = applied
		return openObserver(cfg, fsm)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("metadata log: %w", err)
	}
	level := hclog.Warn
	if cfg.Listener == nil {
		level = hclog.Error // alone: "starting election" at every start is no news
	}
	hlog := newRaftLogger(cfg.Logger, level)
	db, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.Dir, "raft.db")})
	if err != nil {
		return nil, fmt.Errorf("metadata log: opening %s: %w", cfg.Dir, err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("metadata log: snapshots: %w", err)
	}
	fsm := &storeFSM{store: cfg.Store, log: cfg.Logger, changed: cfg.OnChange}
	if err := fsm.catchUp(snaps); err != nil {
		db.Close()
		return nil, err
	}
	trans, err := newTransport(cfg, hlog)
	if err != nil {
		db.Close()
		return nil, err
	}
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(cfg.NodeID)
	rc.Logger = hlog
	rc.NoSnapshotRestoreOnStart = true
	// A follower learns that an entry is committed with the leader's next
	// AppendEntries, which for a lone write comes after CommitTimeout
	// (raft's 50 ms, drawn up to 100): a node that forwarded a change
	// waits for it (read-your-writes), so it cost 80 ms a write. 5 ms
	// costs a few hundred tiny RPCs a second per follower while idle, on
	// a LAN (BENCHMARKS.md "cluster: the metadata quorum").
	rc.CommitTimeout = 5 * time.Millisecond
	if cfg.Listener == nil && cfg.HeartbeatTimeout == 0 {
		// Alone, with no network: no reason to wait a second to elect
		// itself at every start.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout = 20*time.Millisecond, 20*time.Millisecond
	}
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout, rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout, cfg.HeartbeatTimeout
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	fail := func(err error) (*MetadataLog, error) {
		trans.Close()
		db.Close()
		return nil, err
	}
	existing, err := raft.HasExistingState(db, db, snaps)
	if err != nil {
		return fail(fmt.Errorf("metadata log: %w", err))
	}
	if !existing {
		var servers []raft.Server
		for _, v := range cfg.Voters {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: serverID(v.ID), Address: raft.ServerAddress(v.Addr)})
		}
		if err := raft.BootstrapCluster(rc, db, db, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
			return fail(fmt.Errorf("metadata log: bootstrapping: %w", err))
		}
	}
	r, err := raft.NewRaft(rc, fsm, db, db, snaps, trans)
	if err != nil {
		return fail(fmt.Errorf("metadata log: %w", err))
	}
	l := &MetadataLog{cfg: cfg, raft: r, trans: trans, db: db, snaps: snaps, fsm: fsm}
	l.warnChangedVoters()
	if cfg.OnChange != nil {
		l.watchLeader()
	}
	return l, nil
}

// watchLeader calls OnChange at every change of leader, until Close.
func (l *MetadataLog) watchLeader() {
	ch := make(chan raft.Observation, 8)
	l.observed = ch
	l.observer = raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	l.raft.RegisterObserver(l.observer)
	l.watching = make(chan struct{})
	go func() {
		defer close(l.watching)
		for range ch {
			l.cfg.OnChange(state.ChangedCluster, l.fsm.applied())
		}
	}()
}

// warnChangedVoters says when controller.quorum.voters differs from the
// voters the log holds: the log's win (changing the quorum's membership
// is not built yet), so a changed setting would otherwise be ignored in
// silence.
func (l *MetadataLog) warnChangedVoters() {
	f := l.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	var inLog, set []string
	for _, sv := range f.Configuration().Servers {
		inLog = append(inLog, string(sv.ID)+"@"+string(sv.Address))
	}
	for _, v := range l.cfg.Voters {
		set = append(set, strconv.Itoa(int(v.ID))+"@"+v.Addr)
	}
	slices.Sort(inLog)
	slices.Sort(set)
	if !slices.Equal(inLog, set) {
		l.cfg.Logger.Warn("controller.quorum.voters differs from the voters the metadata log holds; the log's are used",
			"setting", strings.Join(set, ","), "log", strings.Join(inLog, ","))
	}
}

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

// newTransport is the transport of cfg: in memory for a node alone
// without a controller listener, else raft's network transport on the
// listener's raft side. The listener may bind a wildcard (0.0.0.0:9093),
// which raft cannot advertise: the others reach this node at its
// controller.quorum.voters address.
func newTransport(cfg LogConfig, hlog hclog.Logger) (transport, error) {
	self := cfg.Voters[slices.IndexFunc(cfg.Voters, func(v Voter) bool { return v.ID == cfg.NodeID })]
	if cfg.Listener == nil {
		if len(cfg.Voters) != 1 {
			return nil, fmt.Errorf("metadata log: node %d has no controller listener, and %d voters", cfg.NodeID, len(cfg.Voters))
		}
		_, t := raft.NewInmemTransport(raft.ServerAddress(self.Addr))
		return t, nil
	}
	stream, err := newStreamLayer(cfg.Listener, self.Addr)
	if err != nil {
		return nil, fmt.Errorf("metadata log: %w", err)
	}
	// NetworkTransport.Close closes stream, which detaches it.
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog,
	}), nil
}

// WaitController waits until this node is the controller (a node alone
// elects itself within milliseconds), or ctx ends.
func (l *MetadataLog) WaitController(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return fmt.Errorf("metadata log: no controller elected: %w", ctx.Err())
	default:
	}
	for !l.IsController() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("metadata log: this node was not elected controller: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// Controller is the node id of the controller (the Raft leader), ok false
// while none is known (an election is running).
func (l *MetadataLog) Controller() (id int32, ok bool) {
	if l.obs != nil {
		id, _, ok := l.obs.controller()
		return id, ok
	}
	_, sid := l.raft.LeaderWithID()
	n, err := strconv.ParseInt(string(sid), 10, 32)
	if sid == "" || err != nil {
		return -1, false
	}
	return int32(n), true
}

// IsController reports whether this node is the controller.
func (l *MetadataLog) IsController() bool { return l.raft != nil && l.raft.State() == raft.Leader }

// leaderEpoch is the controller's epoch (Raft's term) as this node knows it.
func (l *MetadataLog) leaderEpoch() int32 {
	if l.obs != nil {
		_, epoch, _ := l.obs.controller()
		return epoch
	}
	return int32(l.raft.CurrentTerm())
}

// notController is ErrNotController naming the controller if known.
func (l *MetadataLog) notController() error {
	if id, ok := l.Controller(); ok {
		return fmt.Errorf("%w: node %d is", ErrNotController, id)
	}
	return fmt.Errorf("%w: no controller is elected", ErrNotController)
}

// Apply appends ops as one entry and waits until this node has applied it
// (so a read of the store after Apply sees it) or ctx ends. Only the
// controller appends: elsewhere it fails with ErrNotController. Ops the
// stores would refuse are refused here, before the entry is committed
// (every node would fail on it). An error after the entry was appended
// (ctx ended, leadership lost) does not mean it was not committed: a
// caller that retries must make its change idempotent.
func (l *MetadataLog) Apply(ctx context.Context, ops []state.Op) (index uint64, err error) {
	if err := state.CheckOps(ops); err != nil {
		return 0, fmt.Errorf("metadata log: %w", err)
	}
	if err := l.fsm.failure(); err != nil {
		return 0, err // its store misses entries: it must not decide from it
	}
	if !l.IsController() {
		return 0, l.notController()
	}
	timeout := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		if timeout = time.Until(d); timeout <= 0 {
			return 0, fmt.Errorf("metadata log: %w", context.DeadlineExceeded)
		}
	}
	f := l.raft.Apply(EncodeEntry(ops), timeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case <-ctx.Done():
		return 0, fmt.Errorf("metadata log: waiting for the entry: %w", ctx.Err())
	case err = <-done:
	}
	if err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return 0, fmt.Errorf("%w: %w", ErrNotController, err)
		}
		return 0, fmt.Errorf("metadata log: %w", err)
	}
	if err, _ := f.Response().(error); err != nil {
		return 0, err
	}
	return f.Index(), nil
}

// replicateTimeout bounds a store write through the log (Replicate): an
// election, a slow quorum.
const replicateTimeout = 30 * time.Second

// Replicate is Apply for a store whose replicated records this log
// carries (state.Store.SetReplicator): the store's writes on the
// controller become entries.
func (l *MetadataLog) Replicate(ops []state.Op) error {
	ctx, cancel := context.WithTimeout(context.Background(), replicateTimeout)
	defer cancel()
	_, err := l.Apply(ctx, ops)
	return err
}

// Confirmed reports whether the log is known to be this store's: a
// voter's is (the store and the raft log live and die together), an
// observer's once the controller answered a fetch, which it refuses to a
// store of another cluster (Err then says so).
func (l *MetadataLog) Confirmed() bool { return l.obs == nil || l.obs.confirmed.Load() }

// Applied is the index of the last entry this node's store applied.
func (l *MetadataLog) Applied() uint64 { return l.fsm.applied() }

// Err is the store failure that stopped this node applying the log, nil
// while it applies: such a node must restart, and decides nothing
// meanwhile.
func (l *MetadataLog) Err() error { return l.fsm.failure() }

// WaitApplied waits until this node's store holds entry index, or ctx
// ends: a node that forwarded a change to the controller reads its own
// write after it.
func (l *MetadataLog) WaitApplied(ctx context.Context, index uint64) error {
	for {
		if l.fsm.applied() >= index {
			return nil
		}
		if err := l.fsm.failure(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("metadata log: waiting for entry %d (applied %d): %w", index, l.fsm.applied(), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Close leaves the quorum's work to the others and closes the log. It
// does not remove the node from the voters, nor close the controller
// listener (its owner does): the log's raft side detaches from it.
func (l *MetadataLog) Close() error {
	if l.obs != nil {
		l.obs.close()
		return nil
	}
	err := l.raft.Shutdown().Error()
	if l.observer != nil {
		l.raft.DeregisterObserver(l.observer)
		close(l.observed) // raft has stopped: nothing sends any more
		<-l.watching
	}
	return errors.Join(err, l.trans.Close(), l.db.Close())
}

// storeFSM applies committed entries to the node's store.
type storeFSM struct {
	store *state.Store
	log   *slog.Logger
	// changed is LogConfig.OnChange.
	changed func(state.Changes, uint64)

	mu sync.Mutex
	// last is the index of the last entry applied; failed the first
	// store failure, after which no entry is applied and no snapshot is
	// taken (it would claim the entries the store missed), so the store
	// never skips one: the node must restart, and raft replays the log
	// from the last snapshot, which predates the failure; the store skips
	// what it holds.
	last   uint64
	failed error
	// advanced is closed at the next entry applied (appliedAfter); nil
	// while nobody waits.
	advanced chan struct{}
}

// appliedAfter is a channel closed once an entry after index is applied
// (at once when one is).
func (f *storeFSM) appliedAfter(index uint64) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last > index {
		return closedChan
	}
	if f.advanced == nil {
		f.advanced = make(chan struct{})
	}
	return f.advanced
}

var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// advance records index applied; f.mu is held.
func (f *storeFSM) advance(index uint64) {
	f.last = index
	if f.advanced != nil {
		close(f.advanced)
		f.advanced = nil
	}
}

// fail stops the state machine applying (an observer's store of another
// cluster).
func (f *storeFSM) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed == nil {
		f.failed = err
		f.log.Error("this node applies the metadata log no more until it restarts", "err", err)
	}
}

func (f *storeFSM) applied() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *storeFSM) failure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// catchUp prepares the store before raft starts: its applied index, and a
// restore of the latest snapshot when the store is behind it (the entries
// between are no longer in the log).
func (f *storeFSM) catchUp(snaps raft.SnapshotStore) error {
	applied, err := f.store.MetadataApplied()
	if err != nil {
		return fmt.Errorf("metadata log: %w", err)
	}
	f.last = applied
	list, err := snaps.List()
	if err != nil || len(list) == 0 || list[0].Index <= applied {
		return err
	}
	// Raft's index of a snapshot may be past the last entry the store
	// saw (barriers, leader no-ops, configuration entries never reach
	// the state machine): the snapshot's own index says what it holds.
	open := func() (io.ReadCloser, error) {
		_, rc, err := snaps.Open(list[0].ID)
		if err != nil {
			return nil, fmt.Errorf("metadata log: opening snapshot %s: %w", list[0].ID, err)
		}
		return rc, nil
	}
	rc, err := open()
	if err != nil {
		return err
	}
	holds, err := state.MetadataSnapshotIndex(rc)
	rc.Close()
	if err != nil {
		return fmt.Errorf("metadata log: snapshot %s: %w", list[0].ID, err)
	}
	if holds <= applied {
		return nil
	}
	if rc, err = open(); err != nil {
		return err
	}
	f.log.Info("store behind the metadata log's latest snapshot: restoring it", "applied", applied, "snapshot", holds)
	return f.Restore(rc)
}

// Apply applies one committed entry (raft.FSM). Its result is the error
// Apply's caller gets on the controller.
func (f *storeFSM) Apply(l *raft.Log) any {
	ops, err := f.apply(l)
	if err != nil {
		return err
	}
	if f.changed != nil {
		f.changed(state.ChangesOf(ops), l.Index)
	}
	return nil
}

func (f *storeFSM) apply(l *raft.Log) ([]state.Op, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed != nil {
		return nil, f.failed
	}
	ops, err := DecodeEntry(l.Data)
	if err == nil {
		err = f.store.ApplyOps(l.Index, ops)
	}
	if err != nil {
		f.failed = fmt.Errorf("metadata log: applying entry %d: %w", l.Index, err)
		f.log.Error("the store cannot apply the metadata log; this node applies nothing more until it restarts",
			"index", l.Index, "err", err)
		return nil, f.failed
	}
	f.advance(l.Index)
	return ops, nil
}

// Snapshot captures the store's replicated records (raft.FSM). Raft calls
// it between Applies, so the bytes are read now, and Persist only writes
// them.
func (f *storeFSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.failure(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := f.store.WriteMetadataSnapshot(&buf); err != nil {
		return nil, fmt.Errorf("metadata log: snapshot: %w", err)
	}
	return storeSnapshot(buf.Bytes()), nil
}

// Restore replaces the store's replicated records with a snapshot's
// (raft.FSM), checked whole before anything changes.
func (f *storeFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	index, ops, err := state.ReadMetadataSnapshot(rc)
	if err != nil {
		return fmt.Errorf("metadata log: %w", err)
	}
	if err := f.store.RestoreMetadata(index, ops); err != nil {
		return fmt.Errorf("metadata log: restoring a snapshot: %w", err)
	}
	f.mu.Lock()
	f.advance(index)
	f.failed = nil
	f.mu.Unlock()
	if f.changed != nil {
		f.changed(state.ChangedAll, index)
	}
	return nil
}

type storeSnapshot []byte

func (s storeSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (storeSnapshot) Release() {}

// newRaftLogger routes raft's log lines (hclog) from level up into slog;
// raft logs every heartbeat change at info.
func newRaftLogger(l *slog.Logger, level hclog.Level) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "raft", Level: level, Output: slogWriter{l}, DisableTime: true})
}

// slogWriter is hclog's output: one line per write.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if strings.Contains(line, "[ERROR]") {
		level = slog.LevelError
	}
	w.l.Log(context.Background(), level, line)
	return len(p), nil
}

// QuorumState is the metadata log's quorum as Kafka's DescribeQuorum
// shows it: Raft's term is the leader epoch, its commit index the high
// watermark, its log indexes the offsets.
type QuorumState struct {
	LeaderID      int32 // -1 while none is elected
	LeaderEpoch   int32
	HighWatermark int64
	Voters        []QuorumReplica
	// Observers are the broker-only nodes that fetched the log from
	// this controller (empty elsewhere), by id.
	Observers []QuorumReplica
}

// QuorumReplica is one voter's position; LogEndOffset is -1 where this
// node does not know it (hashicorp/raft keeps the leader's view of its
// followers to itself: on the controller, a follower's is the index its
// last heartbeat reported applied, a lower bound). LastFetch is when the
// voter was last heard from, LastCaughtUp when it was last at the
// controller's commit index; zero when unknown.
type QuorumReplica struct {
	ID           int32
	LogEndOffset int64
	LastFetch    time.Time
	LastCaughtUp time.Time
}

// observerExpiry is how long an observer that stopped fetching is still
// listed.
const observerExpiry = 5 * time.Minute

// Quorum describes the quorum as this node sees it.
func (l *MetadataLog) Quorum() QuorumState {
	if l.obs != nil {
		return l.obs.quorum()
	}
	stats := l.raft.Stats()
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(stats[k], 10, 64)
		return n
	}
	q := QuorumState{LeaderID: -1, LeaderEpoch: int32(num("term")), HighWatermark: num("commit_index")}
	if id, ok := l.Controller(); ok {
		q.LeaderID = id
	}
	for _, v := range l.cfg.Voters {
		r := QuorumReplica{ID: v.ID, LogEndOffset: -1}
		if v.ID == l.cfg.NodeID {
			r.LogEndOffset = num("last_log_index")
		}
		q.Voters = append(q.Voters, r)
	}
	if l.IsController() {
		l.obsMu.Lock()
		for id, r := range l.observers {
			if time.Since(r.LastFetch) > observerExpiry {
				delete(l.observers, id) // gone (Kafka forgets an observer after 5 min too)
				continue
			}
			q.Observers = append(q.Observers, r)
		}
		l.obsMu.Unlock()
		slices.SortFunc(q.Observers, func(a, b QuorumReplica) int { return int(a.ID - b.ID) })
	}
	return q
}
