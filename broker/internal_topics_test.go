package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/meta"
)

// The coordinators' topics can be neither deleted nor grown through the
// admin API: either would lose every group's offsets or every
// transaction's state (a key's partition is its hash modulo the count).
// Both stay as they were, and the group's offset is still committed.
func TestInternalTopicsRefuseDeletionAndGrowth(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, adm := brokerWithCommits(ctx, t, 1, "g")
	commitOneTransaction(ctx, t, b, "etl")

	internal := map[string]int{meta.GroupTopic: DefaultOffsetsTopicPartitions, meta.TransactionTopic: DefaultTransactionTopicPartitions}
	for name, parts := range internal {
		dels, err := adm.DeleteTopics(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if d := dels[name]; d.Err != kerr.InvalidTopicException || d.ErrMessage == "" {
			t.Errorf("DeleteTopics %s: %v (%q), want INVALID_TOPIC_EXCEPTION with a message", name, d.Err, d.ErrMessage)
		}
		grown, err := adm.UpdatePartitions(ctx, parts+1, name)
		if err != nil {
			t.Fatal(err)
		}
		if g := grown[name]; g.Err != kerr.InvalidTopicException || g.ErrMessage == "" {
			t.Errorf("CreatePartitions %s: %v (%q), want INVALID_TOPIC_EXCEPTION with a message", name, g.Err, g.ErrMessage)
		}
		checkInternalTopic(ctx, t, newTestClient(t, b), name, parts)
	}
	fetched, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("data", 0); !ok || o.At != 1 {
		t.Errorf("group g's offset after the refused deletions: %+v, want 1", o)
	}
}
