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

// allowance is how many bytes the next fetch may bring: the credit left, at
// least 1 (a source returns the first batch whole however small the limit,
// KIP-74), or -1 when unlimited. Fetchers cap the response size with it:
// spend and wait alone only charge a response after it arrived, so one
// response could overshoot the rate by up to mirror.fetch.response.max.bytes
// (1 MiB of backlog mirrored at once at 200 KiB/s, then a five-second wait).
// Fetchers of one mirror read the same credit concurrently, so together
// they may still overshoot it, by at most one response each; the debt
// then delays them all.
func (t *throttle) allowance() int64 {
	if t.rate <= 0 {
		return -1
	}
	t.mu.Lock()
	t.refill(time.Now())
	credit := int64(t.tokens)
	t.mu.Unlock()
	return max(credit, 1)
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
