package broker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kmirror/kmirror/group"
	"github.com/kmirror/kmirror/internal/clientauth"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/netio"
	"github.com/kmirror/kmirror/partition"
	"github.com/kmirror/kmirror/replicate"
	"github.com/kmirror/kmirror/state"
	"github.com/kmirror/kmirror/storage"
	"github.com/kmirror/kmirror/txn"
)

// OpenStore opens the state store of cfg (cfg.StateDir; cfg validated),
// as New does when cfg.Store is nil.
func OpenStore(cfg Config) (*state.Store, error) {
	store, err := state.Open(cfg.StateDir, state.Options{Logger: cfg.Logger,
		Secret: cfg.PasswordEncoderSecret, IsSecret: clientauth.Sensitive})
	if err != nil {
		return nil, fmt.Errorf("opening the state store: %w", err)
	}
	return store, nil
}

// Broker is one kmirror node's Kafka API.
type Broker struct {
	cfg   Config
	log   *slog.Logger
	store *state.Store
	srv   *netio.Server
	// partitions are the topics and partition logs the node hosts.
	partitions *partition.Manager
	// replicas fetch the partitions this node follows from their leaders
	// (replication.go); nil for a bare broker.
	replicas *replicate.Manager
	// isrWake asks isrLoop for a pass now (isr.go).
	isrWake chan struct{}

	// advertised is what Metadata and DescribeCluster tell clients, fixed
	// once the listeners are bound.
	advertised []Listener
	// img is the metadata image handlers answer from (image.go),
	// replaced whole under the partition registry's lock (or imgMu alone
	// for an epoch patch), read without a lock.
	img atomic.Pointer[meta.Image]
	// imgMu orders image publications: a full build (under the
	// registry's lock, then imgMu) and an epoch patch (imgMu alone) never overwrite each
	// other's image.
	imgMu sync.Mutex

	// saslDecoyKey derives the decoy SCRAM salts of unknown users.
	saslDecoyKey []byte
	// warnings rate-limits the warnings a client or a full disk repeats.
	warnings warnLimiter
	// tlsCert is the certificate TLS listeners present (tls_reload.go).
	tlsCert atomic.Pointer[tls.Certificate]
	// authzState is the ACL authorizer (authorizer.go): its cached ACL
	// index and the denials already logged.
	authzState atomic.Pointer[authorizer]

	// quotas are the client quotas and the usage measured against them
	// (quotas.go).
	quotas *quotaSet

	// txns is the transaction coordinator (txn/). orphans remembers when
	// maintenance first saw each open transaction no id owns (repairTxns);
	// only the maintenance goroutine touches it.
	txns    *txn.Coordinator
	orphans map[orphanKey]time.Time

	// adminMu serialises the admin requests that read, check and then
	// change topics, configs or ACLs (CreateTopics, DeleteTopics,
	// CreatePartitions, AlterConfigs, IncrementalAlterConfigs,
	// CreateAcls, DeleteAcls, AlterClientQuotas and their Go API twins): each
	// decides from what it read, so two must not interleave. They are
	// rare; one lock costs nothing. Lock order: adminMu, then the
	// partition registry's (partition.Topic's maintainMu, then
	// partition.Manager's; topic configs are resolved and images built
	// under it), then dynMu or imgMu, then partition locks.
	adminMu sync.Mutex

	// dynamicConfigs are the cluster-default broker configs set with
	// IncrementalAlterConfigs/AlterConfigs (BROKER ""), nodeConfigs this
	// node's (BROKER "<node.id>"), which win over them; both persisted in
	// state/. dynMu guards them apart from the partition registry's lock
	// because topic creation reads them while holding it.
	dynMu          sync.RWMutex
	dynamicConfigs map[string]string
	nodeConfigs    map[string]string

	sessions *fetchSessions
	pids     producerIDs
	groups   *group.Coordinator
	groupLog *groupLog // the groups' store on __consumer_offsets
	shares   *shares   // share partitions and sessions (share_partitions.go)
	txnLog   *txnLog   // the transactions' store on __transaction_state

	// fetchParking, set by tests only, runs when a long-poll Fetch has
	// read its partitions and is about to wait for an append (atomic:
	// the race detector sees no order through the test's socket).
	fetchParking atomic.Pointer[func()]

	mirrorMu    sync.RWMutex
	mirrorAdmin MirrorAdmin

	// ready is closed when New has finished (or, with DeferServing, when
	// StartServing is called): a client that connects while the listeners
	// come up waits for it instead of seeing a half-built broker
	// (advertised listeners unset, no control plane).
	ready     chan struct{}
	readyOnce sync.Once
	closing   chan struct{}
	closeOnce sync.Once
	// groupAsks bounds the mirror group sync's requests in flight to other
	// nodes' coordinators (group_sync.go): the sync asks for all its
	// groups at once, and each ask is a connection.
	groupAsks chan struct{}
	bg        sync.WaitGroup
	stats     Stats
}

// Stats are the broker's counters for the metrics adapter: plain atomics,
// no map lookups on the hot path (STYLE.md item 16).
type Stats struct {
	// Requests counts requests by API key.
	Requests        [maxAPIKey]atomic.Int64
	ProduceBatches  atomic.Int64
	ProduceBytes    atomic.Int64
	FetchBytes      atomic.Int64
	FetchRequests   atomic.Int64
	ProduceRequests atomic.Int64
	ProduceErrors   atomic.Int64 // Produce partitions answered with an error code
	// Throttled counts responses throttled by a client quota, by the
	// quota that set the throttle time (QuotaNames), ThrottleMillis their
	// throttle times.
	Throttled      [numQuotaKinds]atomic.Int64
	ThrottleMillis [numQuotaKinds]atomic.Int64
	// ISRShrinks and ISRExpands count the ISR changes of partitions this
	// node leads that the controller accepted (Kafka's IsrShrinksPerSec
	// and IsrExpandsPerSec).
	ISRShrinks, ISRExpands atomic.Int64
}

// New opens the state store and every partition log, then binds the
// listeners. cfg is validated first.
func New(cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, d := range cfg.LogDirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("log.dirs: creating %s: %w", d, err)
		}
	}
	store := cfg.Store
	if store == nil {
		var err error
		if store, err = OpenStore(cfg); err != nil {
			return nil, err
		}
	}
	// closeStore undoes the open on a failed start; a store the caller
	// opened is the caller's to close.
	closeStore := func() {
		if cfg.Store == nil {
			store.Close()
		}
	}
	stored, err := store.Topics()
	if err == nil {
		err = checkLogDirs(cfg.LogDirs, cfg.StateDir, store.ClusterID(), cfg.NodeID, len(stored) == 0)
	}
	var logSpace, groupSpace map[string]storage.SpaceGuard
	if err == nil {
		logSpace, err = logDirGuards(cfg.LogDirs, store, logDirMargin)
	}
	if err == nil {
		groupSpace, err = logDirGuards(cfg.LogDirs, store, 0)
	}
	if err != nil {
		closeStore()
		return nil, err
	}
	decoy := make([]byte, 32)
	rand.Read(decoy)
	b := &Broker{
		saslDecoyKey: decoy,
		cfg:          cfg,
		log:          cfg.Logger,
		store:        store,
		sessions:     newFetchSessions(fetchSessionSlots),
		ready:        make(chan struct{}),
		closing:      make(chan struct{}),
		groupAsks:    make(chan struct{}, maxGroupAsks),
	}
	b.pids.src, b.pids.after = cfg.ProducerIDs, -1
	if b.pids.src == nil {
		b.pids.src = storeProducerIDBlocks{store}
	}
	b.authzState.Store(newAuthorizer(cfg.Security))
	if err = b.load(); err != nil {
		closeStore()
		return nil, err
	}
	b.partitions, err = partition.Open(partition.Config{Store: store, LogDirs: cfg.LogDirs, SpaceGuards: logSpace,
		CoordinatorTopics: []string{meta.GroupTopic}, CoordinatorSpaceGuards: groupSpace,
		FS: cfg.Log.FS, LogConfig: b.partitionConfig, Place: b.placeReplicas, Removed: b.topicRemoved, TopicsChanged: b.publishImageLocked, EpochMoved: b.epochMoved, RaiseAssignedEpochs: b.raiseAssignedEpochs(),
		Logger: cfg.Logger})
	if err != nil {
		closeStore()
		return nil, err
	}
	b.publishImage()
	b.skipKnownProducerIDs()
	delay := cfg.GroupInitialRebalanceDelay
	if delay == 0 {
		delay = group.NoInitialRebalanceDelay
	}
	b.groupLog = newGroupLog(b, store)
	b.shares = newShares()
	b.groups, err = group.New(b.groupLog, group.Config{
		InitialRebalanceDelay: delay,
		MinSessionTimeout:     cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:     cfg.GroupMaxSessionTimeout,
		PartitionExists:       b.partitionExists,
		Logger:                cfg.Logger,

		ConsumerProtocol:          cfg.ConsumerProtocol(),
		ConsumerSessionTimeout:    cfg.GroupConsumerSessionTimeout,
		ConsumerHeartbeatInterval: cfg.GroupConsumerHeartbeatInterval,
		GroupConsumerConfig:       b.groupConsumerConfig,
		ConsumerAssignors:         cfg.GroupConsumerAssignors,
		ShareProtocol:             cfg.ShareProtocol(),
		ShareSessionTimeout:       cfg.GroupShareSessionTimeout,
		ShareHeartbeatInterval:    cfg.GroupShareHeartbeatInterval,
		ShareMaxSize:              cfg.GroupShareMaxSize,
		GroupShareConfig:          b.groupShareConfig,
		Topics:                    b.groupTopics,
	})
	if err != nil {
		b.partitions.Close()
		closeStore()
		return nil, fmt.Errorf("loading consumer groups: %w", err)
	}
	b.orphans = map[orphanKey]time.Time{}
	b.txnLog = newTxnLog(b, store)
	b.txns, err = txn.New(txn.Config{Logger: cfg.Logger, MaxTimeout: cfg.Transactions.MaxTimeout,
		IDExpiration: cfg.Transactions.IDExpiration, CheckInterval: cfg.Transactions.AbortCheckInterval}, b.txnLog, txnNode{b})
	if err != nil {
		b.groups.Close()
		b.partitions.Close()
		closeStore()
		return nil, err
	}
	b.warnUnnamedPartitions()
	ntopics := len(b.partitions.Topics())
	srv, err := netio.Listen(netio.Config{
		Listeners:       append(netioListeners(cfg.Listeners, b.tlsListenerConfig()), controllerNetioListener(cfg)...),
		MaxRequestBytes: cfg.SocketRequestMaxBytes,
		Logger:          cfg.Logger,
	}, b)
	if err != nil {
		b.txns.Close()
		b.groups.Close()
		b.partitions.Close()
		closeStore()
		return nil, err
	}
	b.srv = srv
	b.advertised = advertisedListeners(cfg, srv.Listeners()[:len(cfg.Listeners)]) // not the CONTROLLER one
	b.publishImage()
	if b.replicas = newReplicas(b); b.replicas != nil {
		if parts, err := store.PartitionAssignments(); err == nil { // else the first reconcile's
			b.applyAssignments(parts)
		}
	}
	b.bg.Add(4)
	go b.maintain()
	go b.checkpointLoop()
	go b.groupLog.run()
	b.groupLog.nudge()
	go b.txnLog.run()
	b.txnLog.nudge()
	if b.replicas != nil {
		b.isrWake = make(chan struct{}, 1)
		b.bg.Add(1)
		go b.isrLoop()
	}
	if !cfg.DeferServing {
		b.StartServing()
	}
	b.log.Info("kmirror broker started", "node_id", cfg.NodeID, "cluster_id", store.ClusterID(),
		"listeners", fmt.Sprint(b.advertised), "topics", ntopics)
	return b, nil
}

// netioListeners binds each listener; SSL and SASL_SSL ones get the
// node's TLS config (netio serves them on crypto/tls).
func netioListeners(ls []Listener, tlsCfg *tls.Config) []netio.Listener {
	out := make([]netio.Listener, len(ls))
	for i, l := range ls {
		out[i] = netio.Listener{Name: l.Name, Addr: l.Addr()}
		if l.Protocol == "SSL" || l.Protocol == "SASL_SSL" {
			out[i].TLS = tlsCfg
		}
	}
	return out
}

// advertisedListeners resolves what clients are told: the configured
// advertised listeners, else the bound ones (port 0 resolved; a wildcard
// host advertised as the machine's hostname, as Kafka does).
func advertisedListeners(cfg Config, bound []netio.BoundListener) []Listener {
	if len(cfg.AdvertisedListeners) > 0 {
		return cfg.AdvertisedListeners
	}
	out := make([]Listener, len(bound))
	for i, bl := range bound {
		host := cfg.Listeners[i].Host
		if host == "" || host == "0.0.0.0" || host == "::" {
			if h, err := os.Hostname(); err == nil {
				host = h
			}
		}
		out[i] = Listener{Name: bl.Name, Host: host, Port: bl.Addr.Port}
	}
	return out
}

// Listeners are the advertised listeners (the bound port when 0 was asked).
func (b *Broker) Listeners() []Listener { return b.advertised }

// Addr is the host:port of the first advertised listener.
func (b *Broker) Addr() string { return b.advertised[0].Addr() }

// ClusterID is the node's cluster id, generated at the first start.
func (b *Broker) ClusterID() string { return b.store.ClusterID() }

// Stats returns the broker's live counters.
func (b *Broker) Stats() *Stats { return &b.stats }

// partitionExists reports whether a topic partition exists (for offset
// commits).
// groupTopics are the topics consumer group subscriptions resolve to.
func (b *Broker) groupTopics() []group.TopicMeta {
	ts := b.partitions.Topics()
	out := make([]group.TopicMeta, 0, len(ts))
	for _, t := range ts {
		out = append(out, group.TopicMeta{Name: t.Name(), ID: t.ID(), Partitions: int32(len(t.Partitions())),
			Internal: isInternalTopic(t.Name())})
	}
	return out
}

func (b *Broker) partitionExists(topic string, partition int32) bool {
	t := b.partitions.Topic(topic)
	return t != nil && t.Partition(partition) != nil
}

// TopicStat is a topic's size and its partitions' offsets for the metrics
// adapter.
type TopicStat struct {
	Name       string
	Partitions []PartitionStat
	SizeBytes  int64
}

// PartitionStat is one partition's log bounds, Kafka's LogStartOffset and
// LogEndOffset.
type PartitionStat struct {
	Index          int32
	LogStartOffset int64
	LogEndOffset   int64
}

// TopicStats reads each topic's partitions (scrape time, not the hot path).
func (b *Broker) TopicStats() []TopicStat {
	ts := b.partitions.Topics()
	out := make([]TopicStat, 0, len(ts))
	for _, t := range ts {
		parts := t.Partitions()
		st := TopicStat{Name: t.Name(), Partitions: make([]PartitionStat, 0, len(parts))}
		for i, p := range parts {
			l := p.Log()
			st.SizeBytes += l.Size()
			st.Partitions = append(st.Partitions, PartitionStat{Index: int32(i), LogStartOffset: l.LogStartOffset(),
				LogEndOffset: l.LogEndOffset()})
		}
		out = append(out, st)
	}
	return out
}

// StartServing lets the requests through: at once from New, or, with
// Config.DeferServing, once the node is wired. Calling it again is a
// no-op.
func (b *Broker) StartServing() { b.readyOnce.Do(func() { close(b.ready) }) }

// NetStats returns the transport's live counters.
func (b *Broker) NetStats() *netio.Stats { return b.srv.Stats() }

// Close stops serving, wakes long-poll fetches, then closes every log
// cleanly (writing the clean-shutdown markers) and the state store.
func (b *Broker) Close() error {
	var errs []error
	b.closeOnce.Do(func() {
		close(b.closing)
		b.groups.Close() // wakes joins and syncs parked on workers
		b.txns.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.srv.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping listeners: %w", err))
		}
		b.bg.Wait()
		if b.replicas != nil {
			b.replicas.Close() // before the logs they append to
		}
		// The last high watermarks, for the next start (Kafka writes the
		// checkpoint at shutdown too). The loop has stopped.
		if err := b.partitions.CheckpointHighWatermarks(); err != nil {
			errs = append(errs, fmt.Errorf("writing the high watermark checkpoints: %w", err))
		}
		if err := b.partitions.Close(); err != nil {
			errs = append(errs, err)
		}
		if b.cfg.Store != nil {
			// the caller's (node/), closed after what it put under it
		} else if err := b.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the state store: %w", err))
		}
		b.log.Info("kmirror broker stopped")
	})
	return errors.Join(errs...)
}

// DefaultMaintainInterval is the default LogRetentionCheckInterval: how
// often retention, compaction, flush.ms and producer expiry run (Kafka's
// log.retention.check.interval.ms is 5 minutes; a shorter pass costs
// little on one node and keeps tests fast).
const DefaultMaintainInterval = 10 * time.Second

// maintain runs the periodic log work until Close.
func (b *Broker) maintain() { b.every(b.cfg.LogRetentionCheckInterval, b.maintainOnce) }

// every runs fn every d until Close, for a goroutine counted in b.bg.
func (b *Broker) every(d time.Duration, fn func(now time.Time)) {
	defer b.bg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-b.closing:
			return
		case now := <-t.C:
			fn(now)
		}
	}
}

func (b *Broker) maintainOnce(now time.Time) {
	b.partitions.Maintain(now)
	b.sessions.expire(now)
	b.repairTxns(now)
}

// DefaultHighWatermarkCheckpointInterval is Kafka's
// replica.high.watermark.checkpoint.interval.ms.
const DefaultHighWatermarkCheckpointInterval = 5 * time.Second

// checkpointLoop writes the high watermark checkpoints
// (partition.Manager.CheckpointHighWatermarks) every
// HighWatermarkCheckpointInterval until Close.
func (b *Broker) checkpointLoop() {
	b.every(b.cfg.HighWatermarkCheckpointInterval, func(now time.Time) {
		if err := b.partitions.CheckpointHighWatermarks(); err != nil {
			if ok, held := b.warnings.allow("hw-checkpoint", now); ok {
				b.log.Warn("writing the high watermark checkpoint failed", "held_back", held, "err", err)
			}
		}
	})
}

// load reads the node's client quotas and dynamic broker configs.
func (b *Broker) load() error {
	quotas, err := b.store.ClientQuotas()
	if err != nil {
		return fmt.Errorf("loading client quotas: %w", err)
	}
	b.quotas = newQuotaSet(b.cfg.QuotaWindowNum, b.cfg.QuotaWindowSize, quotas)
	dyn, err := b.store.BrokerConfigs()
	if err != nil {
		return fmt.Errorf("loading broker configs: %w", err)
	}
	b.dynamicConfigs = dyn
	if b.nodeConfigs, err = b.store.NodeConfigs(b.cfg.NodeID); err != nil {
		return fmt.Errorf("loading broker configs of node %d: %w", b.cfg.NodeID, err)
	}
	return nil
}
