package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirrorapi"
)

// `kmirror mirrors --describe --watch` (issue 18 item 4): live progress.
// Every --interval (1 s) the CLI sends DescribeClusterMirrors and prints a
// block, one row per mirror:
//
//	# 2026-12-02T00:10:03Z every 1s
//	MIRROR  PARTITIONS  STATES       RECORDS-TO-GO  RATE      ETA   MAX-LAG-SECONDS
//	dr      3           MIRRORING=3  1200           5321.4/s  0.2s  0.3s
//
// STATES counts the partitions per state. RECORDS-TO-GO is the sum of
// the partitions' lags ("+?" after it when some lag is unknown, "-" when
// none is known). RATE is the copy rate, records (offsets) per second by
// which the destination offsets advanced over the last watchWindow polls.
// ETA is the time to lag 0 at the rate the lag itself shrank over that
// window (the copy rate minus what the source wrote meanwhile): "-" while
// the lag does not shrink or is partly unknown, "0s" at lag 0.
// MAX-LAG-SECONDS is the largest LAG-SECONDS (the RPO bound) among the
// partitions that have one. Bytes to go are not shown:
// DescribeClusterMirrors reports offsets only.
//
// On a terminal each block replaces the last (ANSI clear); otherwise the
// blocks are appended, each after its timestamp line, so a log or a pipe
// keeps them all. It stops on Ctrl-C (SIGINT, SIGTERM) or after
// --watch-count blocks; --timeout bounds each poll. A poll that fails
// prints its error in its block and the watch goes on.

// watchWindow is how many polls the rate and ETA are computed over.
const watchWindow = 10

// watchKey names a partition of a mirror.
type watchKey struct {
	topic     string
	partition int32
}

// watchPoll is what one poll said of one mirror's partitions: destination
// offsets and lags, known ones only.
type watchPoll struct {
	at       time.Time
	dst, lag map[watchKey]int64
}

// watchRow is one mirror's row of a block.
type watchRow struct {
	Mirror     string
	Partitions int
	States     map[string]int
	// ToGo sums the known lags; Unknown counts the partitions whose lag
	// is unknown.
	ToGo    int64
	Unknown int
	// Rate (records/s) is known from the second poll on; ETA when the
	// lag is known and shrinking, or 0.
	Rate      float64
	RateKnown bool
	ETA       time.Duration
	ETAKnown  bool
	// MaxLag is the largest lag in seconds (LAG-SECONDS, the RPO), -1 if
	// none is known.
	MaxLag time.Duration
}

// watcher keeps the last polls of each mirror.
type watcher struct {
	polls map[string][]watchPoll
}

func newWatcher() *watcher { return &watcher{polls: map[string][]watchPoll{}} }

// observe adds a poll taken at now and returns a row per mirror, by name.
func (w *watcher) observe(r *mirrorapi.DescribeClusterMirrorsResponse, now time.Time) []watchRow {
	var rows []watchRow
	for _, m := range r.Mirrors {
		if m.ErrorCode != 0 {
			continue
		}
		row := watchRow{Mirror: m.MirrorName, States: map[string]int{}, MaxLag: -1}
		poll := watchPoll{at: now, dst: map[watchKey]int64{}, lag: map[watchKey]int64{}}
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				k := watchKey{t.TopicName, p.PartitionIndex}
				row.Partitions++
				row.States[p.StateValue]++
				if p.DestinationOffset >= 0 {
					poll.dst[k] = p.DestinationOffset
				}
				if p.Lag >= 0 {
					poll.lag[k] = p.Lag
					row.ToGo += p.Lag
				} else {
					row.Unknown++
				}
				if p.LagMillis >= 0 {
					row.MaxLag = max(row.MaxLag, time.Duration(p.LagMillis)*time.Millisecond)
				}
			}
		}
		polls := append(w.polls[m.MirrorName], poll)
		if len(polls) > watchWindow {
			polls = polls[len(polls)-watchWindow:]
		}
		w.polls[m.MirrorName] = polls
		row.Rate, row.RateKnown, row.ETA, row.ETAKnown = progress(polls[0], poll, row.ToGo, row.Unknown)
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b watchRow) int { return strings.Compare(a.Mirror, b.Mirror) })
	return rows
}

// progress is the copy rate and the time to lag 0 between polls from and
// to, over the partitions both know (a partition added or gone in between
// counts for neither). toGo and unknown are to's lag sum and unknown count.
func progress(from, to watchPoll, toGo int64, unknown int) (rate float64, rateKnown bool, eta time.Duration, etaKnown bool) {
	if unknown == 0 && toGo == 0 {
		eta, etaKnown = 0, true
	}
	dt := to.at.Sub(from.at).Seconds()
	if dt <= 0 {
		return 0, false, eta, etaKnown
	}
	var copied, shrunk int64
	for k, d := range to.dst {
		if d0, ok := from.dst[k]; ok {
			copied += max(d-d0, 0)
		}
	}
	for k, l := range to.lag {
		if l0, ok := from.lag[k]; ok {
			shrunk += l0 - l
		}
	}
	rate = float64(copied) / dt
	if unknown == 0 && toGo > 0 && shrunk > 0 {
		eta, etaKnown = time.Duration(float64(toGo)/(float64(shrunk)/dt)*float64(time.Second)), true
	}
	return rate, true, eta, etaKnown
}

// stateOrder is the order of the STATES cell: the partition states in
// the order a partition goes through them; others after, by name.
var stateOrder = []string{"LOG_ALIGNMENT", "EPOCH_FENCING", "ULE_RECOVERY", "MIRRORING", "PAUSING", "PAUSED",
	"STOPPING", "STOPPED", "FAILED"}

func statesCell(states map[string]int) string {
	names := make([]string, 0, len(states))
	for s := range states {
		names = append(names, s)
	}
	rank := func(s string) int {
		if i := slices.Index(stateOrder, s); i >= 0 {
			return i
		}
		return len(stateOrder)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a, b)) })
	var parts []string
	for _, s := range names {
		parts = append(parts, s+"="+strconv.Itoa(states[s]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// rateCell prints records per second: tenths below 100.
func rateCell(r float64) string {
	if r < 100 {
		return strconv.FormatFloat(r, 'f', 1, 64) + "/s"
	}
	return strconv.FormatFloat(r, 'f', 0, 64) + "/s"
}

// renderWatch writes one block: the clear sequence on a terminal, the
// timestamp line, then the table, or the poll's error.
func renderWatch(out io.Writer, rows []watchRow, pollErr error, now time.Time, interval time.Duration, term bool) {
	if term {
		fmt.Fprint(out, "\x1b[H\x1b[2J") // cursor home, clear screen
	}
	fmt.Fprintf(out, "# %s every %v\n", now.UTC().Format(time.RFC3339), interval)
	if pollErr != nil {
		fmt.Fprintf(out, "error: %v\n", pollErr)
	} else {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MIRROR\tPARTITIONS\tSTATES\tRECORDS-TO-GO\tRATE\tETA\tMAX-LAG-SECONDS")
		for _, r := range rows {
			toGo := strconv.FormatInt(r.ToGo, 10)
			switch {
			case r.Unknown == r.Partitions && r.Partitions > 0:
				toGo = "-"
			case r.Unknown > 0:
				toGo += "+?"
			}
			rate, eta, age := "-", "-", "-"
			if r.RateKnown {
				rate = rateCell(r.Rate)
			}
			switch {
			case r.ETAKnown && r.ETA == 0:
				eta = "0s" // caught up
			case r.ETAKnown:
				eta = formatAge(r.ETA)
			}
			if r.MaxLag >= 0 {
				age = formatAge(r.MaxLag)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Mirror, r.Partitions, statesCell(r.States), toGo, rate, eta, age)
		}
		tw.Flush()
	}
	if !term {
		fmt.Fprintln(out)
	}
}

// isTerminal reports whether w is a terminal, without a dependency: a
// character device (a tty; also /dev/null, where the redraw codes do no
// harm), unless TERM is "dumb".
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// runWatch polls and prints until ctx ends or --watch-count blocks are
// out; a Ctrl-C is a normal end.
func (f *mirrorsFlags) runWatch(ctx context.Context, cl kmsg.Requestor, out io.Writer) error {
	term := isTerminal(out)
	w := newWatcher()
	req, err := f.request("describe")
	if err != nil {
		return err
	}
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	for n := 0; f.watchCount == 0 || n < f.watchCount; n++ {
		if n > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
		pctx, cancel := context.WithTimeout(ctx, f.timeout)
		resp, err := cl.Request(pctx, req)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		now := time.Now()
		var rows []watchRow
		if err == nil {
			err = responseError(resp)
		}
		if err == nil {
			if dr, ok := resp.(*mirrorapi.DescribeClusterMirrorsResponse); ok {
				rows = w.observe(dr, now)
			} else {
				err = fmt.Errorf("DescribeClusterMirrors: answered with %T", resp)
			}
		}
		renderWatch(out, rows, err, now, f.interval, term)
	}
	return nil
}
