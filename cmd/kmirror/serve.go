package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/control"
	"github.com/kmirror/kmirror/metrics"
)

// overrideFlags collects repeated --override key=value flags.
type overrideFlags []string

func (o *overrideFlags) String() string { return strings.Join(*o, ",") }

func (o *overrideFlags) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("want key=value, got %q", v)
	}
	*o = append(*o, v)
	return nil
}

// runServe is `kmirror serve`: load the configuration, start the broker and
// the metrics listener, run until SIGINT or SIGTERM, then shut down
// cleanly (every log closed with its clean-shutdown marker).
func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("config", "", "Kafka-style server.properties `file` (optional)")
	var overrides overrideFlags
	fs.Var(&overrides, "override", "a setting as `key=value`, repeatable; wins over the file")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kmirror serve [--config server.properties] [--override key=value]...\n\n"+
			"Runs a kmirror node. With no file it listens on PLAINTEXT://127.0.0.1:9092 and keeps\n"+
			"its data in %s.\n\nFlags:\n", broker.DefaultLogDir)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nSettings (in the file or with --override):\n%s", serveConfigHelp())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kmirror serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "kmirror serve: --log-level: %v\n", err)
		return 2
	}
	cfg, ignored, err := loadServeConfig(*file, overrides)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror serve: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.Logger = log
	logIgnored(log, ignored)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return serve(ctx, cfg, stdout, log)
}

// controlConfig maps the node's mirror settings onto the control plane's
// config, whose zero values mean defaults and negative ones "off".
func controlConfig(cfg broker.Config, log *slog.Logger) control.Config {
	cc := control.Config{Logger: log, RefreshInterval: cfg.Mirror.MetadataRefresh,
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

// serve runs a configured node until ctx ends.
func serve(ctx context.Context, cfg broker.Config, stdout io.Writer, log *slog.Logger) int {
	cfg.DeferServing = true // until the control plane is wired
	b, err := broker.New(cfg)
	if err != nil {
		log.Error("starting the broker", "err", err)
		return 1
	}
	ctl, err := control.New(b, controlConfig(cfg, log))
	if err != nil {
		log.Error("starting the mirror control plane", "err", err)
		b.Close()
		return 1
	}
	b.SetMirrorAdmin(ctl)
	b.StartServing()
	var metricsSrv *http.Server
	if cfg.MetricsListener != "" {
		if metricsSrv, err = startMetrics(cfg.MetricsListener, metricsHandler(b, ctl, cfg.MetricsMirrorPartitionLabels), log); err != nil {
			log.Error("starting the metrics listener", "setting", "metrics.listener", "err", err)
			ctl.Close()
			b.Close()
			return 1
		}
	}
	fmt.Fprintf(stdout, "kmirror serving on %s (cluster id %s)\n", b.Addr(), b.ClusterID())
	<-ctx.Done()
	log.Info("shutting down")
	code := 0
	if metricsSrv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		metricsSrv.Shutdown(sctx)
		cancel()
	}
	ctl.Close()
	if err := b.Close(); err != nil {
		log.Error("shutdown", "err", err)
		code = 1
	}
	return code
}

// metricsHandler serves the node's metrics; partitionLabels is
// metrics.mirror.partition.labels.
func metricsHandler(b *broker.Broker, ctl *control.Plane, partitionLabels bool) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(b), metrics.NewFetchCollector(ctl.Fetchers(), partitionLabels), metrics.NewSyncCollector(ctl), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// startMetrics serves h as /metrics for Prometheus on addr.
func startMetrics(addr string, h http.Handler, log *slog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "err", err)
		}
	}()
	log.Info("metrics listening", "addr", ln.Addr().String())
	return srv, nil
}
