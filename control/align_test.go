package control

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// Starting a stopped topic again, from a source that never mirrored from
// us (kfake answers no last-mirror-epoch lookup), mirrors it from scratch:
// the records written here after the failover are gone and the log is the
// source's again.
func TestRestartAfterFailoverMirrorsFromScratch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	sp := nodetest.Client(t, src.ListenAddrs(), kgo.DefaultProduceTopic("t"))
	if err := sp.ProduceSync(ctx, kgo.StringRecord("1"), kgo.StringRecord("2"), kgo.StringRecord("3")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := nodetest.Config(t)
	n := openTestNode(t, cfg, nil)
	defer n.close()
	send := func(req kmsg.Request) {
		t.Helper()
		if _, err := n.cl.Request(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	boot := src.ListenAddrs()[0]
	n.createMirror(t, ctx, boot)
	start := mirrorapi.NewPtrStartMirrorTopicsRequest()
	start.MirrorName = "m"
	start.Topics = []mirrorapi.StartMirrorTopicsRequestTopic{{TopicName: "t"}}
	send(start)
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 mirrored to log end 3, source at 3", func() bool {
		st, err := n.ctl.fm.Status("m", "t", 0)
		return err == nil && st.SourceHighWatermark == 3 && st.LogEndOffset == 3
	}))
	stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName = "m"
	stop.Topics = []mirrorapi.MirrorTopicsRequestTopic{{TopicName: "t"}}
	send(stop)
	wp, err := kgo.NewClient(kgo.SeedBrokers(n.b.Addr()), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer wp.Close()
	if err := wp.ProduceSync(ctx, kgo.StringRecord("written here")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// After the failover the log holds the 3 mirrored records, the
	// MIRROR_PID_RESET and the local write.
	send(start)
	testutil.CheckFor(t, 10*time.Second, func() error {
		st, err := n.ctl.fm.Status("m", "t", 0)
		if err == nil && st.LogEndOffset == 3 && st.SourceHighWatermark == 3 {
			return nil
		}
		info, _ := n.b.Partitions().Info("t")
		return fmt.Errorf("status %+v err %v topic %+v", st, err, info)
	})
	local, err := n.b.Partitions().MirrorPartition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if end := local.LogEndOffset(); end != 3 {
		t.Fatalf("log end %d after mirroring from scratch, want the source's 3", end)
	}
}
