package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/fetch"
	"github.com/kmirror/kmirror/internal/clientauth"
	"github.com/kmirror/kmirror/internal/pattern"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/verify"
)

// `kmirror mirrors --verify --mirror M [--topics ...] [--json]
// [--throttle BYTES/s]` (issue 18 item 1): the byte-level audit of a
// mirror's copy against its source, done by package verify.
//
// The command reads the mirror from the destination (--bootstrap-server):
// ListClusterMirrors for its source's bootstrap.servers and cluster id,
// DescribeClusterMirrors for its topics, partitions and states (a STOPPED
// partition's offset mirroring stopped at bounds what is compared), and
// the topics' cleanup.policy. The source is reached at the mirror's
// bootstrap.servers unless --source-bootstrap-server says otherwise; its
// credentials are not read from the node (they may be sealed there), so a
// source that needs them needs --source-command-config, the client
// properties the mirror's own security settings would be. The source must
// answer with the mirror's cluster id: a verify against another cluster
// would prove nothing.
//
// Output: one row per partition and a summary line (stdout); notes and
// per-partition errors go to stderr, as --describe's notes do. --json
// prints an array of verifyRow. Exit status: 0 when every partition is
// identical over what was compared, 1 when any differs (even if others
// could not be verified: a difference is the finding), 2 when something
// could not be verified and nothing differs.

// Exit statuses of --verify.
const (
	verifyIdentical = 0
	verifyDiffers   = 1
	verifyFailed    = 2
)

// verifyRow is one partition of --verify --json.
type verifyRow struct {
	Mirror           string  `json:"mirror"`
	Topic            string  `json:"topic"`
	Partition        int32   `json:"partition"`
	Status           string  `json:"status"`
	ComparedBatches  int64   `json:"comparedBatches"`
	ComparedBytes    int64   `json:"comparedBytes"`
	DifferingBatches int64   `json:"differingBatches"`
	FirstDiff        *int64  `json:"firstDiff"`
	ComparedFrom     int64   `json:"comparedFrom"`
	ComparedTo       int64   `json:"comparedTo"`
	OnlyInCopy       []Range `json:"onlyInCopy"`
	MissingInCopy    []Range `json:"missingInCopy"`
	NotCopied        []Range `json:"notCopied"`
	// RangesOmitted counts the ranges left out of the three lists
	// (verify keeps eight of each kind).
	RangesOmitted       int      `json:"rangesOmitted"`
	SourceLogStart      int64    `json:"sourceLogStart"`
	SourceHighWatermark int64    `json:"sourceHighWatermark"`
	CopyLogStart        int64    `json:"copyLogStart"`
	CopyHighWatermark   int64    `json:"copyHighWatermark"`
	StoppedAt           *int64   `json:"stoppedAt"`
	Compacted           bool     `json:"compacted"`
	Notes               []string `json:"notes"`
	Error               *string  `json:"error"`
}

// Range is verify.Range in the JSON.
type Range = verify.Range

// verifyPlan is what the destination says about the mirror.
type verifyPlan struct {
	bootstrap       []string
	sourceClusterID string
	partitions      []verify.Partition
}

// runVerify runs --verify and returns the exit status.
func (f *mirrorsFlags) runVerify(stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "kmirror mirrors: %v\n", err)
		return verifyFailed
	}
	// No deadline for the run: a large topic takes as long as it takes
	// (at --throttle). --timeout bounds each request.
	ctx := context.Background()
	dst, err := f.client()
	if err != nil {
		return fail(err)
	}
	defer dst.Close()
	plan, err := f.verifyPlan(ctx, dst)
	if err != nil {
		return fail(err)
	}
	src, err := f.sourceClient(ctx, plan)
	if err != nil {
		return fail(err)
	}
	defer src.Close()
	// The fetches' raw connections carry the same security as the two
	// clients (both files were read once already, so they parse).
	srcSec, err := securityOf(f.sourceCommandConfig)
	if err != nil {
		return fail(err)
	}
	dstSec, err := securityOf(f.commandConfig)
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	results, err := verify.Run(ctx, verify.Config{Source: src, Copy: dst, Partitions: plan.partitions,
		SourceConn: fetch.ConnConfig{ClientID: verifyClientID, TLS: srcSec.TLS, SASL: srcSec.SASL},
		CopyConn:   fetch.ConnConfig{ClientID: verifyClientID, TLS: dstSec.TLS, SASL: dstSec.SASL},
		Throttle:   f.throttle, RequestTimeout: f.timeout})
	if err != nil {
		return fail(err)
	}
	took := time.Since(start)
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(verifyRows(f.mirror, results)); err != nil {
			return fail(err)
		}
	} else {
		printVerify(stdout, f.mirror, results, took)
		printVerifyNotes(stderr, results)
	}
	return verifyExit(results)
}

// verifyExit is the exit status of results.
func verifyExit(results []verify.Result) int {
	code := verifyIdentical
	for _, r := range results {
		switch r.Status {
		case verify.Differs:
			return verifyDiffers
		case verify.Failed:
			code = verifyFailed
		}
	}
	return code
}

// verifyPlan asks the destination for the mirror's source and the
// partitions to verify (--topics: names or full-match regexes among the
// mirror's topics; all of them without it).
func (f *mirrorsFlags) verifyPlan(ctx context.Context, dst *kgo.Client) (verifyPlan, error) {
	rctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	var plan verifyPlan
	lreq := mirrorapi.NewPtrListClusterMirrorsRequest()
	lresp, err := dst.Request(rctx, lreq)
	if err != nil {
		return plan, fmt.Errorf("ListClusterMirrors from %s: %w", f.bootstrap, err)
	}
	if err := responseError(lresp); err != nil {
		return plan, fmt.Errorf("ListClusterMirrors: %w", err)
	}
	found := false
	for _, m := range lresp.(*mirrorapi.ListClusterMirrorsResponse).Mirrors {
		if m.MirrorName == f.mirror {
			found = true
			plan.bootstrap = splitTopics(m.SourceBootstrap)
			if m.SourceClusterID != nil {
				plan.sourceClusterID = *m.SourceClusterID
			}
		}
	}
	if !found {
		return plan, fmt.Errorf("UNKNOWN_CLUSTER_MIRROR: the node has no mirror %s", f.mirror)
	}
	if f.sourceBootstrap != "" {
		plan.bootstrap = splitTopics(f.sourceBootstrap)
	}
	if len(plan.bootstrap) == 0 {
		return plan, fmt.Errorf("mirror %s reports no bootstrap.servers; pass --source-bootstrap-server", f.mirror)
	}

	dreq := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
	dreq.MirrorNames = []string{f.mirror}
	dresp, err := dst.Request(rctx, dreq)
	if err != nil {
		return plan, fmt.Errorf("DescribeClusterMirrors from %s: %w", f.bootstrap, err)
	}
	if err := responseError(dresp); err != nil {
		return plan, fmt.Errorf("DescribeClusterMirrors: %w", err)
	}
	res, err := pattern.CompileAll(splitTopics(f.topics))
	if err != nil {
		return plan, fmt.Errorf("--topics: %w", err)
	}
	matched := map[string]bool{}
	var topics []string
	for _, m := range dresp.(*mirrorapi.DescribeClusterMirrorsResponse).Mirrors {
		for _, t := range m.Topics {
			if len(res) > 0 && !pattern.MatchAny(res, t.TopicName) {
				continue
			}
			matched[t.TopicName] = true
			topics = append(topics, t.TopicName)
			for _, p := range t.Partitions {
				stopped := int64(-1)
				if p.StateValue == "STOPPED" {
					stopped = p.DestinationOffset // -1 when the node does not know
				}
				plan.partitions = append(plan.partitions, verify.Partition{Topic: t.TopicName, Partition: p.PartitionIndex,
					StoppedAt: stopped})
			}
		}
	}
	for _, t := range splitTopics(f.topics) {
		if topicNameRe.MatchString(t) && !matched[t] {
			return plan, fmt.Errorf("TOPIC_NOT_IN_CLUSTER_MIRROR: topic %s is not in mirror %s", t, f.mirror)
		}
	}
	if len(plan.partitions) == 0 {
		return plan, fmt.Errorf("mirror %s has no topics to verify (--topics %q)", f.mirror, f.topics)
	}
	slices.SortFunc(plan.partitions, func(a, b verify.Partition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	// The cleanup.policy only explains differences (compaction runs on
	// each side on its own): without it the audit still runs.
	if configs, err := kadm.NewClient(dst).DescribeTopicConfigs(rctx, topics...); err == nil {
		compacted := map[string]bool{}
		for _, rc := range configs {
			for _, c := range rc.Configs {
				if c.Key == "cleanup.policy" && c.Value != nil && strings.Contains(*c.Value, "compact") {
					compacted[rc.Name] = true
				}
			}
		}
		for i := range plan.partitions {
			plan.partitions[i].Compacted = compacted[plan.partitions[i].Topic]
		}
	}
	return plan, nil
}

// sourceClient connects to the mirror's source with --source-command-config
// and checks that it is the mirror's source cluster.
func (f *mirrorsFlags) sourceClient(ctx context.Context, plan verifyPlan) (*kgo.Client, error) {
	where := "the mirror's bootstrap.servers " + strings.Join(plan.bootstrap, ",")
	if f.sourceBootstrap != "" {
		where = "--source-bootstrap-server " + f.sourceBootstrap
	}
	sec, err := securityOf(f.sourceCommandConfig)
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(plan.bootstrap...), kgo.ClientID(verifyClientID)}, sec.KgoOpts()...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
	if err != nil {
		cl.Close()
		hint := ""
		if f.sourceCommandConfig == "" {
			hint = "; if the source needs credentials or TLS, pass its client properties with --source-command-config " +
				"(the node does not hand out the mirror's)"
		}
		return nil, fmt.Errorf("reaching the source at %s: %w%s", where, err, hint)
	}
	if meta.ClusterID != nil && plan.sourceClusterID != "" && *meta.ClusterID != plan.sourceClusterID {
		cl.Close()
		return nil, fmt.Errorf("the cluster at %s is %q, mirror %s's source is %q: refusing to compare with another cluster",
			where, *meta.ClusterID, f.mirror, plan.sourceClusterID)
	}
	return cl, nil
}

// verifyClientID is the client id of --verify's source connections.
const verifyClientID = "kmirror-mirrors-verify"

// securityOf reads the client security settings of a --command-config
// style file; none without a file.
func securityOf(file string) (clientauth.Security, error) {
	if file == "" {
		return clientauth.Security{}, nil
	}
	ps, err := readProps(file)
	if err != nil {
		return clientauth.Security{}, err
	}
	sec := map[string]string{}
	for _, p := range ps {
		if clientauth.IsKey(p.Key) {
			sec[p.Key] = p.Value
		}
	}
	parsed, err := clientauth.Parse(sec)
	if err != nil {
		return clientauth.Security{}, fmt.Errorf("%s: %w", file, err)
	}
	return parsed, nil
}

// rangesCell prints ranges as FIRST..LAST(reason) joined by commas, "-"
// for none.
func rangesCell(rs verify.Ranges) string {
	if len(rs.List) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(rs.List)+1)
	for _, r := range rs.List {
		parts = append(parts, r.String())
	}
	if rs.More > 0 {
		parts = append(parts, "+"+strconv.Itoa(rs.More)+"-more")
	}
	return strings.Join(parts, ",")
}

// printVerify writes the table and the summary line.
func printVerify(out io.Writer, mirror string, results []verify.Result, took time.Duration) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTATUS\tCOMPARED-BATCHES\tCOMPARED-BYTES\tFIRST-DIFF\tONLY-IN-COPY\tMISSING-IN-COPY\tNOT-COPIED")
	var n [3]int
	var batches, bytes, read int64
	for _, r := range results {
		switch r.Status {
		case verify.Identical:
			n[0]++
		case verify.Differs:
			n[1]++
		default:
			n[2]++
		}
		batches, bytes, read = batches+r.ComparedBatches, bytes+r.ComparedBytes, read+r.ReadBytes
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", r.Topic, r.Partition, r.Status, r.ComparedBatches, r.ComparedBytes,
			offsetCell(r.FirstDiff), rangesCell(r.OnlyInCopy), rangesCell(r.MissingInCopy), rangesCell(r.NotCopied))
	}
	tw.Flush()
	rate := float64(read) / max(took.Seconds(), 1e-3) / 1e6
	fmt.Fprintf(out, "mirror %s: %d partitions: %d identical, %d differ, %d not verified; %d batches (%d bytes) identical; "+
		"%d bytes read from both sides in %v (%.1f MB/s)\n", mirror, len(results), n[0], n[1], n[2], batches, bytes, read,
		took.Round(time.Millisecond), rate)
}

// printVerifyNotes writes each partition's notes and error, one line each.
func printVerifyNotes(w io.Writer, results []verify.Result) {
	for _, r := range results {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "note: %s-%d: %s\n", r.Topic, r.Partition, n)
		}
		if r.Err != nil {
			fmt.Fprintf(w, "error: %s-%d: not verified: %v\n", r.Topic, r.Partition, r.Err)
		}
	}
}

// verifyRows is results as --json prints them; never nil.
func verifyRows(mirror string, results []verify.Result) []verifyRow {
	rows := []verifyRow{}
	list := func(rs verify.Ranges) []Range { return append([]Range{}, rs.List...) }
	for _, r := range results {
		row := verifyRow{Mirror: mirror, Topic: r.Topic, Partition: r.Partition, Status: string(r.Status),
			ComparedBatches: r.ComparedBatches, ComparedBytes: r.ComparedBytes, DifferingBatches: r.DifferingBatches,
			ComparedFrom: r.From, ComparedTo: r.To, OnlyInCopy: list(r.OnlyInCopy), MissingInCopy: list(r.MissingInCopy),
			NotCopied: list(r.NotCopied), RangesOmitted: r.OnlyInCopy.More + r.MissingInCopy.More + r.NotCopied.More,
			SourceLogStart: r.SourceLogStart, SourceHighWatermark: r.SourceHighWatermark, CopyLogStart: r.CopyLogStart,
			CopyHighWatermark: r.CopyHighWatermark, Compacted: r.Compacted, Notes: append([]string{}, r.Notes...)}
		if r.FirstDiff >= 0 {
			row.FirstDiff = &r.FirstDiff
		}
		if r.StoppedAt >= 0 {
			row.StoppedAt = &r.StoppedAt
		}
		if r.Err != nil {
			s := r.Err.Error()
			row.Error = &s
		}
		rows = append(rows, row)
	}
	return rows
}

// verifyFlagsErr checks the flags that go with --verify only.
func (f *mirrorsFlags) verifyFlagsErr(action string) error {
	switch {
	case action != "verify" && (f.sourceBootstrap != "" || f.sourceCommandConfig != "" || f.throttle != 0):
		return errors.New("--source-bootstrap-server, --source-command-config and --throttle go with --verify only")
	case f.throttle < 0:
		return fmt.Errorf("--throttle must be positive bytes per second, got %d", f.throttle)
	case f.sourceBootstrap != "":
		if err := bootstrapErr(f.sourceBootstrap); err != nil {
			return errors.New("--source-" + strings.TrimPrefix(err.Error(), "--"))
		}
	}
	return nil
}
