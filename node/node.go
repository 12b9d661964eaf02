// Package node is kmirror's composition root: it builds one node from its
// config in one order (the state store, the metadata log on it and the
// cluster's identity, the broker with its listeners held, the reconciler
// that follows the log into the broker, the mirror control plane, the
// broker's mirror RPCs pointed at it, the metrics listener, the broker's
// lifecycle with the controller until it is registered and unfenced, then
// serving), and closes it in the reverse order after a controlled
// shutdown. `kmirror serve`, `kmirror
// demo`, `kmirror bench` (perf/mirror) and the end-to-end tests all build
// their nodes here, so a node a test runs is wired as the one an operator
// runs. cluster.go holds the node's place in the cluster (log, identity,
// reconciler), lifecycle.go its registration and heartbeats.
//
// The tests of the broker alone, or of the bare fetch path without a
// control plane, build a bare broker on purpose: the in-package tests of
// the broker, control and what they import (which cannot import node: an
// import cycle) with internal/testutil/nodetest, and tests/' brokerNode.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/meta"
	"github.com/kmirror/kmirror/metrics"
	"github.com/kmirror/kmirror/state"
)

// Node is one running kmirror node: its Kafka API and its mirror control
// plane.
type Node struct {
	Broker  *broker.Broker
	Mirrors *control.Plane
	// store is the node's state store and log its metadata log, which
	// the store writes its replicated records through; controller is the
	// controller role, acting while this node leads the log; ctlLn the
	// CONTROLLER listener of a voter of several (nil alone and on a
	// broker-only node); rec follows
	// the log's changes into the broker.
	store      *state.Store
	log        *meta.MetadataLog
	controller *meta.Controller
	ctlLn      *meta.ControllerListener
	rec        *reconciler
	recStarted bool
	// channel sends forwarded requests to the controller (a node of
	// several), mirrorChannel the forwarded mirror RPCs, lifeChannel the
	// lifecycle's (registration, heartbeats, ISR changes, epoch raises),
	// each on connections of its own: the controller serves a
	// connection's requests one at a time, and a heartbeat queued behind
	// a slow forwarded request expired the node's session (it was fenced,
	// its leaderships moved, while alive); a topic creation queued behind
	// a forwarded failover (up to 25 s) waited for all of it.
	channel, mirrorChannel, lifeChannel *meta.ControllerChannel
	// closeOnce makes Close run once; later calls return its result.
	closeOnce sync.Once
	closeErr  error
	// life is the node's registration and heartbeats with the
	// controller (lifecycle.go).
	life *Lifecycle
	// repl is the store's replicator (mirror_states.go).
	repl *storeReplicator
	// rebalancer moves leaderships back to their preferred replicas
	// while this node is the controller (rebalance.go); nil when off.
	rebalancer *leaderRebalancer
	// metricsSrv serves /metrics on metrics.listener; nil when that is
	// empty.
	metricsSrv *http.Server
	metricsLn  net.Listener
}

// MirrorConfig is the control plane's config from the node's mirror.*
// settings (server.properties), whose zero values mean "off" where the
// control plane's zero means "default": a node configured with
// mirror.metadata.refresh.interval.ms=0 runs no periodic sync, and with
// mirror.failed.retry.max.attempts=0 never retries a FAILED partition.
func MirrorConfig(cfg broker.Config) control.Config {
	cc := control.Config{Logger: cfg.Logger, RefreshInterval: cfg.Mirror.MetadataRefresh,
		RetryInitial: cfg.Mirror.RetryInitialBackoff, RetryMax: cfg.Mirror.RetryMaxBackoff,
		RetryMaxAttempts: cfg.Mirror.RetryMaxAttempts}
	if cc.RefreshInterval == 0 {
		cc.RefreshInterval = -1
	}
	if cc.RetryMaxAttempts == 0 {
		cc.RetryMaxAttempts = -1
	}
	return cc
}

// Start builds and starts a node: cfg is the broker's config, mirrors the
// control plane's (MirrorConfig maps cfg's mirror.* settings; tests pass
// their own). The state store opens first, then the metadata log on it
// (a node alone is a one-voter quorum, in memory: its replicated records
// are written through the log, as a cluster's controller writes them),
// then the broker and the control plane. The listeners are bound but
// answer no request until the whole node is wired, so a client that
// connects early waits instead of finding no control plane. A nil
// mirrors.Logger takes cfg.Logger.
func Start(cfg broker.Config, mirrors control.Config) (*Node, error) {
	return StartContext(context.Background(), cfg, mirrors)
}

// StartContext is Start, given up when ctx ends (kmirror serve's SIGTERM)
// while the node waits for its cluster: a quorum to form, the controller
// to register it.
func StartContext(ctx context.Context, cfg broker.Config, mirrors control.Config) (_ *Node, err error) {
	if mirrors.Logger == nil {
		mirrors.Logger = cfg.Logger
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{rec: newReconciler()}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if n.store, err = broker.OpenStore(cfg); err != nil {
		return nil, err
	}
	if err = n.openMetadataLog(cfg); err != nil {
		return nil, err
	}
	if err = n.joinCluster(ctx, cfg.Cluster.Voters, cfg.Logger); err != nil {
		return nil, err
	}
	cfg.Store, cfg.MetadataQuorum, cfg.DeferServing = n.store, n.quorum(cfg.NodeID), true
	if n.ctlLn != nil {
		cfg.ControllerConns, cfg.ControllerListenerName = n.ctlLn.KafkaListener(), cfg.Cluster.ControllerListener.Name
		cfg.MetadataLog = n.log
	}
	if cfg.Cluster.Several() {
		n.channel = meta.NewControllerChannel(cfg.Cluster.Voters, n.log.Controller)
		n.mirrorChannel = meta.NewControllerChannel(cfg.Cluster.Voters, n.log.Controller)
		n.lifeChannel = meta.NewControllerChannel(cfg.Cluster.Voters, n.log.Controller)
		cfg.ControllerChannel, cfg.MirrorControllerChannel = n.channel, n.mirrorChannel
	}
	n.life = newNodeLifecycle(cfg, n.store, n.log, n.controller, n.lifeChannel)
	cfg.Controller, cfg.ProducerIDs, cfg.ISR = n.controller, n.life, n.life
	if cfg.Cluster.Several() {
		cfg.Epochs = epochBumper{life: n.life, q: n.quorum(cfg.NodeID)}
	}
	if n.Broker, err = broker.New(cfg); err != nil {
		return nil, fmt.Errorf("starting the broker: %w", err)
	}
	go n.rec.run(n.Broker, cfg.Logger)
	n.recStarted = true
	n.repl.leader.Store(&leaderWrites{life: n.life, parts: n.Broker.Partitions()})
	if n.Mirrors, err = control.New(n.Broker, mirrors); err != nil {
		return nil, fmt.Errorf("starting the mirror control plane: %w", err)
	}
	n.Broker.SetMirrorAdmin(n.Mirrors) // the plane is the broker's MirrorAdmin
	nudge := n.Mirrors.Nudge
	n.rec.nudge.Store(&nudge)
	if cfg.MetricsListener != "" {
		if err = n.startMetrics(cfg.MetricsListener, cfg.MetricsMirrorPartitionLabels, cfg.Logger); err != nil {
			return nil, fmt.Errorf("starting the metrics listener (metrics.listener=%s): %w", cfg.MetricsListener, err)
		}
	}
	n.life.Start(brokerEndpoints(n.Broker.Listeners()))
	n.rebalancer = startLeaderRebalancer(cfg.LeaderRebalance, n.controller, n.log.IsController, cfg.Logger)
	if err = n.waitUnfenced(ctx, cfg.Cluster.Several()); err != nil {
		return nil, err
	}
	n.Broker.StartServing()
	return n, nil
}

// Close stops the node in the reverse order of Start: the metrics
// listener, the control plane (its fetchers first, so no mirrored append
// races the logs' close), the broker, the metadata log, the store. A
// node Start did not finish is closed as far as it got.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

func (n *Node) close() error {
	if n.life != nil {
		// Kafka's controlled shutdown first, while the node still serves
		// what it leads; a node alone skips it (nowhere to move).
		ctx, cancel := context.WithTimeout(context.Background(), n.life.cfg.ShutdownTimeout)
		if err := n.life.Shutdown(ctx); err != nil {
			n.life.cfg.Logger.Warn("controlled shutdown", "err", err)
		}
		cancel()
		n.life.Close()
	}
	n.rebalancer.close()
	if n.metricsSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n.metricsSrv.Shutdown(ctx)
		cancel()
	}
	if n.Mirrors != nil {
		n.Mirrors.Close()
	}
	if n.rec != nil {
		n.rec.halt(n.recStarted)
	}
	var errs []error
	if n.Broker != nil {
		errs = append(errs, n.Broker.Close())
	}
	if n.log != nil {
		errs = append(errs, n.log.Close())
	}
	if n.channel != nil {
		n.channel.Close()
		n.mirrorChannel.Close()
		n.lifeChannel.Close()
	}
	if n.ctlLn != nil {
		errs = append(errs, n.ctlLn.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}

// Addr is the address of the node's first listener.
func (n *Node) Addr() string { return n.Broker.Addr() }

// MetricsAddr is the address /metrics is served on, "" without a metrics
// listener.
func (n *Node) MetricsAddr() string {
	if n.metricsLn == nil {
		return ""
	}
	return n.metricsLn.Addr().String()
}

// MetricsHandler serves the node's metrics in the Prometheus format;
// partitionLabels is metrics.mirror.partition.labels.
func (n *Node) MetricsHandler(partitionLabels bool) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(n.Broker), metrics.NewFetchCollector(n.Mirrors.Fetchers(), partitionLabels),
		metrics.NewSyncCollector(n.Mirrors), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// startMetrics serves MetricsHandler as /metrics on addr.
func (n *Node) startMetrics(addr string, partitionLabels bool, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", n.MetricsHandler(partitionLabels))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "err", err)
		}
	}()
	log.Info("metrics listening", "addr", ln.Addr().String())
	n.metricsSrv, n.metricsLn = srv, ln
	return nil
}
