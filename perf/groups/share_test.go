package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/broker"
)

// The share measurement's core against an in-process cluster with share
// groups on: the topic produced and checked, every read complete with no
// record twice, join rounds that end with both members assigned and B
// reading, and a report that holds all of it. 3000 records a partition:
// more than the 2000 a share partition locks at most, so B finds records
// past those A holds.
func TestShareInProcess(t *testing.T) {
	t.Parallel()
	tg := startInProc(t, func(c *broker.Config) {
		c.GroupRebalanceProtocols = []string{"classic", "consumer", "share"}
		c.GroupShareHeartbeatInterval = time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	o := options{share: true, shareRecords: 9000, shareRecordBytes: 16, sharePartitions: 3, shareConsumers: []int{1, 2},
		shareRounds: 1, shareWarmup: 1, shareJoinRounds: 1, shareTimeout: 45 * time.Second}
	rep := newReport(nil, o)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := runShare(ctx, o, []*target{tg}, rep, log); err != nil {
		t.Fatal(err)
	}
	for _, c := range o.shareConsumers {
		rs := rep.share.reads[shareKey{tg.name, c}]
		if len(rs) != 1 || !rs[0].complete || rs[0].distinct != o.shareRecords || rs[0].dups != 0 || rs[0].late != 0 ||
			rs[0].corrupt != 0 {
			t.Fatalf("%d consumers: %+v", c, rs)
		}
	}
	js := rep.share.joins[tg.name]
	if len(js) != 1 || js[0].first <= 0 || js[0].assigned <= 0 || js[0].record <= 0 || js[0].aParts < 1 || js[0].bParts < 1 {
		t.Fatalf("join rounds: %+v", js)
	}
	var sb strings.Builder
	rep.Write(&sb)
	for _, want := range []string{"## share consumers (KIP-932)", "| 1 | kmirror | 1 |", "| 2 | kmirror | 1 |",
		"| record | kmirror | 1 |", "ShareGroupHeartbeat v"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, sb.String())
		}
	}
}
