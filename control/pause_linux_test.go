package control

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/internal/testutil"
	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
	"github.com/kmirror/kmirror/mirrorapi"
	"github.com/kmirror/kmirror/state"
)

// A pause whose PAUSING cannot be persisted (the state store's disk full)
// changes nothing: the partition keeps its fetcher and its state, the
// topic stays MIRRORING, the answer names the error, and the pause asked
// again once space is back goes through. Before, the fetcher was removed
// first and the failed transitions ignored: a partition MIRRORING in the
// store but without a fetcher.
func TestPauseOnAFullDisk(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.SeedTopics(1, "t"))
	cfg := nodetest.Config(t)
	cfg.LogDirs = []string{testutil.Tmpfs(t, 64<<20)}
	n := openTestNode(t, cfg, nil)
	defer n.close()
	n.createMirror(t, ctx, src.ListenAddrs()[0])
	n.startTopics(t, ctx, "t")
	testutil.CheckFor(t, testutil.Timeout, testutil.True("t-0 MIRRORING", func() bool {
		ps, _ := n.b.Store().MirrorPartitionState("m", "t", 0)
		return ps.State == state.StateMirroring
	}))
	pause := func() *mirrorapi.PauseMirrorTopicsResponse {
		req := mirrorapi.NewPtrPauseMirrorTopicsRequest()
		req.MirrorName, req.Topics = "m", []mirrorapi.MirrorTopicsRequestTopic{{TopicName: "t"}}
		resp, err := n.cl.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*mirrorapi.PauseMirrorTopicsResponse)
	}

	filler := testutil.FillDisk(t, cfg.LogDirs[0], 0)
	resp := pause()
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode == 0 {
		t.Fatalf("a pause on a full disk answered %+v, want the topic's error", resp)
	}
	if _, err := n.ctl.fm.Status("m", "t", 0); err != nil {
		t.Fatalf("the failed pause removed the fetcher: %v", err)
	}
	if ps, _ := n.b.Store().MirrorPartitionState("m", "t", 0); ps.State != state.StateMirroring {
		t.Fatalf("state after the failed pause: %v", ps.State)
	}
	if m, _ := n.b.Store().GetMirror("m"); m.Topics["t"] != state.StateMirroring {
		t.Fatalf("the topic after the failed pause: %v", m.Topics["t"])
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if resp := pause(); resp.ErrorCode != 0 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("the pause asked again: %+v", resp)
	}
	if ps, _ := n.b.Store().MirrorPartitionState("m", "t", 0); ps.State != state.StatePaused {
		t.Fatalf("state after the pause: %v", ps.State)
	}
	if _, err := n.ctl.fm.Status("m", "t", 0); err == nil {
		t.Fatal("a paused partition still has a fetcher")
	}
}
