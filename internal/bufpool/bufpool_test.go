package bufpool

import (
	"testing"
)

func TestGetCapacity(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 511, 512, 513, 4096, 4097, 1 << 20, MaxPooled, MaxPooled + 1} {
		b := Get(n)
		if len(b) != 0 || cap(b) < n {
			t.Fatalf("Get(%d): len %d cap %d", n, len(b), cap(b))
		}
		Put(b)
	}
}

func TestPutGrownBuffer(t *testing.T) {
	t.Parallel()
	// A buffer grown by append to an odd capacity lands in the class it
	// fills, and a later Get of that class still gets its full capacity.
	b := make([]byte, 0, 3000)
	Put(b)
	for range 100 {
		g := Get(2048)
		if cap(g) < 2048 {
			t.Fatalf("cap %d < 2048", cap(g))
		}
		g = g[:cap(g)]
		g[len(g)-1] = 1 // must be addressable memory of that size
		Put(g)
	}
}

func TestClassFor(t *testing.T) {
	t.Parallel()
	cases := []struct{ n, class int }{
		{0, 0}, {512, 0}, {513, 1}, {1024, 1}, {1025, 2}, {1 << 24, classes - 1},
	}
	for _, c := range cases {
		if got := classFor(c.n); got != c.class {
			t.Errorf("classFor(%d) = %d, want %d", c.n, got, c.class)
		}
	}
}

func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race; the plain run checks allocations")
	}
	Put(Get(64 << 10))
	allocs := testing.AllocsPerRun(1000, func() {
		b := Get(64 << 10)
		b = append(b, 1, 2, 3)
		Put(b)
	})
	if allocs > 0 {
		t.Fatalf("Get/Put allocate %.1f times per run", allocs)
	}
}

func BenchmarkGetPut(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		Put(Get(16 << 10))
	}
}
