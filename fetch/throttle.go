package fetch

import (
	"context"
	"sync"
	"time"
)

// throttle caps a mirror's appended bytes per second
// (mirror.replication.throttled.rate). Fetchers spend what they append and
// wait before their next fetch while the mirror is in debt: a token bucket
// holding at most one second of credit.
type throttle struct {
	rate int64 // bytes per second; 0 unlimited

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newThrottle(rate int64) *throttle {
	return &throttle{rate: rate, tokens: float64(rate), last: time.Now()}
}

func (t *throttle) refill(now time.Time) {
	t.tokens = min(t.tokens+now.Sub(t.last).Seconds()*float64(t.rate), float64(t.rate))
	t.last = now
}

// spend records n appended bytes.
func (t *throttle) spend(n int64) {
	if t.rate <= 0 {
		return
	}
	t.mu.Lock()
	t.refill(time.Now())
	t.tokens -= float64(n)
	t.mu.Unlock()
}

// wait blocks while the mirror is over its rate.
func (t *throttle) wait(ctx context.Context) error {
	if t.rate <= 0 {
		return nil
	}
	t.mu.Lock()
	t.refill(time.Now())
	debt := -t.tokens
	t.mu.Unlock()
	if debt <= 0 {
		return nil
	}
	timer := time.NewTimer(time.Duration(debt / float64(t.rate) * float64(time.Second)))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
