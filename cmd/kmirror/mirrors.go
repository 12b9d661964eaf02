package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/clientauth"
	"github.com/kmirror/kmirror/internal/props"
	"github.com/kmirror/kmirror/mirrorapi"
)

const mirrorsUsage = `Usage: kmirror mirrors --bootstrap-server HOST:PORT[,HOST:PORT...] <action> [options]

Manages the cluster mirrors of a kmirror node, like Kafka's kafka-cluster-mirrors.sh.
Exactly one action:
  --create    create a mirror (--mirror, --mirror-config FILE with bootstrap.servers)
  --start     start mirroring --topics (names or regexes matched at the source; --exclude);
              with --dry-run, print what LOG_ALIGNMENT would cut and copy, change nothing
  --stop      stop mirroring --topics (failover: the topics become writable), after
              a last sync of their group offsets and configs; prints how far
              behind the source each copy stopped
  --pause     pause --topics (they stay read-only)
  --resume    resume paused --topics
  --recover   restart failed partitions of --topics
  --delete    delete a mirror whose topics are all stopped
  --list      list the mirrors
  --describe  describe mirror partitions (--mirror to pick one, --failed for failures only);
              with --watch, per mirror progress every --interval until Ctrl-C
  --verify    compare the copy of --mirror's --topics (all without it) with the source,
              batch by batch; exit 0 identical, 1 differences, 2 not verified

Options:
`

// mirrorsFlags are the command's flags.
type mirrorsFlags struct {
	bootstrap, commandConfig, mirror, mirrorConfig, topics, exclude string
	failed, asJSON, dryRun, watch                                   bool
	timeout, interval                                               time.Duration
	watchCount                                                      int
	actions                                                         map[string]*bool
	// notes receives what is said about a table but is no row of it
	// (stderr), so scripts that parse the table keep working.
	notes io.Writer
	// --verify's (mirrors_verify.go).
	sourceBootstrap, sourceCommandConfig string
	throttle                             int64
}

func runMirrors(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mirrors", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f mirrorsFlags
	fs.StringVar(&f.bootstrap, "bootstrap-server", "", "the kmirror nodes to manage, `host:port[,host:port...]`: whichever answers (required)")
	fs.StringVar(&f.commandConfig, "command-config", "", "client properties `file`: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.* (PEM)")
	fs.StringVar(&f.mirror, "mirror", "", "the mirror `name`")
	fs.StringVar(&f.mirrorConfig, "mirror-config", "", "mirror configs properties `file` (--create)")
	fs.StringVar(&f.topics, "topics", "", "comma list of topic names or regexes")
	fs.StringVar(&f.exclude, "exclude", "", "comma list of regexes to exclude (--start)")
	fs.BoolVar(&f.failed, "failed", false, "describe failed partitions only")
	fs.BoolVar(&f.dryRun, "dry-run", false, "with --start: print per partition what it would truncate and copy, and change nothing")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON (--describe: an array of partitions, as kafka-cluster-mirrors.sh prints it)")
	fs.BoolVar(&f.watch, "watch", false, "with --describe: redraw per mirror progress (states, records to go, rate, ETA) every --interval")
	fs.DurationVar(&f.interval, "interval", time.Second, "--watch: poll every `duration`")
	fs.IntVar(&f.watchCount, "watch-count", 0, "--watch: stop after `n` polls (0: until Ctrl-C)")
	fs.DurationVar(&f.timeout, "timeout", 60*time.Second, "give up when the node has not answered within this `duration`")
	fs.StringVar(&f.sourceBootstrap, "source-bootstrap-server", "", "--verify: the source, `host:port[,host:port...]` (default: the mirror's bootstrap.servers)")
	fs.StringVar(&f.sourceCommandConfig, "source-command-config", "", "--verify: client properties `file` for the source (as --command-config)")
	fs.Int64Var(&f.throttle, "throttle", 0, "--verify: read at most this many `bytes` per second from both sides together (0: no limit)")
	f.actions = map[string]*bool{}
	for _, a := range []string{"create", "start", "stop", "pause", "resume", "recover", "delete", "list", "describe", "verify"} {
		f.actions[a] = fs.Bool(a, false, a+" (see above)")
	}
	fs.Usage = func() { fmt.Fprint(stderr, mirrorsUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	f.notes = stderr
	action, err := f.validate(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "kmirror mirrors: %v\n", err)
		return 2
	}
	if action == "verify" {
		return f.runVerify(stdout, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	if f.watch {
		// --watch runs until Ctrl-C or --watch-count; --timeout bounds
		// each poll instead.
		ctx, cancel = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	}
	defer cancel()
	if err := f.run(ctx, action, stdout); err != nil {
		fmt.Fprintf(stderr, "kmirror mirrors: %v\n", err)
		return 1
	}
	return 0
}

// validate checks the flag combination and returns the action.
func (f *mirrorsFlags) validate(extra []string) (string, error) {
	var picked []string
	for a, set := range f.actions {
		if *set {
			picked = append(picked, a)
		}
	}
	switch {
	case len(extra) > 0:
		// Naming it shows the usual slip, --topics a b for --topics a,b.
		return "", fmt.Errorf("unexpected argument %q", extra[0])
	case len(picked) != 1:
		return "", errors.New("exactly one of --create --start --stop --pause --resume --recover --delete --list --describe --verify is required")
	case f.bootstrap == "":
		return "", errors.New("--bootstrap-server is required")
	case bootstrapErr(f.bootstrap) != nil:
		return "", bootstrapErr(f.bootstrap)
	case f.timeout <= 0:
		return "", fmt.Errorf("--timeout must be positive, got %v", f.timeout)
	}
	a := picked[0]
	switch {
	case a != "list" && a != "describe" && f.mirror == "":
		return "", fmt.Errorf("--%s needs --mirror", a)
	case a == "create" && f.mirrorConfig == "":
		return "", errors.New("--create needs --mirror-config (a properties file with bootstrap.servers)")
	case (a == "start" || a == "stop" || a == "pause" || a == "resume" || a == "recover") && f.topics == "":
		return "", fmt.Errorf("--%s needs --topics", a)
	case f.exclude != "" && a != "start":
		return "", errors.New("--exclude goes with --start only")
	case f.failed && a != "describe":
		return "", errors.New("--failed goes with --describe only")
	case f.dryRun && a != "start":
		return "", errors.New("--dry-run goes with --start only")
	case f.watch && (a != "describe" || f.asJSON || f.failed):
		return "", errors.New("--watch goes with --describe only, without --json or --failed")
	case f.watch && (f.interval <= 0 || f.watchCount < 0):
		return "", fmt.Errorf("--watch needs a positive --interval and a --watch-count of at least 0, got %v and %d", f.interval, f.watchCount)
	}
	if err := f.verifyFlagsErr(a); err != nil {
		return "", err
	}
	return a, nil
}

// bootstrapErr checks a --bootstrap-server list: comma-separated
// host:port entries, as Kafka's tools take them.
func bootstrapErr(list string) error {
	for _, hp := range splitTopics(list) {
		if _, port, err := net.SplitHostPort(hp); err != nil || port == "" {
			return fmt.Errorf("--bootstrap-server: %q is not host:port", hp)
		}
	}
	if len(splitTopics(list)) == 0 {
		return errors.New("--bootstrap-server is required")
	}
	return nil
}

// splitTopics splits a comma list (topics, bootstrap servers), dropping
// blanks.
func splitTopics(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

var topicNameRe = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// client connects to the destination. --command-config takes Kafka's
// client security settings (security.protocol, sasl.*, PEM ssl.*), as
// kafka-cluster-mirrors.sh does; other client settings are ignored.
func (f *mirrorsFlags) client() (*kgo.Client, error) {
	// Every address is a seed: the request goes to whichever node
	// answers, as with Kafka's tools.
	// Only --timeout bounds a request: kgo's own read timeout (10 s for
	// requests that carry none, as the mirror RPCs) would cut off a stop
	// that answers after 10 s (it may take up to 25 s with a node down)
	// and lose its report.
	opts := []kgo.Opt{kgo.SeedBrokers(splitTopics(f.bootstrap)...), kgo.ClientID("kmirror-mirrors"),
		kgo.MaxVersions(mirrorapi.WithMirrorKeys(nil)), kgo.RequestTimeoutOverhead(readTimeout(f.timeout))}
	if f.commandConfig != "" {
		ps, err := readProps(f.commandConfig)
		if err != nil {
			return nil, err
		}
		sec := map[string]string{}
		for _, p := range ps {
			if clientauth.IsKey(p.Key) {
				sec[p.Key] = p.Value
			}
		}
		parsed, err := clientauth.Parse(sec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.commandConfig, err)
		}
		opts = append(opts, parsed.KgoOpts()...)
	}
	return kgo.NewClient(opts...)
}

// readTimeout is kgo's wait for an answer for a --timeout of d, within
// the bounds kgo accepts (it refuses to build a client outside 100 ms to
// 15 min); the command's context still ends at d.
func readTimeout(d time.Duration) time.Duration {
	return min(max(d, 100*time.Millisecond), 15*time.Minute)
}

func readProps(file string) ([]props.Property, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	ps, err := props.Parse(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return ps, nil
}

// run sends the action's request and prints the answer.
func (f *mirrorsFlags) run(ctx context.Context, action string, out io.Writer) error {
	cl, err := f.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	if f.dryRun {
		return f.runDryRun(ctx, cl, out)
	}
	if f.watch {
		return f.runWatch(ctx, cl, out)
	}
	req, err := f.request(action)
	if err != nil {
		return err
	}
	resp, err := requestMirror(ctx, cl, req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s: no answer from %s within --timeout %v: %w", mirrorapi.NameForKey(req.Key()), f.bootstrap, f.timeout, err)
		}
		return fmt.Errorf("%s: %w", mirrorapi.NameForKey(req.Key()), err)
	}
	if f.asJSON {
		if err := f.printJSON(action, resp, out); err != nil {
			return err
		}
		return responseError(resp)
	}
	if err := responseError(resp); err != nil {
		if sr, ok := resp.(*mirrorapi.StopMirrorTopicsResponse); ok {
			// The topics that did stop are reported (how far behind
			// each copy was) before the error on the others.
			printStop(out, sr, time.Now())
		}
		return err
	}
	return f.print(action, resp, out)
}

// request builds the action's request.
func (f *mirrorsFlags) request(action string) (kmsg.Request, error) {
	var names []mirrorapi.MirrorTopicsRequestTopic
	for _, t := range splitTopics(f.topics) {
		names = append(names, mirrorapi.MirrorTopicsRequestTopic{TopicName: t})
	}
	switch action {
	case "create":
		ps, err := readProps(f.mirrorConfig)
		if err != nil {
			return nil, err
		}
		r := mirrorapi.NewPtrCreateClusterMirrorRequest()
		r.MirrorName = f.mirror
		for _, p := range ps {
			v := p.Value
			r.Configs = append(r.Configs, mirrorapi.CreateClusterMirrorRequestConfig{Name: p.Key, Value: &v})
		}
		return r, nil
	case "start":
		r := mirrorapi.NewPtrStartMirrorTopicsRequest()
		r.MirrorName = f.mirror
		for _, t := range splitTopics(f.topics) {
			if topicNameRe.MatchString(t) {
				r.Topics = append(r.Topics, mirrorapi.StartMirrorTopicsRequestTopic{TopicName: t})
			} else {
				r.IncludePatterns = append(r.IncludePatterns, t)
			}
		}
		r.ExcludePatterns = splitTopics(f.exclude)
		return r, nil
	case "stop":
		r := mirrorapi.NewPtrStopMirrorTopicsRequest()
		r.MirrorName = f.mirror
		for _, t := range names {
			if topicNameRe.MatchString(t.TopicName) {
				r.Topics = append(r.Topics, t)
			} else {
				r.Patterns = append(r.Patterns, t.TopicName)
			}
		}
		return r, nil
	case "pause":
		r := mirrorapi.NewPtrPauseMirrorTopicsRequest()
		r.MirrorName, r.Topics = f.mirror, names
		return r, nil
	case "resume":
		r := mirrorapi.NewPtrResumeMirrorTopicsRequest()
		r.MirrorName, r.Topics = f.mirror, names
		return r, nil
	case "recover":
		r := mirrorapi.NewPtrRecoverMirrorTopicsRequest()
		r.MirrorName, r.Topics = f.mirror, names
		return r, nil
	case "delete":
		r := mirrorapi.NewPtrDeleteClusterMirrorRequest()
		r.MirrorName = f.mirror
		return r, nil
	case "list":
		r := mirrorapi.NewPtrListClusterMirrorsRequest()
		r.IncludeTopicNames = true
		return r, nil
	case "describe":
		r := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
		if f.mirror != "" {
			r.MirrorNames = []string{f.mirror}
		}
		return r, nil
	}
	return nil, fmt.Errorf("unknown action %s", action)
}

// requestMirror sends req and, while the answer says the controller
// moved (controllerMoved: nothing was changed), sends it again after a
// metadata refresh, until ctx ends; then the last answer is returned.
// WHY: a controller election takes about a second, and an operator's
// failover must not fail on one. kgo retries NOT_CONTROLLER only for the
// admin requests it knows, not for the mirror RPCs.
func requestMirror(ctx context.Context, cl *kgo.Client, req kmsg.Request) (kmsg.Response, error) {
	for {
		resp, err := cl.Request(ctx, req)
		if err != nil || !controllerMoved(resp) {
			return resp, err
		}
		cl.ForceMetadataRefresh()
		select {
		case <-ctx.Done():
			return resp, nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// controllerMoved reports whether resp is NOT_CONTROLLER as a whole, or
// for every topic it names: the metadata log refused the request's
// writes, so nothing of it was done and it can be sent again. An answer
// that did some topics is never sent again (their reports, a stop's
// above all, would be lost to a second answer).
func controllerMoved(resp kmsg.Response) bool {
	moved := kerr.NotController.Code
	if a, ok := actionAnswerOf(resp); ok {
		if a.code != 0 && a.code != moved {
			return false
		}
		// A topic answered without error was done, whatever the
		// top-level code says (a stop whose last write was refused).
		for _, t := range a.topics {
			if t.ErrorCode != moved && (a.code != moved || t.ErrorCode == 0) {
				return false
			}
		}
		return a.code == moved || len(a.topics) > 0
	}
	switch r := resp.(type) {
	case *mirrorapi.ListClusterMirrorsResponse:
		return r.ErrorCode == moved
	case *mirrorapi.DescribeClusterMirrorsResponse: // reads only: always safe again
		for _, m := range r.Mirrors {
			if m.ErrorCode == moved {
				return true
			}
		}
	}
	return false
}

// responseError turns the response's error codes into one line.
func responseError(resp kmsg.Response) error {
	top := func(code int16, msg *string) error {
		if code == 0 {
			return nil
		}
		text := mirrorapi.ErrorName(code)
		if msg != nil && *msg != "" {
			text += ": " + *msg
		}
		return errors.New(text)
	}
	topics := func(code int16, msg *string, ts []mirrorapi.MirrorTopicsResponseTopic) error {
		if err := top(code, msg); err != nil {
			return err
		}
		var errs []string
		for _, t := range ts {
			if t.ErrorCode != 0 {
				m := mirrorapi.ErrorName(t.ErrorCode)
				if t.ErrorMessage != nil {
					m += ": " + *t.ErrorMessage
				}
				errs = append(errs, t.Name+": "+m)
			}
		}
		if len(errs) > 0 {
			return errors.New(strings.Join(errs, "; "))
		}
		return nil
	}
	if a, ok := actionAnswerOf(resp); ok {
		return topics(a.code, a.msg, a.topics)
	}
	switch r := resp.(type) {
	case *mirrorapi.ListClusterMirrorsResponse:
		return top(r.ErrorCode, nil)
	case *mirrorapi.DescribeClusterMirrorsResponse:
		for _, m := range r.Mirrors {
			if err := top(m.ErrorCode, m.ErrorMessage); err != nil {
				return fmt.Errorf("%s: %w", m.MirrorName, err)
			}
		}
	}
	return nil
}

// print writes the human form: SPEC.md section 8's columns (for
// --describe, see mirrors_describe.go).
func (f *mirrorsFlags) print(action string, resp kmsg.Response, out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	switch r := resp.(type) {
	case *mirrorapi.ListClusterMirrorsResponse:
		fmt.Fprintln(tw, "MIRROR\tTOPICS\tSOURCE-CLUSTER-ID\tSOURCE-BOOTSTRAP-SERVER")
		for _, m := range r.Mirrors {
			id := ""
			if m.SourceClusterID != nil {
				id = *m.SourceClusterID
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.MirrorName, strings.Join(m.TopicNames, ","), id, m.SourceBootstrap)
		}
	case *mirrorapi.DescribeClusterMirrorsResponse:
		rows := describeRows(r, f.failed)
		printDescribe(tw, rows, f.failed)
		if f.notes != nil {
			printDescribeNotes(f.notes, rows)
		}
	case *mirrorapi.StopMirrorTopicsResponse:
		printStop(out, r, time.Now())
	default:
		fmt.Fprintf(out, "%s: done\n", action)
	}
	return nil
}

// printStop writes a stop's report: per stopped topic whether the final
// sync ran and, summed over its partitions, the source's end offset (as
// last known), the copy's end and how far behind the copy was; then a
// line per topic whose final sync did not run or failed, saying why, and
// a WARNING line per topic whose copy lacks records the source held (or
// may: its source offsets are unknown). Topics the stop refused are left
// to the error line. The exit status does not change: the stop itself
// succeeded, and what was left behind is reported, not undone.
func printStop(out io.Writer, r *mirrorapi.StopMirrorTopicsResponse, now time.Time) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tFINAL-SYNC\tSOURCE-OFFSET\tDESTINATION-OFFSET\tBEHIND")
	var notes []string
	for _, t := range r.Topics {
		if t.ErrorCode != 0 {
			continue
		}
		var src, dst, behind, unknown int64
		oldest := int64(-1)
		for _, p := range t.Partitions {
			if p.SourceOffset < 0 || p.Lag < 0 {
				unknown++
			} else {
				src, behind = src+p.SourceOffset, behind+p.Lag
			}
			dst += max(p.DestinationOffset, 0)
			if p.SourceOffsetMillis >= 0 && (oldest < 0 || p.SourceOffsetMillis < oldest) {
				oldest = p.SourceOffsetMillis
			}
		}
		srcCell, behindCell, dstCell := fmt.Sprint(src), fmt.Sprint(behind), fmt.Sprint(dst)
		if unknown > 0 || len(t.Partitions) == 0 {
			srcCell, behindCell = "unknown", "unknown"
		}
		if len(t.Partitions) == 0 {
			dstCell = "unknown"
		}
		status := map[int8]string{mirrorapi.FinalSyncDone: "done", mirrorapi.FinalSyncSkipped: "skipped",
			mirrorapi.FinalSyncFailed: "failed"}[t.FinalSync]
		if status == "" {
			status = "unknown"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, status, srcCell, dstCell, behindCell)

		switch {
		case t.FinalSync == mirrorapi.FinalSyncUnknown:
			notes = append(notes, t.Name+": the node reports no final sync and no offsets (a kmirror before the report)")
		case t.FinalSync != mirrorapi.FinalSyncDone:
			note := fmt.Sprintf("%s: final sync %s", t.Name, status)
			if t.FinalSyncMessage != nil {
				note += ": " + *t.FinalSyncMessage
			}
			if oldest >= 0 && len(t.Partitions) > 0 {
				note += fmt.Sprintf("; source offsets as last known, read %v before this report",
					now.Sub(time.UnixMilli(oldest)).Round(time.Second))
			}
			notes = append(notes, note)
		}
		if behind > 0 {
			notes = append(notes, fmt.Sprintf("WARNING: %s: the copy stopped %d records behind the source; they are not on this node", t.Name, behind))
		}
		if unknown > 0 && len(t.Partitions) > 0 {
			notes = append(notes, fmt.Sprintf("WARNING: %s: the source offset of %d of %d partitions is unknown; the copy may lack records the source held",
				t.Name, unknown, len(t.Partitions)))
		}
	}
	tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(out, n)
	}
}
