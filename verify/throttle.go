package verify

import (
	"context"
	"sync"
	"time"
)

// throttle is a token bucket over the bytes read from both sides
// (--throttle). The bucket holds at most a second of credit; every fetch
// asks for at most the credit left (at least one byte: a broker returns
// the first batch whole however small the limit, KIP-74), so one fetch
// overshoots the rate by at most one batch, and a debt delays the next
// fetches of every partition until it is paid.
type throttle struct {
	rate float64 // bytes per second; 0 unlimited

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newThrottle(rate int64) *throttle {
	return &throttle{rate: float64(rate), tokens: float64(rate), last: time.Now()}
}

// refill adds the credit earned since the last call. REQUIRES: t.mu held.
func (t *throttle) refill(now time.Time) {
	t.tokens = min(t.tokens+now.Sub(t.last).Seconds()*t.rate, t.rate)
	t.last = now
}

// take waits while the bucket is in debt, then returns how many bytes the
// next fetch may ask for, at most limit.
func (t *throttle) take(ctx context.Context, limit int32) (int32, error) {
	if t.rate <= 0 {
		return limit, nil
	}
	for {
		t.mu.Lock()
		t.refill(time.Now())
		credit := t.tokens
		t.mu.Unlock()
		if credit >= 1 {
			return int32(min(credit, float64(limit))), nil
		}
		timer := time.NewTimer(time.Duration((1 - credit) / t.rate * float64(time.Second)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return 0, ctx.Err()
		case <-timer.C:
		}
	}
}

// spend charges n bytes read.
func (t *throttle) spend(n int) {
	if t.rate <= 0 {
		return
	}
	t.mu.Lock()
	t.refill(time.Now())
	t.tokens -= float64(n)
	t.mu.Unlock()
}
