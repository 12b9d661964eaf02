package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kmirror/kmirror/broker"
	"github.com/kmirror/kmirror/node"
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

// serve runs a configured node until ctx ends.
func serve(ctx context.Context, cfg broker.Config, stdout io.Writer, log *slog.Logger) int {
	n, err := node.StartContext(ctx, cfg, node.MirrorConfig(cfg))
	if err != nil {
		log.Error("starting the node", "err", err)
		return 1
	}
	fmt.Fprintf(stdout, "kmirror serving on %s (cluster id %s)\n", n.Addr(), n.Broker.ClusterID())
	<-ctx.Done()
	log.Info("shutting down")
	if err := n.Close(); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	return 0
}
