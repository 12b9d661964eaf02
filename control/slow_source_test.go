package control

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// A Start waiting on a source that stalls holds no lock that List and
// Describe need: a failback peer's DescribeClusterMirrors, or an
// operator's --describe, is answered meanwhile (issue 19 item 6). Before,
// every mirror RPC took one node-wide mutex, held across the source I/O.
func TestSlowSourceDoesNotBlockDescribe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src := nodetest.Source(t, kfake.SeedTopics(1, "t"))
	n := openTestNode(t, nodetest.Config(t), nil)
	defer n.close()
	n.createMirror(t, ctx, src.ListenAddrs()[0])

	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	src.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case <-release:
			return nil, nil, false
		default:
		}
		src.KeepControl()
		once.Do(func() { close(stalled) })
		src.SleepControl(func() {
			select {
			case <-release:
			case <-ctx.Done():
			}
		})
		return nil, nil, false
	})
	started := make(chan error, 1)
	go func() {
		req := mirrorapi.NewPtrStartMirrorTopicsRequest()
		req.MirrorName, req.Topics = "m", []mirrorapi.StartMirrorTopicsRequestTopic{{TopicName: "t"}}
		_, err := n.cl.Request(ctx, req)
		started <- err
	}()
	select {
	case <-stalled:
	case <-ctx.Done():
		t.Fatal("the start never asked the source")
	}

	// Another connection, as an operator's or a peer's would be.
	other, err := kgo.NewClient(kgo.SeedBrokers(n.b.Addr()), kgo.MaxVersions(mirrorapi.WithMirrorKeys(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	dctx, dcancel := context.WithTimeout(ctx, 3*time.Second)
	defer dcancel()
	for _, req := range []kmsg.Request{mirrorapi.NewPtrDescribeClusterMirrorsRequest(), mirrorapi.NewPtrListClusterMirrorsRequest()} {
		if _, err := other.Request(dctx, req); err != nil {
			t.Fatalf("%T while a start waits on a stalled source: %v", req, err)
		}
	}
	close(release)
	if err := <-started; err != nil {
		t.Fatalf("the start once the source answers: %v", err)
	}
}

// A Stop of one mirror whose final sync waits on a stalled source holds
// only that mirror's lock: the other mirror's Pause and Describe are
// answered meanwhile (issue 19 item 6). Before, the final sync ran under
// the node-wide mutex every mirror RPC took, and the other mirror's Pause
// waited for it (up to the final sync's 10 s bound).
func TestStalledStopDoesNotBlockOtherMirror(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srcA := nodetest.Source(t, kfake.SeedTopics(1, "a"))
	srcB := nodetest.Source(t, kfake.SeedTopics(1, "b"))
	n := openTestNode(t, nodetest.Config(t), nil)
	defer n.close()
	for _, mt := range []struct {
		mirror, topic string
		src           *kfake.Cluster
	}{{"ma", "a", srcA}, {"mb", "b", srcB}} {
		boot := mt.src.ListenAddrs()[0]
		create := mirrorapi.NewPtrCreateClusterMirrorRequest()
		create.MirrorName = mt.mirror
		create.Configs = []mirrorapi.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: &boot}}
		if resp, err := n.cl.Request(ctx, create); err != nil || resp.(*mirrorapi.CreateClusterMirrorResponse).ErrorCode != 0 {
			t.Fatalf("create %s: %v %+v", mt.mirror, err, resp)
		}
		start := mirrorapi.NewPtrStartMirrorTopicsRequest()
		start.MirrorName, start.Topics = mt.mirror, []mirrorapi.StartMirrorTopicsRequestTopic{{TopicName: mt.topic}}
		if _, err := n.cl.Request(ctx, start); err != nil {
			t.Fatal(err)
		}
		testutil.CheckFor(t, 20*time.Second, testutil.True(mt.mirror+" mirroring", func() bool {
			ps, err := n.ctl.store.MirrorPartitionState(mt.mirror, mt.topic, 0)
			return err == nil && ps.State == state.StateMirroring
		}))
	}

	// The final sync reads the source's end offsets (ListOffsets), which
	// no fetcher asks for once it fetches.
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srcA.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		srcA.KeepControl()
		once.Do(func() { close(stalled) })
		srcA.SleepControl(func() {
			select {
			case <-release:
			case <-ctx.Done():
			}
		})
		return nil, nil, false
	})
	defer close(release)
	stopped := make(chan error, 1)
	go func() {
		req := mirrorapi.NewPtrStopMirrorTopicsRequest()
		req.MirrorName, req.Topics = "ma", []mirrorapi.MirrorTopicsRequestTopic{{TopicName: "a"}}
		_, err := n.cl.Request(ctx, req)
		stopped <- err
	}()
	select {
	case <-stalled:
	case <-ctx.Done():
		t.Fatal("the stop's final sync never asked the source")
	}

	other, err := kgo.NewClient(kgo.SeedBrokers(n.b.Addr()), kgo.MaxVersions(mirrorapi.WithMirrorKeys(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// Well under the final sync's bound (maxFinalSync): an answer in time
	// did not wait for the stop.
	octx, ocancel := context.WithTimeout(ctx, 3*time.Second)
	defer ocancel()
	describe := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
	describe.MirrorNames = []string{"mb"}
	pause := mirrorapi.NewPtrPauseMirrorTopicsRequest()
	pause.MirrorName, pause.Topics = "mb", []mirrorapi.MirrorTopicsRequestTopic{{TopicName: "b"}}
	for _, req := range []kmsg.Request{describe, pause} {
		if _, err := other.Request(octx, req); err != nil {
			t.Fatalf("%T of mirror mb while mirror ma's stop waits on a stalled source: %v", req, err)
		}
	}
	if ps, err := n.ctl.store.MirrorPartitionState("mb", "b", 0); err != nil || ps.State != state.StatePaused {
		t.Fatalf("mirror mb after its pause: %v %v, want PAUSED", ps.State, err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("the stop ended (%v) before the source answered: the test stalled nothing", err)
	default:
	}
}
