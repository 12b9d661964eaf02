package groups

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

// fakeShareDest records share start offsets; partitions of topic "t" are
// mirrored with the bounds given.
type fakeShareDest struct {
	mu     sync.Mutex
	bounds map[int32][2]int64
	// refuse answers the alter of a group with its error.
	refuse map[string]error
	set    map[string][]ShareStartOffset
}

func (d *fakeShareDest) Bounds(topic string, p int32) (int64, int64, bool) {
	b, ok := d.bounds[p]
	return b[0], b[1], ok && topic == "t"
}

func (d *fakeShareDest) AlterShareOffsets(_ context.Context, g string, offs []ShareStartOffset) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.refuse[g]; err != nil {
		return err
	}
	d.set[g] = offs
	return nil
}

// The share group sync (KIP-1279): each selected share group's start
// offsets at the source are set here, clamped into the local log; a group
// with members here is skipped; a group whose name is another kind of
// group here fails alone, named; classic groups at the source are not
// share groups.
func TestSyncShareAgainstKfake(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.SeedTopics(2, "t", "other"))
	adm := kadm.NewClient(nodetest.Client(t, src.ListenAddrs()))
	set := func(group string, offs map[int32]int64) {
		os := kadm.Offsets{}
		for p, o := range offs {
			os.Add(kadm.Offset{Topic: "t", Partition: p, At: o})
		}
		os.Add(kadm.Offset{Topic: "other", Partition: 0, At: 5})
		resp, err := adm.AlterShareGroupOffsets(ctx, group, os)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("setting %s's start offsets at the source: %v", group, err)
		}
	}
	set("queue-a", map[int32]int64{0: 10, 1: 500})
	set("queue-b", map[int32]int64{0: 1})
	set("skip-me", map[int32]int64{0: 1})
	set("busy", map[int32]int64{0: 1})
	set("clash", map[int32]int64{0: 1})
	if _, err := adm.CommitOffsets(ctx, "classic", kadm.Offsets{"t": {0: {Topic: "t", Partition: 0, At: 3}}}); err != nil {
		t.Fatal(err)
	}

	dst := &fakeShareDest{bounds: map[int32][2]int64{0: {0, 100}, 1: {0, 200}}, set: map[string][]ShareStartOffset{},
		refuse: map[string]error{"busy": ErrShareGroupActive, "clash": kerr.GroupIDNotFound}}
	f, _ := Compile(nil, []string{"skip-.*"})
	res, err := SyncShare(ctx, adm, dst, f)
	if err == nil || !strings.Contains(err.Error(), "share group start offsets of clash") ||
		!errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("error %v, want one naming the group whose name is another kind here", err)
	}
	want := map[string]string{
		"queue-a": "[{t 0 10} {t 1 200}]", // 500 clamped to the local end
		"queue-b": "[{t 0 1}]",
	}
	if len(dst.set) != len(want) {
		t.Fatalf("set %v, want %v", dst.set, want)
	}
	for g, w := range want {
		if got := fmt.Sprint(dst.set[g]); got != w {
			t.Fatalf("%s: %s, want %s", g, got, w)
		}
	}
	if res.Groups != 2 || res.SkippedActive != 1 || res.Clamped != 1 || res.Offsets != 3 {
		t.Fatalf("result %+v", res)
	}
}
