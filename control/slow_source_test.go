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
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
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
	src := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
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

// A Stop whose final sync waits on a stalled source holds no lock while it
// waits: the other mirror's Pause and Describe are answered meanwhile, and
// so are the same mirror's, for its other topics (issue 19 item 6); a
// Pause of the topic being stopped is refused as such, and the stop does
// not undo the other topic's pause when it stores the mirror. Before,
// the final sync ran under the node-wide mutex every mirror RPC took, and
// every other Pause waited for it (up to the final sync's 10 s bound).
func TestStalledStopDoesNotBlockOtherMirror(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srcA := kfaketest.Source(t, kfake.SeedTopics(1, "a", "a2"))
	srcB := kfaketest.Source(t, kfake.SeedTopics(1, "b"))
	n := openTestNode(t, nodetest.Config(t), nil)
	defer n.close()
	for _, mt := range []struct {
		mirror string
		topics []string
		src    *kfake.Cluster
	}{{"ma", []string{"a", "a2"}, srcA}, {"mb", []string{"b"}, srcB}} {
		boot := mt.src.ListenAddrs()[0]
		create := mirrorapi.NewPtrCreateClusterMirrorRequest()
		create.MirrorName = mt.mirror
		create.Configs = []mirrorapi.CreateClusterMirrorRequestConfig{{Name: "bootstrap.servers", Value: &boot}}
		if resp, err := n.cl.Request(ctx, create); err != nil || resp.(*mirrorapi.CreateClusterMirrorResponse).ErrorCode != 0 {
			t.Fatalf("create %s: %v %+v", mt.mirror, err, resp)
		}
		start := mirrorapi.NewPtrStartMirrorTopicsRequest()
		start.MirrorName = mt.mirror
		for _, topic := range mt.topics {
			start.Topics = append(start.Topics, mirrorapi.StartMirrorTopicsRequestTopic{TopicName: topic})
		}
		if _, err := n.cl.Request(ctx, start); err != nil {
			t.Fatal(err)
		}
		for _, topic := range mt.topics {
			testutil.CheckFor(t, 20*time.Second, testutil.True(mt.mirror+"/"+topic+" mirroring", func() bool {
				ps, err := n.ctl.store.MirrorPartitionState(mt.mirror, topic, 0)
				return err == nil && ps.State == state.StateMirroring
			}))
		}
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
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	stopped := make(chan *mirrorapi.StopMirrorTopicsResponse, 1)
	go func() {
		req := mirrorapi.NewPtrStopMirrorTopicsRequest()
		req.MirrorName, req.Topics = "ma", []mirrorapi.MirrorTopicsRequestTopic{{TopicName: "a"}}
		resp, err := n.cl.Request(ctx, req)
		if err != nil {
			t.Error(err)
			stopped <- nil
			return
		}
		stopped <- resp.(*mirrorapi.StopMirrorTopicsResponse)
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
	pause := func(mirror, topic string) int16 {
		t.Helper()
		req := mirrorapi.NewPtrPauseMirrorTopicsRequest()
		req.MirrorName, req.Topics = mirror, []mirrorapi.MirrorTopicsRequestTopic{{TopicName: topic}}
		resp, err := other.Request(octx, req)
		if err != nil {
			t.Fatalf("pause of %s/%s while mirror ma's stop waits on a stalled source: %v", mirror, topic, err)
		}
		pr := resp.(*mirrorapi.PauseMirrorTopicsResponse)
		if pr.ErrorCode != 0 || len(pr.Topics) != 1 {
			t.Fatalf("pause of %s/%s: %+v", mirror, topic, pr)
		}
		return pr.Topics[0].ErrorCode
	}
	for _, mirror := range []string{"mb", "ma"} {
		describe := mirrorapi.NewPtrDescribeClusterMirrorsRequest()
		describe.MirrorNames = []string{mirror}
		if _, err := other.Request(octx, describe); err != nil {
			t.Fatalf("describe of %s while mirror ma's stop waits on a stalled source: %v", mirror, err)
		}
	}
	if code := pause("mb", "b"); code != 0 {
		t.Fatalf("pause of mb/b: code %d", code)
	}
	if code := pause("ma", "a2"); code != 0 {
		t.Fatalf("pause of ma/a2 (not being stopped): code %d", code)
	}
	if code := pause("ma", "a"); code != mirrorapi.ErrMirrorTopicBeingStopped {
		t.Fatalf("pause of ma/a (being stopped): code %d, want MIRROR_TOPIC_BEING_STOPPED", code)
	}
	for _, mp := range [][2]string{{"mb", "b"}, {"ma", "a2"}} {
		if ps, err := n.ctl.store.MirrorPartitionState(mp[0], mp[1], 0); err != nil || ps.State != state.StatePaused {
			t.Fatalf("%s/%s after its pause: %v %v, want PAUSED", mp[0], mp[1], ps.State, err)
		}
	}
	select {
	case resp := <-stopped:
		t.Fatalf("the stop ended (%+v) before the source answered: the test stalled nothing", resp)
	default:
	}

	releaseOnce.Do(func() { close(release) })
	resp := <-stopped
	if resp == nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("the stop once the source answers: %+v", resp)
	}
	m, err := n.ctl.store.GetMirror("ma")
	if err != nil {
		t.Fatal(err)
	}
	if m.Topics["a"] != state.StateStopped || m.Topics["a2"] != state.StatePaused {
		t.Fatalf("mirror ma after the stop: topics %v, want a STOPPED and a2 PAUSED (the pause kept)", m.Topics)
	}
}
