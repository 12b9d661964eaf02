package meta

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kmirror/kmirror/state"
)

// The controller is the Raft leader's role (DESIGN.md "The cluster"): it
// registers brokers, takes their heartbeats, fences a broker whose session
// expires and unfences it when it returns, creates topics with their
// replicas placed, and hands out producer-id blocks. Every decision is
// one metadata log entry; the records it reads are the leader's store,
// which holds every committed entry. Its calls run one at a time (mu), so
// a decision never reads records another is about to change.
//
// Session state (when each broker was last heard from) is the
// controller's memory, as Kafka's BrokerHeartbeatManager: a node that
// becomes controller gives every broker a full session from then.

// ControllerConfig configures the controller role.
type ControllerConfig struct {
	// SessionTimeout is broker.session.timeout.ms (9 s): a broker not
	// heard from for longer is fenced.
	SessionTimeout time.Duration
	// UncleanLeaderElection is unclean.leader.election.enable of this
	// node's configuration: the default under a topic's own config and
	// the dynamic cluster default (uncleanElection).
	UncleanLeaderElection bool
	// Now is the clock (time.Now); tests set it.
	Now func() time.Time
}

// Errors of the controller's calls, Kafka's error codes in their names.
var (
	ErrStaleBrokerEpoch = errors.New("meta: STALE_BROKER_EPOCH")
	ErrUnknownBroker    = errors.New("meta: broker not registered")
	ErrTopicExists      = errors.New("meta: TOPIC_ALREADY_EXISTS")
)

// Controller makes the cluster's decisions while its node leads the
// metadata log.
type Controller struct {
	log   *MetadataLog
	store *state.Store
	cfg   ControllerConfig

	mu          sync.Mutex
	lastContact map[int32]time.Time
	// arriving holds, per broker, when its heartbeat waiting for mu
	// arrived: a controller busy for longer than a session (one long
	// apply) must not fence the brokers whose heartbeats queued behind
	// it. Under arrivingMu, never with mu wanted while held.
	arrivingMu sync.Mutex
	arriving   map[int32]time.Time
	// reported is the metadata log index each broker said, in its last
	// heartbeat, it had applied (Progress).
	reported map[int32]uint64
	// registeredAt is the metadata log index of each broker's
	// registration made by this controller: a heartbeat unfences the
	// broker once it has applied the log that far. A broker registered
	// under an earlier controller is held to its epoch, which is at most
	// that index.
	registeredAt map[int32]uint64
	// readyTerm is the Raft term in which this node, as the leader,
	// applied every entry of earlier leaders (ready).
	readyTerm uint64
}

// NewController is the controller role of the node whose log and store
// these are.
func NewController(log *MetadataLog, store *state.Store, cfg ControllerConfig) *Controller {
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 9 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Controller{log: log, store: store, cfg: cfg, lastContact: map[int32]time.Time{}, registeredAt: map[int32]uint64{},
		arriving: map[int32]time.Time{},
		reported: map[int32]uint64{}}
}

// ready makes sure the store holds every committed entry before a
// decision reads it: a new leader may not have applied its predecessors'
// last entries yet, so the first call of each term waits for a barrier.
// Elsewhere it fails with ErrNotController. REQUIRES: c.mu held.
func (c *Controller) ready(ctx context.Context) error {
	if err := c.log.Err(); err != nil {
		return err // the store misses entries: decide nothing from it
	}
	if !c.log.IsController() {
		return c.log.notController()
	}
	term := c.log.raft.CurrentTerm()
	if term == c.readyTerm {
		return nil
	}
	timeout := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if err := c.log.raft.Barrier(timeout).Error(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotController, err)
	}
	c.readyTerm, c.lastContact, c.reported = term, map[int32]time.Time{}, map[int32]uint64{}
	return nil
}

// apply writes ops as one entry. REQUIRES: c.mu held.
func (c *Controller) apply(ctx context.Context, ops []state.Op) (uint64, error) {
	if len(ops) == 0 {
		return 0, nil
	}
	return c.log.Apply(ctx, ops)
}

// broker reads broker id's registration. REQUIRES: c.mu held.
func (c *Controller) broker(id int32) (state.BrokerRegistration, bool, error) {
	brokers, err := c.store.Brokers()
	if err != nil {
		return state.BrokerRegistration{}, false, err
	}
	i := slices.IndexFunc(brokers, func(b state.BrokerRegistration) bool { return b.ID == id })
	if i < 0 {
		return state.BrokerRegistration{}, false, nil
	}
	return brokers[i], true, nil
}

// RegisterBroker registers reg (its Epoch, Fenced and ShuttingDown are
// ignored), Kafka's BrokerRegistration: a new incarnation gets a new
// broker epoch, above every earlier one and at most the index of its
// registration entry, and starts fenced until a heartbeat shows it has
// applied the log up to that entry; the same incarnation registering
// again keeps its epoch and state. It returns the epoch.
func (c *Controller) RegisterBroker(ctx context.Context, reg state.BrokerRegistration) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx); err != nil {
		return 0, err
	}
	old, ok, err := c.broker(reg.ID)
	if err != nil {
		return 0, err
	}
	if ok && old.Incarnation == reg.Incarnation {
		c.lastContact[reg.ID] = c.cfg.Now()
		return old.Epoch, nil
	}
	reg.Epoch = int64(c.log.raft.LastIndex()) + 1
	if ok && reg.Epoch <= old.Epoch {
		reg.Epoch = old.Epoch + 1
	}
	reg.Fenced, reg.ShuttingDown = true, false
	op, err := state.BrokerOp(reg)
	if err != nil {
		return 0, err
	}
	ops := []state.Op{op}
	if ok && !old.Fenced {
		// A restarted broker lost what it did not flush: it leaves the
		// ISRs and leaderships of its previous life, as if fenced.
		more, err := c.fenceOps(reg.ID)
		if err != nil {
			return 0, err
		}
		ops = append(ops, more...)
	}
	index, err := c.apply(ctx, ops)
	if err != nil {
		return 0, err
	}
	c.lastContact[reg.ID], c.registeredAt[reg.ID] = c.cfg.Now(), index
	return reg.Epoch, nil
}

// HeartbeatResult is what a heartbeat answers.
type HeartbeatResult struct {
	// Fenced: the broker may not lead or follow yet.
	Fenced bool
	// ShutdownReady: the broker asked to shut down and leads nothing
	// more; it may exit.
	ShutdownReady bool
}

// Heartbeat is Kafka's BrokerHeartbeat from broker id at epoch, which has
// applied the metadata log up to index applied: it renews the broker's
// session; a fenced broker that has applied its registration is unfenced,
// and takes back the leadership of the offline partitions it holds in
// sync; wantShutdown starts (and, at each heartbeat, goes on with) a
// controlled shutdown: the broker's leaderships move to other ISR
// members, or the partition goes offline when none is left, as in Kafka,
// and the broker leaves the ISRs; ShutdownReady says it leads nothing
// more and may exit.
func (c *Controller) Heartbeat(ctx context.Context, id int32, epoch int64, applied uint64, wantShutdown bool) (HeartbeatResult, error) {
	defer c.arrive(id)()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx); err != nil {
		return HeartbeatResult{}, err
	}
	b, err := c.heartbeatFrom(id, epoch)
	if err != nil {
		return HeartbeatResult{}, err
	}
	c.reported[id] = applied
	registered, known := c.registeredAt[id]
	if !known {
		registered = uint64(b.Epoch)
	}
	var ops []state.Op
	switch {
	case wantShutdown:
		b.ShuttingDown = true
		ops, err = c.brokerChange(b, c.moveLeadersOff)
	case b.Fenced && applied >= registered:
		b.Fenced = false
		ops, err = c.brokerChange(b, c.unfenceOps)
	}
	if err != nil {
		return HeartbeatResult{}, err
	}
	if _, err := c.apply(ctx, ops); err != nil {
		return HeartbeatResult{}, err
	}
	res := HeartbeatResult{Fenced: b.Fenced}
	if b.ShuttingDown {
		leads, err := c.leads(id)
		if err != nil {
			return HeartbeatResult{}, err
		}
		res.ShutdownReady = !leads
	}
	return res, nil
}

// heartbeatFrom checks a heartbeat of broker id at epoch against its
// registration, and renews the broker's session. REQUIRES: c.mu held.
func (c *Controller) heartbeatFrom(id int32, epoch int64) (state.BrokerRegistration, error) {
	b, ok, err := c.broker(id)
	switch {
	case err != nil:
		return b, err
	case !ok:
		return b, fmt.Errorf("%w: broker %d", ErrUnknownBroker, id)
	case b.Epoch != epoch:
		return b, fmt.Errorf("%w: broker %d heartbeat at epoch %d, registered at %d", ErrStaleBrokerEpoch, id, epoch, b.Epoch)
	}
	c.lastContact[id] = c.cfg.Now()
	return b, nil
}

// brokerChange is the entry of a change to broker b: its record and what
// the change does to the partitions (partitions reads the records before
// it). REQUIRES: c.mu held.
func (c *Controller) brokerChange(b state.BrokerRegistration, partitions func(id int32) ([]state.Op, error)) ([]state.Op, error) {
	var ops []state.Op
	old, _, err := c.broker(b.ID)
	if err != nil {
		return nil, err
	}
	if old.Fenced != b.Fenced || old.ShuttingDown != b.ShuttingDown {
		op, err := state.BrokerOp(b)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	more, err := partitions(b.ID)
	if err != nil {
		return nil, err
	}
	return append(ops, more...), nil
}

// arrive records that broker id's heartbeat arrived now, until the
// returned func: while it waits for mu, the broker's session counts from
// its arrival.
func (c *Controller) arrive(id int32) (done func()) {
	at := c.cfg.Now()
	c.arrivingMu.Lock()
	c.arriving[id] = at
	c.arrivingMu.Unlock()
	return func() {
		c.arrivingMu.Lock()
		if c.arriving[id] == at {
			delete(c.arriving, id)
		}
		c.arrivingMu.Unlock()
	}
}

// FenceExpired fences every unfenced broker not heard from for longer
// than the session timeout, one entry per broker. A heartbeat that
// arrived and waits for the controller counts as heard from.
func (c *Controller) FenceExpired(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fenceExpiredLocked(ctx)
}

// fenceExpiredLocked is FenceExpired. REQUIRES: c.mu held.
func (c *Controller) fenceExpiredLocked(ctx context.Context) error {
	if err := c.ready(ctx); err != nil {
		return err
	}
	brokers, err := c.store.Brokers()
	if err != nil {
		return err
	}
	now := c.cfg.Now()
	c.arrivingMu.Lock()
	arriving := maps.Clone(c.arriving)
	c.arrivingMu.Unlock()
	for _, b := range brokers {
		last, seen := c.lastContact[b.ID]
		if !seen {
			c.lastContact[b.ID] = now // a new controller: a full session from now
			continue
		}
		if at, ok := arriving[b.ID]; ok && at.After(last) {
			last = at
		}
		if b.Fenced || now.Sub(last) <= c.cfg.SessionTimeout {
			continue
		}
		b.Fenced, b.ShuttingDown = true, false
		ops, err := c.brokerChange(b, c.fenceOps)
		if err != nil {
			return err
		}
		if _, err := c.apply(ctx, ops); err != nil {
			return fmt.Errorf("fencing broker %d: %w", b.ID, err)
		}
		// Kafka's controller logs it too: the broker's leaderships
		// moved and it left every ISR.
		c.log.cfg.Logger.Warn("broker session expired: fenced", "broker", b.ID, "broker_epoch", b.Epoch,
			"last_heartbeat_ago", now.Sub(last).Round(time.Millisecond).String(),
			"broker.session.timeout.ms", c.cfg.SessionTimeout.Milliseconds())
	}
	return nil
}

// liveness is the brokers that may lead: registered, unfenced, not
// shutting down, and not except. REQUIRES: c.mu held.
func (c *Controller) liveness(except int32) (func(int32) bool, error) {
	brokers, err := c.store.Brokers()
	if err != nil {
		return nil, err
	}
	live := map[int32]bool{}
	for _, b := range brokers {
		if !b.Fenced && !b.ShuttingDown && b.ID != except {
			live[b.ID] = true
		}
	}
	return func(id int32) bool { return live[id] }, nil
}

// partitionOps encodes changed assignments.
func partitionOps(changed []state.PartitionAssignment) ([]state.Op, error) {
	ops := make([]state.Op, 0, len(changed))
	for _, p := range changed {
		op, err := state.PartitionOp(p)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// fenceOps are the partition changes of fencing id. REQUIRES: c.mu held.
func (c *Controller) fenceOps(id int32) ([]state.Op, error) {
	unclean, err := c.uncleanElection()
	if err != nil {
		return nil, err
	}
	return c.withoutBroker(id, unclean)
}

// uncleanElection resolves unclean.leader.election.enable per topic in
// Kafka's order: the topic's own config, else the cluster-wide dynamic
// default (kafka-configs --entity-default), else this controller's static
// setting. REQUIRES: c.mu held.
func (c *Controller) uncleanElection() (Unclean, error) {
	const key = "unclean.leader.election.enable"
	def := c.cfg.UncleanLeaderElection
	dyn, err := c.store.BrokerConfigs()
	if err != nil {
		return nil, err
	}
	if b, err := strconv.ParseBool(dyn[key]); err == nil {
		def = b
	}
	topics, err := c.store.Topics()
	if err != nil {
		return nil, err
	}
	own := map[[16]byte]bool{}
	for _, t := range topics {
		if b, err := strconv.ParseBool(t.Configs[key]); err == nil {
			own[t.ID] = b
		}
	}
	return func(id [16]byte) bool {
		if b, ok := own[id]; ok {
			return b
		}
		return def
	}, nil
}

// withoutBroker are the partition changes of taking id out of the
// leaderships and ISRs (Fence). REQUIRES: c.mu held.
func (c *Controller) withoutBroker(id int32, unclean Unclean) ([]state.Op, error) {
	live, err := c.liveness(id)
	if err != nil {
		return nil, err
	}
	parts, err := c.store.PartitionAssignments()
	if err != nil {
		return nil, err
	}
	return partitionOps(Fence(parts, id, live, unclean))
}

// unfenceOps are the partition changes of id's return. REQUIRES: c.mu
// held, and id's record not yet unfenced in the store.
func (c *Controller) unfenceOps(id int32) ([]state.Op, error) {
	others, err := c.liveness(-1)
	if err != nil {
		return nil, err
	}
	live := func(b int32) bool { return b == id || others(b) }
	parts, err := c.store.PartitionAssignments()
	if err != nil {
		return nil, err
	}
	unclean, err := c.uncleanElection()
	if err != nil {
		return nil, err
	}
	return partitionOps(Unfence(parts, live, unclean))
}

// moveLeadersOff is a controlled shutdown's step, Kafka's: every
// partition id leads elects another live ISR member, or goes offline when
// none is left (id stays the ISR's last member, so the partition comes
// back with it); id leaves the ISR of the partitions it follows; and an
// offline partition whose ISR has a live member again elects it. Run at
// each heartbeat of the shutdown, it changes only what is left to change.
// REQUIRES: c.mu held.
func (c *Controller) moveLeadersOff(id int32) ([]state.Op, error) {
	return c.withoutBroker(id, UncleanFor(false)) // a shutdown never elects out of sync
}

// leads reports whether id leads a partition. REQUIRES: c.mu held.
func (c *Controller) leads(id int32) (bool, error) {
	parts, err := c.store.PartitionAssignments()
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(parts, func(p state.PartitionAssignment) bool { return p.Leader == id }), nil
}

// CreateTopic creates topic t (its ID and Partitions set) with rf replicas
// per partition on the unfenced brokers, leaders spread (PlaceReplicas):
// the topic and its assignments are one entry.
func (c *Controller) CreateTopic(ctx context.Context, t state.Topic, rf int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx); err != nil {
		return err
	}
	ops, err := state.TopicOps(t) // checks t before anything is placed
	if err != nil {
		return err
	}
	if _, err := c.store.Topic(t.Name); err == nil {
		return fmt.Errorf("%w: topic %q", ErrTopicExists, t.Name)
	} else if !errors.Is(err, state.ErrNotFound) {
		return err
	}
	brokers, err := c.store.Brokers()
	if err != nil {
		return err
	}
	parts, err := c.store.PartitionAssignments()
	if err != nil {
		return err
	}
	news, err := PlaceNew(brokers, parts, t.ID, 0, t.Partitions, rf)
	if err != nil {
		return err
	}
	more, err := partitionOps(news)
	if err != nil {
		return err
	}
	_, err = c.apply(ctx, append(ops, more...))
	return err
}

// AllocateProducerIDs hands out a block of n producer ids, Kafka's
// AllocateProducerIds: the first of the block, which no other block
// overlaps, across controller changes too (the allocator is a record).
func (c *Controller) AllocateProducerIDs(ctx context.Context, n int64) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx); err != nil {
		return 0, err
	}
	first, err := c.store.NextProducerID()
	if err != nil {
		return 0, err
	}
	if n < 1 || n > 1<<62-first {
		return 0, fmt.Errorf("meta: a block of %d producer ids from %d", n, first)
	}
	op, err := state.NextProducerIDOp(first + n)
	if err != nil {
		return 0, err
	}
	if _, err := c.apply(ctx, []state.Op{op}); err != nil {
		return 0, err
	}
	return first, nil
}

// EnsureClusterIdentity writes the controller's cluster id (and secret
// salt) as the cluster's when the metadata log holds none yet: the first
// entry of a new cluster's first controller, and of a single node whose
// store predates its log. Nodes that apply it join that cluster or, when
// their data belongs to another, stop applying (state's joinCluster). It
// returns the cluster's id.
func (c *Controller) EnsureClusterIdentity(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx); err != nil {
		return "", err
	}
	if id, ok, err := c.store.LogClusterID(); err != nil || ok {
		return id, err
	}
	ops, err := c.store.ClusterIdentityOps()
	if err != nil {
		return "", err
	}
	if _, err := c.apply(ctx, ops); err != nil {
		return "", err
	}
	return c.store.ClusterID(), nil
}

// Progress is one broker's position in the metadata log as its last
// heartbeat to this controller reported it.
type Progress struct {
	Applied uint64
	At      time.Time
}

// Progress returns what the brokers' heartbeats reported to this
// controller since it was elected (DescribeQuorum's voter positions).
func (c *Controller) Progress() map[int32]Progress {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int32]Progress, len(c.reported))
	for id, applied := range c.reported {
		out[id] = Progress{Applied: applied, At: c.lastContact[id]}
	}
	return out
}
