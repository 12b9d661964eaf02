package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/perf/mirror"
)

// sizeFlag is a byte count flag that takes unit suffixes (1GiB, 512KiB,
// 10MB; see mirror.ParseBytes), bounded by max.
type sizeFlag struct {
	v   *int64
	max int64
}

func (s sizeFlag) String() string {
	if s.v == nil {
		return ""
	}
	return mirror.FormatBytes(*s.v)
}

func (s sizeFlag) Set(v string) error {
	n, err := mirror.ParseBytes(v)
	if err != nil {
		return err
	}
	if n > s.max {
		return fmt.Errorf("%s is more than %s", v, mirror.FormatBytes(s.max))
	}
	*s.v = n
	return nil
}

// benchConfig is a parsed `kmirror bench` command line.
type benchConfig struct {
	opts mirror.Options
	// sourceProcess runs a kmirror or kfake source as a child process.
	sourceProcess bool
	// kfakeSource: this process is the kfake source child of a parent
	// bench run.
	kfakeSource bool
	logLevel    slog.Level
}

const benchUsage = `Usage: kmirror bench [flags]

Fills a source topic once (generated JSON records, as real topics compress),
then copies it with each mode and prints one row per mode:

  mirror    kmirror's fetchers into a kmirror node (the product)
  drain     the same Fetch requests over a plain socket, data discarded:
            the ceiling of any fetch-based copier
  pipeline  a kgo consumer on the source and a kgo producer (recompressing)
            into a kmirror node: the MirrorMaker 2 cost model

The source is a kmirror node (default) or kfake, run as a child process of
this binary so that CPU and RSS are the measured side's alone, or an
external cluster (--source). Sizes take units: 1GiB, 512KiB, 4M, 10MB.

Flags:
`

// parseBenchFlags parses args. It returns the config and -1, or an exit
// code: 0 after --help, 2 for a usage error (the message names the flag).
func parseBenchFlags(args []string, stderr io.Writer) (benchConfig, int) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, benchUsage)
		fs.PrintDefaults()
	}
	var (
		cfg                          benchConfig
		recordSize, total, throttle  int64 = mirror.DefaultRecordSize, mirror.DefaultBytes, 0
		fetchMax, partMax            int64 = mirror.DefaultFetchMaxBytes, mirror.DefaultPartitionMaxBytes
		mode, codec, kind, level     string
		partitions, fetchers         int
		maxWait, duration            time.Duration
		source, topic, cpuprofile    string
		consumer, verify, sourceProc bool
		kfakeSource                  bool
	)
	fs.IntVar(&partitions, "partitions", mirror.DefaultPartitions, "partitions of the source topic")
	fs.Var(sizeFlag{&recordSize, 1 << 20}, "record-size", "bytes of each record value")
	fs.StringVar(&codec, "codec", mirror.DefaultCodec, "compression of the source batches: none, gzip, snappy, lz4 or zstd")
	fs.Var(sizeFlag{&total, math.MaxInt64}, "bytes", "total uncompressed record bytes filled into the source")
	fs.IntVar(&fetchers, "fetchers", mirror.DefaultFetchers, "fetchers (connections) per source broker: mirror.num.replica.fetchers")
	fs.Var(sizeFlag{&fetchMax, math.MaxInt32}, "fetch-max-bytes", "Fetch response max bytes (mirror.fetch.response.max.bytes)")
	fs.Var(sizeFlag{&partMax, math.MaxInt32}, "partition-max-bytes", "Fetch max bytes per partition (mirror.fetch.max.bytes)")
	fs.DurationVar(&maxWait, "max-wait", mirror.DefaultMaxWait, "Fetch max wait (mirror.fetch.wait.max.ms)")
	fs.Var(sizeFlag{&throttle, math.MaxInt64}, "throttle", "mirror mode only: bytes per second (mirror.replication.throttled.rate), 0 unlimited")
	fs.DurationVar(&duration, "duration", 0, "end each mode after this long even if not caught up; 0 runs until caught up")
	fs.StringVar(&source, "source", "", "bootstrap `host:port[,host:port]` of an external source cluster (a topic is created and deleted)")
	fs.StringVar(&kind, "source-kind", mirror.SourceKmirror, "source to start when --source is not set: kmirror or kfake")
	fs.BoolVar(&sourceProc, "source-process", true, "run the kmirror or kfake source in a child process of this binary; false runs it in this process (CPU and RSS then include it)")
	fs.StringVar(&mode, "mode", "all", "mirror, drain, pipeline, a comma list of them, or all")
	fs.BoolVar(&consumer, "consumer", false, "also read the copy with a kgo consumer on the mirror node (mirror and pipeline modes)")
	fs.BoolVar(&verify, "verify", false, "after each mode, check the copy against the source (mirror: byte for byte)")
	fs.StringVar(&topic, "topic", mirror.DefaultTopic, "source topic name")
	fs.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of each mode's measured phase to `file` (file-<mode>.ext with several modes)")
	fs.StringVar(&level, "log-level", "info", "progress log `level` on stderr: debug, info, warn or error")
	fs.BoolVar(&kfakeSource, "kfake-source", false, "internal: serve a kfake source for a parent bench run until stdin closes")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, 0
		}
		return cfg, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kmirror bench: unexpected argument %q\n", fs.Arg(0))
		return cfg, 2
	}
	usageErr := func(format string, args ...any) (benchConfig, int) {
		fmt.Fprintf(stderr, "kmirror bench: "+format+"\n", args...)
		return cfg, 2
	}
	if err := cfg.logLevel.UnmarshalText([]byte(level)); err != nil {
		return usageErr("--log-level: %v", err)
	}
	cfg.kfakeSource, cfg.sourceProcess = kfakeSource, sourceProc
	modes, err := mirror.ParseModes(mode)
	if err != nil {
		return usageErr("--mode: %v", err)
	}
	if strings.TrimSpace(topic) == "" {
		return usageErr("--topic: must not be empty")
	}
	cfg.opts = mirror.Options{
		Partitions:        partitions,
		RecordSize:        int(recordSize),
		Codec:             codec,
		Bytes:             total,
		Topic:             topic,
		Fetchers:          fetchers,
		FetchMaxBytes:     int32(fetchMax),
		PartitionMaxBytes: int32(partMax),
		MaxWait:           maxWait,
		Throttle:          throttle,
		Duration:          duration,
		Source:            strings.TrimSpace(source),
		SourceKind:        kind,
		Modes:             modes,
		Consumer:          consumer,
		Verify:            verify,
		CPUProfile:        cpuprofile,
	}
	if err := cfg.opts.Validate(); err != nil {
		return usageErr("%s", strings.TrimPrefix(err.Error(), mirror.ErrInvalidOptions.Error()+": "))
	}
	return cfg, -1
}

// runBench is `kmirror bench`: the end-to-end mirroring benchmark
// (perf/mirror).
func runBench(args []string, stdout, stderr io.Writer) int {
	cfg, code := parseBenchFlags(args, stderr)
	if code >= 0 {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cfg.kfakeSource {
		if err := mirror.ServeKfake(ctx, os.Stdin, stdout); err != nil {
			fmt.Fprintf(stderr, "kmirror bench: kfake source: %v\n", err)
			return 1
		}
		return 0
	}
	opts := cfg.opts
	opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	if cfg.sourceProcess && opts.Source == "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "kmirror bench: finding this executable for the source process: %v\n", err)
			return 1
		}
		opts.SourceExe = exe
	}
	res, err := mirror.Run(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror bench: %v\n", err)
		return 1
	}
	res.WriteTable(stdout)
	return 0
}
