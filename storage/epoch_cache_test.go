package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kmirror/kmirror/internal/vfs"
)

func epochEnt(epoch int32, start int64) EpochEntry {
	return EpochEntry{Epoch: epoch, StartOffset: start}
}

// epochTestCache opens a cache on a fresh directory through a FaultFS (no
// fault armed) and loads entries into it with Rebuild.
func epochTestCache(t *testing.T, entries ...EpochEntry) (*EpochCache, *vfs.FaultFS, string) {
	t.Helper()
	dir := t.TempDir()
	ffs := vfs.NewFaultFS(vfs.Default)
	c, err := OpenEpochCache(ffs, dir)
	if err != nil {
		t.Fatalf("OpenEpochCache: %v", err)
	}
	if len(entries) > 0 {
		if err := c.Rebuild(entries); err != nil {
			t.Fatalf("Rebuild: %v", err)
		}
		if got := c.Entries(); !slices.Equal(got, entries) {
			t.Fatalf("setup: entries %v, want %v", got, entries)
		}
	}
	return c, ffs, dir
}

// epochTestReopen reads dir's checkpoint back with a new cache.
func epochTestReopen(t *testing.T, dir string) []EpochEntry {
	t.Helper()
	c, err := OpenEpochCache(vfs.Default, dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	return c.Entries()
}

// epochTestCheck asserts the in-memory entries and those of a reopened cache.
func epochTestCheck(t *testing.T, c *EpochCache, dir string, want []EpochEntry) {
	t.Helper()
	if got := c.Entries(); !slices.Equal(got, want) {
		t.Errorf("entries %v, want %v", got, want)
	}
	if got := epochTestReopen(t, dir); !slices.Equal(got, want) {
		t.Errorf("reopened entries %v, want %v", got, want)
	}
}

func TestEpochCacheAssign(t *testing.T) {
	t.Parallel()
	type op struct {
		epoch   int32
		start   int64
		changed bool
	}
	for _, tc := range []struct {
		name string
		ops  []op
		want []EpochEntry
	}{
		{"first entry", []op{{2, 10, true}}, []EpochEntry{epochEnt(2, 10)}},
		{"epochs need not start at zero", []op{{0, 10, true}, {2, 13, true}, {4, 17, true}},
			[]EpochEntry{epochEnt(0, 10), epochEnt(2, 13), epochEnt(4, 17)}},
		{"same epoch later offset keeps first", []op{{2, 6, true}, {2, 7, false}}, []EpochEntry{epochEnt(2, 6)}},
		{"same epoch same offset", []op{{2, 6, true}, {2, 6, false}}, []EpochEntry{epochEnt(2, 6)}},
		{"per batch stream", []op{{1, 0, true}, {1, 1, false}, {1, 2, false}, {2, 3, true}, {2, 4, false}, {2, 5, false}},
			[]EpochEntry{epochEnt(1, 0), epochEnt(2, 3)}},
		{"same epoch earlier offset truncates", []op{{5, 11, true}, {6, 12, true}, {7, 13, true}, {7, 12, true}},
			[]EpochEntry{epochEnt(5, 11), epochEnt(7, 12)}},
		{"higher epoch lower offset drops conflicting", []op{{2, 6, true}, {3, 5, true}}, []EpochEntry{epochEnt(3, 5)}},
		{"higher epoch same offset replaces empty epoch", []op{{1, 5, true}, {2, 5, true}}, []EpochEntry{epochEnt(2, 5)}},
		{"lower epoch drops higher epochs", []op{{1, 5, true}, {2, 6, true}, {1, 7, true}}, []EpochEntry{epochEnt(1, 7)}},
		{"lower epoch higher offset", []op{{2, 0, true}, {5, 10, true}, {3, 20, true}},
			[]EpochEntry{epochEnt(2, 0), epochEnt(3, 20)}},
		{"lower epoch and offset clears all", []op{{4, 10, true}, {5, 20, true}, {1, 3, true}}, []EpochEntry{epochEnt(1, 3)}},
		{"negative epoch ignored", []op{{2, 6, true}, {-1, 7, false}}, []EpochEntry{epochEnt(2, 6)}},
		{"negative offset ignored", []op{{2, 6, true}, {3, -1, false}}, []EpochEntry{epochEnt(2, 6)}},
		{"negative on empty cache", []op{{-1, -1, false}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _, dir := epochTestCache(t)
			for i, o := range tc.ops {
				changed, err := c.Assign(o.epoch, o.start)
				if err != nil || changed != o.changed {
					t.Fatalf("op %d Assign(%d, %d) = %v, %v; want %v, nil", i, o.epoch, o.start, changed, err, o.changed)
				}
			}
			epochTestCheck(t, c, dir, tc.want)
		})
	}
}

func TestEpochCacheEndOffsetFor(t *testing.T) {
	t.Parallel()
	kafka := []EpochEntry{epochEnt(0, 10), epochEnt(2, 13), epochEnt(4, 17)}
	const leo = 20
	for _, tc := range []struct {
		name      string
		entries   []EpochEntry
		requested int32
		wantEpoch int32
		wantEnd   int64
	}{
		{"empty cache", nil, 3, -1, -1},
		{"empty cache undefined epoch", nil, -1, -1, -1},
		{"undefined epoch", kafka, -1, -1, -1},
		{"latest epoch gives log end", kafka, 4, 4, leo},
		{"above latest", kafka, 5, -1, -1},
		{"equal to an entry", kafka, 2, 2, 17},
		{"equal to first entry", kafka, 0, 0, 13},
		{"between entries", kafka, 3, 2, 17},
		{"between first entries", kafka, 1, 0, 13},
		{"below first entry", []EpochEntry{epochEnt(5, 11), epochEnt(6, 12)}, 4, 4, 11},
		{"negative but not undefined", kafka, -2, -2, 10},
		{"single entry latest", []EpochEntry{epochEnt(2, 6)}, 2, 2, leo},
		{"single entry above", []EpochEntry{epochEnt(2, 100)}, 3, -1, -1},
		{"single entry below", []EpochEntry{epochEnt(2, 100)}, 1, 1, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _, _ := epochTestCache(t, tc.entries...)
			epoch, end := c.EndOffsetFor(tc.requested, leo)
			if epoch != tc.wantEpoch || end != tc.wantEnd {
				t.Errorf("EndOffsetFor(%d, %d) = (%d, %d), want (%d, %d)", tc.requested, leo, epoch, end, tc.wantEpoch, tc.wantEnd)
			}
		})
	}
}

func TestEpochCacheEpochForOffset(t *testing.T) {
	t.Parallel()
	entries := []EpochEntry{epochEnt(1, 10), epochEnt(3, 20), epochEnt(5, 30)}
	for _, tc := range []struct {
		name    string
		entries []EpochEntry
		offset  int64
		want    int32
		wantOK  bool
	}{
		{"empty cache", nil, 10, 0, false},
		{"before first entry", entries, 5, 0, false},
		{"negative offset", entries, -1, 0, false},
		{"first entry start", entries, 10, 1, true},
		{"inside first epoch", entries, 15, 1, true},
		{"second entry start", entries, 20, 3, true},
		{"end of second epoch", entries, 29, 3, true},
		{"latest entry start", entries, 30, 5, true},
		{"beyond latest start", entries, 40, 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _, _ := epochTestCache(t, tc.entries...)
			got, ok := c.EpochForOffset(tc.offset)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("EpochForOffset(%d) = %d, %v; want %d, %v", tc.offset, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// epochTestTruncate runs a truncation case and checks that the checkpoint
// is written exactly when the entries change.
func epochTestTruncate(t *testing.T, start, want []EpochEntry, op func(*EpochCache) error) {
	c, ffs, dir := epochTestCache(t, start...)
	before := ffs.Written()
	if err := op(c); err != nil {
		t.Fatalf("truncate: %v", err)
	}
	epochTestCheck(t, c, dir, want)
	wrote, changed := ffs.Written() != before, !slices.Equal(start, want)
	if wrote != changed {
		t.Errorf("checkpoint written = %v, want %v (entries changed = %v)", wrote, changed, changed)
	}
}

func TestEpochCacheTruncateFromEnd(t *testing.T) {
	t.Parallel()
	start := []EpochEntry{epochEnt(2, 6), epochEnt(3, 8), epochEnt(4, 11)}
	for _, tc := range []struct {
		name  string
		start []EpochEntry
		end   int64
		want  []EpochEntry
	}{
		{"beyond latest start", start, 12, start},
		{"at latest start", start, 11, start[:2]},
		{"inside an epoch", start, 9, start[:2]},
		{"at an epoch boundary", start, 8, start[:1]},
		{"at first start", start, 6, nil},
		{"to zero", start, 0, nil},
		{"undefined offset ignored", start, -1, start},
		{"empty cache", nil, 5, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			epochTestTruncate(t, tc.start, tc.want, func(c *EpochCache) error { return c.TruncateFromEnd(tc.end) })
		})
	}
}

func TestEpochCacheTruncateFromStart(t *testing.T) {
	t.Parallel()
	start := []EpochEntry{epochEnt(2, 6), epochEnt(3, 8), epochEnt(4, 11)}
	for _, tc := range []struct {
		name  string
		start []EpochEntry
		from  int64
		want  []EpochEntry
	}{
		{"before first start", start, 5, start},
		{"at first start", start, 6, start},
		{"inside first epoch", start, 7, []EpochEntry{epochEnt(2, 7), epochEnt(3, 8), epochEnt(4, 11)}},
		{"at an epoch boundary", start, 8, start[1:]},
		{"inside second epoch", start, 9, []EpochEntry{epochEnt(3, 9), epochEnt(4, 11)}},
		{"at latest start", start, 11, start[2:]},
		{"beyond latest start", start, 12, []EpochEntry{epochEnt(4, 12)}},
		{"negative", start, -1, start},
		{"empty cache", nil, 5, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			epochTestTruncate(t, tc.start, tc.want, func(c *EpochCache) error { return c.TruncateFromStart(tc.from) })
		})
	}
}

func TestEpochCacheRebuild(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start []EpochEntry
		in    []EpochEntry
		want  []EpochEntry
	}{
		{"replaces everything", []EpochEntry{epochEnt(7, 100)}, []EpochEntry{epochEnt(1, 0), epochEnt(2, 5)},
			[]EpochEntry{epochEnt(1, 0), epochEnt(2, 5)}},
		{"empty input clears", []EpochEntry{epochEnt(7, 100)}, nil, nil},
		{"per batch stream", nil, []EpochEntry{epochEnt(1, 0), epochEnt(1, 3), epochEnt(2, 7), epochEnt(2, 9), epochEnt(4, 12)},
			[]EpochEntry{epochEnt(1, 0), epochEnt(2, 7), epochEnt(4, 12)}},
		{"negative values skipped", nil, []EpochEntry{epochEnt(-1, 0), epochEnt(1, -5), epochEnt(1, 4)},
			[]EpochEntry{epochEnt(1, 4)}},
		{"conflicts resolved like Assign", nil, []EpochEntry{epochEnt(1, 0), epochEnt(5, 10), epochEnt(3, 20)},
			[]EpochEntry{epochEnt(1, 0), epochEnt(3, 20)}},
		{"empty epoch dropped", nil, []EpochEntry{epochEnt(1, 0), epochEnt(2, 5), epochEnt(3, 5)},
			[]EpochEntry{epochEnt(1, 0), epochEnt(3, 5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _, dir := epochTestCache(t, tc.start...)
			in := slices.Clone(tc.in)
			if err := c.Rebuild(in); err != nil {
				t.Fatalf("Rebuild: %v", err)
			}
			if !slices.Equal(in, tc.in) {
				t.Errorf("Rebuild modified its input: %v", in)
			}
			epochTestCheck(t, c, dir, tc.want)
		})
	}
}

func TestEpochCacheAccessors(t *testing.T) {
	t.Parallel()
	c, _, dir := epochTestCache(t)
	if _, ok := c.Latest(); ok {
		t.Error("Latest on an empty cache reports an entry")
	}
	if _, ok := c.Earliest(); ok {
		t.Error("Earliest on an empty cache reports an entry")
	}
	if _, err := os.Stat(filepath.Join(dir, epochCheckpointName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("opening wrote a checkpoint: %v", err)
	}
	for _, e := range []EpochEntry{epochEnt(1, 0), epochEnt(3, 7), epochEnt(6, 9)} {
		if _, err := c.Assign(e.Epoch, e.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok := c.Latest(); !ok || got != epochEnt(6, 9) {
		t.Errorf("Latest = %v, %v", got, ok)
	}
	if got, ok := c.Earliest(); !ok || got != epochEnt(1, 0) {
		t.Errorf("Earliest = %v, %v", got, ok)
	}
	got := c.Entries()
	got[0] = epochEnt(99, 99)
	if again := c.Entries(); again[0] != epochEnt(1, 0) {
		t.Errorf("Entries does not return a copy: %v", again)
	}
	data, err := os.ReadFile(filepath.Join(dir, epochCheckpointName))
	if want := "0\n3\n1 0\n3 7\n6 9\n"; err != nil || string(data) != want {
		t.Errorf("checkpoint = %q, %v; want %q", data, err, want)
	}
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	epochTestCheck(t, c, dir, nil)
	data, err = os.ReadFile(filepath.Join(dir, epochCheckpointName))
	if want := "0\n0\n"; err != nil || string(data) != want {
		t.Errorf("cleared checkpoint = %q, %v; want %q", data, err, want)
	}
}

func TestEpochCacheOpenFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		content  string
		want     []EpochEntry
		wantLine int // 0: the file is valid
	}{
		{"valid", "0\n2\n1 0\n3 7\n", []EpochEntry{epochEnt(1, 0), epochEnt(3, 7)}, 0},
		{"valid empty", "0\n0\n", nil, 0},
		{"valid extremes", "0\n2\n0 0\n2147483647 9223372036854775807\n",
			[]EpochEntry{epochEnt(0, 0), epochEnt(1<<31-1, 1<<63-1)}, 0},
		{"empty epoch dropped on load", "0\n3\n1 0\n2 5\n3 5\n", []EpochEntry{epochEnt(1, 0), epochEnt(3, 5)}, 0},
		{"empty file", "", nil, 1},
		{"version 1", "1\n0\n", nil, 1},
		{"version not a number", "v0\n0\n", nil, 1},
		{"garbage", "hello", nil, 1},
		{"windows line ends", "0\r\n0\r\n", nil, 1},
		{"missing count", "0\n", nil, 2},
		{"negative count", "0\n-1\n", nil, 2},
		{"count with plus sign", "0\n+1\n1 0\n", nil, 2},
		{"count overflows int32", "0\n2147483648\n", nil, 2},
		{"torn last line", "0\n1\n5 10", nil, 3},
		{"fewer entries than counted", "0\n2\n5 10\n", nil, 4},
		{"more entries than counted", "0\n1\n5 10\n6 11\n", nil, 4},
		{"trailing blank line", "0\n1\n5 10\n\n", nil, 4},
		{"negative epoch", "0\n1\n-1 10\n", nil, 3},
		{"negative offset", "0\n1\n1 -10\n", nil, 3},
		{"leading zero", "0\n1\n01 10\n", nil, 3},
		{"two spaces", "0\n1\n1  10\n", nil, 3},
		{"tab separator", "0\n1\n1\t10\n", nil, 3},
		{"one field", "0\n1\n110\n", nil, 3},
		{"three fields", "0\n1\n1 10 3\n", nil, 3},
		{"epoch overflows int32", "0\n1\n2147483648 0\n", nil, 3},
		{"offset overflows int64", "0\n1\n1 9223372036854775808\n", nil, 3},
		{"equal epochs", "0\n2\n5 10\n5 11\n", nil, 4},
		{"descending epochs", "0\n2\n5 10\n4 11\n", nil, 4},
		{"descending offsets", "0\n2\n4 11\n5 10\n", nil, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, epochCheckpointName)
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := OpenEpochCache(vfs.Default, dir)
			if tc.wantLine == 0 {
				if err != nil {
					t.Fatalf("OpenEpochCache: %v", err)
				}
				if got := c.Entries(); !slices.Equal(got, tc.want) {
					t.Errorf("entries %v, want %v", got, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrEpochCheckpointCorrupt) {
				t.Fatalf("OpenEpochCache error %v, want ErrEpochCheckpointCorrupt", err)
			}
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, fmt.Sprintf("line %d:", tc.wantLine)) {
				t.Errorf("error %q does not name %s line %d", msg, path, tc.wantLine)
			}
		})
	}
}

func TestEpochCacheOpenReadError(t *testing.T) {
	t.Parallel()
	_, ffs, dir := epochTestCache(t, epochEnt(1, 0))
	ffs.Fail(vfs.OpRead, vfs.ErrInjected)
	_, err := OpenEpochCache(ffs, dir)
	if !errors.Is(err, vfs.ErrInjected) || errors.Is(err, ErrEpochCheckpointCorrupt) {
		t.Errorf("OpenEpochCache with a read error: %v, want the I/O error, not corruption", err)
	}
}

// TestEpochCacheFaults: every failed write leaves both memory and disk with
// the previous entries, and the cache works again once the fault is gone.
func TestEpochCacheFaults(t *testing.T) {
	t.Parallel()
	start := []EpochEntry{epochEnt(1, 0), epochEnt(3, 10), epochEnt(5, 20)}
	faults := []struct {
		name string
		arm  func(*vfs.FaultFS)
		is   error
	}{
		{"write error", func(f *vfs.FaultFS) { f.Fail(vfs.OpWrite, vfs.ErrInjected) }, vfs.ErrInjected},
		{"disk full", func(f *vfs.FaultFS) { f.DiskFull(0) }, syscall.ENOSPC},
		{"disk full mid file", func(f *vfs.FaultFS) { f.DiskFull(3) }, syscall.ENOSPC},
		{"fsync error", func(f *vfs.FaultFS) { f.Fail(vfs.OpSync, vfs.ErrInjected) }, vfs.ErrInjected},
		{"rename error", func(f *vfs.FaultFS) { f.Fail(vfs.OpRename, vfs.ErrInjected) }, vfs.ErrInjected},
		{"open error", func(f *vfs.FaultFS) { f.Fail(vfs.OpOpen, vfs.ErrInjected) }, vfs.ErrInjected},
	}
	ops := []struct {
		name string
		run  func(*EpochCache) error
	}{
		{"assign new epoch", func(c *EpochCache) error { _, err := c.Assign(6, 30); return err }},
		{"assign conflicting", func(c *EpochCache) error { _, err := c.Assign(2, 5); return err }},
		{"truncate from end", func(c *EpochCache) error { return c.TruncateFromEnd(15) }},
		{"truncate from start", func(c *EpochCache) error { return c.TruncateFromStart(12) }},
		{"clear", func(c *EpochCache) error { return c.Clear() }},
		{"rebuild", func(c *EpochCache) error { return c.Rebuild([]EpochEntry{epochEnt(9, 0)}) }},
	}
	for _, f := range faults {
		for _, op := range ops {
			if f.name == "fsync error" && strings.HasPrefix(op.name, "assign") {
				continue // Assign does not fsync: TestEpochCacheAssignDefersFsync
			}
			t.Run(f.name+"/"+op.name, func(t *testing.T) {
				t.Parallel()
				c, ffs, dir := epochTestCache(t, start...)
				f.arm(ffs)
				err := op.run(c)
				if !errors.Is(err, f.is) || !strings.Contains(fmt.Sprint(err), "writing leader-epoch checkpoint") {
					t.Fatalf("error %v, want a wrapped %v", err, f.is)
				}
				if latest, ok := c.Latest(); !ok || latest != start[len(start)-1] {
					t.Errorf("Latest after failure = %v, %v", latest, ok)
				}
				epochTestCheck(t, c, dir, start)
				// Disarm: the same operation now succeeds.
				ffs.Fail(vfs.OpWrite, nil)
				ffs.Fail(vfs.OpSync, nil)
				ffs.Fail(vfs.OpRename, nil)
				ffs.Fail(vfs.OpOpen, nil)
				ffs.DiskFull(-1)
				if err := op.run(c); err != nil {
					t.Fatalf("retry after the fault: %v", err)
				}
				epochTestCheck(t, c, dir, c.Entries())
				if slices.Equal(c.Entries(), start) {
					t.Errorf("retry did not change the entries")
				}
			})
		}
	}
}

// Assign replaces the checkpoint without an fsync; Sync makes it durable,
// reports the fsync's failure, and does nothing when nothing is unsynced.
func TestEpochCacheAssignDefersFsync(t *testing.T) {
	t.Parallel()
	start := []EpochEntry{epochEnt(1, 0), epochEnt(3, 10)}
	want := append(slices.Clone(start), epochEnt(6, 30))
	c, ffs, dir := epochTestCache(t, start...)
	ffs.Fail(vfs.OpSync, vfs.ErrInjected)
	if _, err := c.Assign(6, 30); err != nil {
		t.Fatalf("Assign with fsync failing: %v (it must not fsync)", err)
	}
	epochTestCheck(t, c, dir, want) // the file was replaced all the same
	if err := c.Sync(); !errors.Is(err, vfs.ErrInjected) || !strings.Contains(err.Error(), "writing leader-epoch checkpoint") {
		t.Fatalf("Sync with fsync failing = %v, want a wrapped %v", err, vfs.ErrInjected)
	}
	ffs.Fail(vfs.OpSync, nil)
	if err := c.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	epochTestCheck(t, c, dir, want)
	ffs.Fail(vfs.OpSync, vfs.ErrInjected)
	if err := c.Sync(); err != nil {
		t.Fatalf("Sync with nothing unsynced wrote again: %v", err)
	}
	for _, mutate := range []func() error{
		func() error { return c.TruncateFromEnd(20) },
		func() error { return c.Rebuild(start) },
	} {
		if err := mutate(); !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("truncation and rebuild must fsync: err %v", err)
		}
	}
}

// TestEpochCacheConcurrent runs readers against a writer; run with -race.
func TestEpochCacheConcurrent(t *testing.T) {
	t.Parallel()
	c, _, dir := epochTestCache(t)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				es := c.Entries()
				for i := 1; i < len(es); i++ {
					if es[i].Epoch <= es[i-1].Epoch || es[i].StartOffset <= es[i-1].StartOffset {
						t.Errorf("entries out of order: %v", es)
						return
					}
				}
				if latest, ok := c.Latest(); ok {
					// The writer may have moved on since Latest: only what holds
					// for any snapshot is checked.
					if epoch, end := c.EndOffsetFor(latest.Epoch, 1<<40); epoch > latest.Epoch || (epoch != -1 && end < latest.StartOffset) {
						t.Errorf("EndOffsetFor(%d) = %d, %d", latest.Epoch, epoch, end)
					}
				}
				c.EpochForOffset(25)
				c.Earliest()
			}
		}()
	}
	var want []EpochEntry
	for i := range int32(40) {
		if _, err := c.Assign(i, int64(i)*10); err != nil {
			t.Error(err)
		}
		want = append(want, epochEnt(i, int64(i)*10))
		if i%10 == 9 {
			if err := c.TruncateFromEnd(int64(i) * 10); err != nil {
				t.Error(err)
			}
			want = want[:len(want)-1]
		}
	}
	close(done)
	wg.Wait()
	epochTestCheck(t, c, dir, want)
}

// TestEpochCacheAllocs: the calls made per batch or per fetch do not
// allocate. Not parallel: AllocsPerRun counts every goroutine's allocations.
func TestEpochCacheAllocs(t *testing.T) {
	c, _, _ := epochTestCache(t, epochEnt(1, 0), epochEnt(3, 10), epochEnt(5, 20))
	for _, tc := range []struct {
		name string
		fn   func()
	}{
		{"Assign unchanged", func() { c.Assign(5, 25) }},
		{"Assign negative", func() { c.Assign(-1, 25) }},
		{"EndOffsetFor", func() { c.EndOffsetFor(2, 30) }},
		{"EpochForOffset", func() { c.EpochForOffset(15) }},
		{"Latest", func() { c.Latest() }},
		{"Earliest", func() { c.Earliest() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(100, tc.fn); n != 0 {
				t.Errorf("%v allocs per run, want 0", n)
			}
		})
	}
}
