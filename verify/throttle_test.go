package verify

import (
	"context"
	"testing"
	"time"
)

// The bucket lets a second's worth through at once, then the rate.
func TestThrottle(t *testing.T) {
	t.Parallel()
	const rate = 100_000
	th := newThrottle(rate)
	start := time.Now()
	for range 30 {
		n, err := th.take(context.Background(), 10_000)
		if err != nil || n < 1 || n > 10_000 {
			t.Fatalf("take: %d %v", n, err)
		}
		if err := th.done(context.Background(), n, 10_000); err != nil {
			t.Fatal(err)
		}
	}
	// 300 KB at 100 KB/s with 100 KB of credit: at least 2 s.
	if took := time.Since(start); took < 1900*time.Millisecond {
		t.Fatalf("300 KB in %v at %d B/s", took, rate)
	}
	if n, _ := newThrottle(0).take(context.Background(), 7); n != 7 {
		t.Fatalf("unlimited take: %d", n)
	}
}
