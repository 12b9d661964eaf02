package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A transactional producer commits one transaction and aborts another;
// read_committed consumers see only the committed records.
func TestTransactionsCommitAndAbort(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := newTestClient(t, b, kgo.TransactionalID("smoke-txn"), kgo.DefaultProduceTopic("txn"),
		kgo.AllowAutoTopicCreation())
	for i, commit := range []bool{true, false, true} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			rec := kgo.StringRecord(string(rune('a'+i)) + string(rune('0'+j)))
			if err := p.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("producing in transaction %d: %v", i, err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("ending transaction %d: %v", i, err)
		}
	}
	c := newTestClient(t, b, kgo.ConsumeTopics("txn"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 6 {
		fs := c.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming: %v (got %v)", err, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	want := []string{"a0", "a1", "a2", "c0", "c1", "c2"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("read_committed saw %v, want %v", got, want)
		}
	}
}
