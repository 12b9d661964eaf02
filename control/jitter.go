package control

import (
	"math/rand/v2"
	"time"
)

// jitter spreads retries: d scaled by a random factor in [0.8, 1.2].
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
