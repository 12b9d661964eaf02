package testutil

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Timeout is how long CheckFor waits when the caller has no bound of its
// own: long enough for a loaded CI machine running -race, short enough
// that a condition that never holds fails the test well before go test's
// own timeout.
const Timeout = 20 * time.Second

// pollInterval is how often CheckFor asks again: small against every
// timeout in the tests, large enough not to spin a shared CPU.
const pollInterval = 10 * time.Millisecond

// CheckFor calls cond every 10 ms until it returns nil and fails the test
// with cond's last error once timeout has passed.
//
// The condition returns an error rather than a bool so that a test that
// times out says what it saw last (a log end, a state, a counter), not
// only that it waited. True adapts a condition that is a plain bool,
// Named puts a name on one, and Left bounds the wait by a test's context.
// CheckFor replaces time.Sleep in tests (STYLE.md 22): a sleep that waits
// for something to happen is either too long or, on a loaded machine,
// too short.
//
// REQUIRES: called from the test's goroutine (it may call t.Fatalf).
func CheckFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v: %v", timeout, err)
		}
		<-tick.C
	}
}

// True is a CheckFor condition that holds when ok returns true; until
// then its error is what.
func True(what string, ok func() bool) func() error {
	err := errors.New(what)
	return func() error {
		if ok() {
			return nil
		}
		return err
	}
}

// Named is cond with what in front of its error, for a CheckFor whose
// condition is built apart from the call (a helper's, a table's), where
// the failing line alone does not say what was awaited.
func Named(what string, cond func() error) func() error {
	return func() error {
		if err := cond(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
}

// Left is the time ctx has left before its deadline (Timeout if it has
// none): the timeout of a CheckFor that may wait as long as the test's
// context lasts.
func Left(ctx context.Context) time.Duration {
	deadline, ok := ctx.Deadline()
	if !ok {
		return Timeout
	}
	return time.Until(deadline)
}
