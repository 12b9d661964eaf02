package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/state"
)

// A node's place in the cluster (DESIGN.md "The cluster"): its metadata
// log, on the CONTROLLER listener when the node is one voter of several,
// in memory when it is alone, fetched from the controller on a
// broker-only node; the cluster identity it joins before the
// broker opens anything; and the reconciler that brings the broker in
// line with every batch the log applies.

// metadataLogDir is the metadata log's directory in the state dir.
const metadataLogDir = "raft"

// formTimeout bounds how long a starting node waits for its cluster's
// identity: a controller elected by a majority of the voters, and its
// first entry applied here.
const formTimeout = 2 * time.Minute

// openMetadataLog opens the node's metadata log under store and makes it
// the store's replicator: the store's writes of replicated records then
// go through the log on the controller, and fail elsewhere. A node alone
// waits until it leads its one-voter log (milliseconds).
func (n *Node) openMetadataLog(cfg broker.Config) error {
	lc := meta.LogConfig{NodeID: cfg.NodeID, Dir: filepath.Join(cfg.StateDir, metadataLogDir), Store: n.store,
		Logger: cfg.Logger, OnChange: n.rec.changed,
		SnapshotThreshold: cfg.Cluster.SnapshotEntries, SnapshotInterval: cfg.Cluster.SnapshotInterval,
		TrailingLogs: cfg.Cluster.TrailingEntries}
	switch {
	case cfg.Cluster.BrokerOnly:
		lc.Voters = cfg.Cluster.Voters // an observer: it fetches the log from the controller
	case cfg.Cluster.Several():
		ln, err := meta.ListenController(cfg.Cluster.ControllerListener.Addr())
		if err != nil {
			return fmt.Errorf("controller listener %s: %w", cfg.Cluster.ControllerListener, err)
		}
		n.ctlLn = ln
		lc.Listener, lc.Voters = ln, cfg.Cluster.Voters
	default:
		lc.Voters = []meta.Voter{{ID: cfg.NodeID, Addr: "node-" + strconv.Itoa(int(cfg.NodeID))}}
	}
	l, err := meta.OpenLog(lc)
	if err != nil {
		return err
	}
	n.log = l
	if !cfg.Cluster.Several() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := l.WaitController(ctx); err != nil {
			return err
		}
	}
	n.repl = &storeReplicator{log: l}
	n.store.SetReplicator(n.repl)
	n.controller = meta.NewController(l, n.store, meta.ControllerConfig{SessionTimeout: cfg.Cluster.SessionTimeout,
		UncleanLeaderElection: cfg.UncleanLeaderElection})
	return nil
}

// joinCluster waits until the store holds the cluster's identity: the
// first entry of the log, which the controller writes (EnsureClusterIdentity)
// when the log has none. A store of another cluster stops applying there
// and the node refuses to start, naming both ids.
func (n *Node) joinCluster(ctx context.Context, voters []meta.Voter, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, formTimeout)
	defer cancel()
	lastSaid := time.Now()
	for {
		if err := n.log.Err(); err != nil {
			return err
		}
		_, ok, err := n.store.LogClusterID()
		if err != nil || ok && n.log.Confirmed() {
			return err
		}
		if n.log.IsController() {
			if _, err := n.controller.EnsureClusterIdentity(ctx); err != nil && !errors.Is(err, meta.ErrNotController) {
				return fmt.Errorf("writing the cluster's identity: %w", err)
			}
		}
		if time.Since(lastSaid) > 10*time.Second {
			lastSaid = time.Now()
			log.Info("waiting for the metadata quorum: a controller elected by a majority of the voters", "voters", fmt.Sprint(voters))
		}
		select {
		case <-ctx.Done():
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("waiting for the metadata quorum: %w", context.Cause(ctx))
			}
			return fmt.Errorf("no controller elected within %v: are a majority of controller.quorum.voters (%v) up and "+
				"reachable on their CONTROLLER listeners?", formTimeout, voters)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// reconciler runs Broker.Reconcile after the metadata log applies
// entries that change what the broker holds (coalesced: one run covers
// every entry applied before it started, and reloads only the kinds of
// state they changed), and records the index it covered, so that a node
// that forwarded a change can answer once the change is in place here.
// Entries that change nothing the broker holds (a mirror partition's
// state, the most frequent) are covered at once, without a run.
type reconciler struct {
	wakeCh chan struct{}
	stop   chan struct{}
	done   chan struct{}

	mu   sync.Mutex
	cond *sync.Cond
	// pending is what the entries applied since the last run started
	// changed; latest the last index applied; running is set during a
	// run; covered is the last index the broker is known to hold.
	pending state.Changes
	latest  uint64
	running bool
	covered uint64

	// nudge tells the mirror control plane that what it drives may have
	// changed: after a run (leaderships, topics) and after an entry that
	// changed mirrors (which no run waits for); nil until set.
	nudge atomic.Pointer[func()]
}

// reconcileRetry is how soon a failed reconcile runs again.
const reconcileRetry = time.Second

func newReconciler() *reconciler {
	r := &reconciler{wakeCh: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// changed records entries up to applied that changed changes, and asks
// for a run when they changed anything; it never blocks (the log's
// OnChange).
func (r *reconciler) changed(changes state.Changes, applied uint64) {
	if changes&state.ChangedMirrors != 0 {
		r.nudgeMirrors()
		changes &^= state.ChangedMirrors // nothing of the broker's
	}
	r.mu.Lock()
	r.pending |= changes
	r.latest = max(r.latest, applied)
	idle := r.pending == 0 && !r.running
	if idle {
		r.covered = r.latest
		r.cond.Broadcast()
	}
	r.mu.Unlock()
	if !idle {
		r.wake()
	}
}

// nudgeMirrors tells the control plane, if there is one yet.
func (r *reconciler) nudgeMirrors() {
	if f := r.nudge.Load(); f != nil {
		(*f)()
	}
}

// wake asks for a run.
func (r *reconciler) wake() {
	select {
	case r.wakeCh <- struct{}{}:
	default:
	}
}

// reconcilable is what run keeps in line with the log: the broker.
type reconcilable interface {
	Reconcile(changes state.Changes) error
}

// run reconciles b with what the log applied until halt.
func (r *reconciler) run(b reconcilable, log *slog.Logger) {
	defer close(r.done)
	var lastWarn time.Time
	for {
		select {
		case <-r.stop:
			return
		case <-r.wakeCh:
		}
		r.mu.Lock()
		changes, upTo := r.pending, r.latest
		r.pending, r.running = 0, true
		r.mu.Unlock()
		var err error
		if changes != 0 {
			if err = b.Reconcile(changes); err != nil && time.Since(lastWarn) > 10*time.Second {
				lastWarn = time.Now()
				log.Warn("applying the metadata log's changes to this node (retried every second)", "err", err)
			}
		}
		r.mu.Lock()
		r.running = false
		if err != nil {
			// Not covered: the kinds go back, and a run retries them
			// (a log that could not open, a full disk).
			r.pending |= changes
			time.AfterFunc(reconcileRetry, r.wake)
		} else {
			r.covered = max(r.covered, upTo)
			if r.pending == 0 {
				r.covered = r.latest // what arrived meanwhile changed nothing
			}
		}
		r.cond.Broadcast()
		r.mu.Unlock()
		if err == nil && changes&(state.ChangedTopics|state.ChangedCluster) != 0 {
			r.nudgeMirrors()
		}
	}
}

// halt stops run, if it started, and waits for it.
func (r *reconciler) halt(started bool) {
	close(r.stop)
	if started {
		<-r.done
	}
	r.mu.Lock()
	r.cond.Broadcast()
	r.mu.Unlock()
}

// waitCovered waits until a run covered entry index, ctx ends or the
// reconciler stops.
func (r *reconciler) waitCovered(ctx context.Context, index uint64) error {
	stopWaking := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer stopWaking()
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.covered < index {
		select {
		case <-r.stop:
			return errors.New("node: closing")
		default:
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for entry %d to reach this node (covered %d): %w", index, r.covered, err)
		}
		r.cond.Wait()
	}
	return nil
}

// quorum is the metadata log as the broker sees it, except that
// WaitApplied waits until the reconciler has brought the entry into the
// broker (a forwarded CreateTopics answers once the topic is open here).
type quorum struct {
	*meta.MetadataLog
	rec  *reconciler
	ctl  *meta.Controller
	self int32
}

// quorum is node self's metadata log as its broker sees it.
func (n *Node) quorum(self int32) quorum {
	return quorum{MetadataLog: n.log, rec: n.rec, ctl: n.controller, self: self}
}

// Quorum is the log's view of the quorum, with, on the controller, each
// other voter's position as its heartbeats report it (the index it
// applied: hashicorp/raft does not show its followers' log ends).
func (q quorum) Quorum() meta.QuorumState {
	s := q.MetadataLog.Quorum()
	if !q.IsController() {
		return s
	}
	now, progress := time.Now(), q.ctl.Progress()
	for i := range s.Voters {
		v := &s.Voters[i]
		if v.ID == q.self {
			v.LastFetch, v.LastCaughtUp = now, now
			continue
		}
		if p, ok := progress[v.ID]; ok {
			v.LogEndOffset, v.LastFetch = int64(p.Applied), p.At
			if v.LogEndOffset >= s.HighWatermark {
				v.LastCaughtUp = p.At
			}
		}
	}
	return s
}

func (q quorum) WaitApplied(ctx context.Context, index uint64) error {
	if err := q.MetadataLog.WaitApplied(ctx, index); err != nil {
		return err
	}
	return q.rec.waitCovered(ctx, index)
}
