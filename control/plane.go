package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/state"

	"github.com/kmirror/kmirror/internal/clientauth"
	"github.com/kmirror/kmirror/internal/settings"
)

// Config configures a Plane. Zero values mean the defaults named.
type Config struct {
	Logger *slog.Logger
	// RetryInitial, RetryMax and RetryMaxAttempts are
	// mirror.failed.retry.initial.backoff.ms (1 s), .max.backoff.ms (60 s)
	// and .max.attempts (20; negative: FAILED partitions are never
	// retried, they wait for a recover).
	RetryInitial     time.Duration
	RetryMax         time.Duration
	RetryMaxAttempts int32
	// SourceTimeout bounds each call to a source cluster (30 s).
	SourceTimeout time.Duration
	// RefreshInterval is mirror.metadata.refresh.interval.ms (60 s): how
	// often each mirror's metadata sync runs; negative turns the periodic
	// sync off (SyncOnce still runs a cycle).
	RefreshInterval time.Duration
}

// Plane is the node's mirror control plane: its mirrors, their
// partitions' states and fetchers, and the mirror RPCs. (Not "the
// controller": in a cluster that is the metadata quorum's leader.)
type Plane struct {
	cfg   Config
	b     Node
	parts *partition.Manager
	store *state.Store
	fm    *fetch.Manager
	log   *slog.Logger

	// locks are the mirrors' locks (locks.go), by name, guarded by
	// locksMu.
	locksMu sync.Mutex
	locks   map[string]*mirrorCtl
	// topicsMu makes a Start's check that a topic is free and its claim
	// of the topic one step, so two mirrors cannot both take a topic.
	topicsMu sync.Mutex
	// localMu serialises the ACL and client-quota syncs' changes to the
	// node's tables, which every mirror's sync writes (local work only).
	localMu sync.Mutex
	// srcMu guards sources apart from the mirror locks, so that the
	// source I/O of an RPC can run before it takes one (Handle).
	srcMu   sync.Mutex
	sources map[string]*kgo.Client // per mirror, for the slow calls

	syncRec syncRecord // the metadata sync's stats and failing kinds
	// evMu guards the mirrors' event queues (mirrorCtl.events,
	// events.go) and evClosed, set by Close.
	evMu     sync.Mutex
	evClosed bool
	// removedConfigs are the removed Kafka topic configs already logged.
	removedConfigs removedConfigLog
	// nudges asks driveLoop for a drive (drive.go).
	nudges chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New loads every mirror and resumes its partitions from their persisted
// states: MIRRORING and the alignment states restart the fetcher, PAUSING
// settles in PAUSED, STOPPING finishes the stop.
func New(b Node, cfg Config) (*Plane, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.RetryInitial, time.Second)
	def(&cfg.RetryMax, time.Minute)
	def(&cfg.SourceTimeout, 30*time.Second)
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = time.Minute
	}
	if cfg.RetryMaxAttempts == 0 {
		cfg.RetryMaxAttempts = 20
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Plane{cfg: cfg, b: b, store: b.Store(), parts: b.Partitions(), log: cfg.Logger, sources: map[string]*kgo.Client{},
		locks: map[string]*mirrorCtl{}, nudges: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
	c.fm = fetch.NewManager(fetch.Config{Logger: cfg.Logger, Events: c.onFetchEvent})
	mirrors, err := c.store.Mirrors()
	if err != nil {
		return nil, err
	}
	for _, m := range mirrors {
		c.resumeMirror(m)
	}
	c.wg.Add(3)
	go c.syncLoop()
	go c.checkpointLoop()
	go c.driveLoop()
	return c, nil
}

// resumeMirror registers a mirror with the fetchers and resumes its
// partitions from their persisted states.
func (c *Plane) resumeMirror(m state.Mirror) {
	defer c.lockMirror(m.Name)()
	if err := c.addFetchers(m); err != nil {
		// One mirror whose settings no longer work (a PEM file
		// removed) must not keep the node and the other mirrors
		// down: its partitions wait for a config fix.
		c.log.Error("mirror not started", "mirror", m.Name, "err", err)
		return
	}
	states, err := c.store.MirrorPartitionStates(m.Name)
	if err != nil {
		// One unreadable record must not keep the node down:
		// partition by partition, it fails alone.
		c.log.Error("reading a mirror's partition states; resuming them one by one", "mirror", m.Name, "err", err)
		c.resumeEach(m)
		return
	}
	// The stops a crash interrupted are finished together (a few writes
	// for all), the rest one by one.
	stops := map[string][]int32{}
	for _, ps := range states {
		if ps.State == state.StateStopping {
			stops[ps.Topic] = append(stops[ps.Topic], ps.Partition)
			continue
		}
		c.resume(m, ps)
	}
	if len(stops) > 0 {
		c.logStopFailures(m, "finishing a stop after a restart", stops)
		c.releaseStopped(m, slices.Collect(maps.Keys(stops)))
	}
}

// Fetchers exposes the fetch manager (for metrics).
func (c *Plane) Fetchers() *fetch.Manager { return c.fm }

// Close stops the fetchers and the source clients.
func (c *Plane) Close() {
	c.closeEvents()
	c.cancel()
	c.wg.Wait()
	c.fm.Close()
	c.srcMu.Lock()
	for _, cl := range c.sources {
		cl.Close()
	}
	c.sources = map[string]*kgo.Client{}
	c.srcMu.Unlock()
}

// resumeEach resumes the partitions of m's topics one at a time, for a
// store whose scan of them failed: a partition whose record cannot be
// read goes to FAILED (startPartitionFrom), the others resume.
// REQUIRES: m's lock held.
func (c *Plane) resumeEach(m state.Mirror) {
	for _, topic := range sortedTopics(m.Topics) {
		info, ok := c.parts.Info(topic)
		if !ok {
			continue
		}
		for p := int32(0); p < info.Partitions; p++ {
			ps, err := c.readPartitionState(m.Name, topic, p)
			switch {
			case err != nil:
				c.resumeFailed(m, topic, p, c.startPartition(m, topic, p)) // fails it, saying why
			case ps.State != state.StateUnknown:
				c.resume(m, ps)
			}
		}
	}
}

// resume continues a partition after a restart. REQUIRES: m's lock held.
func (c *Plane) resume(m state.Mirror, ps state.MirrorPartitionState) {
	switch ps.State {
	case state.StateLogAlignment, state.StateULERecovery:
		if m.Topics[ps.Topic] != state.StatePaused { // paused mid-alignment: the resume aligns
			c.resumeFailed(m, ps.Topic, ps.Partition, c.startPartition(m, ps.Topic, ps.Partition))
		}
	case state.StateEpochFencing, state.StateMirroring:
		c.resumeFailed(m, ps.Topic, ps.Partition, c.startPartition(m, ps.Topic, ps.Partition))
	case state.StateFailed:
		// Retried after the backoff its attempt count gives, counting
		// on from the persisted attempt.
		if ps.RetryAttempt > 0 {
			c.scheduleRetry(ps, ps.RetryAttempt)
		}
	case state.StatePausing:
		c.resumeFailed(m, ps.Topic, ps.Partition, c.setState(ps, state.StatePaused, ""))
	case state.StateStopping:
		c.logStopFailures(m, "finishing a stop after a restart", map[string][]int32{ps.Topic: {ps.Partition}})
		c.releaseStopped(m, []string{ps.Topic})
	}
}

// resumeFailed logs a partition a restart could not resume. It stays as
// stored: a start that failed before its fetcher ran is retried by the
// next restart or start, and one whose record cannot be read is FAILED
// (startPartitionFrom). REQUIRES: m's lock held.
func (c *Plane) resumeFailed(m state.Mirror, topic string, p int32, err error) {
	if err != nil {
		c.log.Error("resuming a mirror partition after a restart", "mirror", m.Name, "topic", topic, "partition", p, "err", err)
	}
}

// setState persists a partition's state. REQUIRES: ps.Mirror's lock held.
func (c *Plane) setState(ps state.MirrorPartitionState, to state.PartitionState, errMsg string) error {
	return c.store.PutMirrorPartitionState(withState(ps, to, errMsg))
}

// withState is ps moved to state to: the state it leaves is the one a
// FAILED partition goes back to, a state other than FAILED starts the
// retry count over.
func withState(ps state.MirrorPartitionState, to state.PartitionState, errMsg string) state.MirrorPartitionState {
	if ps.State != to && ps.State != state.StateFailed {
		ps.Previous = ps.State
	}
	ps.State, ps.ErrorMessage = to, errMsg
	if to != state.StateFailed {
		ps.RetryAttempt = 0
	}
	return ps
}

// partitionState reads a partition's state, UNKNOWN when none is stored
// or the record cannot be read. Paths that would act on UNKNOWN as "never
// mirrored" (a start aligns such a partition, and may cut it) read with
// readPartitionState instead.
func (c *Plane) partitionState(mirror, topic string, p int32) state.MirrorPartitionState {
	ps, _ := c.readPartitionState(mirror, topic, p)
	return ps
}

// readPartitionState is partitionState that also returns the error of a
// record that exists but cannot be read (corrupt, or the store failing);
// ps is then UNKNOWN. No record at all is UNKNOWN without an error.
func (c *Plane) readPartitionState(mirror, topic string, p int32) (state.MirrorPartitionState, error) {
	ps, err := c.store.MirrorPartitionState(mirror, topic, p)
	if err != nil {
		unknown := state.MirrorPartitionState{Mirror: mirror, Topic: topic, Partition: p, State: state.StateUnknown,
			Previous: state.StateUnknown, LastMirrorEpoch: -1, LastMirrorOffset: -1}
		if errors.Is(err, state.ErrNotFound) {
			err = nil
		}
		return unknown, err
	}
	return ps, nil
}

// startPartition hands a partition to the fetchers, its state persisted
// first. A partition that starts afresh (no state, STOPPED: a failback),
// whose failure came while aligning, or that was still aligning when the
// node stopped, is in LOG_ALIGNMENT (or ULE_RECOVERY) and is started with
// fetch.StartAlign: the alignment proper, cutting a divergent tail, is the
// fetcher's OffsetForLeaderEpoch at start, and the state stays persisted
// until the source accepts the fetch position (finishAlignment), so a
// crash in between aligns again at the next start instead of resuming
// unaligned. Every other (re)start (a node restart, a retry, a resume)
// is MIRRORING and resumes with fetch.StartResume, which never cuts the
// local log.
// REQUIRES: m's lock held.
func (c *Plane) startPartition(m state.Mirror, topic string, p int32) error {
	return c.startPartitionFrom(m, topic, p, false)
}

// startPartitionFrom is startPartition; resumeOnly (recover) starts a
// FAILED partition with StartResume whatever state it failed in.
// REQUIRES: m's lock held.
func (c *Plane) startPartitionFrom(m state.Mirror, topic string, p int32, resumeOnly bool) error {
	if c.beingStopped(m.Name, topic) {
		// Its fetcher was removed for the stop's final sync: a retry, a
		// recover or a config change must not bring it back.
		return fmt.Errorf("topic %s is being stopped", topic)
	}
	// In a cluster the controller persists a start for every partition
	// and the leader runs it (drive.go); any other node does nothing.
	leads := c.leads(topic, p)
	if !leads && !c.b.IsController() {
		return nil
	}
	ps, err := c.readPartitionState(m.Name, topic, p)
	if err != nil && !resumeOnly {
		// Not "never mirrored": aligning it could cut a copy that
		// mirrors. FAILED, with the error, until an operator recovers
		// it (a recover resumes, and never cuts) or stops it.
		msg := fmt.Sprintf("the partition's state record cannot be read (%v): not started; --recover resumes it "+
			"from the log end without cutting anything", err)
		failed := ps
		failed.State, failed.Previous, failed.RetryAttempt, failed.ErrorMessage = state.StateFailed, state.StateUnknown, -1, msg
		if errors.Is(err, state.ErrCorrupt) {
			if rerr := c.store.ReplaceCorruptMirrorPartitionState(failed); rerr != nil {
				c.log.Warn("marking a partition with a corrupt state record failed", "mirror", m.Name, "topic", topic,
					"partition", p, "err", rerr)
			}
		}
		c.log.Error("mirror partition failed", "mirror", m.Name, "topic", topic, "partition", p, "reason", msg)
		return errors.New(msg)
	}
	if err != nil {
		ps.State = state.StateFailed // --recover: resume as it is
	}
	mode := fetch.StartResume
	switch ps.State {
	case state.StateMirroring:
		// Restart after a crash: mirroring resumes as is.
	case state.StateEpochFencing:
		if err := c.setState(ps, state.StateMirroring, ""); err != nil {
			return err
		}
	case state.StateLogAlignment, state.StateULERecovery:
		mode = fetch.StartAlign
	case state.StateFailed:
		if resumeOnly || !alignsOnRetry(ps.Previous) {
			if err := c.setState(ps, state.StateMirroring, ""); err != nil {
				return err
			}
			break
		}
		fallthrough
	default:
		if err := c.setState(ps, state.StateLogAlignment, ""); err != nil {
			return err
		}
		mode = fetch.StartAlign
	}
	if !leads {
		return nil // persisted: its leader's drive starts the fetcher
	}
	local, err := c.parts.MirrorPartition(topic, p)
	if err != nil {
		return err
	}
	key, aligning := partitionKey{m.Name, topic, p}, c.ctl(m.Name).aligning
	delete(aligning, key)
	if err := c.fm.StartPartition(m.Name, topic, p, local, mode); err != nil {
		return err
	}
	if mode == fetch.StartAlign {
		aligning[key] = struct{}{}
	}
	return nil
}

// alignsOnRetry reports whether a partition that failed in state prev is
// retried through LOG_ALIGNMENT (SPEC.md section 4: a retry goes back to
// the previous state, UNKNOWN meaning LOG_ALIGNMENT).
func alignsOnRetry(prev state.PartitionState) bool {
	return prev == state.StateUnknown || prev == state.StateLogAlignment || prev == state.StateULERecovery
}

// releaseStopped makes writable each of topics whose partitions are all
// STOPPED, in one write for all (a failover of a hundred topics waited
// 35 ms per topic for the metadata log); on the controller only (topic
// records), whose drive releases a topic whose last partitions other
// nodes stopped. REQUIRES: m's lock held.
func (c *Plane) releaseStopped(m state.Mirror, topics []string) {
	if !c.b.IsController() {
		return
	}
	var release []string
	for _, topic := range topics {
		if c.allStopped(m, topic) {
			release = append(release, topic)
		}
	}
	if len(release) == 0 {
		return
	}
	if err := c.b.SetTopicsMirror(release, ""); err != nil {
		c.log.Error("releasing stopped topics", "mirror", m.Name, "topics", release, "err", err)
		return
	}
	for _, topic := range release {
		c.log.Info("topic stopped: writable", "mirror", m.Name, "topic", topic)
	}
}

// allStopped reports whether topic is a topic of mirror m not released
// yet whose partitions are all STOPPED.
func (c *Plane) allStopped(m state.Mirror, topic string) bool {
	info, ok := c.parts.Info(topic)
	return ok && info.Mirror == m.Name && len(c.notStopped(m.Name, topic)) == 0
}

// source returns the mirror's client for the source (slow calls).
func (c *Plane) source(m state.Mirror) (*kadm.Client, error) {
	cl, err := c.sourceClient(m)
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// addFetchers registers a mirror with the fetch manager. REQUIRES: m's lock held.
func (c *Plane) addFetchers(m state.Mirror) error {
	fc, err := fetchConfig(m.Name, m.Configs)
	if err != nil {
		return err
	}
	if err := c.fm.AddMirror(fc); err != nil {
		return err
	}
	mc := c.ctl(m.Name)
	mc.registered, mc.fetchConfigs = true, maps.Clone(m.Configs)
	return nil
}

// removeFetchers stops a mirror's fetchers and unregisters it from the
// fetch manager. REQUIRES: its lock held.
func (c *Plane) removeFetchers(name string) {
	_ = c.fm.RemoveMirror(name)
	mc := c.ctl(name)
	mc.registered, mc.fetchConfigs = false, nil
}

// sourceClient is source's kgo client; it may send the mirror RPCs to a
// source that is itself a kmirror node (the loop check).
func (c *Plane) sourceClient(m state.Mirror) (*kgo.Client, error) {
	c.srcMu.Lock()
	defer c.srcMu.Unlock()
	cl := c.sources[m.Name]
	if cl == nil {
		var err error
		if cl, err = newSourceClient(m); err != nil {
			return nil, err
		}
		c.sources[m.Name] = cl
	}
	return cl, nil
}

// newSourceClient makes a kgo client for m's source.
func newSourceClient(m state.Mirror) (*kgo.Client, error) {
	sec, err := clientauth.Parse(m.Configs)
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(settings.Items(m.Configs["bootstrap.servers"])...),
		kgo.ClientID("kmirror-mirror-" + m.Name + "-admin"), kgo.MaxVersions(mirrorapi.WithMirrorKeys(nil))},
		sec.KgoOpts()...)
	return kgo.NewClient(opts...)
}

// errSourceUnreachable wraps failures to reach a source.
var errSourceUnreachable = errors.New("source cluster unreachable")
