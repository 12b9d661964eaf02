package verify

import (
	"context"
	"sync"
	"time"
)

// throttle is a token bucket over the bytes read from both sides
// (--throttle), holding at most a second of credit. A fetch reserves what
// it may ask for (the credit left, at most its limit, and at least one
// byte: a broker returns the first batch whole however small the limit,
// KIP-74), so concurrent fetches share the credit instead of each taking
// all of it; once the answer is in, the difference with what it brought is
// settled and the fetch waits out any debt before its partition goes on.
// So over a run the bytes read exceed rate x seconds by at most the
// initial second of credit plus one oversized batch per partition read at
// once.
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

// sleep waits for d or ctx.
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// take waits for credit, then reserves and returns how many bytes the
// next fetch may ask for, at most limit. The caller settles with done.
func (t *throttle) take(ctx context.Context, limit int32) (int32, error) {
	if t.rate <= 0 {
		return limit, nil
	}
	for {
		t.mu.Lock()
		t.refill(time.Now())
		credit := t.tokens
		if credit >= 1 {
			n := int32(min(credit, float64(limit)))
			t.tokens -= float64(n)
			t.mu.Unlock()
			return n, nil
		}
		t.mu.Unlock()
		if err := sleep(ctx, time.Duration((1-credit)/t.rate*float64(time.Second))); err != nil {
			return 0, err
		}
	}
}

// done settles a fetch that reserved reserved bytes and read read, then
// waits while the bucket is in debt.
func (t *throttle) done(ctx context.Context, reserved int32, read int) error {
	if t.rate <= 0 {
		return nil
	}
	t.mu.Lock()
	t.refill(time.Now())
	t.tokens -= float64(read) - float64(reserved)
	debt := -t.tokens
	t.mu.Unlock()
	if debt <= 0 {
		return nil
	}
	return sleep(ctx, time.Duration(debt/t.rate*float64(time.Second)))
}
