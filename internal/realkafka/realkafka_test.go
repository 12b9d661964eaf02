package realkafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Each required version installs, starts, takes and serves records,
// restarts with a higher partition leader epoch, and runs a tool.
func TestRealKafkaBrokerLifecycle(t *testing.T) {
	eachVersion(t, true, 4*time.Minute, func(t *testing.T, ctx context.Context, v string) {
		b, err := Start(Config{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.ProduceSync(ctx, kgo.StringRecord("one")).FirstErr(); err != nil {
			t.Fatalf("producing to Kafka %s: %v", v, err)
		}
		epoch := func() int32 {
			t.Helper()
			td, err := kadm.NewClient(cl).ListTopics(ctx, "t")
			if err != nil || td["t"].Err != nil {
				t.Fatalf("metadata of t: %v %v", err, td["t"].Err)
			}
			return td["t"].Partitions[0].LeaderEpoch
		}
		before := epoch()
		if err := b.Restart(); err != nil {
			t.Fatal(err)
		}
		cl.ForceMetadataRefresh()
		deadline := time.Now().Add(time.Minute)
		for epoch() <= before {
			if time.Now().After(deadline) {
				t.Fatalf("leader epoch still %d after a restart", before)
			}
			time.Sleep(200 * time.Millisecond)
		}
		out, err := b.Tool(ctx, "kafka-topics", "--bootstrap-server", b.Addr(), "--list")
		if err != nil || !strings.Contains(out, "t\n") {
			t.Fatalf("kafka-topics --list: %q %v", out, err)
		}
	})
}

// eachVersion runs f in a subtest per required version, in parallel or
// not, with a context that ends after d.
func eachVersion(t *testing.T, parallel bool, d time.Duration, f func(t *testing.T, ctx context.Context, version string)) {
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			f(t, ctx, v)
		})
	}
}
