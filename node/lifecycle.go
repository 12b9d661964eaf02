package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/state"
)

// The lifecycle is a node's broker side of the cluster, Kafka's
// BrokerLifecycleManager: while the node is up it registers with the
// controller, then heartbeats every broker.heartbeat.interval.ms with the
// metadata log index it has applied, which keeps its session and unfences
// it once it has caught up with its registration. It registers again when
// the controller no longer knows its epoch (STALE_BROKER_EPOCH, a
// controller that lost the registration), and retries with a short
// backoff through NOT_CONTROLLER (an election) and connection errors. At
// close it runs a controlled shutdown: it heartbeats with WantShutDown
// until the controller has moved its leaderships off it.
//
// On the controller itself the calls go to meta.Controller directly, not
// over the network (controllerClient has the two implementations), and a
// second loop fences the brokers whose sessions expired.

// ControllerChannel sends a request to the cluster's current controller
// (meta's controller channel is one), answering its response or the error
// of reaching it.
type ControllerChannel interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// LifecycleConfig configures a node's lifecycle.
type LifecycleConfig struct {
	// NodeID is node.id, ClusterID the cluster's id (a controller of
	// another cluster refuses the registration), read at every
	// registration: a broker-only node's store takes the cluster's id from
	// the controller's snapshot, which may come after the lifecycle is
	// built. Rack is broker.rack (nil when unset).
	NodeID    int32
	ClusterID func() string
	Rack      *string
	// HeartbeatInterval is broker.heartbeat.interval.ms (2 s when 0).
	HeartbeatInterval time.Duration
	// ShutdownTimeout bounds the controlled shutdown of Close
	// (broker.session.timeout.ms, 9 s when 0): past it the controller
	// fences the broker anyway.
	ShutdownTimeout time.Duration
	// RetryBackoff is the wait before a call that failed is tried again,
	// and between the heartbeats of a broker fenced or shutting down
	// (100 ms when 0).
	RetryBackoff time.Duration
	// Applied is the index of the last metadata log entry the node has
	// applied (meta.MetadataLog's Applied).
	Applied func() uint64
	// Controller is the node's controller role, nil on a broker-only
	// node; IsController tells whether it is the controller now (nil:
	// always, a node alone).
	Controller   *meta.Controller
	IsController func() bool
	// Store is the node's state store: the controller's producer-id
	// allocator and the registered brokers are read from it. Nil: the
	// controlled shutdown always runs.
	Store *state.Store
	// Channel reaches the controller when this node is not it; nil on a
	// node alone.
	Channel ControllerChannel
	Logger  *slog.Logger
}

// Lifecycle is a node's registration and heartbeats (see the top of
// lifecycle.go). It is also the broker's source of producer-id blocks
// (broker.ProducerIDBlocks): the controller's, and its way to change a
// partition's ISR (broker.ISRChanger).
type Lifecycle struct {
	cfg         LifecycleConfig
	incarnation [16]byte
	listeners   []state.BrokerEndpoint
	local       controllerClient // nil without cfg.Controller
	remote      controllerClient // nil without cfg.Channel

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	kick   chan struct{}
	wg     sync.WaitGroup

	mu sync.Mutex
	// epoch is the broker epoch of the registration, -1 before one (or
	// after the controller refused it as stale).
	epoch  int64
	fenced bool
	// wantShutdown: Shutdown was called; the heartbeats ask for it.
	wantShutdown bool
	// ready is closed when a shutdown heartbeat answers ShutdownReady.
	ready chan struct{}
	// changed is closed and replaced at each change of epoch or fenced.
	changed chan struct{}
	// failing: the last call failed (its error was logged at Warn; the
	// next ones, alike, at Debug).
	failing bool
}

// NewLifecycle is a node's lifecycle, not started: the broker asks it for
// producer-id blocks from its start (broker.Config.ProducerIDs), before
// its listeners, which the registration carries, are bound.
func NewLifecycle(cfg LifecycleConfig) *Lifecycle {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 2 * time.Second
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 9 * time.Second
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Applied == nil {
		cfg.Applied = func() uint64 { return 0 }
	}
	l := &Lifecycle{cfg: cfg, epoch: -1, fenced: true, kick: make(chan struct{}, 1),
		ready: make(chan struct{}), changed: make(chan struct{})}
	rand.Read(l.incarnation[:])
	l.incarnation[6] = l.incarnation[6]&0x0f | 0x40 // a version 4 uuid, as Kafka's Uuid.randomUuid
	l.incarnation[8] = l.incarnation[8]&0x3f | 0x80
	if cfg.Controller != nil {
		l.local = localController{c: cfg.Controller, store: cfg.Store}
	}
	if cfg.Channel != nil {
		l.remote = remoteController{ch: cfg.Channel, clusterID: cfg.ClusterID}
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// Start registers the broker with listeners (its advertised listeners)
// and heartbeats from then on, until Close.
func (l *Lifecycle) Start(listeners []state.BrokerEndpoint) {
	l.listeners = listeners
	l.wg.Add(1)
	go l.run()
	if l.local != nil {
		l.wg.Add(1)
		go l.fenceLoop()
	}
}

// Close stops the heartbeats (a broker that did not run Shutdown first is
// fenced when its session expires). It waits for the loops to end.
func (l *Lifecycle) Close() {
	l.cancel()
	l.wg.Wait()
}

// Epoch is the broker epoch of the registration, -1 before one.
func (l *Lifecycle) Epoch() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// Fenced reports whether the broker is fenced (true until the controller
// has unfenced it).
func (l *Lifecycle) Fenced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fenced
}

// WaitUnfenced waits until the broker is registered and unfenced, or ctx
// ends.
func (l *Lifecycle) WaitUnfenced(ctx context.Context) error {
	return l.waitFor(ctx, func() bool { return l.epoch >= 0 && !l.fenced })
}

// waitFor waits until cond holds (it is called with l.mu held), or ctx or
// the lifecycle ends.
func (l *Lifecycle) waitFor(ctx context.Context, cond func() bool) error {
	for {
		l.mu.Lock()
		ok, changed := cond(), l.changed
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.ctx.Done():
			return fmt.Errorf("node: broker lifecycle closed")
		}
	}
}

// setState records a registration or a heartbeat's answer. REQUIRES:
// l.mu held.
func (l *Lifecycle) setState(epoch int64, fenced bool) {
	if epoch == l.epoch && fenced == l.fenced {
		return
	}
	l.epoch, l.fenced = epoch, fenced
	close(l.changed)
	l.changed = make(chan struct{})
}

// wake makes the loop call the controller now instead of at its next
// heartbeat.
func (l *Lifecycle) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Shutdown is Kafka's controlled shutdown: the heartbeats ask to shut
// down, and the controller moves the broker's leaderships to other
// in-sync replicas (a partition with none goes offline); Shutdown returns
// once it answers ShutdownReady, or with ctx's error when ctx ends first
// (the controller fences the broker when its session expires). A broker
// not registered, or the only one registered, has nowhere to move its
// leaderships to: Shutdown returns at once; so does one whose peers are
// all fenced or shutting down themselves (the last of a cluster going
// down, which may have no controller left to answer).
func (l *Lifecycle) Shutdown(ctx context.Context) error {
	if l.alone() {
		return nil
	}
	l.mu.Lock()
	l.wantShutdown = true
	l.mu.Unlock()
	l.wake()
	select {
	case <-l.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("node: controlled shutdown of broker %d: %w", l.cfg.NodeID, ctx.Err())
	case <-l.ctx.Done():
		return fmt.Errorf("node: controlled shutdown of broker %d: the lifecycle is closed", l.cfg.NodeID)
	}
}

// alone reports whether the broker is not registered, or no other broker
// the node's store knows could take its leaderships (none is unfenced
// and not shutting down).
func (l *Lifecycle) alone() bool {
	if l.Epoch() < 0 {
		return true
	}
	if l.cfg.Store == nil {
		return false
	}
	brokers, err := l.cfg.Store.Brokers()
	if err != nil {
		return false
	}
	for _, b := range brokers {
		if b.ID != l.cfg.NodeID && !b.Fenced && !b.ShuttingDown {
			return false
		}
	}
	return true
}

// client is the way to the controller now: this node's own role while it
// is the controller, else the channel (remote).
func (l *Lifecycle) client() (c controllerClient, remote bool) {
	switch {
	case l.local != nil && (l.remote == nil || l.cfg.IsController == nil || l.cfg.IsController()):
		return l.local, false
	case l.remote != nil:
		return l.remote, true
	}
	return noController{}, false
}

// callTimeout bounds one call to the controller.
func (l *Lifecycle) callTimeout() time.Duration { return max(2*l.cfg.HeartbeatInterval, 5*time.Second) }

// run is the loop of registrations and heartbeats.
func (l *Lifecycle) run() {
	defer l.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		case <-l.kick:
		}
		t.Stop()
		t.Reset(l.step())
	}
}

// step makes one call to the controller: a registration when the broker
// has none, else a heartbeat (right after a registration too). It returns
// the wait before the next.
func (l *Lifecycle) step() time.Duration {
	ctx, cancel := context.WithTimeout(l.ctx, l.callTimeout())
	defer cancel()
	c, _ := l.client()
	l.mu.Lock()
	epoch, wantShutdown := l.epoch, l.wantShutdown
	l.mu.Unlock()
	if epoch < 0 {
		reg := state.BrokerRegistration{ID: l.cfg.NodeID, Incarnation: l.incarnation, Rack: l.cfg.Rack, Listeners: l.listeners}
		e, err := c.register(ctx, reg)
		if err != nil {
			l.failed("registering with the controller", err)
			return l.cfg.RetryBackoff
		}
		l.mu.Lock()
		l.setState(e, true)
		l.mu.Unlock()
		epoch = e
		l.cfg.Logger.Info("registered with the controller", "node_id", l.cfg.NodeID, "broker_epoch", e)
	}
	res, err := c.heartbeat(ctx, l.cfg.NodeID, epoch, l.cfg.Applied(), wantShutdown)
	switch {
	case errors.Is(err, meta.ErrStaleBrokerEpoch), errors.Is(err, meta.ErrUnknownBroker):
		l.failed("heartbeat", err)
		l.mu.Lock()
		if l.epoch == epoch {
			l.setState(-1, true) // register again, at once
		}
		l.mu.Unlock()
		return 0
	case err != nil:
		l.failed("heartbeat", err)
		return l.cfg.RetryBackoff
	}
	l.succeeded()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epoch == epoch {
		l.setState(epoch, res.Fenced)
	}
	if wantShutdown && res.ShutdownReady {
		select {
		case <-l.ready:
		default:
			close(l.ready)
		}
	}
	if wantShutdown || res.Fenced {
		return l.cfg.RetryBackoff // catching up, or moving leaderships off: soon
	}
	return l.cfg.HeartbeatInterval
}

// failed logs a failed call: at Warn the first time in a row, then at
// Debug (an election or a controller restart repeats the same error at
// every retry).
func (l *Lifecycle) failed(what string, err error) {
	if l.ctx.Err() != nil {
		return // closing
	}
	l.mu.Lock()
	first := !l.failing
	l.failing = true
	l.mu.Unlock()
	level := slog.LevelDebug
	if first {
		level = slog.LevelWarn
	}
	l.cfg.Logger.Log(context.Background(), level, "broker lifecycle: "+what+" failed, retrying", "node_id", l.cfg.NodeID, "err", err)
}

func (l *Lifecycle) succeeded() {
	l.mu.Lock()
	l.failing = false
	l.mu.Unlock()
}

// fenceLoop fences the brokers whose sessions expired, every half
// heartbeat interval while this node is the controller.
func (l *Lifecycle) fenceLoop() {
	defer l.wg.Done()
	t := time.NewTicker(max(l.cfg.HeartbeatInterval/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		if l.cfg.IsController != nil && !l.cfg.IsController() {
			continue
		}
		ctx, cancel := context.WithTimeout(l.ctx, l.callTimeout())
		err := l.cfg.Controller.FenceExpired(ctx)
		cancel()
		if err != nil && !errors.Is(err, meta.ErrNotController) && l.ctx.Err() == nil {
			l.cfg.Logger.Warn("fencing the brokers whose sessions expired", "err", err)
		}
	}
}

// ProducerIDBlock is broker.ProducerIDBlocks: a block from the
// controller, directly on the controller (past after: it asks for a block
// that large), else over AllocateProducerIds once the broker is
// registered. It retries through elections and re-registrations until ctx
// ends; without a channel, NOT_CONTROLLER fails at once.
func (l *Lifecycle) ProducerIDBlock(ctx context.Context, after int64) (first, n int64, err error) {
	for {
		c, remote := l.client()
		epoch := int64(-1)
		if remote {
			if err := l.waitFor(ctx, func() bool { return l.epoch >= 0 }); err != nil {
				return 0, 0, fmt.Errorf("node: waiting for the broker's registration: %w", err)
			}
			epoch = l.Epoch()
		}
		first, n, err = c.producerIDBlock(ctx, l.cfg.NodeID, epoch, after)
		if err == nil {
			return first, n, nil
		}
		if l.remote == nil && errors.Is(err, meta.ErrNotController) {
			// No way to another controller: waiting would not help
			// (a node alone is always its own).
			return 0, 0, err
		}
		if errors.Is(err, meta.ErrStaleBrokerEpoch) || errors.Is(err, meta.ErrUnknownBroker) {
			l.wake() // the heartbeat finds out and registers again
		}
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("node: allocating producer ids: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(l.cfg.RetryBackoff):
		}
	}
}

// AlterISR is broker.ISRChanger: this broker, the partition's leader at
// leaderEpoch, asks the controller to change the ISR of the assignment
// it holds at partitionEpoch to isr (AlterPartition), directly on the
// controller, else over the channel once the broker is registered. It
// returns the assignment after the change (the current one when isr is
// the ISR already) without its replicas, which AlterPartition does not
// answer and never changes. A refusal is an error wrapping the
// *kerr.Error of its code (errors.Is(err, kerr.InvalidUpdateVersion)):
// the change is not retried, the leader must first learn the new
// assignment. Through elections, re-registrations, connection errors and
// timeouts it retries until ctx ends; a retry of a change that was
// written but not answered meets the epoch it moved
// (INVALID_UPDATE_VERSION), as in Kafka. Without a channel,
// NOT_CONTROLLER fails at once.
func (l *Lifecycle) AlterISR(ctx context.Context, topicID [16]byte, partition, leaderEpoch, partitionEpoch int32, isr []int32, brokerEpochs []int64) (state.PartitionAssignment, error) {
	ch := meta.ISRChange{TopicID: topicID, Partition: partition, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch,
		NewISR: isr, BrokerEpochs: brokerEpochs}
	var p state.PartitionAssignment
	err := l.retryController(ctx, fmt.Sprintf("AlterPartition of partition %d of topic %x", partition, topicID), func(ctx context.Context, c controllerClient) error {
		if err := l.waitFor(ctx, func() bool { return l.epoch >= 0 }); err != nil {
			return fmt.Errorf("node: waiting for the broker's registration: %w", err)
		}
		var err error
		p, err = c.alterPartition(ctx, l.cfg.NodeID, l.Epoch(), ch)
		return err
	})
	if err != nil {
		return state.PartitionAssignment{}, err
	}
	p.Replicas = nil
	return p, nil
}

// retryController makes call, a broker's call to the controller (its
// own role or over the channel), until it succeeds, the controller
// refuses it (a *kerr.Error other than REQUEST_TIMED_OUT), no other
// controller can be reached (a lifecycle without a channel), or ctx ends,
// waiting RetryBackoff between tries. A stale or unknown broker epoch
// wakes the heartbeat, which registers again. what names the call in its
// errors. The ctx call gets ends with the lifecycle too (Close): a node
// stopping while no controller is reachable (the last one up) gives up at
// once instead of holding its shutdown for the caller's whole timeout.
func (l *Lifecycle) retryController(ctx context.Context, what string, call func(ctx context.Context, c controllerClient) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.ctx, cancel)()
	for {
		c, _ := l.client()
		err := call(ctx, c)
		if err == nil {
			return nil
		}
		var ke *kerr.Error
		if errors.As(err, &ke) && ke != kerr.RequestTimedOut {
			return fmt.Errorf("node: %s: %w", what, err)
		}
		if l.remote == nil && errors.Is(err, meta.ErrNotController) {
			return err // no way to another controller
		}
		if errors.Is(err, meta.ErrStaleBrokerEpoch) || errors.Is(err, meta.ErrUnknownBroker) {
			l.wake() // the heartbeat finds out and registers again
		}
		select {
		case <-ctx.Done():
			if l.ctx.Err() != nil {
				return fmt.Errorf("node: %s: the node is stopping (last error: %w)", what, err)
			}
			return fmt.Errorf("node: %s: %w (last error: %w)", what, ctx.Err(), err)
		case <-time.After(l.cfg.RetryBackoff):
		}
	}
}

// controllerClient is the controller's calls as a broker makes them. Its
// errors are meta's: ErrNotController, ErrStaleBrokerEpoch and
// ErrUnknownBroker, whichever way the call went.
type controllerClient interface {
	register(ctx context.Context, reg state.BrokerRegistration) (epoch int64, err error)
	heartbeat(ctx context.Context, id int32, epoch int64, applied uint64, wantShutdown bool) (meta.HeartbeatResult, error)
	// producerIDBlock: epoch is -1 on the local controller, which does
	// not check it.
	producerIDBlock(ctx context.Context, id int32, epoch, after int64) (first, n int64, err error)
	// alterPartition is an AlterPartition of one partition from broker
	// id at epoch: a refusal of the change is a *kerr.Error.
	alterPartition(ctx context.Context, id int32, epoch int64, ch meta.ISRChange) (state.PartitionAssignment, error)
	// bumpLeaderEpochs raises leader epochs (epoch_bumps.go): a refusal
	// of a partition is a *kerr.Error; it returns the entry's index.
	bumpLeaderEpochs(ctx context.Context, bumps []meta.EpochBump) (uint64, error)
	// writeMirrorStates persists mirror partition states led by writer
	// (mirror_states.go): a refusal of a partition is a *kerr.Error; it
	// returns the index to wait for.
	writeMirrorStates(ctx context.Context, writer int32, writes []meta.MirrorStateWrite) (uint64, error)
}

// producerIDBlockSize is the block a broker asks for, Kafka's.
const producerIDBlockSize = 1000

// localController calls this node's controller role.
type localController struct {
	c     *meta.Controller
	store *state.Store
}

func (lc localController) register(ctx context.Context, reg state.BrokerRegistration) (int64, error) {
	return lc.c.RegisterBroker(ctx, reg)
}

func (lc localController) heartbeat(ctx context.Context, id int32, epoch int64, applied uint64, wantShutdown bool) (meta.HeartbeatResult, error) {
	return lc.c.Heartbeat(ctx, id, epoch, applied, wantShutdown)
}

// producerIDBlock asks for a block that reaches a full block past after:
// the controller's allocator then moves past the ids the logs know, in
// one entry, which the AllocateProducerIds RPC cannot ask for.
func (lc localController) producerIDBlock(ctx context.Context, _ int32, _, after int64) (int64, int64, error) {
	n := int64(producerIDBlockSize)
	if lc.store != nil && after >= 0 {
		next, err := lc.store.NextProducerID()
		if err != nil {
			return 0, 0, err
		}
		if after >= next {
			n += after + 1 - next
		}
	}
	first, err := lc.c.AllocateProducerIDs(ctx, n)
	return first, n, err
}

func (lc localController) alterPartition(ctx context.Context, id int32, epoch int64, ch meta.ISRChange) (state.PartitionAssignment, error) {
	res, err := lc.c.AlterPartition(ctx, id, epoch, []meta.ISRChange{ch})
	if err != nil {
		return state.PartitionAssignment{}, err
	}
	if res[0].Err != nil {
		return state.PartitionAssignment{}, res[0].Err
	}
	return res[0].Assignment, nil
}

// remoteController calls the controller over the channel.
type remoteController struct {
	ch        ControllerChannel
	clusterID func() string
}

// controllerError is the error of a controller RPC's code, meta's
// sentinels for the codes the lifecycle acts on.
func controllerError(code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.NotController.Code:
		return meta.ErrNotController
	case kerr.StaleBrokerEpoch.Code:
		return meta.ErrStaleBrokerEpoch
	case kerr.BrokerIDNotRegistered.Code:
		return meta.ErrUnknownBroker
	}
	return fmt.Errorf("node: the controller answered %w", kerr.ErrorForCode(code))
}

func (rc remoteController) register(ctx context.Context, reg state.BrokerRegistration) (int64, error) {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.ClusterID, req.IncarnationID, req.Rack = reg.ID, rc.clusterID(), reg.Incarnation, reg.Rack
	req.PreviousBrokerEpoch = -1
	for _, e := range reg.Listeners {
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port = e.Name, e.Host, uint16(e.Port)
		req.Listeners = append(req.Listeners, l)
	}
	resp, err := rc.ch.Request(ctx, req)
	if err != nil {
		return 0, err
	}
	r, ok := resp.(*kmsg.BrokerRegistrationResponse)
	if !ok {
		return 0, fmt.Errorf("node: BrokerRegistration answered with a %T", resp)
	}
	if err := controllerError(r.ErrorCode); err != nil {
		return 0, err
	}
	return r.BrokerEpoch, nil
}

func (rc remoteController) heartbeat(ctx context.Context, id int32, epoch int64, applied uint64, wantShutdown bool) (meta.HeartbeatResult, error) {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.BrokerID, req.BrokerEpoch, req.CurrentMetadataOffset, req.WantShutdown = id, epoch, int64(applied), wantShutdown
	resp, err := rc.ch.Request(ctx, req)
	if err != nil {
		return meta.HeartbeatResult{}, err
	}
	r, ok := resp.(*kmsg.BrokerHeartbeatResponse)
	if !ok {
		return meta.HeartbeatResult{}, fmt.Errorf("node: BrokerHeartbeat answered with a %T", resp)
	}
	if err := controllerError(r.ErrorCode); err != nil {
		return meta.HeartbeatResult{}, err
	}
	return meta.HeartbeatResult{Fenced: r.IsFenced, ShutdownReady: r.ShouldShutdown}, nil
}

func (rc remoteController) producerIDBlock(ctx context.Context, id int32, epoch, _ int64) (int64, int64, error) {
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = id, epoch
	resp, err := rc.ch.Request(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	r, ok := resp.(*kmsg.AllocateProducerIDsResponse)
	if !ok {
		return 0, 0, fmt.Errorf("node: AllocateProducerIds answered with a %T", resp)
	}
	if err := controllerError(r.ErrorCode); err != nil {
		return 0, 0, err
	}
	if r.ProducerIDStart < 0 || r.ProducerIDLen <= 0 {
		return 0, 0, fmt.Errorf("node: AllocateProducerIds answered the block %d+%d", r.ProducerIDStart, r.ProducerIDLen)
	}
	return r.ProducerIDStart, int64(r.ProducerIDLen), nil
}

// alterPartition sends ch by topic id, at the version the channel
// negotiates (v2+: the controller's listener serves v0-3); at v3 with the
// members' broker epochs the leader saw in their fetches (-1 where it
// sends none: the members already in the ISR).
func (rc remoteController) alterPartition(ctx context.Context, id int32, epoch int64, ch meta.ISRChange) (state.PartitionAssignment, error) {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.BrokerID, req.BrokerEpoch = id, epoch
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = ch.TopicID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch, rp.NewISR = ch.Partition, ch.LeaderEpoch, ch.PartitionEpoch, ch.NewISR
	for i, m := range ch.NewISR {
		e := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		e.BrokerID, e.BrokerEpoch = m, -1
		if i < len(ch.BrokerEpochs) {
			e.BrokerEpoch = ch.BrokerEpochs[i]
		}
		rp.NewEpochISR = append(rp.NewEpochISR, e)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := rc.ch.Request(ctx, req)
	if err != nil {
		return state.PartitionAssignment{}, err
	}
	r, ok := resp.(*kmsg.AlterPartitionResponse)
	if !ok {
		return state.PartitionAssignment{}, fmt.Errorf("node: AlterPartition answered with a %T", resp)
	}
	if err := controllerError(r.ErrorCode); err != nil {
		return state.PartitionAssignment{}, err
	}
	if len(r.Topics) != 1 || r.Topics[0].TopidID != ch.TopicID || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].Partition != ch.Partition {
		return state.PartitionAssignment{}, fmt.Errorf("node: AlterPartition of partition %d answered %+v", ch.Partition, r.Topics)
	}
	sp := r.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		return state.PartitionAssignment{}, kerr.ErrorForCode(sp.ErrorCode)
	}
	return state.PartitionAssignment{TopicID: ch.TopicID, Partition: ch.Partition, ISR: sp.ISR, Leader: sp.LeaderID,
		LeaderEpoch: sp.LeaderEpoch, PartitionEpoch: sp.PartitionEpoch}, nil
}

// noController is the client of a lifecycle with neither a controller
// role nor a channel: every call fails.
type noController struct{}

func (noController) register(context.Context, state.BrokerRegistration) (int64, error) {
	return 0, meta.ErrNotController
}

func (noController) heartbeat(context.Context, int32, int64, uint64, bool) (meta.HeartbeatResult, error) {
	return meta.HeartbeatResult{}, meta.ErrNotController
}

func (noController) producerIDBlock(context.Context, int32, int64, int64) (int64, int64, error) {
	return 0, 0, meta.ErrNotController
}

func (noController) alterPartition(context.Context, int32, int64, meta.ISRChange) (state.PartitionAssignment, error) {
	return state.PartitionAssignment{}, meta.ErrNotController
}

// newNodeLifecycle is the lifecycle Start builds: the node's controller
// role c is called directly while this node is the controller (always,
// for a node alone), ch otherwise (without it, a node of several that is
// not the controller retries until it becomes one). broker.heartbeat.interval.ms and
// broker.session.timeout.ms are cfg.Cluster's; broker.rack comes from
// cfg's Kafka settings.
func newNodeLifecycle(cfg broker.Config, store *state.Store, log *meta.MetadataLog, c *meta.Controller, ch *meta.ControllerChannel) *Lifecycle {
	var rack *string
	if r, ok := cfg.KafkaSettings["broker.rack"]; ok && r != "" {
		rack = &r
	}
	lc := LifecycleConfig{NodeID: cfg.NodeID, ClusterID: store.ClusterID, Rack: rack,
		HeartbeatInterval: cfg.Cluster.HeartbeatInterval, ShutdownTimeout: cfg.Cluster.SessionTimeout,
		Applied: log.Applied, Controller: c, IsController: log.IsController, Store: store, Logger: cfg.Logger}
	if ch != nil {
		lc.Channel = ch
	}
	return NewLifecycle(lc)
}

// brokerEndpoints are the broker's advertised listeners as its
// registration carries them.
func brokerEndpoints(ls []broker.Listener) []state.BrokerEndpoint {
	out := make([]state.BrokerEndpoint, 0, len(ls))
	for _, l := range ls {
		out = append(out, state.BrokerEndpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port)})
	}
	return out
}

// Lifecycle is the node's registration and heartbeats with the
// controller.
func (n *Node) Lifecycle() *Lifecycle { return n.life }

// unfenceTimeout bounds Start's wait for the controller to unfence the
// node: a node alone is unfenced by its first heartbeat, milliseconds
// after its registration.
const unfenceTimeout = 30 * time.Second

// waitUnfenced waits, as Kafka's broker does before it serves, until the
// controller has registered and unfenced this node, and the reconciler
// has brought the broker in line with what that wrote: the image lists
// the brokers from their registrations, and this start's registration
// (its listeners, its leaderships back after a restart's fencing) must be
// in it before the first client asks. A node of several without a
// channel to the controller does not wait: unless it is the controller,
// nothing can register it.
func (n *Node) waitUnfenced(ctx context.Context, several bool) error {
	if several && n.life.remote == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, unfenceTimeout)
	defer cancel()
	if err := n.life.WaitUnfenced(ctx); err != nil {
		return fmt.Errorf("waiting for the controller to register and unfence node %d: %w", n.life.cfg.NodeID, err)
	}
	if err := n.rec.waitCovered(ctx, n.log.Applied()); err != nil {
		return fmt.Errorf("applying the node's registration: %w", err)
	}
	return nil
}

// meta's channel to the controller is the lifecycle's.
var _ ControllerChannel = (*meta.ControllerChannel)(nil)
