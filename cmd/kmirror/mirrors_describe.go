package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/internal/topicid"
	"github.com/kmirror/kmirror/mirrorapi"
)

// What `kmirror mirrors --describe` prints (issue 16 items 2 and 7).
//
// The table starts with kafka-cluster-mirrors.sh's columns, in its order
// and with its "-" for an unknown offset, so scripts written for it keep
// working; kmirror's columns come after STATE:
//
//	MIRROR TOPIC PARTITION SOURCE-OFFSET DESTINATION-OFFSET LAG STATE SOURCE-OFFSET-AGE STALLED GROUPS-SYNCED LAG-SECONDS
//
// LAG-SECONDS is the RPO (issue 18 item 2): how long ago, at most, the
// oldest source record the copy lacks reached the source, in seconds with
// one decimal, rounded up ("0.4", "95.0"), so scripts can compare it with a number; "-"
// when unknown (no fetcher: PAUSED, STOPPED; or nothing answered since
// the fetcher started). It comes last so the columns before it keep the
// positions scripts know them at. SOURCE-OFFSET-AGE is how old the source offset is ("0.4s", "2m13s", "-"
// when none was ever read): a LAG of 0 measured two minutes ago says
// nothing about now. STALLED is "yes" when the partition's fetcher has had
// no good answer for longer than request.timeout.ms plus
// mirror.fetch.wait.max.ms. STATE stays the bare
// state name, as kafka-cluster-mirrors.sh prints it, so a filter on it
// still matches. GROUPS-SYNCED is how long ago the mirror's consumer group
// offsets were last synced ("35s-ago", "never"): what a consumer failing
// over to this node would resume from.
//
// --failed prints MIRROR TOPIC PARTITION RETRY ERROR with the whole error,
// wrapped onto continuation lines under the ERROR column (the Kafka tool
// cuts it at 80 characters, which hid the half of the message saying what
// to do). --json prints kafka-cluster-mirrors.sh's shape, an array of
// describeRow, and honours --failed.

// describeRow is one described partition: the JSON object of --describe
// --json. The first nine keys are kafka-cluster-mirrors.sh's; the others
// are kmirror's.
type describeRow struct {
	Mirror            string  `json:"mirror"`
	Topic             string  `json:"topic"`
	Partition         int32   `json:"partition"`
	SourceOffset      int64   `json:"sourceOffset"`
	DestinationOffset int64   `json:"destinationOffset"`
	Lag               int64   `json:"lag"`
	State             string  `json:"state"`
	RetryAttempt      int32   `json:"retryAttempt"`
	ErrorMessage      *string `json:"errorMessage"`
	// SourceOffsetAgeMs is -1 when the source offset is unknown.
	SourceOffsetAgeMs int64 `json:"sourceOffsetAgeMs"`
	// LagMs is LAG-SECONDS in milliseconds, -1 when unknown.
	LagMs   int64 `json:"lagMs"`
	Stalled bool  `json:"stalled"`
	// TopicID is Kafka's form of the id (internal/topicid); null from a
	// node that does not report it.
	TopicID *string `json:"topicId"`
	// SourceHasNoTopicIDs: the source is older than Kafka 2.8, and
	// TopicID is the one kmirror assigned.
	SourceHasNoTopicIDs bool `json:"sourceHasNoTopicIds"`
	// GroupOffsetsSyncedAt is when the mirror's consumer group offsets
	// were last synced (RFC 3339, UTC); null: never, or a node that does
	// not report it.
	GroupOffsetsSyncedAt *string `json:"groupOffsetsSyncedAt"`
	// ReportedBy is the node id of the partition's leader, whose view
	// the row is; -1 when no leader could be asked (the row is the
	// metadata log's: the last checkpoint's source offset).
	ReportedBy int32 `json:"reportedBy"`
}

// describeRows flattens a Describe answer into rows sorted by mirror,
// topic and partition; failed keeps the FAILED ones only. Never nil, so
// JSON prints [] for none, as kafka-cluster-mirrors.sh does.
func describeRows(r *mirrorapi.DescribeClusterMirrorsResponse, failed bool) []describeRow {
	rows := []describeRow{}
	for _, m := range r.Mirrors {
		var synced *string
		if m.LastGroupSyncMillis > 0 {
			at := time.UnixMilli(m.LastGroupSyncMillis).UTC().Format(time.RFC3339)
			synced = &at
		}
		for _, t := range m.Topics {
			var id *string
			if t.TopicID != ([16]byte{}) {
				s := topicid.String(t.TopicID)
				id = &s
			}
			for _, p := range t.Partitions {
				if failed && p.StateValue != "FAILED" {
					continue
				}
				rows = append(rows, describeRow{Mirror: m.MirrorName, Topic: t.TopicName, Partition: p.PartitionIndex,
					SourceOffset: p.SourceOffset, DestinationOffset: p.DestinationOffset, Lag: p.Lag, State: p.StateValue,
					RetryAttempt: p.RetryAttempt, ErrorMessage: p.ErrorMessage, SourceOffsetAgeMs: p.SourceOffsetAgeMillis,
					LagMs: p.LagMillis, Stalled: p.Stalled, TopicID: id, SourceHasNoTopicIDs: t.NoSourceTopicIDs, GroupOffsetsSyncedAt: synced,
					ReportedBy: p.ReportedBy})
			}
		}
	}
	slices.SortFunc(rows, func(a, b describeRow) int {
		return cmp.Or(strings.Compare(a.Mirror, b.Mirror), strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return rows
}

// errorWidth is where --describe --failed wraps an error.
const errorWidth = 80

// printDescribe writes the rows as the table above to tw (a tabwriter).
func printDescribe(tw io.Writer, rows []describeRow, failed bool) {
	if failed {
		fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tRETRY\tERROR")
		for _, r := range rows {
			retry := "NonRetryable"
			if r.RetryAttempt >= 0 {
				retry = strconv.Itoa(int(r.RetryAttempt))
			}
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			lines := wrapText(msg, errorWidth)
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Mirror, r.Topic, r.Partition, retry, lines[0])
			for _, l := range lines[1:] {
				fmt.Fprintf(tw, "\t\t\t\t%s\n", l)
			}
		}
		return
	}
	fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tSOURCE-OFFSET\tDESTINATION-OFFSET\tLAG\tSTATE\tSOURCE-OFFSET-AGE\tSTALLED\tGROUPS-SYNCED\tLAG-SECONDS")
	for _, r := range rows {
		age := "-"
		if r.SourceOffsetAgeMs >= 0 {
			age = formatAge(time.Duration(r.SourceOffsetAgeMs) * time.Millisecond)
		}
		stalled := "no"
		if r.Stalled {
			stalled = "yes"
		}
		synced := "never"
		if r.GroupOffsetsSyncedAt != nil {
			if at, err := time.Parse(time.RFC3339, *r.GroupOffsetsSyncedAt); err == nil {
				synced = formatAge(max(time.Since(at), 0)) + "-ago"
			}
		}
		lagSeconds := "-"
		if r.LagMs >= 0 {
			// Rounded up: the bound must not shrink in print.
			lagSeconds = strconv.FormatFloat(math.Ceil(float64(r.LagMs)/100)/10, 'f', 1, 64)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Mirror, r.Topic, r.Partition, offsetCell(r.SourceOffset),
			offsetCell(r.DestinationOffset), offsetCell(r.Lag), r.State, age, stalled, synced, lagSeconds)
	}

}

// printDescribeNotes writes, apart from the table (to stderr), which
// topics' sources have no topic ids, and which partitions no leader
// reported (a leader down or out of reach of the node asked): their
// SOURCE-OFFSET is the last checkpoint's, their STALLED and LAG-SECONDS
// unknown.
func printDescribeNotes(w io.Writer, rows []describeRow) {
	noted := map[[2]string]bool{}
	var unreported []string
	for _, r := range rows {
		if k := [2]string{r.Mirror, r.Topic}; r.SourceHasNoTopicIDs && r.TopicID != nil && !noted[k] {
			noted[k] = true
			fmt.Fprintf(w, "note: mirror %s topic %s: the source has no topic ids (Kafka before 2.8); kmirror assigned topic id %s\n",
				r.Mirror, r.Topic, *r.TopicID)
		}
		if r.ReportedBy < 0 {
			unreported = append(unreported, fmt.Sprintf("%s/%s-%d", r.Mirror, r.Topic, r.Partition))
		}
	}
	if len(unreported) > 0 {
		fmt.Fprintf(w, "note: no leader reported %s (down, or out of reach of the node asked): "+
			"their SOURCE-OFFSET is the last checkpoint's (see SOURCE-OFFSET-AGE), STALLED and LAG-SECONDS are unknown\n",
			strings.Join(unreported, ", "))
	}
}

// offsetCell prints an offset or a lag as kafka-cluster-mirrors.sh does:
// "-" for unknown (-1).
func offsetCell(v int64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}

// formatAge prints an age short and exact enough to judge a lag by:
// tenths of a second below 10 s ("0.4s"), whole seconds above ("42s",
// "2m13s", "26h3m0s").
func formatAge(d time.Duration) string {
	if d < 10*time.Second {
		return strconv.FormatFloat(d.Truncate(100*time.Millisecond).Seconds(), 'f', 1, 64) + "s"
	}
	return d.Truncate(time.Second).String()
}

// wrapText splits s into lines of at most width bytes, at spaces where it
// can (a longer word is cut), keeping the line breaks s has. It returns at
// least one line, "" for an empty s.
func wrapText(s string, width int) []string {
	var out []string
	for _, para := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		line := ""
		for _, w := range strings.Fields(para) {
			for len(w) > width {
				if line != "" {
					out, line = append(out, line), ""
				}
				out, w = append(out, w[:width]), w[width:]
			}
			switch {
			case line == "":
				line = w
			case len(line)+1+len(w) <= width:
				line += " " + w
			default:
				out, line = append(out, line), w
			}
		}
		out = append(out, line)
	}
	return out
}
