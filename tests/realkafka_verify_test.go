package tests

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/verify"
)

// checkVerified runs the byte-level audit (`kmirror mirrors --verify`'s
// package) over every partition of topic, the source read from Kafka
// itself: a copy checkSameLog found equal must be IDENTICAL, every batch
// compared (Kafka's compressed, transactional and control batches
// included) and nothing reported as held by one side only.
func checkVerified(t *testing.T, ctx context.Context, srcCl, dstCl *kgo.Client, topic string) {
	t.Helper()
	ends, err := kadm.NewClient(srcCl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var parts []verify.Partition
	ends.Each(func(o kadm.ListedOffset) {
		parts = append(parts, verify.Partition{Topic: topic, Partition: o.Partition, StoppedAt: -1})
	})
	res, err := verify.Run(ctx, verify.Config{Source: srcCl, Copy: dstCl, Partitions: parts})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Status != verify.Identical || r.ComparedBatches == 0 || len(r.OnlyInCopy.List) > 0 ||
			len(r.MissingInCopy.List) > 0 || len(r.NotCopied.List) > 0 {
			t.Errorf("verify %s-%d: %s, %d batches compared, only in copy %v, missing %v, not copied %v, notes %q, err %v",
				r.Topic, r.Partition, r.Status, r.ComparedBatches, r.OnlyInCopy.List, r.MissingInCopy.List, r.NotCopied.List,
				r.Notes, r.Err)
		}
	}
}
