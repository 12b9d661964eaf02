package groups

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kmirror/kmirror/internal/testutil/kfaketest"
	"github.com/kmirror/kmirror/internal/testutil/nodetest"
)

func TestFilter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		include, exclude []string
		group            string
		want             bool
	}{
		{nil, nil, "anything", true},
		{[]string{"app-.*"}, nil, "app-1", true},
		{[]string{"app-.*"}, nil, "other", false},
		{[]string{"app-.*"}, nil, "xapp-1", false}, // full match
		{[]string{".*"}, []string{"app-2"}, "app-2", false},
		{nil, []string{"tmp.*"}, "tmp-x", false},
	} {
		f, err := Compile(tc.include, tc.exclude)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Match(tc.group); got != tc.want {
			t.Errorf("include %q exclude %q group %q: %v, want %v", tc.include, tc.exclude, tc.group, got, tc.want)
		}
	}
	if _, err := Compile([]string{"("}, nil); err == nil {
		t.Error("a bad regex compiled")
	}
}

func TestClamp(t *testing.T) {
	t.Parallel()
	o := Offset{Topic: "t", Partition: 1, Offset: 50, LeaderEpoch: 3, Metadata: "m"}
	for _, tc := range []struct {
		start, end int64
		want       int64
		clamped    bool
	}{
		{0, 100, 50, false}, {0, 50, 50, false}, {0, 40, 40, true}, {60, 100, 60, true},
	} {
		got, clamped := Clamp(o, tc.start, tc.end)
		if got.Offset != tc.want || clamped != tc.clamped {
			t.Errorf("[%d, %d]: %+v clamped %v", tc.start, tc.end, got, clamped)
		}
		if clamped && (got.LeaderEpoch != -1 || got.Metadata != "") {
			t.Errorf("a clamped offset keeps epoch %d metadata %q", got.LeaderEpoch, got.Metadata)
		}
		if !clamped && (got.LeaderEpoch != 3 || got.Metadata != "m") {
			t.Errorf("an unclamped offset lost its epoch or metadata: %+v", got)
		}
	}
}

// fakeDest records commits; partitions of topic "t" are mirrored with the
// bounds given.
type fakeDest struct {
	mu      sync.Mutex // Sync calls it for several groups at once
	active  map[string]bool
	hang    map[string]bool // GroupActive waits for ctx to end for these
	bounds  map[int32][2]int64
	commits map[string][]Offset
	fail    error
}

func (d *fakeDest) GroupActive(ctx context.Context, g string) (bool, error) {
	if d.hang[g] {
		<-ctx.Done()
		return false, fmt.Errorf("coordinator node 2 is down: %w", ctx.Err())
	}
	return d.active[g], nil
}
func (d *fakeDest) Bounds(topic string, p int32) (int64, int64, bool) {
	b, ok := d.bounds[p]
	return b[0], b[1], ok && topic == "t"
}
func (d *fakeDest) Commit(_ context.Context, g string, offs []Offset) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail != nil {
		return d.fail
	}
	d.commits[g] = offs
	return nil
}

func TestSyncAgainstKfake(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	src := kfaketest.Source(t, kfake.SeedTopics(2, "t", "other"))
	cl := nodetest.Client(t, src.ListenAddrs())
	adm := kadm.NewClient(cl)
	commit := func(group string, offs map[int32]int64) {
		os := kadm.Offsets{}
		for p, o := range offs {
			os.Add(kadm.Offset{Topic: "t", Partition: p, At: o, LeaderEpoch: 0, Metadata: "meta"})
		}
		os.Add(kadm.Offset{Topic: "other", Partition: 0, At: 5, LeaderEpoch: -1})
		if _, err := adm.CommitOffsets(ctx, group, os); err != nil {
			t.Fatal(err)
		}
	}
	commit("app-a", map[int32]int64{0: 10, 1: 500})
	commit("app-b", map[int32]int64{0: 1})
	commit("skip-me", map[int32]int64{0: 1})
	commit("busy", map[int32]int64{0: 1})

	dst := &fakeDest{active: map[string]bool{"busy": true}, bounds: map[int32][2]int64{0: {0, 100}, 1: {0, 200}},
		commits: map[string][]Offset{}}
	f, _ := Compile(nil, []string{"skip-.*"})
	res, err := Sync(ctx, adm, dst, f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]Offset{
		"app-a": {{Topic: "t", Partition: 0, Offset: 10, LeaderEpoch: 0, Metadata: "meta"},
			{Topic: "t", Partition: 1, Offset: 200, LeaderEpoch: -1}},
		"app-b": {{Topic: "t", Partition: 0, Offset: 1, LeaderEpoch: 0, Metadata: "meta"}},
	}
	if !maps.EqualFunc(dst.commits, want, func(a, b []Offset) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("commits %+v\nwant    %+v", dst.commits, want)
	}
	if res.Groups != 2 || res.SkippedActive != 1 || res.Clamped != 1 || res.Offsets != 3 {
		t.Fatalf("result %+v", res)
	}

	dst.fail = errors.New("disk full")
	if _, err := Sync(ctx, adm, dst, f); err == nil {
		t.Fatal("a failing commit was not reported")
	}

	// A group whose coordinator here cannot be asked until the sync's
	// bound is neither synced nor counted as active: the sync names it in
	// its error (a failover's final sync reports it), and the groups
	// after it are synced still, within the same bound.
	dst.fail, dst.commits = nil, map[string][]Offset{}
	dst.hang = map[string]bool{"app-a": true}
	bounded, cancelBounded := context.WithTimeout(ctx, time.Second)
	defer cancelBounded()
	res, err = Sync(bounded, adm, dst, f)
	if err == nil || !strings.Contains(err.Error(), "group app-a not synced") ||
		!strings.Contains(err.Error(), "coordinator node 2 is down") {
		t.Fatalf("error %v, want one naming group app-a and why", err)
	}
	if _, synced := dst.commits["app-a"]; synced || len(dst.commits["app-b"]) != 1 {
		t.Fatalf("commits %+v: want app-b only", dst.commits)
	}
	if res.Groups != 1 || res.SkippedActive != 1 {
		t.Fatalf("result %+v: app-a counted as synced or as active", res)
	}
}
