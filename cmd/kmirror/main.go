// Command kmirror is the single kmirror binary: serve runs a node, mirrors
// manages its cluster mirrors, storage inspects a node's log dirs and
// rebuilds its topic registry from them, demo shows a mirror, a failover and a
// failback end to end, bench measures mirroring (perf/mirror), version
// prints the build.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `kmirror: a Kafka-compatible broker with cluster mirroring (KIP-1279) built in.

Usage:
  kmirror <command> [flags]

Commands:
  serve      run a kmirror node (a Kafka-compatible broker)
  mirrors    manage cluster mirrors (like kafka-cluster-mirrors.sh)
  storage    inspect a node's log dirs (info), rebuild its topic registry from them (rebuild)
  demo       mirror, fail over and fail back between two local nodes (make demo)
  bench      measure mirroring end to end: kmirror vs a fetch drain vs a consume/produce pipeline
  version    print the version and build information
  help       print this help

Run 'kmirror <command> --help' for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a command line and returns the process exit code:
// 0 success, 2 usage error, 1 any other failure.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version":
		return runVersion(args[1:], stdout, stderr)
	case "serve":
		return runServe(args[1:], stdout, stderr)
	case "mirrors":
		return runMirrors(args[1:], stdout, stderr)
	case "storage":
		return runStorage(args[1:], stdout, stderr)
	case "demo":
		return runDemo(args[1:], stdout, stderr)
	case "bench":
		return runBench(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "kmirror: unknown command %q\n\n%s", args[0], usage)
	return 2
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: kmirror version\n\nPrints the kmirror version, the Go version and the platform.")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kmirror version: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	v := version
	if info, ok := debug.ReadBuildInfo(); ok && v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	fmt.Fprintf(stdout, "kmirror %s (%s, %s/%s)\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
