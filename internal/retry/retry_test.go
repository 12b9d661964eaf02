package retry

import (
	"testing"
	"time"
)

func TestJitterStaysWithinTwentyPercent(t *testing.T) {
	t.Parallel()
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := Jitter(time.Second)
		if d < 800*time.Millisecond || d > 1200*time.Millisecond {
			t.Fatalf("jitter %v outside [0.8s, 1.2s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct values in 1000: not random", len(seen))
	}
}
