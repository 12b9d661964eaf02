// Package retry holds the retry timing the mirror fetchers and the control
// plane share, so both spread their retries the same way.
package retry

import (
	"math/rand/v2"
	"time"
)

// Jitter scales d by a random factor in [0.8, 1.2] (Kafka's 20% jitter),
// so many partitions failing together do not retry in lockstep.
func Jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
