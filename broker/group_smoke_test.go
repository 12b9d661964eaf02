package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestGroupConsumeSmoke(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t, func(c *Config) { c.GroupInitialRebalanceDelay = 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newTestClient(t, b))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "g"); err != nil {
		t.Fatal(err)
	}
	p := newTestClient(t, b, kgo.DefaultProduceTopic("g"))
	const n = 3000
	for i := range n {
		p.Produce(ctx, kgo.StringRecord(fmt.Sprint(i)), nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for c := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := newTestClient(t, b, kgo.ConsumerGroup("grp"), kgo.ConsumeTopics("g"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID(fmt.Sprint("c", c)))
			for {
				mu.Lock()
				done := len(seen) >= n
				mu.Unlock()
				if done {
					cl.CommitUncommittedOffsets(ctx)
					return
				}
				pctx, pcancel := context.WithTimeout(ctx, time.Second)
				fs := cl.PollRecords(pctx, 100)
				pcancel()
				if err := fs.Err0(); err != nil && err != context.DeadlineExceeded {
					t.Errorf("poll: %v", err)
					return
				}
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("saw %d distinct records, want %d", len(seen), n)
	}
	offs, err := adm.FetchOffsets(ctx, "grp")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	if total != n {
		t.Fatalf("committed offsets sum to %d, want %d", total, n)
	}
	described, err := adm.DescribeGroups(ctx, "grp")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("group state %s", described["grp"].State)
}
