package control

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
)

// Start and Stop keep the mirror's include and exclude sets as SPEC.md
// section 2 says, and a named topic that is excluded is refused.
func TestIncludeExcludeRules(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.SeedTopics(1, "a", "b1", "b2"))
	cfg := nodetest.Config(t)
	n := openTestNode(t, cfg, nil)
	defer n.close()
	send := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := n.cl.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	boot := src.ListenAddrs()[0]
	n.createMirror(t, ctx, boot)

	start := mirrorapi.NewPtrStartMirrorTopicsRequest()
	start.MirrorName = "m"
	start.Topics = []mirrorapi.StartMirrorTopicsRequestTopic{{TopicName: "a"}}
	start.ExcludePatterns = []string{"a"}
	sr := send(start).(*mirrorapi.StartMirrorTopicsResponse)
	if len(sr.Topics) != 1 || sr.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("a named, excluded topic: %+v", sr.Topics)
	}

	start = mirrorapi.NewPtrStartMirrorTopicsRequest()
	start.MirrorName = "m"
	start.IncludePatterns = []string{"b.*"}
	sr = send(start).(*mirrorapi.StartMirrorTopicsResponse)
	if len(sr.Topics) != 2 || sr.Topics[0].ErrorCode != 0 || sr.Topics[1].ErrorCode != 0 {
		t.Fatalf("start by pattern: %+v", sr.Topics)
	}
	m, _ := n.b.Store().GetMirror("m")
	if !slices.Contains(m.Include, "b.*") || !slices.Contains(m.Exclude, "a") {
		t.Fatalf("after start: include %q exclude %q", m.Include, m.Exclude)
	}

	stop := mirrorapi.NewPtrStopMirrorTopicsRequest()
	stop.MirrorName = "m"
	stop.Patterns = []string{"b.*", "zz.*"}
	send(stop)
	m, _ = n.b.Store().GetMirror("m")
	if slices.Contains(m.Include, "b.*") || !slices.Contains(m.Exclude, "zz.*") {
		t.Fatalf("after stop: include %q exclude %q", m.Include, m.Exclude)
	}
	for _, topic := range []string{"b1", "b2"} {
		if info, ok := n.b.Partitions().Info(topic); !ok || info.Mirror != "" {
			t.Fatalf("%s after the stop: %+v %v", topic, info, ok)
		}
	}
}
