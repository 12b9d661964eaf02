package testutil

import (
	"log/slog"
	"testing"
)

// LogOnFailure is a logger of records at level and above that the test
// prints only when it fails: the story of a rare failure (a group's
// rebalances, a coordinator's loads) without the noise of every passing
// run. Loggers derived from it (With) share its buffer, so one call serves
// every node of a cluster.
func LogOnFailure(t testing.TB, level slog.Level) *slog.Logger {
	t.Helper()
	var buf SyncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the logs:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
}
