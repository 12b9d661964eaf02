package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// newTestBroker starts a broker on a free loopback port in a temp dir.
func newTestBroker(t testing.TB, mutate ...func(*Config)) *Broker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listeners = []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 0}}
	cfg.LogDirs = []string{t.TempDir()}
	cfg.MetricsListener = ""
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatalf("starting broker: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func newTestClient(t testing.TB, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestProduceConsumeSmoke(t *testing.T) {
	t.Parallel()
	b := newTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := newTestClient(t, b, kgo.DefaultProduceTopic("smoke"), kgo.AllowAutoTopicCreation())
	const n = 1000
	for i := range n {
		p.Produce(ctx, kgo.StringRecord(fmt.Sprint(i)), func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c := newTestClient(t, b, kgo.ConsumeTopics("smoke"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fs := c.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != fmt.Sprint(got) || r.Offset != int64(got) {
				t.Fatalf("record %d: offset %d value %q", got, r.Offset, r.Value)
			}
			got++
		})
	}
}
