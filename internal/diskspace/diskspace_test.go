package diskspace

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// fakeFS is a filesystem whose free space and clock the test sets.
type fakeFS struct {
	free  atomic.Int64
	calls atomic.Int64
	now   atomic.Int64 // unix nanoseconds
	fail  atomic.Bool
}

func (f *fakeFS) statfs(string) (int64, error) {
	f.calls.Add(1)
	if f.fail.Load() {
		return 0, errors.New("statfs failed")
	}
	return f.free.Load(), nil
}

func (f *fakeFS) clock() time.Time { return time.Unix(0, f.now.Load()) }

func newFake(t *testing.T, free int64) (*fakeFS, *Monitor) {
	t.Helper()
	f := &fakeFS{}
	f.free.Store(free)
	m, err := newMonitor("/data", f.statfs, f.clock)
	if err != nil {
		t.Fatal(err)
	}
	return f, m
}

func TestReserveGrantsAboveTheFloorOnly(t *testing.T) {
	t.Parallel()
	f, m := newFake(t, 1<<30)
	if err := m.Reserve(100<<20, 900<<20); err != nil {
		t.Fatalf("100 MiB of 1 GiB keeping 900 MiB: %v", err)
	}
	f.free.Add(-100 << 20) // written: the next statfs sees it
	err := m.Reserve(100<<20, 900<<20)
	var low *LowError
	if !errors.As(err, &low) || !errors.Is(err, ErrLow) {
		t.Fatalf("a second 100 MiB: %v, want a LowError", err)
	}
	if low.Free != 924<<20 || low.Want != 100<<20 || low.KeepFree != 900<<20 || low.Path != "/data" {
		t.Fatalf("LowError %+v", *low)
	}
	if got := m.Free(); got != 924<<20 {
		t.Fatalf("a refusal changed the estimate: %d", got)
	}
	if err := m.Reserve(24<<20, 900<<20); err != nil {
		t.Fatalf("what is left above the floor: %v", err)
	}
}

// The normal path, far from the floor, measures once per interval; near
// the floor every call measures, so freed space is seen at once.
func TestReserveMeasures(t *testing.T) {
	t.Parallel()
	f, m := newFake(t, 10<<30)
	for range 1000 {
		if err := m.Reserve(4096, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.calls.Load(); got != 1 {
		t.Fatalf("%d statfs calls far from the floor within one interval, want only New's", got)
	}
	f.now.Add(int64(refreshInterval))
	if err := m.Reserve(4096, 1<<20); err != nil {
		t.Fatal(err)
	}
	if got := f.calls.Load(); got != 2 {
		t.Fatalf("%d statfs calls after an interval, want 2", got)
	}
	if got := m.Free(); got != 10<<30-4096 {
		t.Fatalf("estimate after a measurement %d", got)
	}

	// The disk fills by other means: refused at the next measurement...
	f.free.Store(2 << 20)
	f.now.Add(int64(refreshInterval))
	if err := m.Reserve(4096, 4<<20); !errors.Is(err, ErrLow) {
		t.Fatalf("on a full disk: %v", err)
	}
	// ...and granted at the first call after space came back, without
	// waiting for the interval.
	f.free.Store(1 << 30)
	if err := m.Reserve(4096, 4<<20); err != nil {
		t.Fatalf("after space was freed: %v", err)
	}
}

// ReserveMeasured sees space another program took within the interval.
func TestReserveMeasured(t *testing.T) {
	t.Parallel()
	f, m := newFake(t, 10<<30)
	if err := m.Reserve(4096, 1<<20); err != nil {
		t.Fatal(err)
	}
	f.free.Store(512 << 10)
	if err := m.Reserve(4096, 1<<20); err != nil {
		t.Fatalf("the estimate within the interval: %v", err)
	}
	if err := m.ReserveMeasured(4096, 1<<20); !errors.Is(err, ErrLow) {
		t.Fatalf("measured on a full disk: %v", err)
	}
	if got := f.calls.Load(); got != 2 {
		t.Fatalf("%d statfs calls, want New's and ReserveMeasured's", got)
	}
}

func TestReserveKeepsEstimateWhenStatfsFails(t *testing.T) {
	t.Parallel()
	f, m := newFake(t, 1<<30)
	f.fail.Store(true)
	f.now.Add(int64(refreshInterval))
	if err := m.Reserve(1<<20, 0); err != nil {
		t.Fatalf("a failed statfs stopped a write: %v", err)
	}
	if got := m.Free(); got != 1<<30-1<<20 {
		t.Fatalf("estimate %d", got)
	}
}

func TestStatfsAndSameFilesystem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	free, err := Statfs(dir)
	if err != nil || free <= 0 {
		t.Fatalf("Statfs(%s) = %d, %v", dir, free, err)
	}
	if _, err := Statfs(dir + "/missing"); err == nil {
		t.Fatal("Statfs of a missing path succeeded")
	}
	same, err := SameFilesystem(dir, dir+"/.")
	if err != nil || !same {
		t.Fatalf("SameFilesystem(dir, dir/.) = %v, %v", same, err)
	}
	if same, err := SameFilesystem(dir, "/proc"); err != nil || same {
		t.Fatalf("SameFilesystem(dir, /proc) = %v, %v", same, err)
	}
}

func TestBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {48 << 20, "48.0 MiB"}, {3 << 30, "3.0 GiB"}, {-2048, "-2.0 KiB"}} {
		if got := Bytes(tc.n); got != tc.want {
			t.Errorf("Bytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// BenchmarkReserve is the cost a partition append pays on the normal path.
func BenchmarkReserve(b *testing.B) {
	m, err := New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Reserve(0, 0); err != nil {
			b.Fatal(err)
		}
	}
}
