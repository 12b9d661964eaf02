package broker

import (
	"sync"
	"time"
)

// warnLimiter lets a repeated warning through once per interval per key
// (a client id, a partition), so a client that keeps sending bad batches,
// or a disk that stays full, costs one line a minute, not one per request
// (STYLE.md item 35). held counts the lines held back since the last one.
type warnLimiter struct {
	mu   sync.Mutex
	last map[string]warnState
}

type warnState struct {
	at   time.Time
	held int
}

// warnEvery is how often a limited warning is let through per key.
const warnEvery = time.Minute

// maxWarnKeys bounds the keys remembered; past it the memory starts over
// (a client id per connection must not grow it without end).
const maxWarnKeys = 4096

// allow reports whether the warning for key may be logged now, and how
// many were held back since the last one.
func (w *warnLimiter) allow(key string, now time.Time) (ok bool, held int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil || len(w.last) >= maxWarnKeys {
		w.last = map[string]warnState{}
	}
	st, seen := w.last[key]
	if seen && now.Sub(st.at) < warnEvery {
		st.held++
		w.last[key] = st
		return false, 0
	}
	w.last[key] = warnState{at: now}
	return true, st.held
}
