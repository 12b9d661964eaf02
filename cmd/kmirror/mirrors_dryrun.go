package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/mirrorapi"
)

// `kmirror mirrors --start --dry-run` (issue 18 item 3): the failback
// preview. The node computes it (control/align_preview.go: the same code
// as the real start, read-only) and the CLI prints, per partition:
//
//	TOPIC PARTITION LOCAL-END TRUNCATE-FROM TRUNCATE-RECORDS TRUNCATE-BYTES THEN-COPY WHY
//
// LOCAL-END is the local log end ("-": the topic does not exist here and
// would be created); TRUNCATE-FROM the offset the log would be cut back
// to, so [TRUNCATE-FROM, LOCAL-END) goes ("-": nothing is cut);
// TRUNCATE-RECORDS and TRUNCATE-BYTES what those batches hold; THEN-COPY
// the offsets the copy would then fetch (the source's high watermark
// minus where the copy starts; offsets, which compaction gaps make more
// than records); WHY the rule that cuts. A summary line follows, and a
// line per topic that mirrors already (its start changes nothing).
//
// An older node skips the request's ValidateOnly tag and would start the
// topics for real. So the CLI first sends a dry run naming no topic, which
// such a node answers as a no-op without DryRun, and refuses to go on
// unless DryRun comes back.

// errNoDryRun: the node predates the dry run.
var errNoDryRun = errors.New("the node does not know --dry-run (a kmirror before it); nothing was started; upgrade it to preview")

// runDryRun sends the probe, then the dry run, and prints the answer.
func (f *mirrorsFlags) runDryRun(ctx context.Context, cl kmsg.Requestor, out io.Writer) error {
	probe := mirrorapi.NewPtrStartMirrorTopicsRequest()
	probe.MirrorName, probe.ValidateOnly = f.mirror, true
	resp, err := probe.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("StartMirrorTopics: %w", err)
	}
	if err := responseError(resp); err != nil {
		return err
	}
	if !resp.DryRun {
		return errNoDryRun
	}
	req, err := f.request("start")
	if err != nil {
		return err
	}
	sr := req.(*mirrorapi.StartMirrorTopicsRequest)
	sr.ValidateOnly = true
	if resp, err = sr.RequestWith(ctx, cl); err != nil {
		return fmt.Errorf("StartMirrorTopics: %w", err)
	}
	if f.asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(dryRunJSON(f.mirror, resp)); err != nil {
			return err
		}
	} else {
		printDryRun(out, resp)
	}
	return responseError(resp)
}

// causeNames are the WHY cells (and JSON "cause") of mirrorapi's AlignX.
var causeNames = map[int8]string{
	mirrorapi.AlignNone:            "none",
	mirrorapi.AlignLastMirrorEpoch: "last-mirror-epoch",
	mirrorapi.AlignFromScratch:     "from-scratch",
	mirrorapi.AlignDiverged:        "diverged",
	mirrorapi.AlignSourceStart:     "below-source-start",
}

func causeName(c int8) string {
	if n, ok := causeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("cause-%d", c)
}

// thenCopy is how many offsets the copy would fetch, -1 if unknown.
func thenCopy(p mirrorapi.StartPreviewPartition) int64 {
	if p.SourceEnd < 0 {
		return -1
	}
	return max(p.SourceEnd-p.CopyFrom, 0)
}

// dryRunTotals sums a dry run over its partitions.
type dryRunTotals struct {
	Topics              int   `json:"topics"`
	Partitions          int   `json:"partitions"`
	PartitionsTruncated int   `json:"partitionsTruncated"`
	TruncateRecords     int64 `json:"truncateRecords"`
	TruncateBytes       int64 `json:"truncateBytes"`
	// ThenCopy sums the partitions whose source end is known.
	ThenCopy int64 `json:"thenCopy"`
}

func totalsOf(r *mirrorapi.StartMirrorTopicsResponse) dryRunTotals {
	var t dryRunTotals
	for _, tp := range r.Topics {
		if len(tp.Preview) == 0 {
			continue
		}
		t.Topics++
		for _, p := range tp.Preview {
			t.Partitions++
			if p.TruncateFrom >= 0 {
				t.PartitionsTruncated++
				t.TruncateRecords += p.TruncateRecords
				t.TruncateBytes += p.TruncateBytes
			}
			t.ThenCopy += max(thenCopy(p), 0)
		}
	}
	return t
}

// printDryRun writes the table above, the summary and the notes.
func printDryRun(out io.Writer, r *mirrorapi.StartMirrorTopicsResponse) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tLOCAL-END\tTRUNCATE-FROM\tTRUNCATE-RECORDS\tTRUNCATE-BYTES\tTHEN-COPY\tWHY")
	var notes []string
	for _, tp := range r.Topics {
		if tp.ErrorCode != 0 {
			continue // on the error line
		}
		if len(tp.Preview) == 0 {
			notes = append(notes, tp.Name+": mirroring already; --start changes nothing")
			continue
		}
		for _, p := range tp.Preview {
			recs, bytes := "0", "0"
			if p.TruncateFrom >= 0 {
				recs, bytes = fmt.Sprint(p.TruncateRecords), fmt.Sprint(p.TruncateBytes)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", tp.Name, p.PartitionIndex, offsetCell(p.LocalEnd),
				offsetCell(p.TruncateFrom), recs, bytes, offsetCell(thenCopy(p)), causeName(p.Cause))
		}
	}
	tw.Flush()
	t := totalsOf(r)
	fmt.Fprintf(out, "dry run, nothing changed: --start would cut %d records (%d bytes) from %d of %d partitions in %d topics, then copy %d offsets from the source\n",
		t.TruncateRecords, t.TruncateBytes, t.PartitionsTruncated, t.Partitions, t.Topics, t.ThenCopy)
	for _, n := range notes {
		fmt.Fprintln(out, n)
	}
}

// dryRunPartition is one partition of --start --dry-run --json; offsets
// are -1 when unknown or, for truncateFrom, when nothing is cut.
type dryRunPartition struct {
	Partition       int32  `json:"partition"`
	LocalEnd        int64  `json:"localEnd"`
	TruncateFrom    int64  `json:"truncateFrom"`
	TruncateRecords int64  `json:"truncateRecords"`
	TruncateBytes   int64  `json:"truncateBytes"`
	Cause           string `json:"cause"`
	CopyFrom        int64  `json:"copyFrom"`
	SourceEnd       int64  `json:"sourceEnd"`
	ThenCopy        int64  `json:"thenCopy"`
}

type dryRunTopic struct {
	Topic            string            `json:"topic"`
	Error            *string           `json:"error"`
	ErrorMessage     *string           `json:"errorMessage"`
	MirroringAlready bool              `json:"mirroringAlready"`
	Partitions       []dryRunPartition `json:"partitions"`
}

type dryRunResult struct {
	Action       string        `json:"action"`
	DryRun       bool          `json:"dryRun"`
	Mirror       string        `json:"mirror"`
	Error        *string       `json:"error"`
	ErrorMessage *string       `json:"errorMessage"`
	Topics       []dryRunTopic `json:"topics"`
	Summary      dryRunTotals  `json:"summary"`
}

func dryRunJSON(mirror string, r *mirrorapi.StartMirrorTopicsResponse) dryRunResult {
	res := dryRunResult{Action: "start", DryRun: true, Mirror: mirror, Error: errorName(r.ErrorCode),
		ErrorMessage: r.ErrorMessage, Topics: []dryRunTopic{}, Summary: totalsOf(r)}
	for _, tp := range r.Topics {
		t := dryRunTopic{Topic: tp.Name, Error: errorName(tp.ErrorCode), ErrorMessage: tp.ErrorMessage,
			MirroringAlready: tp.ErrorCode == 0 && len(tp.Preview) == 0, Partitions: []dryRunPartition{}}
		for _, p := range tp.Preview {
			recs, bytes := p.TruncateRecords, p.TruncateBytes
			if p.TruncateFrom < 0 {
				recs, bytes = 0, 0
			}
			t.Partitions = append(t.Partitions, dryRunPartition{Partition: p.PartitionIndex, LocalEnd: p.LocalEnd,
				TruncateFrom: p.TruncateFrom, TruncateRecords: recs, TruncateBytes: bytes, Cause: causeName(p.Cause),
				CopyFrom: p.CopyFrom, SourceEnd: p.SourceEnd, ThenCopy: thenCopy(p)})
		}
		res.Topics = append(res.Topics, t)
	}
	return res
}
