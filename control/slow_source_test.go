package control

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
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
