// Package benchrun holds what the perf/ programs that run whole nodes
// share: the run of one benchmark with its report and progress log, and
// the reading of a started `kmirror serve`'s address from its stdout.
package benchrun

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Report is a benchmark's report as Run writes it.
type Report interface {
	// Fail records an error that ended the run early; the report still
	// holds what was measured before it.
	Fail(msg string)
	// Write writes the report.
	Write(w io.Writer)
}

// Run runs bench until it returns or SIGINT/SIGTERM, with a progress log
// to stderr, then writes rep to stdout and, when out is not "", rep and
// the progress log to the file out. name prefixes its own messages. It
// returns the program's exit status: 1 when bench failed or out could not
// be written.
func Run(name, out string, stdout, stderr io.Writer, rep Report, bench func(ctx context.Context, log *slog.Logger) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var logBuf strings.Builder
	log := slog.New(slog.NewTextHandler(io.MultiWriter(stderr, &logBuf), nil))
	err := bench(ctx, log)
	if err != nil {
		rep.Fail(err.Error())
		log.Error("benchmark failed", "err", err)
	}
	rep.Write(stdout)
	if out != "" {
		f, ferr := os.Create(out)
		if ferr == nil {
			rep.Write(f)
			fmt.Fprintf(f, "\n# progress log\n\n%s", logBuf.String())
			ferr = f.Close()
		}
		if ferr != nil {
			fmt.Fprintf(stderr, "%s: writing %s: %v\n", name, out, ferr)
			return 1
		}
	}
	if err != nil {
		return 1
	}
	return 0
}

// ServingAddr reads a `kmirror serve`'s stdout and sends on the channel
// the address of its "kmirror serving on <addr>" line, then drains the
// rest so the child never blocks on a write. The channel gets at most one
// address and is never closed.
func ServingAddr(stdout io.Reader) <-chan string {
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), " serving on "); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					select {
					case addr <- f[0]:
					default:
					}
				}
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	return addr
}

// Tail is the last n bytes of s (a child's log, in an error).
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
